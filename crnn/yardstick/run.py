"""Reading sets with readers, scoring the readings, and timing every reader the same way.

Reading: each reader reads every item of every set once, one per call (after a warm-up that is not timed); an item
it raises on reads as "" (wrong under every protocol) and is kept in ``Column.failures`` with its error. Timing:
:func:`time_rounds` has every reader read the same items in rounds whose order is reversed every other round, so a
machine whose speed drifts or warms up moves them all alike; speed is the median over the rounds and a ratio between
two readers the median of the per-round ratios (:func:`median_ratio`).
"""
from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from crnn.yardstick.readers import Reader, safe_read

WARMUP = 8  # items read before the clock starts


@dataclass
class Column:
    """One reader's readings of every set, the time it spent on them, the items it raised on, or why it did not
    run."""

    name: str
    how: str = ""
    readings: dict[str, list[str]] = field(default_factory=dict)
    failures: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # set -> [(item index, error)]
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # process CPU time, all threads
    items: int = 0
    rounds: list[float] = field(default_factory=list)  # items/s in each interleaved timing round
    skipped: str = ""  # why the reader did not run ("" when it did)


def read_sets(reader: Reader, sets: dict[str, Sequence], *, progress: Callable[[str], None] | None = None,
              every: int = 0, warmup: int = WARMUP, unit: str = "items") -> Column:
    """``reader`` on every item of every set, one per call (a batched reader: a set per call), timed (wall and
    process CPU) after a warm-up of the first ``warmup`` items; ``progress`` gets a line every ``every`` items (0:
    none), counting ``unit``."""
    col = Column(reader.name, reader.how)
    _warm_up(reader, list(next(iter(sets.values()), []))[:warmup])
    if reader.batched:
        return _read_batched(reader, sets, col)
    with reader.block():
        return _read_each(reader, sets, col, progress, every, unit)


