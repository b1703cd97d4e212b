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
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from crnn.data.datasets import DatasetError, open_dataset  # noqa: E402
from crnn.data.lmdb_io import write_lmdb  # noqa: E402
from crnn.data.real_augment import curve, perspective  # noqa: E402  (real crops in training use them too)


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
