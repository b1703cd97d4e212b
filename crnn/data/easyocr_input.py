"""EasyOCR's recogniser input, reproduced without OpenCV (``data.pad: easyocr``).

What EasyOCR 1.7 does to one grey crop of ``w x h`` for a model of height ``H`` (64 for its generation-2 models),
in ``Reader.recognize`` (``utils.get_image_list``, ``utils.compute_ratio_and_resize``, then
``recognition.AlignCollate`` and ``NormalizePAD``):

1. ``ratio = w / h``. Wider than tall: ``cv2.resize`` to ``(int(H * ratio), H)``; taller than wide (vertical text):
   to ``(H, int(H * h / w))``. The interpolation it passes is PIL's ``LANCZOS`` constant (1), which OpenCV reads as
   ``INTER_LINEAR``: bilinear with half-pixel centres and no anti-aliasing, in 11-bit fixed point.
2. ``AlignCollate``: resize again, with PIL's bicubic filter, to ``(min(ceil(H * w1 / h1), padded), H)``; for a crop
   wider than tall that is its own size, so PIL returns a copy.
3. ``NormalizePAD``: ``pixel / 255``, ``(x - 0.5) / 0.5``, right-padded to ``padded`` by repeating the last column,
   where ``padded = ceil(max(w / h, h / w, 1)) * H`` when ``recognize()`` reads one crop at a time (always on CPU).

:func:`cv2_linear_resize` is OpenCV's ``INTER_LINEAR`` for 8-bit images (its vectorised path: rows
``S * a0 + S' * a1`` with 11-bit weights, then ``((r0 >> 4) * b0 >> 16) + ((r1 >> 4) * b1 >> 16) + 2 >> 2``);
measured identical to ``cv2.resize`` of opencv-python-headless 5.0 on 6.9 M pixels of random sizes
(tools/easyocr_parity.py checks it again against the installed OpenCV).
"""
from __future__ import annotations

import math

import numpy as np
from PIL import Image

__all__ = ["cv2_linear_resize", "easyocr_sizes", "easyocr_resize"]

COEF_BITS = 11  # OpenCV's INTER_RESIZE_COEF_BITS
COEF_ONE = np.float32(1 << COEF_BITS)


def _taps(src: int, dst: int, clamp: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source index and fixed-point weights (index, w0, w1) of each destination pixel along one axis."""
    scale = 1.0 / (dst / src)  # OpenCV: scale = 1 / inv_scale, inv_scale = dst / src
    f = ((np.arange(dst) + 0.5) * scale - 0.5).astype(np.float32)
    s = np.floor(f).astype(np.int64)
    f = (f - s.astype(np.float32)).astype(np.float32)
    if clamp:  # columns: OpenCV clamps the index and zeroes the fraction at both borders (rows only clip)
        out = (s < 0) | (s >= src - 1)
        f[out] = 0
        s = np.clip(s, 0, src - 1)
    w0 = np.rint((np.float32(1) - f) * COEF_ONE).astype(np.int64)
    w1 = np.rint(f * COEF_ONE).astype(np.int64)
    return s, w0, w1


def cv2_linear_resize(arr: np.ndarray, width: int, height: int) -> np.ndarray:
    """``cv2.resize(arr, (width, height), interpolation=cv2.INTER_LINEAR)`` for uint8 ``(H, W)`` or ``(H, W, C)``."""
    if arr.ndim == 3:
        return np.stack([cv2_linear_resize(arr[..., c], width, height) for c in range(arr.shape[2])], axis=2)
    h, w = arr.shape
    if (w, h) == (width, height):
        return arr.copy()
    sx, a0, a1 = _taps(w, width, clamp=True)
    sy, b0, b1 = _taps(h, height, clamp=False)
    src = arr.astype(np.int64)
    rows = src[:, sx] * a0 + src[:, np.minimum(sx + 1, w - 1)] * a1  # (h, width), scaled by 2048
    r0, r1 = rows[np.clip(sy, 0, h - 1)] >> 4, rows[np.clip(sy + 1, 0, h - 1)] >> 4  # (height, width)
    out = ((r0 * b0[:, None]) >> 16) + ((r1 * b1[:, None]) >> 16)
    return np.clip((out + 2) >> 2, 0, 255).astype(np.uint8)


def easyocr_sizes(w: int, h: int, height: int) -> tuple[tuple[int, int], int, int]:
    """(first resize ``(w1, h1)``, second-resize width, padded width) for a ``w x h`` crop, as EasyOCR computes them."""
    ratio = w / h
    if ratio < 1.0:
        first = (height, int(height * (1.0 / ratio)))  # vertical text: the width becomes the model height
    else:
        first = (int(height * ratio), height)
    padded = math.ceil(max(ratio, 1.0 / ratio, 1.0)) * height
    second = min(math.ceil(height * (first[0] / float(first[1]))), padded)
    return first, max(1, second), padded


def easyocr_resize(img: Image.Image, height: int, interpolation: int = Image.BICUBIC) -> tuple[Image.Image, int]:
    """EasyOCR's two resizes of a PIL ``L``/``RGB`` crop: (resized image, width to right-pad it to)."""
    first, second, padded = easyocr_sizes(img.width, img.height, height)
    arr = cv2_linear_resize(np.asarray(img), max(1, first[0]), max(1, first[1]))
    out = Image.fromarray(arr, img.mode)
    return out.resize((second, height), interpolation), padded  # PIL copies when the size is unchanged
