"""crnn-create-lmdb: validation, bad-line reports, exit codes, nothing half-written."""
from __future__ import annotations

import os

import pytest

from crnn.charset import Charset
from crnn.cli.create_lmdb import main
from crnn.data.datasets import LmdbDataset
from tests.conftest import shared_dataset
from tests.test_datasets import png_bytes

IIIT5K = shared_dataset("iiit5k_train")  # None when the optional real crops are absent


def _folder(root, lines: list[str]):
    (root / "IMG").mkdir(parents=True)
    for i in range(3):
        (root / "IMG" / f"{i}.png").write_bytes(png_bytes(value=i))
    (root / "IMG" / "bad.jpg").write_bytes(b"\xff\xd8 truncated jpeg")
    (root / "gt.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


MIXED = ["IMG/0.png\tgood", "IMG/1.png no tab", "IMG/9.png\tmissing", "IMG/bad.jpg\tcorrupt", "IMG/2.png\t",
         "", "IMG/2.png\tlast"]


def test_writes_good_lines_and_reports_bad_ones(tmp_path, capsys):
    root = _folder(tmp_path / "f", MIXED)
    out = tmp_path / "out.lmdb"
    assert main(["--images", str(root), "--out", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err.splitlines()
    gt = str(root / "gt.txt")
    assert err == [f"{gt}:2: expected 'relative/path<TAB>label' but found no tab; fix the line",
                   f"{gt}:3: cannot read image 'IMG/9.png' (No such file or directory)",
                   f"{gt}:4: image 'IMG/bad.jpg' cannot be decoded (corrupt or not an image)",
                   f"{gt}:5: empty label for 'IMG/2.png'"]
    ds = LmdbDataset(out, charset=None)
    assert [ds[i][1] for i in range(len(ds))] == ["good", "last"]


def test_check_only_writes_nothing(tmp_path, capsys):
    root = _folder(tmp_path / "f", MIXED)
    assert main(["--images", str(root), "--check", "--quiet", "--out", str(tmp_path / "o")]) == 1
    assert "2 good, 4 bad" in capsys.readouterr().out
    assert not (tmp_path / "o").exists()
    clean = _folder(tmp_path / "c", ["IMG/0.png\ta", "IMG/1.png\tb"])
    assert main(["--images", str(clean), "--check", "--quiet"]) == 0


def test_strict_and_all_bad_write_nothing(tmp_path, capsys):
    root = _folder(tmp_path / "f", MIXED)
    assert main(["--images", str(root), "--out", str(tmp_path / "s"), "--strict", "--quiet"]) == 1
    bad = _folder(tmp_path / "b", ["IMG/bad.jpg\tx"])
    assert main(["--images", str(bad), "--out", str(tmp_path / "n"), "--quiet"]) == 1
    assert "no valid samples" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["b", "f"]


def test_existing_output_needs_overwrite(tmp_path, capsys):
    root = _folder(tmp_path / "f", ["IMG/0.png\ta"])
    out = tmp_path / "o"
    assert main(["--images", str(root), "--out", str(out), "--quiet"]) == 0
    assert main(["--images", str(root), "--out", str(out), "--quiet"]) == 2
    assert "already exists" in capsys.readouterr().err
    (root / "gt.txt").write_text("IMG/0.png\ta\nIMG/1.png\tb\n")
    assert main(["--images", str(root), "--out", str(out), "--quiet", "--overwrite"]) == 0
    assert len(LmdbDataset(out)) == 2


def test_missing_inputs_are_one_line_errors(tmp_path, capsys):
    assert main(["--images", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["--images", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "image folder not found" in err[0] and "gt file not found" in err[1]
    with pytest.raises(SystemExit):
        main(["--images", str(tmp_path)])  # --out required without --check


@pytest.mark.skipif(IIIT5K is None, reason="shared IIIT5K crops not available")
def test_iiit5k_train_to_lmdb(tmp_path):
    out = tmp_path / "iiit5k.lmdb"
    assert main(["--images", str(IIIT5K), "--out", str(out), "--quiet"]) == 0
    raw = LmdbDataset(out, charset=None)
    assert len(raw) == 2000 and raw[0][1] == "You"
    kept = LmdbDataset(out, charset=Charset.from_spec("alnum36"))
    assert len(kept) + sum(kept.dropped.values()) == 2000
