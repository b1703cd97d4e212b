"""Sierkinhane/CRNN_Chinese_Characters_Rec checkpoints -> crnn's ``vgg``.

The network is meijieru's (same keys, see :mod:`crnn.foreign.meijieru`) with a ``log_softmax`` at the end of its
forward, which changes neither the argmax nor the CTC decoding. What differs is the alphabet (``char_std_5990.txt``:
GB18030, first line ``blank`` = class 0) and the input: grayscale resized with bicubic interpolation to 32 x 160
(280 in some configs) and normalised as ``(pixel / 255 - 0.588) / 0.193``. They resize with OpenCV's INTER_CUBIC;
crnn resizes with PIL's bicubic filter, so pixels (not the network) differ slightly.
"""
from __future__ import annotations

import torch

from crnn.foreign import meijieru
from crnn.foreign.common import Imported

__all__ = ["to_ours", "MEAN", "STD", "WIDTH"]

MEAN, STD, WIDTH = 0.588, 0.193, 160


def to_ours(state: dict[str, torch.Tensor], width: int = WIDTH) -> Imported:
    """Map a plain-keyed Sierkinhane state dict onto crnn's ``vgg`` with their preprocessing stored."""
    imported = meijieru.to_ours(state, source="sierkinhane", width=width)
    imported.data = {"width": width, "interpolation": "bicubic", "mean": MEAN, "std": STD, "keep_ratio": False}
    return imported
