"""Reading one crop per call (the model cards' speed figure against the peers): ways to run the same weights, timed.

    python benchmarks/bench_read.py                                   # weights en on data/en_dev, 300 crops
    python benchmarks/bench_read.py --weights zh --data data/zh_bench/unseen_print --num 200
    python benchmarks/bench_read.py --rounds 7 --out /tmp/bench_read.json
    python benchmarks/bench_read.py --quick                          # 16 crops, 1 round: for CI

Each arm is ``crnn.Recognizer(weights, ...).read(path)`` over the same files, one call per crop, after a warm-up of
8 crops that is not timed; the arms take turns in ``--rounds`` interleaved rounds, the order reversed every other
round, so that a machine whose speed drifts moves them all alike and none is always first, and each arm's ratio to
``shipped`` is the median of its per-round ratios. The arms:

- ``shipped``: fp32, as every user reads (torch threads = ``--threads``);
- ``bf16``: the same with ``amp="bf16"``: on a CPU the weights held in bfloat16 (``CRNN.hold_weights_in``), the
  images cast in and the logits out (faster only where this CPU has native bf16 kernels);
- ``bf16 autocast``: float32 weights under ``torch.autocast`` in bf16 (what ``amp="bf16"`` did before: every weight
  cast on every call);
- ``frozen``: the convolutional part compiled once to a frozen TorchScript graph for inference
  (``torch.jit.freeze`` + ``optimize_for_inference``: BatchNorm folded, oneDNN layouts kept between layers);
  the same arithmetic in fp32;
- ``int8 lstm``: the LSTMs and linear layers quantised to int8 weights (``quantize_dynamic``: EasyOCR's CPU default);
- ``onnxruntime``: the model exported by ``crnn-export --format onnx`` and run by onnxruntime (as the peers run),
  our preprocessing and decoding around it (needs ``pip install -e '.[export]'``);
- ``1 thread``: ``shipped`` with torch limited to one thread (one crop's convolutions are small);
- ``--against CKPT`` (repeatable): other weights read the same way as ``shipped`` (fp32; ``--against-amp bf16``: as
  the ``bf16`` arm), e.g. a cheaper network trained by a lever probe, or a wider one grown by
  ``tools/widen_lstm.py``: what it would gain or cost in speed (its accuracy is the probe's to say).

``same`` counts the crops whose text equals ``shipped``'s. The crops: a folder with ``gt.txt`` (``image<TAB>label``);
the default, ``data/en_dev``, is built by ``python scripts/en_benchmark.py --build-dev`` from the shared real crops;
where it is absent (a fresh clone) the benchmark says so and times synthetic words from the product's generator
(a fixed seed) instead. An arm whose package is missing (onnxruntime) is left out with a note.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

WARMUP = 8
DEFAULT_DATA = REPO / "data" / "en_dev"
QUICK_NUM = 16
SYNTH_SEED = 7  # the synthetic fallback: a seed no shipped model trained on


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--weights", default="en", help="a shipped model's name or a checkpoint (default: en)")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a folder with gt.txt (default: data/en_dev)")
    p.add_argument("--num", type=int, default=300, help="crops read per arm and round (default 300)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    p.add_argument("--threads", type=int, default=2, help="torch threads of every arm but '1 thread' (default 2)")
    p.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated arms (default: all: {','.join(ARMS)})")
    p.add_argument("--against", action="append", default=[], metavar="CKPT",
                   help="also time these weights (a checkpoint or a shipped name) as an arm of their own; repeatable")
    p.add_argument("--against-amp", choices=("off", "bf16"), default="off",
                   help="how the --against arms read: off (fp32, as 'shipped', the default) or bf16 (as 'bf16')")
    p.add_argument("--quick", action="store_true", help=f"{QUICK_NUM} crops, 1 round (for CI)")
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args(argv)
    if args.num < 1 or args.rounds < 1 or args.threads < 1:
        p.error("--num, --rounds and --threads must be >= 1")
    if args.quick:
        args.num, args.rounds = QUICK_NUM, 1
    return args


def read_paths(folder: Path, num: int) -> list[str]:
    """The first ``num`` image paths of ``folder/gt.txt``; a one-line error when there is none."""
    gt = folder / "gt.txt"
    if not gt.is_file():
        sys.exit(f"bench_read: error: {gt} not found; give --data a folder with gt.txt "
                 f"(data/en_dev: python scripts/en_benchmark.py --build-dev)")
    rows = [ln.split("\t", 1)[0] for ln in gt.read_text(encoding="utf-8").splitlines() if "\t" in ln]
    return [str(folder / r) for r in rows[:num]]


ARMS = ("shipped", "bf16", "bf16 autocast", "frozen", "int8 lstm", "onnxruntime", "1 thread")


def synthetic_crops(folder: Path, num: int) -> Path:
    """``num`` synthetic word crops from the product's generator (seed SYNTH_SEED) as JPEG files + gt.txt."""
    import os

    from crnn.data.synth import SynthOptions, find_fonts, iter_samples

    (folder / "IMG").mkdir(parents=True)
    rows = []
    for i, (data, label) in enumerate(iter_samples(num, SYNTH_SEED, find_fonts(), SynthOptions(charset="alnum36"),
                                                   workers=os.cpu_count() or 1)):
        (folder / "IMG" / f"{i}.jpg").write_bytes(data)
        rows.append(f"IMG/{i}.jpg\t{label}")
    (folder / "gt.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


class _OnnxModel:
    """Stands in for the model inside a Recognizer: logits from an onnxruntime session of its ONNX export."""

    def __init__(self, session) -> None:
        self.session, self.name = session, session.get_inputs()[0].name

    def __call__(self, images):
        import torch

        return torch.from_numpy(self.session.run(None, {self.name: images.contiguous().numpy()})[0])


def make_arm(name: str, weights: str, threads: int, work: Path, against_amp: str = "off"):
    """(recogniser, torch threads) for one arm: the same weights, run another way (None: its package is missing)."""
    import torch

    import crnn

    if name.startswith("against "):
        return crnn.Recognizer(name[len("against "):], amp=against_amp), threads
    rec = crnn.Recognizer(weights, amp="bf16" if name == "bf16" else "off")
    model = rec._engine.model
    if name == "bf16 autocast":  # float32 weights under torch.autocast: what amp=bf16 did before
        rec._engine.amp = "bf16"
    if name == "frozen":
        with torch.no_grad():
            model.cnn = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.script(model.cnn.eval())))
    elif name == "int8 lstm":  # EasyOCR's CPU default: LSTM and Linear weights in int8, activations quantised per call
        for part in ("rnn1", "rnn2", "head"):
            setattr(model, part, torch.ao.quantization.quantize_dynamic(
                getattr(model, part), {torch.nn.LSTM, torch.nn.Linear}, dtype=torch.qint8))
    elif name == "onnxruntime":  # crnn-export's file, read by onnxruntime as the peers are
        import copy

        try:
            import onnxruntime as ort
        except ImportError:
            print("bench_read: onnxruntime is not installed (pip install -e '.[export]'): arm left out",
                  file=sys.stderr)
            return None

        from crnn.export import export_model

        path = work / "model.onnx"
        export_model(copy.deepcopy(model).float(), rec._engine.charset, rec._engine.config, path, "onnx")
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        rec._engine.model = _OnnxModel(ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]))
    return rec, 1 if name == "1 thread" else threads


