"""Effects for real word crops, applied before they are resized: the geometry and camera of incidental scene text
(ICDAR 2015: small, blurred, tilted, perspective-distorted words, loosely or tightly cut) that a few thousand real
crops show too rarely.

Each effect is a function ``(RGB image, label, random.Random) -> RGB image``; :class:`RealAugment` applies each with its
own probability (``data.real_*``, 0 = off), in a fixed order: tighten, loosen, perspective, curve, elastic, blur.
Every effect draws from its own ``random.Random`` seeded by the sample's key and the effect's name, so a crop's draws
follow the seed alone (any worker, rank or resume) and switching one effect on leaves the others' draws as they were.

``perspective`` and ``curve`` are also the geometry proxies of SVTP and CUTE80 (``tools/warp_crops.py``); ``elastic``
is the generator's stroke bending (:func:`crnn.data.synth._elastic`, the font size read as the crop's height).
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageFilter

from crnn.data.synth import _elastic, _perspective_coeffs

# tighten: at most this share of the height off the top and off the bottom, and this share of an average character's
# width (the crop's width over the label's length) off each end, so that no character loses more than a sliver
TIGHTEN_Y, TIGHTEN_X = 0.06, 0.15
# loosen: at most this share of the height added above and below, and this share of the height at each end
LOOSEN_Y, LOOSEN_X, LOOSEN_GRAIN = 0.25, 0.5, 6.0
# elastic: the generator's stroke bending with the font size taken as this share of the crop's height (cells of
# 0.25-0.6 of it, shifts of 2-7 % of it: at the whole height, the letters of a tight crop bent out of shape)
ELASTIC_FS = 0.35
# blur, in pixels of the model's input (data.height): a Gaussian of this sigma, or the crop seen at this height and
# enlarged again (a small word far away)
BLUR_SIGMA, BLUR_LOW_HEIGHT = (0.5, 1.5), (0.35, 0.7)


def border_colour(arr: np.ndarray) -> tuple[int, ...]:
    """Mean colour of the outermost pixels of an (H, W, 3) image."""
    edge = np.concatenate([arr[0], arr[-1], arr[:, 0], arr[:, -1]])
    return tuple(int(v) for v in edge.mean(axis=0))


def perspective(img: Image.Image, rng: random.Random) -> Image.Image:
    """One end of the word farther away (55-80 % as tall), then a rotation of up to 8 degrees; the output holds the
    whole quad, uncovered corners in the crop's border colour."""
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
    """Every column shifted onto an arc (up or down) 30-60 % of the height deep; letters are not rotated."""
    arr = np.asarray(img)
    h, w = arr.shape[:2]
    x = np.linspace(-1.0, 1.0, w)
    shift = h * rng.uniform(0.3, 0.6) * x ** 2 * rng.choice([-1, 1])
    shift = np.round(shift - shift.min()).astype(int)
    out = np.empty((h + int(shift.max()), w, 3), arr.dtype)
    out[:] = border_colour(arr)
    out[np.arange(h)[:, None] + shift[None, :], np.arange(w)[None, :]] = arr
    return Image.fromarray(out)


def tighten(img: Image.Image, label: str, rng: random.Random) -> Image.Image:
    """A few percent cut off each edge: at most TIGHTEN_Y of the height at the top and the bottom, TIGHTEN_X of an
    average character's width at each end (the label's length says how wide a character is)."""
    w, h = img.size
    cx, cy = TIGHTEN_X * w / max(1, len(label)), TIGHTEN_Y * h
    left, right = round(rng.uniform(0, cx)), round(rng.uniform(0, cx))
    top, bottom = round(rng.uniform(0, cy)), round(rng.uniform(0, cy))
    if w - left - right < 2 or h - top - bottom < 2:
        return img
    return img.crop((left, top, w - right, h - bottom))


