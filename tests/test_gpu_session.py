"""scripts/gpu_session.sh --dry-run: the GPU session's one command, rehearsed on the CPU, writes the files a device call
brings back (at most 8, flat names) and exits 0; its documented device call fits the tool's limits."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

SCRIPT = REPO / "scripts/gpu_session.sh"
EXPECTED = {"summary.txt", "env.txt", "tests.log", "tests.xml", "bench_gpu.log", "bench_gpu.json"}
NAME = re.compile(r"^[A-Za-z0-9._-]+$")  # what the device tool brings back


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_dry_run_writes_every_result_file_and_exits_0(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    res = subprocess.run(["bash", str(SCRIPT), "--dry-run"], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=380)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    files = {p.name for p in tmp_path.iterdir()}
    assert files == EXPECTED and len(files) <= 8 and all(NAME.match(f) for f in files)
    summary = (tmp_path / "summary.txt").read_text(encoding="utf-8").splitlines()
    assert [ln.split()[0] for ln in summary] == ["setup", "cuda_tests", "bench_gpu"]
    assert all("rc=0" in ln for ln in summary), summary
    tests_log = (tmp_path / "tests.log").read_text(encoding="utf-8")
    # the GPU run's own selection (pytest -m cuda tests/): on the CPU every one of them skips, with its reason
    assert (REPO / "scripts/gpu_session.sh").read_text(encoding="utf-8").count("-m pytest -m cuda tests/ ") == 2
    assert re.search(r"\d+ skipped, \d+ deselected", tests_log) and "failed" not in tests_log, tests_log[-3000:]
    assert "SKIPPED" in tests_log and "needs a CUDA GPU" in tests_log
    assert "test_health.py::test_clock_waits_for_queued_cuda_work" in tests_log  # cuda tests outside test_cuda.py
    assert "lmdb: ok" in tests_log
    xml = (tmp_path / "tests.xml").read_text(encoding="utf-8")
    assert 'failures="0"' in xml and 'errors="0"' in xml
    data = json.loads((tmp_path / "bench_gpu.json").read_text(encoding="utf-8"))
    assert data["device"]["name"] and data["steps"]["vgg_small"]["rows"]["reference"]["images_per_s"] > 0
    assert "mode: dry" in (tmp_path / "env.txt").read_text(encoding="utf-8")


def test_unknown_option_is_one_line_and_2(tmp_path):
    res = subprocess.run(["bash", str(SCRIPT), "--bogus"], cwd=REPO, capture_output=True, text=True, timeout=30,
                         env={**os.environ, "OUT": str(tmp_path)})
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "--bogus" in res.stderr
    assert not list(tmp_path.iterdir())


def test_documented_device_call_fits_the_tool():
    """benchmarks/README.md's device call: a command of at most 2000 characters that runs this script, and a carry
    list of at most 8 git-ignored paths that includes .gpu_carry."""
    text = (REPO / "benchmarks/README.md").read_text(encoding="utf-8")
    m = re.search(r"```json\n(\{[^`]*\"command\"[^`]*\})\n```", text)
    assert m, "benchmarks/README.md has no ```json device call"
    call = json.loads(m.group(1))
    assert len(call["command"]) <= 2000 and "scripts/gpu_session.sh" in call["command"]
    assert ".gpu_carry" in call["carry"] and len(call["carry"]) <= 8
    assert call.get("timeout_s", 600) <= 600
    ignored = subprocess.run(["git", "check-ignore", "-q", ".gpu_carry/x"], cwd=REPO).returncode
    assert ignored == 0, ".gpu_carry/ must be git-ignored (it travels as a carried path)"


def test_the_working_tree_leaves_room_for_the_carry_under_the_device_limit():
    """The device call moves at most 64 MiB: the tracked files (committed weights above all) and .gpu_carry (about
    2 MiB: the lmdb wheel and two font packages). Tracked files over 56 MiB mean a lent GPU could not be used."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    total = sum((REPO / f.decode()).stat().st_size for f in files if f and (REPO / f.decode()).is_file())
    assert total <= 56 * 2**20, f"tracked files hold {total / 2**20:.1f} MiB: a GPU session's call would not fit"
