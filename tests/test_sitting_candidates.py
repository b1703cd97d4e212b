"""scripts/sitting.sh with a candidate (issues 57 and 60, step 4: a larger network trained on under its own name until
it beats the shipped file): configs/en_NAME.yaml -> runs/en_NAME -> weights/candidates/crnn_en_NAME.pt, set up and
reported as the English model, the shipped file untouched; one CPU-heavy run at a time across shipped runs and
candidates. Nothing here trains: the set-up script and the benchmark are stand-ins."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from crnn.engine.curve import append_curve
from crnn.engine.state import TrainState
from tests.conftest import REPO

pytestmark = pytest.mark.skipif(not (REPO / ".venv" / "bin" / "python").exists(), reason="needs the project's .venv")

FAKE_BENCH = '''import json, sys
from pathlib import Path
args = sys.argv[1:]
Path("bench_argv.json").write_text(json.dumps(args))
Path(args[args.index("--markdown") + 1]).write_text("| model |\\n")
print("{}")
'''


def _tree(root: Path, init: str = "runs/grown/en_x.pt") -> Path:
    """The scripts under ``root`` with a no-op set-up, the repository's configs, and configs/en_x.yaml: the English
    recipe starting from ``init``."""
    (root / "scripts").mkdir(parents=True)
    for script in ("sitting.sh", "plot_curve.py"):
        shutil.copy(REPO / "scripts" / script, root / "scripts")
    (root / "scripts" / "setup.sh").write_text("exit 0\n")
    (root / "scripts" / "en_benchmark.py").write_text(FAKE_BENCH, encoding="utf-8")
    (root / ".venv").symlink_to(REPO / ".venv")
    shutil.copytree(REPO / "configs", root / "configs")
    recipe = (REPO / "configs" / "shipped_en.yaml").read_text(encoding="utf-8")
    start = "  init_weights: weights/candidates/en_h48_start.pt  # weights only: counters from 0\n"
    assert start in recipe
    (root / "configs" / "en_x.yaml").write_text(recipe.replace(start, f"  init_weights: {init}\n"))
    return root


def _sitting(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(root / "scripts" / "sitting.sh"), *args], cwd=root, capture_output=True,
                          text=True, timeout=120)


def test_a_candidate_needs_its_config_and_a_name_of_its_family(tmp_path):
    root = _tree(tmp_path / "repo")
    r = _sitting(root, "en_nothere", "status")
    assert r.returncode == 2 and r.stderr.strip() == (
        "sitting: no configs/en_nothere.yaml: a candidate en_nothere trains from configs/en_nothere.yaml (a copy of "
        "configs/shipped_en.yaml with its lever, its starting file and its own schedule)")
    r = _sitting(root, "en_Wide!", "status")
    assert r.returncode == 2 and "a candidate's name is zh_ or en_" in r.stderr and "en_Wide!" in r.stderr
    assert _sitting(root, "fr_x", "status").returncode == 2  # the usage: no such model
    r = _sitting(root, "en_x", "status")
    assert r.returncode == 0 and r.stdout.startswith("not running")


def test_a_candidates_first_sitting_says_when_its_starting_file_is_missing(tmp_path):
    root = _tree(tmp_path / "repo")
    r = _sitting(root, "en_x", "start")
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == (
        "sitting: error: the run starts from runs/grown/en_x.pt (train.init_weights in configs/en_x.yaml), which is "
        "not here: the first lines of configs/en_x.yaml say how to make it")
    assert not (root / "runs" / "en_x" / "train.pid").exists()


def test_one_run_at_a_time_across_shipped_runs_and_candidates(tmp_path):
    root = _tree(tmp_path / "repo")
    (root / "runs" / "zh_wide").mkdir(parents=True)
    (root / "runs" / "zh_wide" / "train.pid").write_text(str(os.getpid()))  # alive: this test's own process
    r = _sitting(root, "en", "start")
    assert r.returncode == 1 and r.stderr.strip() == (
        f"sitting: the zh_wide run is training (pid {os.getpid()}): one CPU-heavy run at a time; stop it first "
        "(bash scripts/sitting.sh zh_wide stop)")
    r = _sitting(root, "en_x", "start")
    assert r.returncode == 1 and "the zh_wide run is training" in r.stderr
    assert not (root / "runs" / "en" / "train.pid").exists() and not (root / "runs" / "en_x").exists()


def test_a_candidates_report_reads_it_beside_the_shipped_file_and_draws_its_own_curve(tmp_path):
    root = _tree(tmp_path / "repo")
    pack = root / "weights" / "candidates" / "crnn_en_x.pt"
    pack.parent.mkdir(parents=True)
    for i in (1, 2):
        metrics = {f"data/{s}{p}": {"cer": 0.1 / i, "word_acc": 0.5, "ned_similarity": 0.9}
                   for s in ("en_dev", "ic15_dev") for p in ("", "@alnum-insensitive")}
        append_curve(pack.parent, TrainState(step=1000 * i, images_seen=64000 * i, cpu_seconds=900.0 * i),
                     metrics, "cpu", 2, "bf16")
    (pack.parent / "curve.tsv").rename(pack.parent / "crnn_en_x_curve.tsv")
    (root / "weights" / "crnn_en_curve.tsv").symlink_to(REPO / "weights" / "crnn_en_curve.tsv")
    r = _sitting(root, "en_x", "report")
    assert r.returncode == 0, r.stderr
    argv = json.loads((root / "bench_argv.json").read_text())
    weights = [argv[i + 1] for i, a in enumerate(argv) if a == "--weights"]
    assert weights[:2] == ["weights/candidates/crnn_en_x.pt", "weights/crnn_en.pt"]
    assert argv[argv.index("--markdown") + 1] == "runs/en_x/bench.md"
    assert (pack.parent / "crnn_en_x_curve.png").is_file() and not (root / "weights" / "crnn_en_curve.png").exists()
    assert "the shipped en file's: weights/README.md" in r.stdout
