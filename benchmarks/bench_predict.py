"""Throughput and accuracy of crnn-predict's library path against Tesseract on the same real word crops.

    python benchmarks/bench_predict.py                       # shipped model, all of iiit5k_train
    python benchmarks/bench_predict.py --data DIR            # any folder with a gt.txt
    python benchmarks/bench_predict.py --quick --out /tmp/bench_predict.json
    python benchmarks/bench_predict.py --weights runs/x/best.pt --limit 500 --amp bf16

crnn: ``Recognizer.predict_paths`` in this process (file reading, resizing, batching, decoding included),
timed after a warm-up pass. Tesseract: ``tesseract IMG stdout --psm 7`` (one text line) per image with
OMP_THREAD_LIMIT=1, once with as many parallel processes as cores and once single-process. Accuracy is
word accuracy under the alnum-insensitive protocol (lowercase, keep 0-9a-z) for both.

Without --data the real crops are ``iiit5k_train`` in the shared data folder (``$CRNN_SHARED_DATA``, else
``../shared/data``, see crnn/shared_data.py); when they are absent the benchmark says so and runs on synthetic crops
rendered by the product's own generator (``crnn-synth``, a fixed seed) instead, so the speeds still compare but the
accuracies describe synthetic text, not real photos.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from crnn.shared_data import ENV_VAR, shared_data_dir, shared_dataset

REPO = Path(__file__).resolve().parent.parent
PROTOCOL = "alnum-insensitive"
SYNTH_SEED = 7  # the synthetic fallback set; different from the seeds the shipped model was trained on (1, 2)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", help="checkpoint (default: the shipped model in weights/)")
    p.add_argument("--data", help="folder with gt.txt (PATH<TAB>label lines); default: the shared iiit5k_train "
                                  "crops, else synthetic crops")
    p.add_argument("--limit", type=int, help="use the first N images (default: all)")
    p.add_argument("--quick", action="store_true", help="40 images, for CI")
    p.add_argument("--synth-num", type=int, default=500, help="images of the synthetic fallback (default 500)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--amp", choices=("off", "bf16"), default="off")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's own, = cores)")
    p.add_argument("--compare-amp", action="store_true",
                   help="also time --amp bf16 and count the images whose prediction differs from amp off")
    p.add_argument("--no-tesseract", action="store_true", help="only measure crnn")
    p.add_argument("--out", help="write the results as JSON here")
    return p.parse_args(argv)


def read_gt(folder: Path, limit: int | None) -> tuple[list[str], list[str]]:
    """Image paths and labels from ``folder/gt.txt``."""
    paths, labels = [], []
    for line in (folder / "gt.txt").read_text(encoding="utf-8").splitlines():
        if "\t" in line:
            rel, label = line.split("\t", 1)
            paths.append(str(folder / rel))
            labels.append(label)
    n = limit if limit is not None else len(paths)
    return paths[:n], labels[:n]


def write_synthetic_crops(folder: Path, num: int) -> None:
    """``num`` synthetic word crops (alnum36 labels) as JPEG files plus a gt.txt in ``folder``."""
    from crnn.data.synth import SynthOptions, find_fonts, iter_samples

    (folder / "IMG").mkdir(parents=True)
    lines = []
    opts = SynthOptions(charset="alnum36")
    for i, (data, label) in enumerate(iter_samples(num, SYNTH_SEED, find_fonts(), opts, workers=os.cpu_count() or 1)):
        (folder / "IMG" / f"{i}.jpg").write_bytes(data)
        lines.append(f"IMG/{i}.jpg\t{label}")
    (folder / "gt.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def word_accuracy(preds: list[str], labels: list[str]) -> float:
    """Word accuracy under the alnum-insensitive protocol."""
    from crnn.metrics import RecognitionMetrics

    m = RecognitionMetrics(PROTOCOL)
    m.update(preds, labels)
    return m.compute()["word_acc"]


def bench_crnn(args: argparse.Namespace, paths: list[str], labels: list[str], amp: str) -> dict:
    """Warm up, then time ``predict_paths`` over every image."""
    from crnn.infer import Recognizer, default_weights

    weights = args.weights or str(default_weights())
    rec = Recognizer.from_checkpoint(weights, device=args.device, amp=amp, batch_size=args.batch_size)
    list(rec.predict_paths(paths[: min(len(paths), 2 * args.batch_size)]))  # warm-up: allocator, kernels, threads
    t0 = time.perf_counter()
    preds = list(rec.predict_paths(paths))
    dt = time.perf_counter() - t0
    d = rec.config.data
    geometry = f"keep_ratio<= {d.max_width}" if d.keep_ratio else f"fixed width {d.width}"
    return {"name": f"crnn {rec.config.model.variant} ({args.device}, amp {amp}, batch {args.batch_size}, "
                    f"{torch.get_num_threads()} threads, {geometry})",
            "weights": weights, "images": len(paths), "seconds": dt, "images_per_s": len(paths) / dt,
            "word_acc": word_accuracy([p.text or "" for p in preds], labels),
            "failed": sum(p.error is not None for p in preds), "texts": [p.text for p in preds]}


def tesseract_one(path: str) -> str:
    """Tesseract's single-line reading of one image (empty on failure)."""
    env = dict(os.environ, OMP_THREAD_LIMIT="1")
    proc = subprocess.run(["tesseract", path, "stdout", "--psm", "7"], capture_output=True, text=True, env=env)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def bench_tesseract(paths: list[str], labels: list[str], procs: int) -> dict:
    """Time Tesseract over every image with ``procs`` processes running at a time."""
    tesseract_one(paths[0])  # warm-up: page cache of the binary and traineddata
    t0 = time.perf_counter()
    if procs == 1:
        preds = [tesseract_one(p) for p in paths]
    else:
        with ThreadPoolExecutor(procs) as pool:
            preds = list(pool.map(tesseract_one, paths))
    dt = time.perf_counter() - t0
    return {"name": f"tesseract --psm 7 ({procs} process{'es' if procs > 1 else ''}, OMP_THREAD_LIMIT=1)",
            "images": len(paths), "seconds": dt, "images_per_s": len(paths) / dt,
            "word_acc": word_accuracy(preds, labels)}


