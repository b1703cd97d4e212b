"""Progress of long work, one place for every command: a tqdm bar on a terminal, plain periodic lines in a log.

    for sample in track(samples, total=n, desc="lmdb", unit="img", enabled=show):
        ...

On a terminal the bar redraws in place. When the stream is a file or a pipe (``> log 2>&1``, SLURM, CI) a redrawn
bar would leave a line every tenth of a second, so instead a plain line is written at most every
:data:`PLAIN_INTERVAL_S` seconds (``CRNN_PROGRESS_SECONDS`` changes it), plus one closing line when any was
written; work shorter than the interval writes nothing.
"""
from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TextIO, TypeVar

__all__ = ["Progress", "track", "is_terminal", "plain_interval", "PLAIN_INTERVAL_S"]

PLAIN_INTERVAL_S = 30.0
T = TypeVar("T")


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is an interactive terminal (a closed or odd stream counts as not)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def plain_interval() -> float:
    """Seconds between plain progress lines: ``CRNN_PROGRESS_SECONDS`` when set to a positive number, else 30."""
    try:
        value = float(os.environ.get("CRNN_PROGRESS_SECONDS", PLAIN_INTERVAL_S))
    except ValueError:
        return PLAIN_INTERVAL_S
    return value if value > 0 and math.isfinite(value) else PLAIN_INTERVAL_S


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    """Counts done work and shows it on ``file`` (default: stderr at creation): a bar on a terminal, else lines."""

    def __init__(self, total: int | None = None, desc: str = "", unit: str = "it", *, file: TextIO | None = None,
                 enabled: bool = True, interval: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.file = file if file is not None else sys.stderr
        self.n, self.lines = 0, 0
        self.interval = plain_interval() if interval is None else interval
        self.clock = clock
        self.t0 = self.last = clock()
        self.bar = None
        self.enabled = enabled
        if enabled and is_terminal(self.file):
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, unit=unit, file=self.file, dynamic_ncols=True)

    def update(self, n: int = 1) -> None:
        """``n`` more units done."""
        self.n += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.enabled and self.clock() - self.last >= self.interval:
            self._line()

    def close(self) -> None:
        """End the bar, or write the closing line when plain lines were written."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        elif self.enabled and self.lines:
            self._line(done=True)
        self.enabled = False

    def _line(self, done: bool = False) -> None:
        now = self.clock()
        elapsed = now - self.t0
        rate = self.n / elapsed if elapsed > 0 else 0.0
        count = f"{self.n:,}" + (f"/{self.total:,}" if self.total else "") + f" {self.unit}"
        if self.total:
            count += f" ({self.n / self.total:.0%})"
        eta = ""
        if not done and self.total and rate > 0 and self.n < self.total:
            eta = f", about {_duration((self.total - self.n) / rate)} left"
        head = f"{self.desc}: " if self.desc else ""
        what = "done, " if done else ""
        self.file.write(f"{head}{what}{count} in {_duration(elapsed)}, {rate:,.1f} {self.unit}/s{eta}\n")
        self.file.flush()
        self.last, self.lines = now, self.lines + 1

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def track(iterable: Iterable[T], total: int | None = None, desc: str = "", unit: str = "it", *,
          enabled: bool = True, file: TextIO | None = None, interval: float | None = None,
          size: Callable[[T], int] | None = None) -> Iterator[T]:
    """Yield ``iterable``'s items, counting each (or ``size(item)`` units of it) in a :class:`Progress`."""
    if not enabled:
        yield from iterable
        return
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    with Progress(total, desc, unit, file=file, interval=interval) as bar:
        for item in iterable:
            yield item
            bar.update(size(item) if size is not None else 1)
