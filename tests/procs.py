"""Process-tree helpers for the multi-process tests (torchrun agents, their workers, their children)."""
from __future__ import annotations

import os
import signal
import subprocess


def descendants(pid: int) -> list[int]:
    """Child processes of ``pid``, recursively (pgrep -P)."""
    kids = [int(k) for k in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()]
    return kids + [g for k in kids for g in descendants(k)]


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL what is left of a process a test started and of its descendants (torchrun workers may run in their
    own process groups, so by pid), then collect it."""
    if proc.poll() is None:
        for pid in [*descendants(proc.pid), proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    proc.communicate()


def wait_all(procs: list[subprocess.Popen], timeout: float) -> list[str]:
    """The merged output of each process, waiting up to ``timeout`` s for each; whatever is left afterwards (on a
    timeout too) is killed with its descendants."""
    try:
        return [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for p in procs:
            kill_tree(p)
