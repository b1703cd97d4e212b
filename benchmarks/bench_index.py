"""Opening a large LMDB: the label scan before the label-index cache, the first (cold) build, and a warm open.

Generates an LMDB of N samples (tiny placeholder image bytes; labels drawn from a vocabulary of random words, some
too long or outside the charset, like MJSynth's ~90 k-word vocabulary), then times and measures (tracemalloc peak of
Python and numpy allocations, in a separate pass so tracing does not slow the timed one):

* **before**: what every rank did on every start: read every label into a Python list of kept ids, then an array;
* **cold**: the first open with the cache: one scan into a numpy mask, written next to the LMDB;
* **warm**: every later open (other ranks, DataLoader workers, restarts): the cached array, memory-mapped.

The 16 M x 8 ranks row extrapolates linearly from the largest N (before: every rank scans; after: one cold build per
machine, then warm opens whose mapped pages are shared by the 8 ranks).

    python benchmarks/bench_index.py --out bench_index.json          # 200 k and 2 M samples
    python benchmarks/bench_index.py --quick                          # 20 k samples, seconds
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import lmdb
import numpy as np

from crnn.charset import Charset
from crnn.data.datasets import LabelFilter, LmdbDataset, _read_label
from crnn.data.lmdb_io import NUM_SAMPLES_KEY, READERS, image_key, label_key

FULL_SCALE, RANKS = 16_000_000, 8


def make_lmdb(path: Path, n: int, vocab: int, seed: int = 0) -> None:
    """N samples with 16-byte placeholder images and labels from ``vocab`` random words (appended in key order)."""
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789"
    words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(vocab)]
    words[: vocab // 50] = ["x" * 30] * (vocab // 50)  # 2 % too long
    words[vocab // 50: vocab // 25] = ["café"] * (vocab // 50)  # 2 % outside alnum36
    env = lmdb.open(str(path), map_size=1 << 36, subdir=True, meminit=False, sync=False)
    with env.begin(write=True) as txn:
        cur = txn.cursor()
        cur.putmulti(((image_key(i), b"\0" * 16) for i in range(1, n + 1)), append=True)
        cur.putmulti(((label_key(i), rng.choice(words).encode()) for i in range(1, n + 1)), append=True)
        txn.put(NUM_SAMPLES_KEY, str(n).encode())
    env.sync()
    env.close()


def scan_before(path: str, keep: LabelFilter) -> np.ndarray:
    """The scan as it was: a Python list of kept ids, then an int64 array."""
    with READERS.borrow(path) as env, env.begin() as txn:
        n = int(txn.get(NUM_SAMPLES_KEY))
        kept = [i for i in range(1, n + 1) if keep(_read_label(txn, i, path)) is not None]
    return np.asarray(kept, dtype=np.int64)


def measure(fn) -> tuple[float, float, object]:
    """(seconds, peak traced MB, result): timed untraced, then repeated under tracemalloc for the peak."""
    t0 = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - t0
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return seconds, peak, result


def drop_cache(path: Path) -> None:
    for f in path.glob("crnn-index-*"):
        f.unlink()


def run_size(n: int, vocab: int, workdir: Path) -> list[dict]:
    """Rows before / cold / warm for one LMDB of ``n`` samples."""
    path = workdir / f"n{n}.lmdb"
    make_lmdb(path, n, vocab)
    charset = Charset.from_spec("alnum36")
    before = measure(lambda: scan_before(str(path), LabelFilter(charset, 25)))

    def cold():
        drop_cache(path)
        return LmdbDataset(path, charset, 25)

    cold_m = measure(cold)
    warm = measure(lambda: LmdbDataset(path, charset, 25))
    assert np.array_equal(before[2], np.asarray(warm[2]._indices)), "the cached index differs from the scan"
    kept = len(before[2])
    shutil.rmtree(path)
    return [{"samples": n, "kept": kept, "case": case, "seconds": round(s, 3), "peak_mb": round(mb, 1)}
            for case, (s, mb, _) in (("before", before), ("cold", cold_m), ("warm", warm))]


def extrapolate(rows: list[dict]) -> list[dict]:
    """16 M samples x 8 ranks from the largest measured size (linear in samples; warm open time as measured)."""
    n = max(r["samples"] for r in rows)
    by = {r["case"]: r for r in rows if r["samples"] == n}
    k = FULL_SCALE / n
    return [
        {"case": "before", "per_rank_s": round(by["before"]["seconds"] * k, 1),
         "node_mb": round(by["before"]["peak_mb"] * k * RANKS), "note": "every rank scans, on every (re)start"},
        {"case": "cold", "per_rank_s": round(by["cold"]["seconds"] * k, 1),
         "node_mb": round(by["cold"]["peak_mb"] * k), "note": "once per machine; the other ranks wait"},
        {"case": "warm", "per_rank_s": by["warm"]["seconds"], "node_mb": round(4 * FULL_SCALE / 2**20),
         "note": "memory-mapped int32 ids, page cache shared by all ranks"},
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print a table, optionally write JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[200_000, 2_000_000])
    p.add_argument("--vocab", type=int, default=90_000, help="distinct labels (MJSynth has about 90 k)")
    p.add_argument("--quick", action="store_true", help="one LMDB of 20 k samples")
    p.add_argument("--out", help="write results as JSON here")
    args = p.parse_args(argv)
    sizes = [20_000] if args.quick else args.sizes
    with tempfile.TemporaryDirectory(prefix="bench_index_") as tmp:
        rows = [r for n in sizes for r in run_size(n, args.vocab, Path(tmp))]
    ext = extrapolate(rows)
    print(f"label index: open time and peak traced memory per rank ({os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}, vocabulary {args.vocab})")
    print(f"{'samples':>9} {'case':>6} {'kept':>9} {'seconds':>8} {'peak MB':>8}")
    for r in rows:
        print(f"{r['samples']:>9} {r['case']:>6} {r['kept']:>9} {r['seconds']:>8} {r['peak_mb']:>8}")
    print(f"extrapolated to {FULL_SCALE // 10**6} M samples x {RANKS} ranks on one machine:")
    for r in ext:
        print(f"{'':>9} {r['case']:>6} {r['per_rank_s']:>8} s/rank {r['node_mb']:>6} MB/machine  {r['note']}")
    if args.out:
        meta = {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
                "loadavg": os.getloadavg(), "vocab": args.vocab}
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "results": rows, "extrapolated": ext}, f, indent=2)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
