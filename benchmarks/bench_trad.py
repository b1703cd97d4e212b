"""What a larger Chinese alphabet costs in speed: the shipped model read and trained at 6,895 classes and widened.

Issue 43 ("the alphabet real text needs"): the shipped line model (weights/crnn_zh_lines.pt, zh_gb2312) against the
same weights with its output layer widened to more classes the way training from it with a larger ``model.charset``
widens it (crnn.engine.alphabet_change: every zh_gb2312 row kept, fresh rows after them). The default widths are the
alphabets of docs/chinese.md, "Traditional forms on signs": 7,463 = zh_gb2312 + PP-OCRv4's 568 traditional-only forms,
8,376 = ``zh_gb2312_trad`` (OpenCC's 1,458 forms and 23 Taiwan / Hong Kong forms), 9,451 = zh_gb2312 + all 2,556 of
OpenCC's traditional-only forms (the extra rows are the forms of zh_gb2312_trad, then other Hanzi outside GB 2312: only
their number matters here).

* reading: lines rendered by the synthetic generator (training fonts), preprocessed as crnn-predict does it, then
  read by crnn.infer's engine (model + greedy decoding) one line at a time and in batches of 32;
* training: one step of the shipped recipe's model (forward, CTC, backward, Adam) on a batch of 32 lines 280 px wide.

Timed in CPU seconds of the one thread doing it (torch at 1 thread), so a busy machine slows the wall clock more than
the ratios; the arms are interleaved round by round (their order rotating) and each ratio is the median over rounds
of the ratio within a round.

    python benchmarks/bench_trad.py --out bench_trad.json   # 96 lines, 5 rounds (~3 CPU-min)
    python benchmarks/bench_trad.py --quick --out /tmp/q.json
"""
from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crnn.charset import Charset, gb2312_hanzi, zh_traditional_forms  # noqa: E402
from crnn.data.synth import SynthOptions, find_fonts, make_sample  # noqa: E402
from crnn.engine.alphabet_change import adapt_head  # noqa: E402
from crnn.engine.checkpoint import load_checkpoint  # noqa: E402
from crnn.engine.curve import cpu_name  # noqa: E402
from crnn.infer import Recognizer  # noqa: E402
from crnn.loss import ctc_loss  # noqa: E402
from crnn.model import build_model  # noqa: E402

CLASSES = (6895, 7463, 8376, 9451)
WEIGHTS = "weights/crnn_zh_lines.pt"


def widened(base: Charset, classes: int) -> Charset:
    """``base`` with characters appended up to ``classes`` outputs: zh_gb2312_trad's forms, then other Hanzi."""
    have = set(base.chars)
    pool = [c for c in zh_traditional_forms() if c not in have]
    gb = set(gb2312_hanzi())
    pool += [chr(o) for o in range(0x4E00, 0xA000) if chr(o) not in gb and chr(o) not in have and chr(o) not in pool]
    extra = classes - base.num_classes
    if extra < 0 or extra > len(pool):
        raise ValueError(f"cannot widen {base.num_classes} classes to {classes}")
    return Charset(base.chars + "".join(pool[:extra]), base.lowercase, base.unknown)


def engines(path: str, classes: list[int]) -> dict[int, Recognizer]:
    """One reading engine per class count, all from the same checkpoint (widened by alphabet_change)."""
    ck = load_checkpoint(path)
    base = Charset.from_dict(ck.charset)
    if classes[0] != base.num_classes:
        raise SystemExit(f"the first class count must be the checkpoint's ({base.num_classes})")
    out = {}
    for k in classes:
        cs = widened(base, k)
        model = build_model(ck.variant or ck.config["model"]["variant"], 1, k)
        state, _ = adapt_head(ck.model_state, base, cs, model)
        wide = dataclasses.replace(ck, model_state=state, charset=cs.to_dict(), num_classes=k)
        out[k] = Recognizer.from_checkpoint(wide, "cpu")
    return out


def render(n: int, engine: Recognizer) -> list[torch.Tensor]:
    """``n`` synthetic Chinese lines (training fonts), preprocessed as crnn-predict does it."""
    from PIL import Image

    fonts = find_fonts(None, "train")
    opts = SynthOptions(charset="zh_gb2312", max_len=12, text="lines")
    return [engine.preprocess(Image.open(io.BytesIO(make_sample(i, 43, fonts, opts)[0])).convert("RGB"))
            for i in range(n)]


def read_cpu_s(engine: Recognizer, lines: list[torch.Tensor], batch: int) -> float:
    """CPU seconds of this thread to read ``lines`` in batches of ``batch`` (1 = one at a time)."""
    engine.batch_size = batch
    t0 = time.thread_time()
    with torch.inference_mode():
        engine.predict_tensors(lines)
    return time.thread_time() - t0


