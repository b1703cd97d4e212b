"""Alphabet size: training images/s and decoding ms/image at 37, ~5,000 and ~7,000 classes, as ratios to 37.

One run, one machine: for each class count a vgg_small CRNN on 32x280 text lines (T = 71, the line geometry of
Chinese CRNN repositories) takes optimizer steps on random images with random 10-character labels, then greedy
and beam search (width 10, the default per-step pruning) decode posteriors shaped like a trained model's: one
likely class per step, a runner-up, the rest noise. Only the classifier head and the decoders depend on the class count,
so the ratios say what a large alphabet costs. The class counts are interleaved round by round and each ratio is the
median over rounds of the ratio within a round (a loaded machine is noisy; compare ratios, not runs).

    python benchmarks/bench_alphabet.py --out bench_alphabet.json   # full run
    python benchmarks/bench_alphabet.py --quick                     # a few seconds
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
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


class TrainBench:
    """A vgg_small CRNN with ``num_classes`` outputs, Adam, and one fixed batch of random lines."""

    def __init__(self, num_classes: int, batch: int) -> None:
        torch.manual_seed(0)
        self.model = build_model("vgg_small", 1, num_classes).train()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-4)
        self.images = torch.randn(batch, 1, HEIGHT, WIDTH)
        self.targets = torch.randint(1, num_classes, (batch * LABEL_LEN,))
        self.lengths = torch.full((batch,), LABEL_LEN, dtype=torch.long)
        self.step()  # warm-up, not timed

    def step(self) -> None:
        """One optimizer step."""
        self.opt.zero_grad(set_to_none=True)
        ctc_loss(self.model(self.images), self.targets, self.lengths).loss.backward()
        self.opt.step()

    def images_per_s(self, steps: int) -> float:
        """Images/s over ``steps`` timed steps."""
        t0 = time.perf_counter()
        for _ in range(steps):
            self.step()
        return len(self.images) * steps / (time.perf_counter() - t0)


def peaked_logits(n: int, T: int, num_classes: int) -> torch.Tensor:
    """``[n, T, C]`` logits like a trained model's: per step one likely class (p ~ 0.9; half of them blank), one
    runner-up (p ~ 0.05) and noise, so a beam has the same choices to weigh at every alphabet size."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(n, T, num_classes, generator=g)
    ids = torch.randint(1, num_classes, (n, T, 2), generator=g)
    ids[:, ::2, 0] = 0
    logits.scatter_(2, ids[..., 1:], 9.0)
    return logits.scatter_(2, ids[..., :1], 12.0)


def decode_ms(cs: Charset, logits: torch.Tensor) -> dict:
    """Greedy and beam (width 10, default pruning) ms/image on ``logits [n, T, C]``."""
    out = {}
    for name, fn in (("greedy", greedy_decode), ("beam", beam_decode)):
        t0 = time.perf_counter()
        fn(logits, cs)
        out[name] = 1000 * (time.perf_counter() - t0) / len(logits)
    return out


def run_rounds(classes: list[int], rounds: int, batch: int, steps: int, images: int, T: int) -> list[dict]:
    """Interleave the class counts round by round; per class: median values and median per-round ratios."""
    benches = {c: TrainBench(c, batch) for c in classes}
    inputs = {c: (alphabet(c), peaked_logits(images, T, c)) for c in classes}
    for c in classes:
        decode_ms(*inputs[c])  # warm-up
    per_round = []
    for _ in range(rounds):
        per_round.append({c: {"train_images_per_s": benches[c].images_per_s(steps), **{
            f"{k}_ms_per_image": v for k, v in decode_ms(*inputs[c]).items()}} for c in classes})
    base, rows = classes[0], []
    for c in classes:
        def med(f):
            return statistics.median(f(r) for r in per_round)
        row = {"classes": c}
        for key in ("train_images_per_s", "greedy_ms_per_image", "beam_ms_per_image"):
            row[key] = med(lambda r: r[c][key])
        row["train_ratio"] = med(lambda r: r[base]["train_images_per_s"] / r[c]["train_images_per_s"])
        row["greedy_ratio"] = med(lambda r: r[c]["greedy_ms_per_image"] / r[base]["greedy_ms_per_image"])
        row["beam_ratio"] = med(lambda r: r[c]["beam_ms_per_image"] / r[base]["beam_ms_per_image"])
        row["rounds"] = [r[c] for r in per_round]
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print a table, optionally write JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--classes", type=int, nargs="+", default=list(CLASSES), help="class counts (first = baseline)")
    p.add_argument("--batch", type=int, default=32, help="training batch size (default 32)")
    p.add_argument("--steps", type=int, default=10, help="timed training steps per class count (default 10)")
    p.add_argument("--images", type=int, default=64, help="images decoded per class count (default 64)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; ratios are per-round medians (3)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    p.add_argument("--quick", action="store_true", help="batch 4, 1 step, 8 images, 1 round")
    p.add_argument("--out", help="write results as JSON here")
    args = p.parse_args(argv)
    if args.quick:
        args.batch, args.steps, args.images, args.rounds = 4, 1, 8, 1
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    T = build_model("vgg_small", 1, 37).output_length(WIDTH)
    rows = run_rounds(args.classes, args.rounds, args.batch, args.steps, args.images, T)
    print(f"vgg_small, {HEIGHT}x{WIDTH} lines (T={T}), batch {args.batch}, {args.steps} steps, {args.images} images "
          f"decoded, {args.rounds} rounds, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.1f}")
    print(f"{'classes':>7} {'train img/s':>11} {'x slower':>8} {'greedy ms':>9} {'x':>5} {'beam ms':>8} {'x':>5}")
    for r in rows:
        print(f"{r['classes']:>7} {r['train_images_per_s']:>11.1f} {r['train_ratio']:>8.2f} "
              f"{r['greedy_ms_per_image']:>9.3f} {r['greedy_ratio']:>5.2f} {r['beam_ms_per_image']:>8.3f} "
              f"{r['beam_ratio']:>5.2f}")
    if args.out:
        meta = {"python": sys.version.split()[0], "torch": torch.__version__, "platform": platform.platform(),
                "cpus": os.cpu_count(), "threads": torch.get_num_threads(), "loadavg": os.getloadavg(),
                "height": HEIGHT, "width": WIDTH, "T": T, "batch": args.batch, "steps": args.steps,
                "images": args.images, "rounds": args.rounds}
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "results": rows}, f, indent=2)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
