"""Where the optional real word crops live: ``$CRNN_SHARED_DATA``, else ``<repo>/../shared/data``.

Tests, benchmarks and scripts use real crops (``iiit5k_train/``, ``svt_train/``, ``ic15_train/``: folders with a
``gt.txt``) to sharpen a check when they are there, and fall back to data the product makes itself when they are not;
nothing needs them. This is the one place that knows the location; which of their crops are development sets, never
trained on, is :mod:`crnn.data.en_dev`'s.

    python -m crnn.shared_data svt_train    # prints the folder and exits 0, or exits 1 when it is absent
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

ENV_VAR = "CRNN_SHARED_DATA"


def shared_data_dir() -> Path:
    """The folder that may hold real data sets: ``$CRNN_SHARED_DATA`` if set, else ``../shared/data`` by the repo."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def shared_dataset(name: str) -> Path | None:
    """``<shared data>/name`` when it is a folder with a ``gt.txt``, else None."""
    path = shared_data_dir() / name
    return path if (path / "gt.txt").is_file() else None


def main(argv: list[str] | None = None) -> int:
    """Print the folder of each named data set; exit 1 (printing nothing for it) when one is absent."""
    names = sys.argv[1:] if argv is None else argv
    if not names:
        print(shared_data_dir())
        return 0
    found = [shared_dataset(n) for n in names]
    for path in found:
        if path is not None:
            print(path)
    return 0 if all(found) else 1


if __name__ == "__main__":
    sys.exit(main())