def tesseract_version() -> str | None:
    """First line of ``tesseract --version``; None when it is not installed."""
    if shutil.which("tesseract") is None:
        return None
    out = subprocess.run(["tesseract", "--version"], capture_output=True, text=True)
    return (out.stdout or out.stderr).splitlines()[0]


def print_table(rows: list[dict]) -> None:
    """One line per method."""
    width = max(len(r["name"]) for r in rows)
    print(f"{'method':<{width}}  {'images':>6}  {'seconds':>8}  {'img/s':>8}  {'word_acc':>8}")
    for r in rows:
        print(f"{r['name']:<{width}}  {r['images']:>6}  {r['seconds']:>8.2f}  {r['images_per_s']:>8.1f}  "
              f"{r['word_acc']:>8.4f}")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the table and ratios, optionally write JSON."""
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    limit = 40 if args.quick else args.limit
    with tempfile.TemporaryDirectory(prefix="bench_predict_") as tmp:
        folder, args.data_name = choose_data(args.data, Path(tmp), min(limit or args.synth_num, args.synth_num))
        gt = folder / "gt.txt"
        paths, labels = read_gt(folder, limit) if gt.is_file() else ([], [])
        if not paths:
            why = "no images listed in" if gt.is_file() else "not found:"
            print(f"bench_predict: error: {why} {gt}; --data takes a folder with a gt.txt", file=sys.stderr)
            return 2
        return run(args, paths, labels)


def choose_data(data: str | None, tmp: Path, synth_num: int) -> tuple[Path, str]:
    """(folder with gt.txt, name for the report): --data, else the shared iiit5k_train, else synthetic crops in tmp."""
    if data is not None:
        return Path(data), data
    real = shared_dataset("iiit5k_train")
    if real is not None:
        return real, "iiit5k_train"
    print(f"bench_predict: no real crops in {shared_data_dir() / 'iiit5k_train'} (set {ENV_VAR}); "
          f"timing {synth_num} synthetic crops (seed {SYNTH_SEED}) instead", file=sys.stderr)
    write_synthetic_crops(tmp, synth_num)
    return tmp, f"synthetic (seed {SYNTH_SEED})"


def run(args: argparse.Namespace, paths: list[str], labels: list[str]) -> int:
    """Time crnn (and tesseract), print the table and ratios, optionally write JSON."""
    load_before = os.getloadavg()[0]
    rows = [bench_crnn(args, paths, labels, args.amp)]
    amp_diff = None
    if args.compare_amp:
        other = bench_crnn(args, paths, labels, "bf16" if args.amp == "off" else "off")
        amp_diff = sum(a != b for a, b in zip(rows[0]["texts"], other["texts"]))
        rows.append(other)
    for r in rows:
        r.pop("texts", None)
    version = None if args.no_tesseract else tesseract_version()
    if version:
        rows.append(bench_tesseract(paths, labels, os.cpu_count() or 1))
        rows.append(bench_tesseract(paths, labels, 1))
    elif not args.no_tesseract:
        print("bench_predict: tesseract not found on PATH; measuring crnn only", file=sys.stderr)
    print(f"{len(paths)} images from {args.data_name}; accuracy = word accuracy, {PROTOCOL}; "
          f"{os.cpu_count()} cores, load average {load_before:.1f} -> {os.getloadavg()[0]:.1f}")
    print_table(rows)
    if amp_diff is not None:
        print(f"amp off vs bf16: {amp_diff} of {len(paths)} predictions differ")
    ratios = {f"crnn / {r['name']}": rows[0]["images_per_s"] / r["images_per_s"] for r in rows[1:]
              if r["name"].startswith("tesseract")}
    for name, ratio in ratios.items():
        print(f"speed ratio {name}: {ratio:.2f}x")
    result = {"data": args.data_name, "images": len(paths), "protocol": PROTOCOL, "cores": os.cpu_count(),
              "torch": torch.__version__, "tesseract": version, "load_average": [load_before, os.getloadavg()[0]],
              "results": rows, "speed_ratios": ratios,
              "amp_bf16_differing_predictions": amp_diff}
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
