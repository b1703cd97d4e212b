"""Reading one crop per call (``crnn.Recognizer(...).read(image)``, the figure the model cards set beside the peers'):
the reading copy with BatchNorm folded into the convolutions (what Recognizer reads with) against the model's trained
layers (what it read with before), in interleaved rounds on the same crops in one process.

    python benchmarks/bench_read.py                          # en and zh, 300 crops, 7 rounds
    python benchmarks/bench_read.py --weights en --limit 500 --rounds 9
    python benchmarks/bench_read.py --quick --out /tmp/bench_read.json

Per model: the median over rounds of crops/s for each, the median of the per-round ratio (folded / trained layers),
and whether every reading is the same text. The crops are decoded once, before timing (the peers' figures in the
model cards include decoding the file; here both arms read the same decoded images). Crops: ``--data`` (a folder with
a gt.txt), else the shared ``iiit5k_train`` (``$CRNN_SHARED_DATA`` or ``../shared/data``), else synthetic crops from
the product's generator (and it says so). The Chinese model reads the same word crops: a speed check, not accuracy.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from PIL import Image  # noqa: E402

from bench_predict import choose_data, read_gt  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", action="append", help="a shipped model's name or a checkpoint; repeat (default: en, zh)")
    p.add_argument("--data", help="folder with gt.txt; default: the shared iiit5k_train crops, else synthetic crops")
    p.add_argument("--limit", type=int, default=300, help="crops (default 300; --quick: 20)")
    p.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7; --quick: 1)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--quick", action="store_true", help="20 crops, 1 round, for CI")
    p.add_argument("--out", help="write the results as JSON here")
    return p.parse_args(argv)


def bench_model(weights: str, images: list[Image.Image], rounds: int) -> dict:
    """Interleaved rounds of one-by-one reading, folded vs trained layers, in the same Recognizer."""
    import crnn
    from crnn.engine.checkpoint import build_from_checkpoint, load_checkpoint
    from crnn.infer import resolve_weights

    rec = crnn.Recognizer(weights, device="cpu")
    engine = rec._engine
    folded = engine.model
    trained, _, _ = build_from_checkpoint(load_checkpoint(resolve_weights(weights)), "cpu")
    trained = trained.eval().to(memory_format=torch.channels_last)  # as Recognizer read before the fold
    arms = {"trained layers": trained, "BatchNorm folded": folded}
    speed: dict[str, list[float]] = {k: [] for k in arms}
    texts: dict[str, list[str]] = {}
    for name, model in arms.items():  # warm-up
        engine.model = model
        for im in images[:10]:
            rec.read(im)
    for _ in range(rounds):
        for name, model in arms.items():
            engine.model = model
            t0 = time.perf_counter()
            texts[name] = [rec.read(im).text for im in images]
            speed[name].append(len(images) / (time.perf_counter() - t0))
    engine.model = folded
    ratios = [f / t for f, t in zip(speed["BatchNorm folded"], speed["trained layers"])]
    return {"weights": weights, "variant": rec._engine.config.model.variant, "crops": len(images), "rounds": rounds,
            "crops_per_s": {k: statistics.median(v) for k, v in speed.items()}, "ratio_per_round": ratios,
            "ratio": statistics.median(ratios),
            "same_texts": sum(a == b for a, b in zip(texts["trained layers"], texts["BatchNorm folded"]))}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    limit, rounds = (20, 1) if args.quick else (args.limit, args.rounds)
    with tempfile.TemporaryDirectory(prefix="bench_read_") as tmp:
        folder, data_name = choose_data(args.data, Path(tmp), limit)
        gt = folder / "gt.txt"
        paths, _ = read_gt(folder, limit) if gt.is_file() else ([], [])
        if not paths:
            print(f"bench_read: error: no images listed in {gt}; --data takes a folder with a gt.txt", file=sys.stderr)
            return 2
        images = [Image.open(p).convert("RGB") for p in paths]
    rows = [bench_model(w, images, rounds) for w in (args.weights or ["en", "zh"])]
    print(f"one crop per call, {len(images)} crops of {data_name}, {args.threads} thread(s), {rounds} round(s); "
          "median crops/s")
    print("| model | trained layers | BatchNorm folded | ratio (median of rounds) | same texts |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        c = r["crops_per_s"]
        print(f"| {r['weights']} ({r['variant']}) | {c['trained layers']:.1f} | {c['BatchNorm folded']:.1f} | "
              f"{r['ratio']:.3f} | {r['same_texts']} / {r['crops']} |")
    if args.out:
        Path(args.out).write_text(json.dumps({"data": data_name, "threads": args.threads, "models": rows}, indent=2)
                                  + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
