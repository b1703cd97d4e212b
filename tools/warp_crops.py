"""Real word crops seen from the side or bent onto an arc: a proxy for perspective (SVTP) and curved (CUTE80) text.

    python tools/warp_crops.py --data "$SHARED/iiit5k_train" --mode perspective --out data/iiit5k_persp.lmdb
    python tools/warp_crops.py --data "$SHARED/iiit5k_train" --mode curve --out data/iiit5k_curve.lmdb
    crnn-eval --weights W --data data/iiit5k_persp.lmdb --data data/iiit5k_curve.lmdb --protocol alnum-insensitive

The test splits of SVTP and CUTE80 are not here, so this measures the one thing they add to straight crops: the
geometry. ``perspective``: one end of the word 55-80 % as tall as the other, rotated up to 8 degrees; ``curve``: the
baseline bent onto an arc 30-60 % of the crop height deep (columns shifted, letters not rotated). Uncovered corners take
the crop's mean border colour. Same --seed, same output. The labels are the source's, unchanged. Read the results as a
robustness check on real text, not as SVTP/CUTE80 figures (their photos are also harder in every other way).
"""
from __future__ import annotations

import argparse
import io
import math
import random
import sys
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from crnn.data.datasets import DatasetError, open_dataset  # noqa: E402
from crnn.data.lmdb_io import write_lmdb  # noqa: E402
from crnn.data.synth import _perspective_coeffs  # noqa: E402


def border_colour(arr: np.ndarray) -> tuple[int, ...]:
    """Mean colour of the outermost pixels of an (H, W, 3) image."""
    edge = np.concatenate([arr[0], arr[-1], arr[:, 0], arr[:, -1]])
    return tuple(int(v) for v in edge.mean(axis=0))


def perspective(img: Image.Image, rng: random.Random) -> Image.Image:
    """One end of the word farther away (shorter), then a small rotation; the output holds the whole quad."""
    w, h = img.size
    src = np.array([[0, 0], [w, 0], [w, h], [0, h]], float)
    pts = src - [w / 2, h / 2]
    far = rng.uniform(0.55, 0.8)
    rows = [1, 2] if rng.random() < 0.5 else [0, 3]  # the right or the left end is far
    pts[rows, 1] *= far
    pts[:, 0] *= rng.uniform(0.8, 1.0)
    ang = math.radians(rng.uniform(-8, 8))
    c, s = math.cos(ang), math.sin(ang)
    pts = pts @ np.array([[c, -s], [s, c]]).T
    pts = pts - pts.min(axis=0)
    size = (max(2, int(math.ceil(pts[:, 0].max()))), max(2, int(math.ceil(pts[:, 1].max()))))
    fill = border_colour(np.asarray(img))
    return img.transform(size, Image.Transform.PERSPECTIVE, _perspective_coeffs(src, pts),
                         Image.Resampling.BICUBIC, fillcolor=fill)


def curve(img: Image.Image, rng: random.Random) -> Image.Image:
    """Shift every column onto an arc (up or down) 30-60 % of the height deep."""
    arr = np.asarray(img)
    h, w = arr.shape[:2]
    x = np.linspace(-1.0, 1.0, w)
    shift = h * rng.uniform(0.3, 0.6) * x ** 2 * rng.choice([-1, 1])
    shift = np.round(shift - shift.min()).astype(int)
    out = np.empty((h + int(shift.max()), w, 3), arr.dtype)
    out[:] = border_colour(arr)
    out[np.arange(h)[:, None] + shift[None, :], np.arange(w)[None, :]] = arr
    return Image.fromarray(out)


MODES = {"perspective": perspective, "curve": curve}


def warped_samples(path: str, mode: str, seed: int):
    """(PNG bytes, label) of every readable sample of ``path``, warped by ``mode``."""
    ds = open_dataset(path)
    for i in range(len(ds)):
        img, label = ds[i]
        if img is None:
            raise DatasetError(f"{path}: sample {i + 1} cannot be decoded; fix or remove it")
        out = MODES[mode](img.convert("RGB"), random.Random(seed * 1_000_003 + i))
        buf = io.BytesIO()
        out.save(buf, format="PNG")
        yield buf.getvalue(), label


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="an LMDB or a folder with gt.txt")
    p.add_argument("--mode", choices=sorted(MODES), required=True)
    p.add_argument("--out", required=True, help="new LMDB")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--overwrite", action="store_true")
    args = p.parse_args(argv)
    try:
        n = write_lmdb(warped_samples(args.data, args.mode, args.seed), args.out, overwrite=args.overwrite)
    except (DatasetError, OSError, FileExistsError) as e:
        print(f"warp_crops: error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {n} {args.mode} crops of {args.data} to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
