"""tools/warp_crops.py: the perspective / curve proxy sets keep labels and order, are deterministic, warp for real."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from crnn.data.datasets import open_dataset

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "tools" / "warp_crops.py"


@pytest.fixture()
def crops(tmp_path: Path) -> Path:
    """Three dark bars on a light ground (a stand-in for words), with a gt.txt."""
    d = tmp_path / "crops"
    d.mkdir()
    lines = []
    for i, label in enumerate(["alpha", "Beta", "c3"]):
        arr = np.full((32, 120, 3), 220, np.uint8)
        arr[8:24, 10:110] = 20
        Image.fromarray(arr).save(d / f"{i}.png")
        lines.append(f"{i}.png\t{label}")
    (d / "gt.txt").write_text("\n".join(lines) + "\n")
    return d


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def _dark_heights(img: Image.Image) -> tuple[int, int]:
    """Heights of the dark bar at its left and right ends."""
    dark = np.asarray(img.convert("L")) < 100
    cols = np.nonzero(dark.any(axis=0))[0]
    return int(dark[:, cols[0] + 2].sum()), int(dark[:, cols[-1] - 2].sum())


@pytest.mark.parametrize("mode", ["perspective", "curve"])
def test_warped_set_keeps_labels_and_is_deterministic(crops: Path, tmp_path: Path, mode: str) -> None:
    a, b = tmp_path / "a.lmdb", tmp_path / "b.lmdb"
    for out in (a, b):
        res = _run("--data", str(crops), "--mode", mode, "--out", str(out))
        assert res.returncode == 0, res.stderr
        assert f"wrote 3 {mode} crops" in res.stdout
    da, db = open_dataset(str(a)), open_dataset(str(b))
    assert [da[i][1] for i in range(3)] == ["alpha", "Beta", "c3"]
    for i in range(3):
        assert np.array_equal(np.asarray(da[i][0]), np.asarray(db[i][0]))
        img = da[i][0]
        left, right = _dark_heights(img)
        if mode == "perspective":  # one end of the bar is 55-80 % as tall as the other
            assert min(left, right) / max(left, right) < 0.85
        else:  # an arc: the output is taller than the source, the bar keeps its thickness at both ends
            assert img.height > 32 and abs(left - right) <= 2


def test_missing_data_is_one_line_error_and_nothing_written(tmp_path: Path) -> None:
    out = tmp_path / "x.lmdb"
    res = _run("--data", str(tmp_path / "nope"), "--mode", "curve", "--out", str(out))
    assert res.returncode == 1
    assert res.stderr.strip().startswith("warp_crops: error:") and "no such file" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not out.exists()
