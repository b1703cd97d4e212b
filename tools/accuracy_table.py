"""Accuracy table of a model next to tesseract 5 on the same images, measured the same way (for the model card).

    python tools/accuracy_table.py --weights weights/crnn_vgg_small.pt \\
        --data synth_val=data/shipped/synth_val.lmdb:500 --data iiit5k_train="$SHARED/iiit5k_train" \\
        --data svt_train="$SHARED/svt_train" --out runs/accuracy.json
    # SHARED=$(python -m crnn.shared_data): the folder of the real crops, $CRNN_SHARED_DATA or else ../shared/data

Each --data is NAME=PATH[:LIMIT] (an LMDB or a folder with gt.txt; LIMIT = first N samples). crnn is scored with
greedy and beam decoding, lexicon-free; tesseract runs `tesseract IMG stdout --psm 7` per image (OMP_THREAD_LIMIT=1,
one process per core). Everything is scored with crnn.metrics under --protocol (default alnum-insensitive).
Tesseract results are cached per image in --cache (they do not depend on the model).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from PIL import Image

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from crnn.data.datasets import DatasetError, open_dataset  # noqa: E402
from crnn.metrics import RecognitionMetrics  # noqa: E402
from crnn.progress import track  # noqa: E402


def read_samples(path: str, limit: int | None) -> list[tuple[Image.Image, str]]:
    """(decoded RGB image, raw label) pairs of an LMDB or a gt.txt folder, in order."""
    ds = open_dataset(path)
    n = len(ds) if limit is None else min(limit, len(ds))
    samples = [ds[i] for i in range(n)]
    bad = [i for i, (img, _) in enumerate(samples) if img is None]
    if bad:
        raise SystemExit(f"accuracy_table: {path}: {len(bad)} undecodable images (first index {bad[0]})")
    return [(img.convert("RGB"), label) for img, label in samples]


def crnn_scores(weights: str, samples: list[tuple[Image.Image, str]], protocol: str) -> dict:
    """Greedy and beam word accuracy / CER of the model on the samples."""
    from crnn.infer import Recognizer

    images = [img for img, _ in samples]
    labels = [lab for _, lab in samples]
    out = {}
    for decoder in ("greedy", "beam"):
        rec = Recognizer.from_checkpoint(weights, device="cpu", decoder=decoder, beam_width=10)
        preds = [text for text, _ in rec.predict_images(images)]
        m = RecognitionMetrics(protocol=protocol)
        m.update(preds, labels)
        out[decoder] = m.compute()
    return out


def tesseract_one(img: Image.Image, tmp: str, idx: int) -> str:
    """Tesseract 5 single-line reading of one image."""
    p = os.path.join(tmp, f"{idx}.png")
    img.save(p)
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    r = subprocess.run(["tesseract", p, "stdout", "--psm", "7"], capture_output=True, text=True, env=env)
    return r.stdout.strip()


def tesseract_scores(name: str, samples: list[tuple[Image.Image, str]], protocol: str, cache: dict) -> dict | None:
    """Tesseract's word accuracy / CER on the samples (cached per dataset and index)."""
    if shutil.which("tesseract") is None:
        return None
    key = f"{name}:{len(samples)}"
    if key not in cache:
        with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            jobs = pool.map(lambda a: tesseract_one(a[1][0], tmp, a[0]), enumerate(samples))
            cache[key] = list(track(jobs, len(samples), desc=f"tesseract {name}", unit="img"))
    m = RecognitionMetrics(protocol=protocol)
    m.update(cache[key], [lab for _, lab in samples])
    return m.compute()


def markdown(rows: list[dict]) -> str:
    """The table as Markdown."""
    lines = ["| data | samples | crnn greedy acc | crnn greedy CER | crnn beam acc | crnn beam CER | "
             "tesseract acc | tesseract CER |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t = r.get("tesseract") or {}
        tess = f"{t['word_acc']:.1%} | {t['cer']:.3f}" if t else "n/a | n/a"
        lines.append(f"| {r['name']} | {r['samples']} | {r['greedy']['word_acc']:.1%} | {r['greedy']['cer']:.3f} | "
                     f"{r['beam']['word_acc']:.1%} | {r['beam']['cer']:.3f} | {tess} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", help="checkpoint (default: the shipped model)")
    p.add_argument("--data", action="append", required=True, metavar="NAME=PATH[:LIMIT]")
    p.add_argument("--protocol", default="alnum-insensitive", choices=("exact", "alnum-insensitive"))
    p.add_argument("--cache", default="runs/tesseract_cache.json", help="tesseract outputs per dataset")
    p.add_argument("--tesseract-only", action="store_true", help="only fill the tesseract cache")
    p.add_argument("--out", help="write the rows as JSON here")
    args = p.parse_args(argv)
    from crnn.infer import default_weights

    weights = args.weights or ("" if args.tesseract_only else str(default_weights()))
    cache = json.loads(Path(args.cache).read_text()) if Path(args.cache).is_file() else {}
    rows = []
    for spec in args.data:
        name, _, rest = spec.partition("=")
        path, _, limit = rest.rpartition(":") if rest.rsplit(":", 1)[-1].isdigit() else (rest, "", "")
        try:
            samples = read_samples(path, int(limit) if limit else None)
        except DatasetError as e:  # e.g. a real-data folder that is not on this machine: one line, no traceback
            print(f"accuracy_table: error: --data {spec}: {e}", file=sys.stderr)
            return 2
        tess = tesseract_scores(name, samples, args.protocol, cache)
        Path(args.cache).parent.mkdir(parents=True, exist_ok=True)
        Path(args.cache).write_text(json.dumps(cache))
        if args.tesseract_only:
            print(f"{name}: tesseract {tess}")
            continue
        rows.append({"name": name, "path": path, "samples": len(samples), "tesseract": tess,
                     **crnn_scores(weights, samples, args.protocol)})
    if rows:
        print(markdown(rows))
    if args.out and rows:
        Path(args.out).write_text(json.dumps({"weights": weights, "protocol": args.protocol, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
