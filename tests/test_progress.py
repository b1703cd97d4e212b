"""Progress of long commands: a tqdm bar on a terminal, a plain line at most every CRNN_PROGRESS_SECONDS in a log."""
from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios

import pytest

from crnn.progress import Progress, plain_interval, track
from tests.conftest import REPO


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_come_at_the_interval_and_close_with_a_done_line():
    out, clock = io.StringIO(), Clock()
    bar = Progress(10_000, "lmdb", "img", file=out, interval=30, clock=clock)
    for _ in range(10_000):
        clock.now += 0.01  # 100 s of work in all
        bar.update()
    bar.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 4 and "\r" not in out.getvalue()  # at 30, 60 and 90 s, then the closing line
    assert lines[0] == "lmdb: 3,000/10,000 img (30%) in 0:30, 100.0 img/s, about 1:10 left"
    assert lines[-1] == "lmdb: done, 10,000/10,000 img (100%) in 1:40, 100.0 img/s"


def test_work_shorter_than_the_interval_writes_nothing_and_disabled_writes_nothing():
    out = io.StringIO()
    assert list(track(range(5000), desc="validate", file=out, interval=30)) == list(range(5000))
    assert list(track(range(3), desc="x", file=out, interval=1e-9, enabled=False)) == [0, 1, 2]
    assert out.getvalue() == ""


def test_size_counts_units_per_item_and_the_interval_comes_from_the_environment(monkeypatch):
    out, clock = io.StringIO(), Clock()
    bar = Progress(None, "crnn-eval", "img", file=out, interval=1, clock=clock)
    clock.now = 2.0
    bar.update(64)
    assert out.getvalue() == "crnn-eval: 64 img in 0:02, 32.0 img/s\n"
    monkeypatch.setenv("CRNN_PROGRESS_SECONDS", "2.5")
    assert plain_interval() == 2.5
    for bad in ("0", "-1", "nan", "soon"):
        monkeypatch.setenv("CRNN_PROGRESS_SECONDS", bad)
        assert plain_interval() == 30.0


def test_a_terminal_gets_a_tqdm_bar():
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a 100-column terminal
    try:
        with os.fdopen(follower, "w", closefd=False) as tty:
            assert tty.isatty()
            assert list(track(range(50), desc="lmdb", unit="img", file=tty)) == list(range(50))
        drawn = b""
        while select.select([leader], [], [], 0.5)[0]:  # everything the bar wrote to the terminal
            drawn += os.read(leader, 65536)
    finally:
        os.close(leader)
        os.close(follower)
    text = drawn.decode("utf-8", "replace")
    assert "\r" in text and re.search(r"lmdb: 100%\|.*\| 50/50", text), text


def test_crnn_synth_into_a_log_writes_a_bounded_number_of_plain_lines(tmp_path):
    """`crnn-synth ... > log 2>&1`: no redrawn bar (no carriage returns), plain lines at most one per update (a tiny
    interval makes every update due, so lines appear however fast the machine), counts rising, a closing done line.
    How often lines come on a real interval: test_plain_lines_come_at_the_interval_and_close_with_a_done_line."""
    log = tmp_path / "log"
    env = dict(os.environ, CRNN_PROGRESS_SECONDS="0.000001")
    with open(log, "w") as f:
        proc = subprocess.run([sys.executable, "-m", "crnn.cli.synth", "--out", str(tmp_path / "s.lmdb"),
                               "--num", "200", "--workers", "2"], stdout=f, stderr=subprocess.STDOUT, cwd=REPO,
                              env=env, timeout=300)
    text = log.read_bytes().decode("utf-8")  # read_text would turn a bar's carriage returns into newlines
    assert proc.returncode == 0, text
    assert "\r" not in text
    progress = [line for line in text.splitlines() if line.startswith("lmdb:")]
    assert all(re.fullmatch(r"lmdb: (done, )?[\d,]+/200 img \(\d+%\) in \d+:\d\d, [\d,.]+ img/s(, about .* left)?",
                            line) for line in progress), progress
    counts = [int(re.search(r"([\d,]+)/200", line).group(1)) for line in progress[:-1]]
    assert 1 <= len(counts) <= 200 and counts == sorted(set(counts)) and counts[-1] <= 200, progress
    assert progress[-1].startswith("lmdb: done, 200/200 img (100%) in "), progress[-3:]
    assert "wrote 200 images" in text


@pytest.mark.parametrize("root", ["crnn", "scripts", "tools", "benchmarks"])
def test_every_progress_bar_goes_through_crnn_progress(root):
    users = [p.relative_to(REPO).as_posix() for p in sorted((REPO / root).rglob("*.py"))
             if re.search(r"^\s*(from tqdm|import tqdm)", p.read_text(encoding="utf-8"), re.M)]
    assert users == (["crnn/progress.py"] if root == "crnn" else [])
