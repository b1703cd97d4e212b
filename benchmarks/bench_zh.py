"""Cost of a Chinese training line on this CPU: today's recipe against the CPU recipe, and where a step's time goes.

The recipes (zh_gb2312, 6,895 classes, 32-px keep-ratio lines of 1-12 characters, batch 32, Adam, clip 5):

* ``w4 mixed`` - configs/zh_baseline_w4.yaml: ``vgg_small`` (T = W/4 + 1, ~8 steps per Hanzi), lines of any length
  in a batch (a shuffled LMDB), so each batch is padded to its longest line;
* ``w8 mixed`` - ``vgg_small_w8`` (T = W/8) on the same batches;
* ``w8 by length`` - ``vgg_small_w8``, every line of a batch the same length (data.synth_online), so a batch is
  padded less;
* ``w8 by width`` - configs/shipped_zh.yaml: as ``by length``, and the lines of 8 such batches at a time sorted by
  their width and cut into batches again (data.synth_pool: 8), so a batch is padded least;

each in fp32 and bf16 autocast. The batches are real lines from the synthetic generator (training fonts). Each step
is cut at its parts - CNN, BiLSTMs, output layer, log-softmax + CTC, the backward of each (the graph is split at the
part boundaries, so the backward is the same arithmetic as one ``loss.backward()``), clip + optimizer - and timed in
**CPU seconds of the one thread** doing it (torch at 1 thread): a busy machine slows the wall clock, much less the
CPU time of a step, so lines per CPU-second compare across runs; the ratios are taken in this run. The data side is
timed the same way: rendering a line (JPEG encode, decode, resize; what data.synth_online adds per line) and reading
a pre-rendered one (JPEG decode, resize; an LMDB's per-line cost after its one-off generation).

    python benchmarks/bench_zh.py --out bench_zh.json      # 8 batches x 3 rounds per configuration (~10 CPU-min)
    python benchmarks/bench_zh.py --quick --out /tmp/q.json  # CI-sized: tiny batches, one round
"""
from __future__ import annotations

import argparse
import io
import json
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crnn.charset import Charset  # noqa: E402
from crnn.data.collate import Batch, Collate  # noqa: E402
from crnn.data.lines import line_length  # noqa: E402
from crnn.data.synth import SynthOptions, find_fonts, make_sample  # noqa: E402
from crnn.data.transforms import ResizeNormalize  # noqa: E402
from crnn.engine.curve import cpu_name  # noqa: E402
from crnn.engine.evaluate import autocast_context  # noqa: E402
from crnn.loss import ctc_loss  # noqa: E402
from crnn.model import build_model  # noqa: E402

CHARSET, MAX_LEN, HEIGHT, MAX_WIDTH = "zh_gb2312", 12, 32, 400
PARTS = ("cnn", "lstm", "head", "ctc", "ctc+head bwd", "lstm bwd", "cnn bwd", "optimizer")
RECIPES = {  # name -> (variant, batches of one length)
    "w4 mixed": ("vgg_small", "mixed"),
    "w8 mixed": ("vgg_small_w8", "mixed"),
    "w8 by length": ("vgg_small_w8", "by length"),
    "w8 by width": ("vgg_small_w8", "by width"),
}
POOL = 8  # configs/shipped_zh.yaml data.synth_pool


def cpu() -> float:
    return time.thread_time()


def render_lines(n_batches: int, batch: int, by_length: bool, seed: int, fonts, transform, collate) -> tuple[
        list[list], float, float]:
    """Batches of real lines (lists of (image, label)); returns them, CPU seconds per rendered line, CPU seconds per
    decoded line."""
    opts = SynthOptions(charset=CHARSET, max_len=MAX_LEN, text="lines", uniform_share=0.25)
    batches, render_s, decode_s, n = [], 0.0, 0.0, 0
    from PIL import Image

    for b in range(n_batches):
        fixed = line_length(random.Random(f"{seed}/{b}"), MAX_LEN) if by_length else 0
        o = SynthOptions(charset=CHARSET, max_len=MAX_LEN, text="lines", uniform_share=0.25, line_len=fixed)
        items = []
        for j in range(batch):
            t0 = cpu()
            data, label = make_sample(b * batch + j, seed, fonts, o if fixed else opts)
            t1 = cpu()
            img = transform(Image.open(io.BytesIO(data)).convert("RGB"))
            t2 = cpu()
            render_s += t2 - t0
            decode_s += t2 - t1
            n += 1
            items.append((img, label))
        batches.append(items)
    return batches, render_s / n, decode_s / n


def by_width(batches: list[list], pool: int) -> list[list]:
    """The lines of every ``pool`` batches sorted by width and cut into batches again (crnn.data.online)."""
    out = []
    for g in range(0, len(batches), pool):
        items = sorted((it for b in batches[g:g + pool] for it in b), key=lambda it: it[0].shape[-1])
        size = len(batches[0])
        out += [items[i:i + size] for i in range(0, len(items), size)]
    return out


