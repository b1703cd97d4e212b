"""crnn-eval's reading path for a keep-ratio model: loader batches pooled before they are cut to equal widths,
against each batch cut alone (what crnn-eval did before).

A keep-ratio model reads every crop at its own width, so crnn-eval cuts each loader batch into batches of one width.
Cut alone, a batch of 64 word crops of many widths becomes forwards of 2-3 crops; pooled (512 crops, then cut, no
forward larger than a loader batch) a width meets all its crops of the pool. Both arms read the same crops through
``crnn.engine.evaluate.evaluate`` (torch at ``--threads``), in interleaved rounds with their order rotating; each arm's
speed is the median over rounds of images per CPU-second of this process (what a busy machine distorts least) and of
images per wall second, and the ratio is taken within each round. The readings of both arms must be equal.

    python benchmarks/bench_eval.py                          # the default model (en), iiit5k_train if shared
    python benchmarks/bench_eval.py --data DIR --weights zh  # any folder with a gt.txt, any model
    python benchmarks/bench_eval.py --quick --out /tmp/bench_eval.json

Without --data the crops are the shared ``iiit5k_train`` (``$CRNN_SHARED_DATA``, else ``../shared/data``), else
synthetic crops from the product's generator (bench_predict.py's fallback), and the benchmark says so.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_predict import choose_data  # noqa: E402

from crnn.data.collate import read_at_own_width  # noqa: E402
from crnn.data.loader import read_options  # noqa: E402
from crnn.engine.curve import cpu_name  # noqa: E402
from crnn.engine.evaluate import evaluate  # noqa: E402
from crnn.infer import Recognizer, resolve_weights  # noqa: E402
from crnn.report.collect import build_report_loader  # noqa: E402

ARMS = {"pooled (512 crops, then cut)": 512, "each batch cut alone (before)": 0}


def reader(rec: Recognizer, folder: Path, batch_size: int, pool: int):
    """A function reading every crop of ``folder`` as crnn-eval does, with loader batches pooled by ``pool``."""
    d = rec.config.data

    def read() -> tuple[list[str], int]:
        loader = build_report_loader(str(folder), height=d.height, width=d.width, keep_ratio=d.keep_ratio,
                                     max_width=rec.transform.max_width, channels=rec.config.model.in_channels,
                                     batch_size=batch_size, num_workers=0, **read_options(d))
        texts: dict[int, str] = {}
        forwards = []
        evaluate(rec.model, read_at_own_width(loader, pool=pool), rec.charset, torch.device("cpu"),
                 protocol="exact", max_examples=0,
                 on_batch=lambda b, r: (texts.update(zip(b.indices, (t for t, _ in r))), forwards.append(len(r))))
        return [texts[i] for i in sorted(texts)], len(forwards)
    return read


def run(args: argparse.Namespace, folder: Path, name: str) -> dict:
    """Interleaved rounds of both arms; the summary."""
    torch.set_num_threads(args.threads)
    weights = str(resolve_weights(args.weights))
    rec = Recognizer.from_checkpoint(weights, "cpu")
    readers = {arm: reader(rec, folder, args.batch_size, pool) for arm, pool in ARMS.items()}
    next(iter(readers.values()))()  # warm-up, not timed
    per_cpu: dict[str, list[float]] = {a: [] for a in ARMS}
    per_wall: dict[str, list[float]] = {a: [] for a in ARMS}
    ratios, texts, forwards = [], {}, {}
    arms = list(ARMS)
    for r in range(args.rounds):
        order = arms[r % len(arms):] + arms[:r % len(arms)]
        for arm in order:
            t0, c0 = time.perf_counter(), time.process_time()
            texts[arm], forwards[arm] = readers[arm]()
            n = len(texts[arm])
            per_wall[arm].append(n / (time.perf_counter() - t0))
            per_cpu[arm].append(n / max(time.process_time() - c0, 1e-9))
        ratios.append(per_cpu[arms[0]][-1] / per_cpu[arms[1]][-1])
    same = texts[arms[0]] == texts[arms[1]]
    return {"weights": weights, "data": name, "crops": len(texts[arms[0]]), "batch_size": args.batch_size,
            "threads": args.threads, "rounds": args.rounds, "cpu": cpu_name(), "load_avg_1min": os.getloadavg()[0],
            "same_readings": same,
            "arms": {a: {"images_per_cpu_s": statistics.median(per_cpu[a]),
                         "images_per_s": statistics.median(per_wall[a]), "forwards": forwards[a]} for a in arms},
            "ratio_cpu": statistics.median(ratios)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--weights", default=None, help="checkpoint or shipped name (default: the default model, en)")
    p.add_argument("--data", default=None, help="a folder with gt.txt (default: iiit5k_train if shared, else synth)")
    p.add_argument("--batch-size", type=int, default=64, help="loader batch size, as crnn-eval's (default 64)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    p.add_argument("--synth-num", type=int, default=500, help="synthetic crops when no real ones (default 500)")
    p.add_argument("--quick", action="store_true", help="100 synthetic crops at most, 1 round")
    p.add_argument("--out", default=None, help="also write the summary as JSON here")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.synth_num = 1, min(args.synth_num, 100)
    with tempfile.TemporaryDirectory() as tmp:
        folder, name = choose_data(args.data, Path(tmp), args.synth_num)
        res = run(args, folder, name)
    print(f"crnn-eval's path, {res['crops']} crops of {res['data']}, {res['weights']}, batch {res['batch_size']}, "
          f"{res['threads']} thread(s), {res['rounds']} round(s); {res['cpu']}, load {res['load_avg_1min']:.1f}")
    print(f"{'arm':34} {'img/CPU-s':>10} {'img/s':>8} {'forwards':>9}")
    for arm, a in res["arms"].items():
        print(f"{arm:34} {a['images_per_cpu_s']:10.1f} {a['images_per_s']:8.1f} {a['forwards']:9d}")
    print(f"pooled / alone (images per CPU-second, median of per-round ratios): {res['ratio_cpu']:.2f}x; "
          f"same readings: {'yes' if res['same_readings'] else 'NO'}")
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1), encoding="utf-8")
    return 0 if res["same_readings"] else 1


if __name__ == "__main__":
    sys.exit(main())
