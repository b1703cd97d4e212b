"""scripts/sitting.sh en report: the yardstick reads both real development sets (en_dev and the ICDAR 2015 block,
issue 60) with the pack also in bf16 and with vertical=auto, and the curve's picture draws every set the curve holds,
under both protocols, beside the 32 px file's en_dev rows; a curve from before the block is still drawn, with one
note. The benchmark is a stand-in that records its arguments; the picture is drawn by the real scripts/plot_curve.py."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from crnn.engine.curve import append_curve
from crnn.engine.state import TrainState
from tests.conftest import REPO

FAKE_BENCH = '''import json, sys
from pathlib import Path
args = sys.argv[1:]
Path("runs/en/bench_argv.json").write_text(json.dumps(args))
Path(args[args.index("--markdown") + 1]).write_text("| model |\\n")
print("{}")
'''


def _report(root: Path, ic15: bool) -> subprocess.CompletedProcess:
    """``sitting.sh en report`` in a copy of the scripts under ``root`` (no runs/en yet) with a curve of three
    validations (ic15_dev rows in the last two when ``ic15``)."""
    (root / "scripts").mkdir(parents=True)
    for script in ("sitting.sh", "plot_curve.py"):
        shutil.copy(REPO / "scripts" / script, root / "scripts")
    (root / "scripts" / "en_benchmark.py").write_text(FAKE_BENCH, encoding="utf-8")
    (root / ".venv").symlink_to(REPO / ".venv")
    (root / "weights").mkdir()
    (root / "benchmarks" / "en_curves").mkdir(parents=True)  # the 32 px file's run, drawn beside the shipped one
    shutil.copy(REPO / "benchmarks" / "en_curves" / "en_h32.tsv", root / "benchmarks" / "en_curves")
    for i in (1, 2, 3):
        sets = ["data/en_dev"] + (["data/ic15_dev"] if ic15 and i > 1 else [])
        metrics = {f"{s}{p}": {"cer": 0.1 / i, "word_acc": 0.5, "ned_similarity": 0.9}
                   for s in sets for p in ("", "@alnum-insensitive")}
        append_curve(root / "weights", TrainState(step=1000 * i, images_seen=64000 * i, cpu_seconds=900.0 * i),
                     metrics, "cpu", 2, "bf16")
    (root / "weights" / "curve.tsv").rename(root / "weights" / "crnn_en_curve.tsv")
    return subprocess.run(["bash", str(root / "scripts" / "sitting.sh"), "en", "report"], cwd=root,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not (REPO / ".venv" / "bin" / "python").exists(), reason="needs the project's .venv")
@pytest.mark.parametrize("ic15", [True, False], ids=["with_ic15_rows", "before_ic15"])
def test_report_reads_both_sets_and_draws_the_curve_it_has(tmp_path, ic15):
    r = _report(tmp_path, ic15)
    assert r.returncode == 0, r.stderr
    argv = json.loads((tmp_path / "runs" / "en" / "bench_argv.json").read_text())
    pairs = list(zip(argv, argv[1:]))
    assert [v for k, v in pairs if k == "--data"] == ["en_dev=data/en_dev", "ic15_dev=data/ic15_dev"]
    assert [v for k, v in pairs if k == "--part"] == ["svt_train=en_dev:svt_train/"]
    assert ("--bf16", "weights/crnn_en.pt") in pairs and ("--vertical-auto", "weights/crnn_en.pt") in pairs
    assert [v for k, v in pairs if k == "--weights"][0] == "weights/crnn_en.pt"
    png = tmp_path / "weights" / "crnn_en_curve.png"
    assert png.is_file() and "| model |" in r.stdout
    legend_rows = (4 if ic15 else 2) + 1  # and the 32 px file's en_dev rows
    assert Image.open(png).height == 360 + 22 * legend_rows + 12  # plot_curve's PANEL_H and a legend row per line
    notes = [ln for ln in r.stderr.splitlines() if ln.startswith("plot_curve: note:")]
    if ic15:
        assert notes == []
    else:
        assert notes == ["plot_curve: note: no rows yet for data/ic15_dev in weights/crnn_en_curve.tsv; "
                         "data/ic15_dev@alnum-insensitive in weights/crnn_en_curve.tsv: 2 line(s) left out"]
