"""Reading one item per call at many widths, with oneDNN's kernel cache at its default size and larger.

    python benchmarks/bench_kernel_cache.py                          # weights zh, 150 widths, float32 and bf16
    python benchmarks/bench_kernel_cache.py --weights en --widths 150 --amp bf16
    python benchmarks/bench_kernel_cache.py --caps 1024,4096,16384 --passes 4 --out /tmp/cache.json
    python benchmarks/bench_kernel_cache.py --quick                  # 8 widths, one pass, float32: for CI

oneDNN, torch's CPU kernels, compiles a kernel for each convolution and input shape and keeps the last
``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` of them (1,024 unless the environment says otherwise). A keep-ratio model reads
each item at its own width, so a set of items of many widths needs a kernel per layer and width; where they do not
fit, every call compiles again. Each capacity runs in a process of its own (the variable is read when the first
kernel is built): ``--widths`` random items of widths spread evenly from the model's narrowest trained width to
twice its widest (the lines read are not all as short as those trained on; rounded to its ``data.width_step``), read
through ``crnn.Recognizer`` one per call, one untimed pass that builds the kernels, then ``--passes`` timed passes
over the same items in a new order each; items/s is the median pass. Also the process's peak memory (the kernels
cost some). ``import crnn`` sets 16,384 (``crnn/__init__.py``), the second of the default ``--caps``; results:
benchmarks/kernel_cache.md.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def child(weights: str, widths: int, amp: str, passes: int, threads: int) -> dict:
    """One capacity (already in the environment): items/s of each timed pass and the peak memory."""
    sys.path.insert(0, str(REPO))
    import torch

    import crnn

    torch.set_num_threads(threads)
    rec = crnn.Recognizer(weights, device="cpu", amp=amp)
    engine = rec._engine
    d, step = engine.config.data, max(engine.transform.width_step, 1)
    lo, hi = max(d.min_width, step), min(engine.transform.max_width, 2 * d.max_width)  # lines run past training's
    sizes = sorted({max(step, round((lo + (hi - lo) * i / max(widths - 1, 1)) / step) * step) for i in range(widths)})
    gen = torch.Generator().manual_seed(0)
    items = [torch.rand(engine.config.model.in_channels, d.height, w, generator=gen) for w in sizes]
    order = random.Random(0)
    engine.predict_tensors([items[0]])
    for x in items:  # builds every kernel once: not timed
        engine.predict_tensors([x])
    rates = []
    for _ in range(passes):
        order.shuffle(items)
        t0 = time.perf_counter()
        for x in items:
            engine.predict_tensors([x])
        rates.append(len(items) / (time.perf_counter() - t0))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"widths": len(sizes), "rates": rates, "peak_rss_mib": peak}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", default="zh", help="a shipped name or a checkpoint (default: zh)")
    p.add_argument("--widths", type=int, default=150, help="distinct item widths (default 150)")
    p.add_argument("--amp", default="off,bf16", help="comma-separated: off, bf16 (default: both)")
    p.add_argument("--caps", default="1024,16384", help="comma-separated cache capacities (default: 1024,16384)")
    p.add_argument("--passes", type=int, default=3, help="timed passes per process (default 3)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    p.add_argument("--out", metavar="FILE", help="also write the JSON to FILE")
    p.add_argument("--quick", action="store_true", help="8 widths, one pass, float32 only (a check that it runs)")
    p.add_argument("--child", metavar="AMP", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.weights, a.widths, a.child, a.passes, a.threads)))
        return 0
    if a.quick:
        a.widths, a.passes, a.amp = 8, 1, "off"
    if not a.json:
        print(f"{a.weights}: {a.widths} item widths read one per call, oneDNN kernel cache {a.caps}, "
              f"{a.threads} thread(s)", flush=True)
    rows = []
    for amp in a.amp.split(","):
        for cap in a.caps.split(","):
            env = {**os.environ, "ONEDNN_PRIMITIVE_CACHE_CAPACITY": cap}
            out = subprocess.run([sys.executable, __file__, "--child", amp, "--weights", a.weights, "--widths",
                                  str(a.widths), "--passes", str(a.passes), "--threads", str(a.threads)],
                                 capture_output=True, text=True, env=env)
            if out.returncode != 0:
                print(f"bench_kernel_cache: the run with cache {cap}, amp {amp} failed:\n{out.stderr[-2000:]}",
                      file=sys.stderr)
                return 1
            r = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append({"amp": amp, "cache": int(cap), **r, "items_per_s": statistics.median(r["rates"])})
            if not a.json:
                print(f"{a.weights} amp {amp} cache {cap}: {r['widths']} widths, {rows[-1]['items_per_s']:.1f} items/s "
                      f"(passes {', '.join(f'{x:.1f}' for x in r['rates'])}), peak {r['peak_rss_mib']:.0f} MiB",
                      flush=True)
    result = {"weights": a.weights, "threads": a.threads, "rows": rows}
    if a.json:
        print(json.dumps(result))
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