def loosen(img: Image.Image, label: str, rng: random.Random) -> Image.Image:
    """A margin of the crop's own border around it: up to LOOSEN_Y of the height above and below and LOOSEN_X of it
    at each end, in the median colour of the crop's outermost pixels (robust to letters touching the edge) with a
    grain of their spread, at most LOOSEN_GRAIN levels."""
    w, h = img.size
    left, right = round(rng.uniform(0, LOOSEN_X) * h), round(rng.uniform(0, LOOSEN_X) * h)
    top, bottom = round(rng.uniform(0, LOOSEN_Y) * h), round(rng.uniform(0, LOOSEN_Y) * h)
    arr = np.asarray(img)
    edge = np.concatenate([arr[0], arr[-1], arr[:, 0], arr[:, -1]]).astype(np.float32)  # (N, 3)
    noise = np.random.default_rng(rng.getrandbits(63)).standard_normal((h + top + bottom, w + left + right, 3))
    grain = np.minimum(edge.std(axis=0), LOOSEN_GRAIN)
    out = np.clip(np.median(edge, axis=0) + noise * grain + 0.5, 0, 255).astype(np.uint8)
    out[top:top + h, left:left + w] = arr
    return Image.fromarray(out)


def blur(img: Image.Image, rng: random.Random, height: int) -> Image.Image:
    """Out of focus (a Gaussian of BLUR_SIGMA pixels at the model's ``height``) or far away (seen BLUR_LOW_HEIGHT of
    ``height`` high, then enlarged back), half and half; a crop already that small is blurred instead."""
    w, h = img.size
    low = height * rng.uniform(*BLUR_LOW_HEIGHT)
    if rng.random() < 0.5 or h <= low:
        return img.filter(ImageFilter.GaussianBlur(radius=rng.uniform(*BLUR_SIGMA) * h / height))
    f = low / h
    small = img.resize((max(1, round(w * f)), max(1, round(h * f))), Image.Resampling.BILINEAR)
    return small.resize((w, h), Image.Resampling.BILINEAR)


Effect = Callable[[Image.Image, str, random.Random, int], Image.Image]
EFFECTS: dict[str, Effect] = {  # in the order they are applied
    "tighten": lambda img, label, rng, height: tighten(img, label, rng),
    "loosen": lambda img, label, rng, height: loosen(img, label, rng),
    "perspective": lambda img, label, rng, height: perspective(img, rng),
    "curve": lambda img, label, rng, height: curve(img, rng),
    "elastic": lambda img, label, rng, height: Image.fromarray(_elastic(np.asarray(img), rng,
                                                                       max(1, round(ELASTIC_FS * img.height)))),
    "blur": lambda img, label, rng, height: blur(img, rng, height),
}


@dataclass(frozen=True)
class RealAugment:
    """The probability of each effect for a real crop (``data.real_<effect>``; 0 = off); ``height``: the model's
    input height, the unit of ``blur``."""

    tighten: float = 0.0
    loosen: float = 0.0
    perspective: float = 0.0
    curve: float = 0.0
    elastic: float = 0.0
    blur: float = 0.0
    height: int = 32

    def __post_init__(self) -> None:
        for name in EFFECTS:
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"real_{name}: a probability within 0..1, got {getattr(self, name)}")

    @classmethod
    def from_data(cls, data: Any) -> RealAugment:
        """The effects a data config (``cfg.data``) sets: its ``real_<effect>`` keys and its ``height``."""
        return cls(**{name: getattr(data, f"real_{name}") for name in EFFECTS}, height=data.height)

    def __bool__(self) -> bool:
        return any(getattr(self, name) > 0 for name in EFFECTS)

    def describe(self) -> str:
        """``tighten 0.3, blur 0.2``: the effects switched on ("" when none is)."""
        return ", ".join(f"{name} {getattr(self, name):g}" for name in EFFECTS if getattr(self, name) > 0)

    def __call__(self, img: Image.Image, label: str, key: str) -> Image.Image:
        """``img`` with each effect applied with its probability, drawn from ``random.Random(f"{key}/{effect}")``."""
        img = img.convert("RGB") if img.mode != "RGB" else img
        for name, effect in EFFECTS.items():
            p = getattr(self, name)
            if p > 0:
                rng = random.Random(f"{key}/{name}")
                if rng.random() < p:
                    img = effect(img, label, rng, self.height)
        return img

