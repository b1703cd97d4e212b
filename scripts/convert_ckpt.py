#!/usr/bin/env python3
"""Checkpoint converter usable without installing the package: same as the ``crnn-convert-ckpt`` console script."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, so `crnn` imports from a checkout

from crnn.cli.convert_ckpt import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
