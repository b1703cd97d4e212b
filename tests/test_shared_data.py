"""The optional real-data folder: one place locates it, nothing hard-codes it, scripts name a missing one in a line."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from crnn.shared_data import ENV_VAR, main, shared_data_dir, shared_dataset
from tests.conftest import REPO


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
    """tests/, benchmarks/, scripts/, tools/ find real data only through crnn.shared_data (comments may name it)."""
    quoted = re.compile(r"/work/shared|[\"']shared[\"'/]|[\"'][^\"'#]*\.\./shared")
    folders = ("tests", "benchmarks", "scripts", "tools")
    offenders = [f"{p.relative_to(REPO)}:{i}: {line.strip()}" for folder in folders
                 for p in sorted((REPO / folder).rglob("*")) if p.suffix in (".py", ".sh") and p != Path(__file__)
                 for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if quoted.search(line)]
    assert offenders == []


def test_accuracy_table_names_a_missing_data_folder_in_one_line(tmp_path):
    res = subprocess.run([sys.executable, str(REPO / "tools" / "accuracy_table.py"), "--data",
                          f"svt={tmp_path}/no-shared-data/svt_train", "--cache", str(tmp_path / "c.json")],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines() == [f"accuracy_table: error: --data svt={tmp_path}/no-shared-data/svt_train: "
                                       f"{tmp_path}/no-shared-data/svt_train: no such file or directory; "
                                       "check the dataset path"]
