"""Alphabet size: training images/s and decoding ms/image at 37, ~5,000 and ~7,000 classes, as ratios to 37.

One run, one machine: for each class count a vgg_small CRNN on 32x280 text lines (T = 71, the line geometry of
Chinese CRNN repositories) takes optimizer steps on random images with random 10-character labels, then greedy
and beam search (width 10, the default per-step pruning) decode posteriors shaped like a trained model's: one
class near-certain per step, the rest noise. Only the classifier head and the decoders depend on the class count,
so the ratios say what a large alphabet costs. Timings on a loaded machine are noisy; compare ratios, not runs.

    python benchmarks/bench_alphabet.py --out bench_alphabet.json   # full run
    python benchmarks/bench_alphabet.py --quick                     # a few seconds
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import torch

from crnn.charset import Charset
from crnn.decode import beam_decode, greedy_decode
from crnn.loss import ctc_loss
from crnn.model import build_model

CLASSES = (37, 5001, 7001)
HEIGHT, WIDTH, LABEL_LEN = 32, 280, 10


def alphabet(num_classes: int) -> Charset:
    """A charset of ``num_classes - 1`` CJK ideographs."""
    return Charset("".join(chr(0x4E00 + i) for i in range(num_classes - 1)))


def train_images_per_s(num_classes: int, batch: int, steps: int) -> float:
    """Optimizer steps per second x batch for a vgg_small CRNN (one warm-up step not timed)."""
    torch.manual_seed(0)
    model = build_model("vgg_small", 1, num_classes).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    images = torch.randn(batch, 1, HEIGHT, WIDTH)
    targets = torch.randint(1, num_classes, (batch * LABEL_LEN,))
    lengths = torch.full((batch,), LABEL_LEN, dtype=torch.long)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        ctc_loss(model(images), targets, lengths).loss.backward()
        opt.step()

    step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return batch * steps / (time.perf_counter() - t0)


def peaked_logits(n: int, T: int, num_classes: int) -> torch.Tensor:
    """``[n, T, C]`` logits with one near-certain class per step (half of them blank), like a trained model."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(n, T, num_classes, generator=g)
    ids = torch.randint(1, num_classes, (n, T), generator=g)
    ids[:, ::2] = 0
    return logits.scatter_(2, ids[..., None], 10.0)


def decode_ms(num_classes: int, images: int, T: int) -> dict:
    """Greedy and beam ms/image on ``images`` posteriors (best of 3 repeats)."""
    cs, logits = alphabet(num_classes), peaked_logits(images, T, num_classes)
    out = {}
    for name, fn in (("greedy", lambda: greedy_decode(logits, cs)), ("beam", lambda: beam_decode(logits, cs))):
        fn()
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        out[name] = 1000 * min(times) / images
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print a table, optionally write JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--classes", type=int, nargs="+", default=list(CLASSES), help="class counts (first = baseline)")
    p.add_argument("--batch", type=int, default=32, help="training batch size (default 32)")
    p.add_argument("--steps", type=int, default=10, help="timed training steps per class count (default 10)")
    p.add_argument("--images", type=int, default=64, help="images decoded per class count (default 64)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    p.add_argument("--quick", action="store_true", help="batch 4, 2 steps, 8 images")
    p.add_argument("--out", help="write results as JSON here")
    args = p.parse_args(argv)
    if args.quick:
        args.batch, args.steps, args.images = 4, 2, 8
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    T = build_model("vgg_small", 1, 37).output_length(WIDTH)
    rows = []
    for c in args.classes:
        row = {"classes": c, "train_images_per_s": train_images_per_s(c, args.batch, args.steps)}
        row.update({f"{k}_ms_per_image": v for k, v in decode_ms(c, args.images, T).items()})
        rows.append(row)
    base = rows[0]
    for r in rows:
        r["train_ratio"] = base["train_images_per_s"] / r["train_images_per_s"]  # > 1: slower than the baseline
        r["greedy_ratio"] = r["greedy_ms_per_image"] / base["greedy_ms_per_image"]
        r["beam_ratio"] = r["beam_ms_per_image"] / base["beam_ms_per_image"]
    print(f"vgg_small, {HEIGHT}x{WIDTH} lines (T={T}), batch {args.batch}, {args.steps} steps, "
          f"{args.images} images decoded, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.1f}")
    print(f"{'classes':>7} {'train img/s':>11} {'x slower':>8} {'greedy ms':>9} {'x':>5} {'beam ms':>8} {'x':>5}")
    for r in rows:
        print(f"{r['classes']:>7} {r['train_images_per_s']:>11.1f} {r['train_ratio']:>8.2f} "
              f"{r['greedy_ms_per_image']:>9.3f} {r['greedy_ratio']:>5.2f} {r['beam_ms_per_image']:>8.3f} "
              f"{r['beam_ratio']:>5.2f}")
    if args.out:
        meta = {"python": sys.version.split()[0], "torch": torch.__version__, "platform": platform.platform(),
                "cpus": os.cpu_count(), "threads": torch.get_num_threads(), "loadavg": os.getloadavg(),
                "height": HEIGHT, "width": WIDTH, "T": T, "batch": args.batch, "steps": args.steps,
                "images": args.images}
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "results": rows}, f, indent=2)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
