"""Synthetic text generator throughput: images/s in total and per worker, for 1 and 2 workers.

Times ``iter_samples`` (render + JPEG encode, what ``generate_lmdb`` runs) after a warm-up that
fills each process's font caches, and reports wall-clock images/s, images/s per worker, and
CPU-time images/s for the single-process run (the number that does not depend on how busy the
machine is). Also the mean encoded size per image.

    python benchmarks/bench_synth.py --out bench_synth.json     # full run
    python benchmarks/bench_synth.py --quick                    # a few seconds
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

from crnn.data.fonts import find_fonts
from crnn.data.synth import SynthOptions, iter_samples


def time_workers(fonts: list[str], workers: int, num: int, opts: SynthOptions) -> dict:
    """Images/s for ``num`` samples with ``workers`` processes (pool start-up included, warm caches)."""
    list(iter_samples(min(num, 200), 99, fonts, opts, workers=1))  # warm the parent's font caches
    cpu0, t0 = time.process_time(), time.perf_counter()
    samples = list(iter_samples(num, 0, fonts, opts, workers=workers))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    row = {"workers": workers, "images": num, "seconds": round(wall, 3), "images_per_s": round(num / wall, 1),
           "images_per_s_per_worker": round(num / wall / workers, 1),
           "mean_bytes": round(sum(len(d) for d, _ in samples) / num)}
    if workers == 1:
        row["cpu_images_per_s"] = round(num / cpu, 1)
    return row


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print a table, optionally write JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num", type=int, default=3000, help="images per run (default 3000)")
    p.add_argument("--height", type=int, default=32)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--fonts", help="font folder (default: system fonts)")
    p.add_argument("--quick", action="store_true", help="300 images per run")
    p.add_argument("--out", help="write results as JSON here")
    args = p.parse_args(argv)
    num = 300 if args.quick else args.num
    fonts = find_fonts(args.fonts)
    opts = SynthOptions(height=args.height)
    rows = [time_workers(fonts, w, num, opts) for w in args.workers]
    print(f"{len(fonts)} fonts, height {args.height}, {num} images per run, {os.cpu_count()} cores")
    print(f"{'workers':>7} {'images/s':>9} {'per worker':>10} {'cpu img/s':>9} {'bytes/img':>9}")
    for r in rows:
        print(f"{r['workers']:>7} {r['images_per_s']:>9} {r['images_per_s_per_worker']:>10} "
              f"{r.get('cpu_images_per_s', ''):>9} {r['mean_bytes']:>9}")
    if args.out:
        meta = {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
                "fonts": len(fonts), "height": args.height, "loadavg": os.getloadavg()}
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "results": rows}, f, indent=2)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