def time_arms(arms: dict, paths: list[str], rounds: int) -> tuple[dict[str, list[str]], dict[str, list[float]]]:
    """Each arm's texts (after a warm-up) and its crops/s per interleaved round."""
    import torch

    texts: dict[str, list[str]] = {}
    for n, (rec, threads) in arms.items():
        torch.set_num_threads(threads)
        for p in paths[:WARMUP]:
            rec.read(p)
        texts[n] = [rec.read(p).text for p in paths]
    speed: dict[str, list[float]] = {n: [] for n in arms}
    names = list(arms)
    for r in range(rounds):
        for n in names if r % 2 == 0 else names[::-1]:  # none always first (a machine that drifts moves all alike)
            rec, threads = arms[n]
            torch.set_num_threads(threads)
            t0 = time.perf_counter()
            for p in paths:
                rec.read(p)
            speed[n].append(len(paths) / (time.perf_counter() - t0))
        print(f"round {r + 1}/{rounds}: " + ", ".join(f"{n} {v[-1]:.1f}" for n, v in speed.items()),
              file=sys.stderr, flush=True)
    return texts, speed


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from crnn.engine.curve import cpu_name

    names = [a.strip() for a in args.arms.split(",") if a.strip()]
    if "shipped" not in names:
        names.insert(0, "shipped")
    unknown = [n for n in names if n not in ARMS]
    if unknown:
        sys.exit(f"bench_read: error: unknown arm {unknown[0]!r}; choose from {', '.join(ARMS)}")
    for ckpt in args.against:
        if not Path(ckpt).is_file() and "/" in ckpt:
            sys.exit(f"bench_read: error: --against {ckpt}: no such file")
        names.append(f"against {ckpt}")
    with tempfile.TemporaryDirectory() as work:
        data = Path(args.data)
        if not (data / "gt.txt").is_file() and data == DEFAULT_DATA:
            print(f"bench_read: {data} is not here (python scripts/en_benchmark.py --build-dev builds it from the "
                  f"shared real crops); timing {args.num} synthetic words (seed {SYNTH_SEED}) instead", file=sys.stderr)
            data = synthetic_crops(Path(work) / "synth", args.num)
            source = f"synthetic words (seed {SYNTH_SEED})"
        else:
            source = str(data)
        paths = read_paths(data, args.num)
        made = {n: make_arm(n, args.weights, args.threads, Path(work), args.against_amp) for n in names}
        arms = {n: a for n, a in made.items() if a is not None}
        texts, speed = time_arms(arms, paths, args.rounds)
        precision = {n: getattr(rec, "amp", "off") for n, (rec, _) in arms.items()}
    rows = []
    for n, v in speed.items():
        ratios = [a / b for a, b in zip(v, speed["shipped"])]
        label = f"{n} ({args.against_amp})" if n.startswith("against ") and args.against_amp != "off" else n
        rows.append({"arm": label, "crops_per_s": statistics.median(v), "ratio": statistics.median(ratios),
                     "same": sum(a == b for a, b in zip(texts[n], texts["shipped"])), "amp": precision[n], "rounds": v})
    print(f"{args.weights} on {len(paths)} crops of {source}, {args.rounds} rounds, {cpu_name()}")
    print("| arm | crops/s (median) | x shipped (median of rounds) | same text as shipped |")
    print("| --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['arm']} | {r['crops_per_s']:.1f} | {r['ratio']:.3f} | {r['same']} / {len(paths)} |")
    if args.out:
        Path(args.out).write_text(json.dumps({"weights": args.weights, "data": source, "crops": len(paths),
                                              "threads": args.threads, "cpu": cpu_name(), "rows": rows},
                                             indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