def step_parts(model, opt, b: Batch, amp: str) -> dict[str, float]:
    """One training step, timed part by part in CPU seconds (the graph is cut between the parts)."""
    t = {}
    x = b.images.contiguous(memory_format=torch.channels_last)
    c0 = cpu()
    with autocast_context(torch.device("cpu"), amp):
        f = model.features(x)
        c1 = cpu()
        f_in = f.detach().requires_grad_()
        y = model.rnn2(model.rnn1(f_in))[0]
        c2 = cpu()
        y_in = y.detach().requires_grad_()
        logits = model.head(y_in)
        c3 = cpu()
    steps = model.output_length(b.widths.long()).clamp(max=logits.shape[1])
    loss = ctc_loss(logits, b.targets, b.target_lengths, steps).loss
    c4 = cpu()
    loss.backward()
    c5 = cpu()
    y.backward(y_in.grad)
    c6 = cpu()
    f.backward(f_in.grad)
    c7 = cpu()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    c8 = cpu()
    for name, a, z in zip(PARTS, (c0, c1, c2, c3, c4, c5, c6, c7), (c1, c2, c3, c4, c5, c6, c7, c8)):
        t[name] = z - a
    return t


def measure(variant: str, amp: str, batches: list[Batch], classes: int, rounds: int) -> dict:
    torch.manual_seed(0)
    model = build_model(variant, 1, classes).train().to(memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    step_parts(model, opt, batches[0], amp)  # warm-up: oneDNN builds its kernels
    sums = dict.fromkeys(PARTS, 0.0)
    lines = 0
    for _ in range(rounds):
        for b in batches:
            for k, v in step_parts(model, opt, b, amp).items():
                sums[k] += v
            lines += len(b)
    total = sum(sums.values())
    return {"lines": lines, "cpu_seconds": total, "lines_per_cpu_s": lines / total,
            "share": {k: v / total for k, v in sums.items()}}


def pad_share(batches: list[Batch]) -> float:
    """Share of the pixels of these batches that are padding."""
    real = sum(int(b.widths.sum()) for b in batches)
    padded = sum(b.images.shape[0] * b.images.shape[-1] for b in batches)
    return 1 - real / padded


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", type=int, default=8, help="batches per recipe (default 8)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3, help="passes over the batches per configuration")
    p.add_argument("--amps", default="off,bf16", help="autocast modes (default off,bf16)")
    p.add_argument("--quick", action="store_true", help="2 batches of 4, one round")
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args(argv)
    if args.quick:
        args.batches, args.batch_size, args.rounds = 2, 4, 1
    torch.set_num_threads(1)
    amps = [a for a in args.amps.split(",") if a]
    cs = Charset.from_spec(CHARSET)
    fonts = find_fonts(None, "train")
    transform = ResizeNormalize(HEIGHT, 280, keep_ratio=True, max_width=MAX_WIDTH)
    collate = Collate(cs)
    render_lines(args.batches, args.batch_size, False, 7, fonts, transform, collate)  # warm: fonts, word list
    mixed, render_s, decode_s = render_lines(args.batches, args.batch_size, False, 7, fonts, transform, collate)
    by_len, _, _ = render_lines(args.batches, args.batch_size, True, 7, fonts, transform, collate)
    lists = {"mixed": mixed, "by length": by_len, "by width": by_width(by_len, min(POOL, args.batches))}
    data = {k: [collate(b) for b in v] for k, v in lists.items()}
    rows = []
    for name, (variant, kind) in RECIPES.items():
        for amp in amps:
            r = measure(variant, amp, data[kind], cs.num_classes, args.rounds)
            rows.append({"recipe": name, "variant": variant, "amp": "fp32" if amp == "off" else amp, **r})
    base = rows[0]["lines_per_cpu_s"]
    for r in rows:
        r["vs_baseline"] = r["lines_per_cpu_s"] / base
        r["with_data_lines_per_cpu_s"] = 1 / (1 / r["lines_per_cpu_s"] + (decode_s if "mixed" in r["recipe"]
                                                                           else render_s))
    print(f"CPU: {cpu_name()}; torch {torch.__version__}, 1 thread; {args.batches} batches x {args.batch_size} lines "
          f"x {args.rounds} rounds per row; padding: " + ", ".join(f"{k} {pad_share(v) * 100:.0f} %"
                                                                   for k, v in data.items()) + " of the pixels")
    print(f"data per line (CPU ms): rendered on the fly {render_s * 1e3:.2f}, decoded from a pre-rendered set "
          f"{decode_s * 1e3:.2f}")
    print()
    head = "| recipe | amp | lines / CPU-s | vs first row | with data | " + " | ".join(PARTS) + " |"
    print(head)
    print("|" + "---|" * (5 + len(PARTS)))
    for r in rows:
        print(f"| {r['recipe']} | {r['amp']} | {r['lines_per_cpu_s']:.1f} | {r['vs_baseline']:.2f}x | "
              f"{r['with_data_lines_per_cpu_s']:.1f} | " + " | ".join(f"{r['share'][k] * 100:.0f} %" for k in PARTS)
              + " |")
    if args.out:
        Path(args.out).write_text(json.dumps({
            "cpu": cpu_name(), "torch": torch.__version__, "threads": 1, "batches": args.batches,
            "batch_size": args.batch_size, "rounds": args.rounds,
            "pad_share": {k: pad_share(v) for k, v in data.items()},
            "data_cpu_ms_per_line": {"rendered": render_s * 1e3, "decoded": decode_s * 1e3},
            "rows": rows}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