def _warm_up(reader: Reader, items: list) -> None:
    """Read ``items`` untimed and unheard: the warnings of what is read again after it (a tall crop's) come then,
    counted once."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if reader.batched:
            reader.read_many(items)
        else:
            for image in items:
                safe_read(reader, image)


def _read_each(reader: Reader, sets: dict[str, Sequence], col: Column,
               progress: Callable[[str], None] | None, every: int, unit: str) -> Column:
    """:func:`read_sets` for a reader of one item per call."""
    total, done = sum(map(len, sets.values())), 0
    for name, items in sets.items():
        out, failed = [], []
        t0, c0 = time.perf_counter(), time.process_time()
        for i, image in enumerate(items):
            text, error = safe_read(reader, image)
            out.append(text)
            if error:
                failed.append((i, error))
            done += 1
            if progress and every and done % every == 0 and done < total:
                progress(f"  {col.name}: {done}/{total} {unit}, {col.seconds + time.perf_counter() - t0:.0f} s")
        col.seconds += time.perf_counter() - t0
        col.cpu_seconds += time.process_time() - c0
        col.readings[name], col.failures[name] = out, failed
        col.items += len(items)
    return col


def _read_batched(reader: Reader, sets: dict[str, Sequence], col: Column) -> Column:
    """:func:`read_sets` for a batched reader: each set in one ``read_many`` call."""
    for name, items in sets.items():
        t0, c0 = time.perf_counter(), time.process_time()
        col.readings[name], col.failures[name] = list(reader.read_many(list(items))), []
        col.seconds += time.perf_counter() - t0
        col.cpu_seconds += time.process_time() - c0
        col.items += len(items)
    return col


def speed_sample(sets: dict[str, Sequence], num: int) -> list:
    """``num`` items taken evenly from all sets (all of them when there are fewer)."""
    every = [x for items in sets.values() for x in items]
    if len(every) <= num:
        return every
    return [every[i * len(every) // num] for i in range(num)]


def time_rounds(readers: dict[str, Callable[[list], object]], sample: list, rounds: int,
                progress: Callable[[str], None] | None = None) -> dict[str, list[float]]:
    """Interleaved timing: in each of ``rounds`` rounds every reader reads all of ``sample`` its own way (a function
    of the list: :meth:`Reader.timed`, one item per call or a batched row's ``read_many``), the order reversed every
    other round; returns items/s per round for each reader."""
    names = list(readers)
    out: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            t0 = time.perf_counter()
            readers[name](sample)
            out[name].append(len(sample) / max(time.perf_counter() - t0, 1e-9))
        if progress:
            progress(f"  timing round {r + 1}/{rounds}: " + ", ".join(f"{n} {out[n][-1]:.1f}" for n in names))
    return out


def median_ratio(a: Sequence[float], b: Sequence[float]) -> float:
    """The median of the per-round ratios a / b (robust to a round in which the whole machine was slow)."""
    return statistics.median([x / y for x, y in zip(a, b)])


def speed(col: Column, unit: str) -> dict:
    """A column's speed as row keys: ``{unit}_per_s`` (the rounds' median where there are rounds, else the reading
    pass), ``{unit}_per_cpu_s``, and with rounds ``{unit}_per_s_pass`` and ``rounds``."""
    passed = col.items / max(col.seconds, 1e-9)
    row = {f"{unit}_per_s": passed, f"{unit}_per_cpu_s": col.items / max(col.cpu_seconds, 1e-9)}
    if col.rounds:
        row.update({f"{unit}_per_s_pass": passed, f"{unit}_per_s": statistics.median(col.rounds),
                    "rounds": col.rounds})
    return row


def add_ratios(rows: list[dict], base: str, key: str, unit: str) -> None:
    """``row[key]`` = speed relative to the row named ``base`` (median of per-round ratios where both have rounds),
    for every row that ran; nothing when ``base`` did not run."""
    ref = next((r for r in rows if r["model"] == base and "skipped" not in r), None)
    for r in rows if ref else []:
        if "skipped" in r:
            continue
        if r.get("rounds") and ref.get("rounds"):
            r[key] = median_ratio(r["rounds"], ref["rounds"])
        else:
            r[key] = r[f"{unit}_per_s"] / ref[f"{unit}_per_s"]


def score(preds: Sequence[str], labels: Sequence[str], protocol: str) -> dict[str, float]:
    """Word (line) accuracy, CER and 1-NED of ``preds`` against ``labels`` under ``protocol`` (crnn's metrics,
    the numbers crnn-eval gives)."""
    from crnn.metrics import RecognitionMetrics

    m = RecognitionMetrics(protocol=protocol)
    m.update(list(preds), list(labels))
    return m.compute()


def failures(col: Column, items: dict[str, Sequence]) -> dict[str, list[dict]]:
    """The items a column raised on, per set: [{"item": path or index, "error": ...}] (sets without any left out)."""
    return {s: [{"item": str(items[s][i]) if isinstance(items[s][i], (str, Path)) else i, "error": e}
                for i, e in got] for s, got in col.failures.items() if got}


def slug(name: str) -> str:
    """A file name for a reader's readings."""
    import re

    return re.sub(r"[^\w.-]+", "_", name).strip("_") or "model"


def write_readings(work: Path, items: dict[str, list[str]], labels: dict[str, list[str]], columns: list[Column],
                   protocols: Sequence[str] = ()) -> Path:
    """WORK/readings.tsv (set, path, truth, one column per reader that ran) and, for ``protocols``,
    WORK/readings/NAME.tsv per reader (set, path, truth, reading, right under each protocol as 1/0)."""
    from crnn.metrics import normalize_text

    ran = [c for c in columns if not c.skipped]
    rows = ["\t".join(["set", "path", "truth", *(c.name for c in ran)])]
    for s in items:
        rows += ["\t".join([s, str(p), labels[s][i], *(c.readings[s][i] for c in ran)])
                 for i, p in enumerate(items[s])]
    if protocols:
        (work / "readings").mkdir(parents=True, exist_ok=True)
    for c in ran if protocols else []:
        own = ["\t".join(["set", "path", "truth", "reading", *protocols])]
        for s in items:
            for p, t, r in zip(items[s], labels[s], c.readings[s]):
                ok = [str(int(normalize_text(r, pr) == normalize_text(t, pr))) for pr in protocols]
                own.append("\t".join([s, str(p), t, r, *ok]))
        (work / "readings" / f"{slug(c.name)}.tsv").write_text("\n".join(own) + "\n", encoding="utf-8")
    work.mkdir(parents=True, exist_ok=True)
    out = work / "readings.tsv"
    out.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return out