class TrainStep:
    """The shipped recipe's model at ``classes`` outputs, Adam, one fixed batch of 32 x 280 px lines."""

    def __init__(self, variant: str, classes: int, batch: int) -> None:
        torch.manual_seed(0)
        self.model = build_model(variant, 1, classes).train()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-4)
        self.images = torch.randn(batch, 1, 32, 280)
        self.targets = torch.randint(1, classes, (batch * 8,))
        self.lengths = torch.full((batch,), 8, dtype=torch.long)
        self.cpu_s()  # warm-up

    def cpu_s(self) -> float:
        """CPU seconds of one optimizer step."""
        t0 = time.thread_time()
        self.opt.zero_grad(set_to_none=True)
        ctc_loss(self.model(self.images), self.targets, self.lengths).loss.backward()
        self.opt.step()
        return time.thread_time() - t0


def run(args: argparse.Namespace) -> dict:
    """Interleaved rounds; per class count the median per-round ratio of lines/CPU-s to the first count's."""
    eng = engines(args.weights, args.classes)
    lines = render(args.lines, eng[args.classes[0]])
    variant = eng[args.classes[0]].config.model.variant
    train = {k: TrainStep(variant, k, args.train_batch) for k in args.classes} if args.train_steps else {}
    for k in args.classes:
        read_cpu_s(eng[k], lines[:4], 1)  # warm-up
    arms = ["one by one", "batch 32"] + (["train"] if train else [])
    per_round = []
    for r in range(args.rounds):
        order = args.classes[r % len(args.classes):] + args.classes[:r % len(args.classes)]
        row: dict[int, dict[str, float]] = {k: {} for k in args.classes}
        for k in order:  # lines (or training lines) per CPU-second
            row[k]["one by one"] = len(lines) / read_cpu_s(eng[k], lines, 1)
            row[k]["batch 32"] = len(lines) / read_cpu_s(eng[k], lines, 32)
            if train:
                row[k]["train"] = args.train_batch * args.train_steps / sum(
                    train[k].cpu_s() for _ in range(args.train_steps))
        per_round.append(row)
    base = args.classes[0]
    table = {k: {a: {"lines_per_cpu_s": statistics.median(p[k][a] for p in per_round),
                     "ratio": statistics.median(p[k][a] / p[base][a] for p in per_round)} for a in arms}
             for k in args.classes}
    return {"arms": arms, "table": table, "rounds": per_round}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print a table, optionally write JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--weights", default=WEIGHTS)
    p.add_argument("--classes", type=int, nargs="+", default=list(CLASSES), help="class counts (first = the model's)")
    p.add_argument("--lines", type=int, default=96, help="lines read per arm and round (default 96)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    p.add_argument("--train-steps", type=int, default=2, help="training steps per arm and round (0 = none)")
    p.add_argument("--train-batch", type=int, default=32)
    p.add_argument("--quick", action="store_true", help="8 lines, 1 round, 1 training step of 4 lines")
    p.add_argument("--out", help="write results as JSON here")
    args = p.parse_args(argv)
    if args.quick:
        args.lines, args.rounds, args.train_steps, args.train_batch = 8, 1, 1, 4
    torch.set_num_threads(1)
    res = run(args)
    print(f"CPU: {cpu_name()}; torch {torch.__version__}, 1 thread, fp32; {args.weights}; {args.lines} lines, "
          f"{args.rounds} rounds, load {os.getloadavg()[0]:.1f}")
    print("| classes | " + " | ".join(f"{a}: lines / CPU-s | x" for a in res["arms"]) + " |")
    print("|---|" + "---|---|" * len(res["arms"]))
    for k, row in res["table"].items():
        print(f"| {k:,} | " + " | ".join(f"{row[a]['lines_per_cpu_s']:.1f} | {row[a]['ratio']:.3f}"
                                         for a in res["arms"]) + " |")
    if args.out:
        meta = {"cpu": cpu_name(), "python": sys.version.split()[0], "torch": torch.__version__,
                "platform": platform.platform(), "threads": 1, "loadavg": os.getloadavg(), "weights": args.weights,
                "lines": args.lines, "rounds": args.rounds, "train_steps": args.train_steps,
                "train_batch": args.train_batch, "command": sys.argv}
        res["table"] = {str(k): v for k, v in res["table"].items()}
        res["rounds"] = [{str(k): v for k, v in r.items()} for r in res["rounds"]]
        Path(args.out).write_text(json.dumps({**meta, **res}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
