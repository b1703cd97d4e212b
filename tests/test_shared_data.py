"""The optional real-data folder: one place locates it, nothing hard-codes it; the demo's held-out report steps."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from PIL import Image

from crnn.shared_data import ENV_VAR, main, shared_data_dir, shared_dataset
from tests.conftest import REPO, make_lmdb


def _gt_folder(root, name: str):
    (root / name).mkdir(parents=True)
    (root / name / "gt.txt").write_text("IMG/1.jpg\tword\n", encoding="utf-8")
    return root / name


def test_env_var_chooses_the_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert shared_data_dir() == tmp_path
    assert shared_dataset("svt_train") is None
    (tmp_path / "svt_train").mkdir()
    assert shared_dataset("svt_train") is None  # a folder without gt.txt is not a data set
    assert _gt_folder(tmp_path, "iiit5k_train") == shared_dataset("iiit5k_train")


def test_default_is_shared_data_beside_the_repository(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert shared_data_dir() == REPO.parent / "shared" / "data"


def test_module_prints_folders_and_exits_1_when_one_is_absent(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    found = _gt_folder(tmp_path, "svt_train")
    assert main(["svt_train"]) == 0
    assert capsys.readouterr().out == f"{found}\n"
    assert main(["svt_train", "iiit5k_train"]) == 1
    assert capsys.readouterr().out == f"{found}\n"
    assert main([]) == 0
    assert capsys.readouterr().out == f"{tmp_path}\n"
    res = subprocess.run([sys.executable, "-m", "crnn.shared_data", "iiit5k_train"], capture_output=True, text=True,
                         env={**os.environ, ENV_VAR: str(tmp_path / "nowhere")}, timeout=60)
    assert (res.returncode, res.stdout, res.stderr) == (1, "", "")


def test_no_hard_coded_shared_paths():
    """tests/, benchmarks/ and scripts/ locate the real data only through crnn.shared_data (comments may name it)."""
    quoted = re.compile(r"/work/shared|[\"']shared[\"'/]|[\"'][^\"'#]*\.\./shared")
    offenders = [f"{p.relative_to(REPO)}:{i}: {line.strip()}" for folder in ("tests", "benchmarks", "scripts")
                 for p in sorted((REPO / folder).rglob("*")) if p.suffix in (".py", ".sh") and p != Path(__file__)
                 for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if quoted.search(line)]
    assert offenders == []


def _run_heldout(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "demo_heldout.py"), *args], input=stdin,
                          capture_output=True, text=True, cwd=REPO, timeout=120)


def test_demo_report_prints_the_demo_line(tmp_path):
    summary = {"weights": "w.pt", "variant": "vgg_small", "step": 10, "num_classes": 11, "protocol": "exact",
               "decoder": "greedy", "processes": 1, "device": "cpu",
               "datasets": [{"path": "h.lmdb", "samples": 200, "word_acc": 0.915, "cer": 0.02, "ned": 0.98,
                             "seconds": 1.0, "images_per_s": 200.0, "undecodable_images": 0,
                             "worst": [{"label": "123", "pred": "12", "distance": 1}]}],
               "overall": {"path": "overall", "samples": 200, "word_acc": 0.915, "cer": 0.02, "ned": 0.98,
                           "seconds": 1.0, "images_per_s": 200.0}}
    (tmp_path / "e.json").write_text(json.dumps(summary), encoding="utf-8")
    res = _run_heldout("report", str(tmp_path / "e.json"))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[-1] == "demo: the model trained here reads 183 of 200 held-out images (91.5%)"
    assert any(line.startswith("h.lmdb") for line in lines) and "'123'" in res.stdout
    res = _run_heldout("report", str(tmp_path / "missing.json"))
    assert res.returncode == 2 and res.stderr.startswith("demo_heldout: error:") and "Traceback" not in res.stderr


def test_demo_export_and_compare(tmp_path):
    lmdb = make_lmdb(tmp_path / "h.lmdb", ["123", "4567", "89"])
    out = tmp_path / "png"
    res = _run_heldout("export", str(lmdb), str(out), "--num", "2")
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in out.iterdir()) == ["heldout_0.png", "heldout_1.png", "truth.tsv"]
    assert Image.open(out / "heldout_1.png").height == 32
    preds = [{"path": str(out / "heldout_0.png"), "text": "123", "confidence": 0.9},
             {"path": str(out / "heldout_1.png"), "text": "457", "confidence": 0.5}]
    res = _run_heldout("compare", str(out), stdin="\n".join(json.dumps(p) for p in preds) + "\n")
    assert res.returncode == 0, res.stderr
    rows = [line.split() for line in res.stdout.splitlines()[1:]]
    assert rows == [["heldout_0.png", "123", "123", "0.90", "ok"], ["heldout_1.png", "4567", "457", "0.50", "WRONG"]]


def test_demo_trains_on_what_demo_sh_renders_and_never_on_the_held_out_set():
    from crnn.config import load_config

    cfg = load_config(str(REPO / "configs" / "demo.yaml"), [])
    made = re.findall(r"^synth (\w+) (\d+) ", (REPO / "scripts" / "demo.sh").read_text(encoding="utf-8"), re.M)
    assert sorted(name for name, _ in made) == ["heldout", "train", "val"]
    assert len({seed for _, seed in made}) == 3  # three different seeds: three disjoint sets of images
    assert [d["path"] for d in cfg.data.train] == ["data/demo/train.lmdb"]
    assert cfg.data.val == ["data/demo/val.lmdb"]
    assert cfg.model.charset == "digits" and cfg.train.protocol == "exact"


def test_accuracy_table_names_a_missing_data_folder_in_one_line(tmp_path):
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "accuracy_table.py"), "--data",
                          f"svt={tmp_path}/no-shared-data/svt_train", "--cache", str(tmp_path / "c.json")],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines() == [f"accuracy_table: error: --data svt={tmp_path}/no-shared-data/svt_train: "
                                       f"{tmp_path}/no-shared-data/svt_train: no such file or directory; "
                                       "check the dataset path"]
