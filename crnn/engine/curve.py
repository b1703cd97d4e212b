"""A run's learning curve: validation metrics against lines seen, CPU-seconds and wall seconds, with the hardware.

A long run is a resumable job that spans sittings, possibly on other machines with other CPUs. Its cost is counted
in CPU-seconds of every process that works for it (each rank and its data-loader workers, which render or decode the
data), carried in the checkpoint (:class:`crnn.engine.state.TrainState`) so that the count goes on across resumes, and
every validation appends one row per validation set to ``OUTPUT_DIR/curve.tsv`` naming the CPU that ran it (and one
more per set and ``train.extra_protocols`` entry, its set named ``SET@PROTOCOL``: the same readings, scored otherwise).
"""
from __future__ import annotations

import csv
import functools
import os
import platform
import resource
import socket
import time
from pathlib import Path

import torch

from crnn.engine import distributed as D

CURVE_FILE = "curve.tsv"
COLUMNS = ("step", "lines_seen", "cpu_seconds", "wall_seconds", "set", "cer", "word_acc", "ned_similarity", "cpu",
           "device", "world_size", "threads", "amp", "host", "time")


def protocol_set(name: str, protocol: str) -> str:
    """The curve's set name of a validation set scored under one of train.extra_protocols: ``SET@PROTOCOL``."""
    return f"{name}@{protocol}"


def _children_cpu(pid: int) -> float:
    """CPU seconds of the live child processes of ``pid`` (data-loader workers), read from /proc (Linux)."""
    total, tick = 0.0, os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0.0
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:  # fields after the command name: state, ppid, ..., utime (12), stime (13)
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def process_cpu_seconds() -> float:
    """CPU seconds used so far by this process, its finished children and its live children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    done = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + done.ru_utime + done.ru_stime + _children_cpu(os.getpid())


@functools.lru_cache(maxsize=1)
def cpu_name() -> str:
    """The CPU as the log and the curve name it: model name, family/model, and whether it has AMX / AVX-512 bf16."""
    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
                if not line.strip():
                    break
    except OSError:
        return platform.processor() or platform.machine()
    flags = set(info.get("flags", "").split())
    extra = ["AMX" if "amx_tile" in flags else "", "avx512_bf16" if "avx512_bf16" in flags else "",
             "AVX-512" if "avx512f" in flags and "avx512_bf16" not in flags else "",
             "AVX2 only" if "avx2" in flags and "avx512f" not in flags else ""]
    name = info.get("model name", platform.machine())
    fam = f"family {info['cpu family']} model {info['model']}" if "cpu family" in info and "model" in info else ""
    return f"{name} ({', '.join(x for x in [fam, *extra] if x)}; {os.cpu_count()} CPUs)"


class CostClock:
    """Adds this sitting's CPU and wall seconds to a run's counters (summed over every rank under DDP)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cpu0, self.wall0 = process_cpu_seconds(), time.perf_counter()

    def advance(self, st) -> None:
        """Add the seconds since the last call to ``st.cpu_seconds`` / ``st.wall_seconds`` (a collective under DDP:
        every rank calls it at the same step)."""
        cpu, wall = process_cpu_seconds(), time.perf_counter()
        st.cpu_seconds += float(D.all_reduce_sum(torch.tensor([cpu - self.cpu0], dtype=torch.float64,
                                                              device=self.device)).item())
        st.wall_seconds += wall - self.wall0
        self.cpu0, self.wall0 = cpu, wall


def append_curve(out_dir: str | Path, st, metrics: dict[str, dict], device: str, world_size: int, amp: str) -> Path:
    """Append one row per validation set to ``out_dir/curve.tsv`` (header on first write); returns the file."""
    path = Path(out_dir) / CURVE_FILE
    new = not path.exists()
    now = time.strftime("%Y-%m-%dT%H:%M:%S")
    with open(path, "a", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n")
        if new:
            w.writerow(COLUMNS)
        for name, m in metrics.items():
            w.writerow([st.step, st.images_seen, f"{st.cpu_seconds:.2f}", f"{st.wall_seconds:.2f}", name,
                        f"{m.get('cer', float('nan')):.5f}", f"{m.get('word_acc', float('nan')):.5f}",
                        f"{m.get('ned_similarity', float('nan')):.5f}", cpu_name(), device, world_size,
                        torch.get_num_threads(), amp, socket.gethostname(), now])
    return path


def read_curve(path: str | Path) -> list[dict[str, str]]:
    """The rows of a curve.tsv as dicts (header names as keys)."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))
