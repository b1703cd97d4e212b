"""Synthetic scene-text word images: train out of the box, read real photos of words.

Each sample is drawn from its own RNG, seeded by ``(seed, index)``, so a data set is the same
whatever the number of workers. The pipeline, per word:

1. text (:mod:`crnn.data.words`) and a font that really draws every character of it;
2. text masks: fill, outline stroke, shadow or 3-D extrusion, with letter-spacing variation;
3. geometry: rotation, shear, perspective, curved baselines;
4. a loose or tight crop (sometimes cutting the text a little), neighbouring text and sign edges;
5. colours with varied contrast over flat, gradient, textured or cluttered backgrounds;
6. camera effects: lighting, low resolution, blur, motion blur, noise, JPEG artefacts.

``style="street"`` pushes the geometry and the camera towards street-view crops (SVT, SVTP, CUTE80): stronger
perspective (one end of the word nearer the camera), more and deeper curved baselines, text at 13-22 pixels scaled
back up, more blur, and text over crops of natural photographs (the sample images that scikit-image ships; none
contains text). The default style is unchanged (the same seed gives the same bytes as before).
"""
from __future__ import annotations

import dataclasses
import functools
import io
import json
import logging
import math
import multiprocessing
import os
import random
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from crnn.charset import Charset
from crnn.data.backgrounds import NoPhotosError, wallpapers
from crnn.data.fonts import CJK_FONT_PACKAGES, SPLITS, FontInfo, NoFontsError, find_fonts, font_picker, load_font, uncovered
from crnn.data.lines import UNIFORM_SHARE, describe
from crnn.data.text import sample_text
from crnn.data.traditional import check_traditional
from crnn.data.words import RENDERABLE, label_rules, text_label, text_mode

log = logging.getLogger("crnn")

__all__ = [
    "SynthOptions", "SynthDataset", "NoFontsError", "render_word", "sample_text", "text_label",
    "make_sample", "iter_samples", "generate_lmdb", "find_fonts", "contact_sheet", "check_options",
]


STYLES = ("default", "street")

# scikit-image's bundled sample photographs used as street-style backgrounds: scenes and surfaces, none with text
# (text.png, page.png, logo.png, the clock and the astronaut's patches are left out on purpose).
PHOTO_FILES = ("brick.png", "camera.png", "chelsea.png", "coffee.png", "grass.png", "gravel.png", "moon.png",
               "coins.png", "hubble_deep_field.jpg", "retina.jpg", "cell.png", "color.png")


@dataclass
class SynthOptions:
    """What to generate. ``charset``: a crnn.charset spec; labels are folded to it."""

    height: int = 32
    charset: str = "printable94"
    max_len: int = 20
    words: str | None = None  # word list path; None = the built-in English list
    jpeg_quality: tuple[int, int] = (30, 95)
    max_width: int = 0  # 0 = no limit; wider images are squeezed to this width
    text: str = "auto"  # words (scene-text words) | lines (text lines) | auto: lines for alphabets beyond ASCII
    line_len: int = 0  # lines: every line has this many characters; 0 = 1..max_len
    style: str = "default"  # default | street: street-view geometry, photo backgrounds, harsher camera
    # train: no held-out CJK font, no held-out corpus word | heldout: only those (validation) | all
    split: str = "train"
    clutter: bool = True  # fragments of neighbouring text at the crop's edges (a benchmark's clean labels: False)
    uniform_share: float = UNIFORM_SHARE  # lines: share of pieces drawn uniformly from the alphabet (rare characters)
    # lines: share of lines in a CJK face whose ASCII runs (numbers, Latin words) are set in a Western face instead,
    # as documents set them (a Song face + Times New Roman); 0 = the line's face throughout (the old lines, same seeds)
    mixed_fonts: float = 0.0
    # what no face gives (issue 43's data engine); each a share of lines, 0 = off (the old lines, same seeds):
    squeeze: float = 0.0  # lines squeezed or stretched horizontally, 0.5x-1.5x (condensed and wide faces)
    weight: float = 0.0  # lines drawn bolder or thinner by morphology (stroke weights no face has)
    jitter: float = 0.0  # lines whose glyphs each vary in size (+-12 %) and baseline (+-7 % of the size)
    photos: float = 0.0  # lines set on a crop of a photograph (crnn.data.backgrounds: Debian's wallpapers)
    signs: float = 0.0  # words: texts as signs, labels and codes write them (phrases, iPhone, SKU-4471b)
    elastic: float = 0.0  # samples whose strokes are bent by a smooth random field (brush and hand drawn shapes)
    street: float = 0.0  # style default: this share of samples in the street style (geometry, camera, photos)
    # lines: share of lines whose corpus words are written in traditional forms (发展 -> 發展, 头发 -> 頭髮; OpenCC's,
    # Taiwan's or Hong Kong's, crnn.data.traditional); only for an alphabet that has them (zh_gb2312_trad), else a
    # one-line error
    traditional: float = 0.0

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {self.split!r}")
        if self.style not in STYLES:
            raise ValueError(f"style must be one of {', '.join(STYLES)}, got {self.style!r}")
        if self.height < 8:
            raise ValueError(f"height must be >= 8, got {self.height}")
        if self.max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {self.max_len}")
        if self.text not in ("auto", "words", "lines"):
            raise ValueError(f"text must be auto, words or lines, got {self.text!r}")
        if self.line_len < 0 or self.line_len > self.max_len:
            raise ValueError(f"line_len must be 0 (varied) or 1..max_len ({self.max_len}), got {self.line_len}")
        if not 0.0 <= self.uniform_share <= 1.0:
            raise ValueError(f"uniform_share must be within 0..1, got {self.uniform_share}")
        for name in ("mixed_fonts", "squeeze", "weight", "jitter", "photos", "signs", "street", "elastic",
                     "traditional"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be within 0..1, got {getattr(self, name)}")
        check_traditional(self.charset, self.traditional)
        if self.line_len and text_mode(self) == "words":
            raise ValueError("line_len needs text lines (--text lines); scene-text words have varied lengths")


def script_chars(opts: SynthOptions) -> str:
    """The characters of the alphabet beyond printable ASCII that text lines may hold ("" for words)."""
    return "" if text_mode(opts) == "words" else _beyond_ascii(opts.charset)


@functools.lru_cache(maxsize=16)
def _beyond_ascii(charset: str) -> str:
    """The characters of ``charset`` beyond printable ASCII and the space, sorted."""
    chars, _ = label_rules(charset)
    return "".join(sorted(chars - RENDERABLE - {" "}))


# ---------------------------------------------------------------------------- text masks
def _font(info: FontInfo, size: int) -> ImageFont.FreeTypeFont:
    """The cached font object of ``info`` at ``size`` pixels."""
    return load_font(info.path, size)


def _text_masks(text: str, font: ImageFont.FreeTypeFont, spacing: float, stroke: int,
                runs: Sequence[tuple] = ()) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``text``; return (fill, outer) uint8 masks (H, W); outer includes the stroke.

    The canvas is sized from the glyphs' real ink boxes, so overhangs (italic ``f``, the tail
    of ``j``, tall bars) are never clipped. ``spacing`` != 0 places characters one by one.
    ``runs``: (text, font) or (text, font, dy) pieces drawn one after another on one baseline (moved down by dy
    pixels), instead of ``text`` in ``font``.
    """
    runs = [(*r, 0.0)[:3] for r in runs] or [(text, font, 0.0)]
    pieces: list[tuple[float, str, ImageFont.FreeTypeFont, float]] = []
    x = 0.0
    for t, f, dy in runs:
        if spacing == 0:
            pieces.append((x, t, f, dy))
            x += f.getlength(t)
        else:
            for c in t:
                pieces.append((x, c, f, dy))
                x += f.getlength(c) + spacing
    boxes = [(x + b[0], b[1] + dy, x + b[2], b[3] + dy) for x, t, f, dy in pieces
             for b in [f.getbbox(t, anchor="ls", stroke_width=stroke)]]
    left, top = min(b[0] for b in boxes), min(b[1] for b in boxes)
    right, bottom = max(b[2] for b in boxes), max(b[3] for b in boxes)
    pad = 2 + int(font.size) // 6  # room for shadows and extrusions
    size = (max(int(math.ceil(right - left)) + 2 * pad, 4), max(int(math.ceil(bottom - top)) + 2 * pad, 4))
    ox, oy = pad - left, pad - top  # where the anchor (left end of the baseline) goes
    masks = []
    for sw in ([0, stroke] if stroke else [0]):
        im = Image.new("L", size, 0)
        draw = ImageDraw.Draw(im)
        for x, t, f, dy in pieces:
            draw.text((ox + x, oy + dy), t, fill=255, font=f, anchor="ls", stroke_width=sw, stroke_fill=255)
        masks.append(np.asarray(im))
    return masks[0], masks[-1]


def mixed_runs(text: str, font: ImageFont.FreeTypeFont,
               latin: ImageFont.FreeTypeFont) -> list[tuple[str, ImageFont.FreeTypeFont]]:
    """``text`` cut into (run, font) pieces: runs of printable ASCII (numbers, Latin words, ASCII punctuation) in
    ``latin``, the rest (Hanzi, full-width punctuation, spaces) in ``font``."""
    return [(t, latin if i % 2 else font) for i, t in enumerate(_ASCII_RUN.split(text)) if t]


_ASCII_RUN = re.compile(r"([!-~]+)")


def jittered_runs(runs: Sequence[tuple[str, ImageFont.FreeTypeFont]],
                  rng: random.Random) -> list[tuple[str, ImageFont.FreeTypeFont, float]]:
    """Every character of ``runs`` as its own piece, at its run's size +-12 % and moved off the baseline by up to 7 %
    of the size (hand-set type, stamped and printed labels: what no face gives)."""
    out = []
    for t, f in runs:
        for c in t:
            size = max(8, round(f.size * rng.uniform(0.88, 1.12)))
            out.append((c, load_font(f.path, size), f.size * rng.uniform(-0.07, 0.07)))
    return out


def _reweigh(stack: np.ndarray, rng: random.Random, fs: int) -> np.ndarray:
    """Fill and outline masks bolder (dilated) or, for text large enough to keep its strokes, thinner (eroded)."""
    bold = fs < 20 or rng.random() < 0.6
    k = 3 if fs < 36 or not bold else 5
    filt = ImageFilter.MaxFilter(k) if bold else ImageFilter.MinFilter(3)
    out = stack.copy()
    for c in (0, 1):
        out[..., c] = np.asarray(Image.fromarray(np.ascontiguousarray(stack[..., c])).filter(filt))
    return out


def _squeeze(stack: np.ndarray, rng: random.Random) -> np.ndarray:
    """The mask stack squeezed or stretched horizontally by 0.5x-1.5x (log-uniform): condensed and wide faces."""
    h, w = stack.shape[:2]
    s = math.exp(rng.uniform(math.log(0.5), math.log(1.5)))
    return np.asarray(Image.fromarray(stack).resize((max(4, round(w * s)), h), Image.BILINEAR))


def _elastic(stack: np.ndarray, rng: random.Random, fs: int) -> np.ndarray:
    """The mask stack bent by a smooth random displacement field: strokes wobble and lean as a brush or a hand draws
    them, each glyph its own way (cells of 0.25-0.6 of the font size, shifts of 2-7 % of it)."""
    h, w = stack.shape[:2]
    cell = fs * rng.uniform(0.25, 0.6)
    amp = fs * rng.uniform(0.02, 0.07)
    nrng = np.random.default_rng(rng.getrandbits(63))
    gh, gw = max(2, math.ceil(h / cell) + 1), max(2, math.ceil(w / cell) + 1)

    def field() -> np.ndarray:
        coarse = Image.fromarray(nrng.standard_normal((gh, gw)).astype(np.float32), mode="F")
        return np.asarray(coarse.resize((w, h), Image.BICUBIC), np.float32) * amp

    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    x, y = np.clip(xx + field(), 0, w - 1), np.clip(yy + field(), 0, h - 1)
    x0, y0 = np.floor(x).astype(np.int64), np.floor(y).astype(np.int64)
    x1, y1 = np.minimum(x0 + 1, w - 1), np.minimum(y0 + 1, h - 1)
    fx, fy = (x - x0)[..., None], (y - y0)[..., None]
    src = stack.astype(np.float32)
    out = (src[y0, x0] * (1 - fx) * (1 - fy) + src[y0, x1] * fx * (1 - fy) + src[y1, x0] * (1 - fx) * fy
           + src[y1, x1] * fx * fy)
    return np.clip(out + 0.5, 0, 255).astype(stack.dtype)


def _shifted(mask: np.ndarray, dx: int, dy: int) -> np.ndarray:
    """``mask`` moved by (dx, dy) pixels, same shape, zeros shifted in."""
    out = np.zeros_like(mask)
    h, w = mask.shape
    dst = (slice(max(dy, 0), h + min(dy, 0)), slice(max(dx, 0), w + min(dx, 0)))
    out[dst] = mask[max(-dy, 0):h - max(dy, 0), max(-dx, 0):w - max(dx, 0)]
    return out


def _shadow_mask(outer: np.ndarray, rng: random.Random, fs: int) -> np.ndarray:
    """A drop shadow (offset, maybe soft) or a 3-D extrusion (many small offsets)."""
    ang = rng.uniform(0, 2 * math.pi)
    if rng.random() < 0.5:  # extrusion
        n = max(2, int(fs * rng.uniform(0.04, 0.12)))
        acc = np.zeros_like(outer)
        for k in range(1, n + 1):
            np.maximum(acc, _shifted(outer, round(k * math.cos(ang)), round(k * math.sin(ang))), out=acc)
        return acc
    d = max(1, fs * rng.uniform(0.03, 0.1))
    sh = _shifted(outer, round(d * math.cos(ang)), round(d * math.sin(ang)))
    if rng.random() < 0.5:
        sh = np.asarray(Image.fromarray(sh).filter(ImageFilter.GaussianBlur(rng.uniform(0.5, 2.0))))
    return sh


def _layers(text: str, info: FontInfo, fs: int, rng: random.Random,
            latin: tuple[FontInfo, int] | None = None, jitter: bool = False) -> tuple[np.ndarray, dict[str, Any]]:
    """Mask layers stacked (H, W, 3) = fill, outer (fill + stroke), shadow; and the style used. ``latin``: (face,
    size) that draws the runs of printable ASCII instead (:func:`mixed_runs`); ``jitter``: each glyph at its own
    size and baseline (:func:`jittered_runs`)."""
    font = _font(info, fs)
    r = rng.random()
    spacing = 0.0 if r < 0.7 else fs * (0.02 + 0.5 * rng.random() ** 2 if r < 0.9 else rng.uniform(-0.08, 0.0))
    stroke = max(1, round(fs * rng.uniform(0.03, 0.09))) if rng.random() < 0.18 else 0
    runs = mixed_runs(text, font, _font(*latin)) if latin else ()
    if jitter:
        runs = jittered_runs(list(runs) or [(text, font)], rng)
    fill, outer = _text_masks(text, font, spacing, stroke, runs)
    style = {"stroke": stroke > 0, "hollow": stroke > 0 and rng.random() < 0.25, "shadow": rng.random() < 0.15}
    shadow = _shadow_mask(outer, rng, fs) if style["shadow"] else np.zeros_like(fill)
    return np.dstack([fill, outer, shadow]), style


# ---------------------------------------------------------------------------- geometry
def _perspective_coeffs(src: np.ndarray, dst: np.ndarray) -> list[float]:
    """Coefficients for PIL's PERSPECTIVE transform mapping output points ``dst`` to input ``src``."""
    a = []
    for (x, y), (u, v) in zip(dst, src):
        a.append([x, y, 1, 0, 0, 0, -u * x, -u * y])
        a.append([0, 0, 0, x, y, 1, -v * x, -v * y])
    return np.linalg.solve(np.asarray(a, float), src.reshape(8).astype(float)).tolist()


def _warp(stack: np.ndarray, rng: random.Random, fs: int, street: bool = False) -> np.ndarray:
    """Rotate, shear and tilt the mask stack; the output is sized to hold the result.

    ``street``: larger angles and shears, and often a keystone (one end of the word taller, as seen from the side).
    """
    h, w = stack.shape[:2]
    src = np.array([[0, 0], [w, 0], [w, h], [0, h]], float)
    if street:
        ang = math.radians(rng.gauss(0, 4) if rng.random() < 0.85 else rng.uniform(-25, 25))
        shear = rng.uniform(-0.5, 0.5) if rng.random() < 0.4 else 0.0
    else:
        ang = math.radians(rng.gauss(0, 1.5) if rng.random() < 0.97 else rng.uniform(-10, 10))
        shear = rng.uniform(-0.35, 0.35) if rng.random() < 0.3 else 0.0
    pts = src - [w / 2, h / 2]
    if street and rng.random() < 0.5:  # keystone: the far end of the word is shorter (and a little narrower)
        far = rng.uniform(0.45, 0.9)
        pts[[1, 2] if rng.random() < 0.5 else [0, 3], 1] *= far  # the right end's corners, or the left end's
        pts[:, 0] *= rng.uniform(0.75, 1.0)
    pts = pts @ np.array([[1, -shear], [0, 1]]).T  # x -= shear * y: y grows down, so shear > 0 leans right
    c, s = math.cos(ang), math.sin(ang)
    pts = pts @ np.array([[c, -s], [s, c]]).T
    if rng.random() < (0.5 if street else 0.3):
        jitter = fs * (rng.uniform(0.05, 0.3) if street else rng.uniform(0.03, 0.15))
        pts = pts + np.array([[rng.uniform(-jitter, jitter) for _ in range(2)] for _ in range(4)])
    if abs(ang) < 1e-3 and shear == 0.0 and np.allclose(pts + [w / 2, h / 2], src):
        return stack
    pts = pts - pts.min(axis=0) + 2
    size = tuple(int(v) + 4 for v in pts.max(axis=0))
    coeffs = _perspective_coeffs(src, pts)
    im = Image.fromarray(stack).transform(size, Image.Transform.PERSPECTIVE, coeffs, Image.Resampling.BILINEAR)
    return np.asarray(im)


def _curve(stack: np.ndarray, rng: random.Random, fs: int, street: bool = False) -> np.ndarray:
    """Bend the baseline: shift each column vertically along an arc or a wave (``street``: deeper arcs)."""
    h, w = stack.shape[:2]
    amp = fs * (rng.uniform(0.2, 1.0) if street else rng.uniform(0.1, 0.35))
    x = np.linspace(-1.0, 1.0, w)
    if rng.random() < 0.7:
        shift = amp * (x ** 2) * rng.choice([-1, 1])
    else:
        shift = amp * 0.5 * np.sin(math.pi * x * rng.uniform(0.7, 1.5) + rng.uniform(0, 2 * math.pi))
    shift = np.round(shift - shift.min()).astype(int)  # (W,)
    pad = int(shift.max())
    out = np.zeros((h + pad, w, stack.shape[2]), stack.dtype)
    rows = np.arange(h)[:, None] + shift[None, :]  # (H, W)
    out[rows, np.arange(w)[None, :]] = stack
    return out


# ---------------------------------------------------------------------------- cropping
def _crop_box(stack: np.ndarray, rng: random.Random) -> tuple[int, int, int, int]:
    """Crop around the ink: mostly snug, sometimes loose, rarely cutting the text a little."""
    box = _ink_box(stack)
    if box is None:
        return 0, 0, stack.shape[1], stack.shape[0]
    x0, y0, x1, y1 = box
    th = y1 - y0
    loose = rng.random() < 0.15

    def pad(lo: float, hi: float) -> int:
        """A margin in pixels, a fraction of the text height; rarely negative (cuts the text)."""
        v = rng.uniform(lo, hi) * th
        if rng.random() < 0.06:
            v = -rng.uniform(0.0, 0.12) * th  # cut the text slightly
        return int(round(v))

    vy = (0.0, 0.35) if loose else (0.0, 0.15)
    vx = (0.0, 0.7) if loose else (0.0, 0.3)
    return x0 - pad(*vx), y0 - pad(*vy), x1 + pad(*vx), y1 + pad(*vy)


def _crop(stack: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    """Crop with zero padding where the box leaves the array."""
    x0, y0, x1, y1 = box
    h, w = stack.shape[:2]
    out = np.zeros((max(y1 - y0, 2), max(x1 - x0, 2), stack.shape[2]), stack.dtype)
    sy0, sy1, sx0, sx1 = max(y0, 0), min(y1, h), max(x0, 0), min(x1, w)
    if sy1 > sy0 and sx1 > sx0:
        out[sy0 - y0:sy1 - y0, sx0 - x0:sx1 - x0] = stack[sy0:sy1, sx0:sx1]
    return out


def _ink_box(stack: np.ndarray) -> tuple[int, int, int, int] | None:
    """Bounding box (x0, y0, x1, y1) of the visible ink of a mask stack, or None if empty."""
    return Image.fromarray(stack).point(lambda v: 255 if v > 40 else 0).getbbox()


def _clutter(stack: np.ndarray, rng: random.Random, fonts: Sequence[str], fs: int, opts: SynthOptions) -> np.ndarray:
    """Neighbouring text cut by the crop edges, sign edges or rules, as a (H, W) mask.

    Neighbouring text sits outside the word's ink box, so only what the crop padding leaves
    room for shows (often a sliver at the edge, as in real crops).
    """
    h, w = stack.shape[:2]
    im = Image.new("L", (w, h), 0)
    draw = ImageDraw.Draw(im)
    box = _ink_box(stack) or (0, 0, w, h)
    if rng.random() < 0.65:
        text = sample_text(rng, opts)
        try:
            picker = font_picker(tuple(fonts), script_chars(opts))
            font = _font(picker.pick(text, rng), max(6, int(fs * rng.uniform(0.6, 1.1))))
        except ValueError:
            return np.asarray(im)
        gap = max(1, int(fs * rng.uniform(0.05, 0.3)))
        cy = (box[1] + box[3]) / 2
        side = rng.choice(["top", "bottom", "left", "right"])
        xy, anchor = {
            "top": ((rng.uniform(-w / 2, w / 2), box[1] - gap), "ld"),
            "bottom": ((rng.uniform(-w / 2, w / 2), box[3] + gap), "la"),
            "left": ((box[0] - gap * 2, cy), "rm"),
            "right": ((box[2] + gap * 2, cy), "lm"),
        }[side]
        draw.text(xy, text, fill=255, font=font, anchor=anchor)
    else:
        t = max(1, int(fs * rng.uniform(0.03, 0.12)))
        if rng.random() < 0.35:  # the edge of a sign or a box around the word
            m = [rng.randint(-t, max(0, box[i] - 1)) for i in range(2)]
            draw.rectangle([m[0], m[1], w - 1 - rng.randint(-t, max(0, w - box[2] - 1)),
                            h - 1 - rng.randint(-t, max(0, h - box[3] - 1))], outline=255, width=t)
        else:  # an underline or a rule above
            y = rng.choice([rng.randint(min(box[3], h - 1), h - 1), rng.randint(0, max(0, box[1]))])
            draw.line([(0, y), (w, y)], fill=255, width=t)
    return np.asarray(im)


# ---------------------------------------------------------------------------- colour
def _luma(c: np.ndarray) -> float:
    """Perceived brightness (0-255) of an RGB colour."""
    return float(c[0] * 0.299 + c[1] * 0.587 + c[2] * 0.114)


def _color(rng: random.Random, lo: float, hi: float) -> np.ndarray:
    """An RGB colour (float32, 0-255) with luma in [lo, hi]; mostly muted, sometimes vivid."""
    target = rng.uniform(lo, hi)
    sat = rng.random() ** 2.5
    hue = np.array([rng.random(), rng.random(), rng.random()]) * 255
    c = np.full(3, 128.0) * (1 - sat) + hue * sat
    c = c * (target / max(_luma(c), 1.0))
    if c.max() > 255:  # too bright for this hue: blend towards white keeping the luma
        c = c / c.max() * 255
        k = (target - _luma(c)) / max(255 - _luma(c), 1e-3)
        c = c + (255 - c) * min(max(k, 0.0), 1.0)
    return np.clip(c, 0, 255).astype(np.float32)


def _palette(rng: random.Random, low_contrast_ok: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(background, text) colours: dark on light, light on dark or any pair, varied contrast.

    Luma gap is >= 30 (of 255); background texture is later kept weaker than the gap.
    """
    r = rng.random()
    if r < 0.4:
        bg, fg = _color(rng, 150, 255), _color(rng, 0, 100)
    elif r < 0.75:
        bg, fg = _color(rng, 0, 110), _color(rng, 150, 255)
    else:
        bg = _color(rng, 0, 255)
        gap = rng.uniform(35, 60) if low_contrast_ok and rng.random() < 0.3 else rng.uniform(60, 160)
        lb = _luma(bg)
        up = lb + gap <= 255 and (lb - gap < 0 or rng.random() < 0.5)
        fg = _color(rng, lb + gap, min(255.0, lb + gap + 40)) if up else _color(rng, max(0.0, lb - gap - 40), lb - gap)
    return bg, fg


def _smooth_noise(nrng: np.random.Generator, h: int, w: int, cell: float, channels: int) -> np.ndarray:
    """Smooth random field in [-1, 1], shape (H, W, channels)."""
    gh, gw = max(2, int(h / cell) + 2), max(2, int(w / cell) + 2)
    grid = nrng.uniform(-1, 1, (gh, gw, channels)).astype(np.float32)
    chans = [np.asarray(Image.fromarray(grid[..., i]).resize((w, h), Image.Resampling.BICUBIC))
             for i in range(channels)]
    return np.clip(np.dstack(chans), -1, 1)


def _background(h: int, w: int, bg: np.ndarray, gap: float, rng: random.Random,
                nrng: np.random.Generator) -> np.ndarray:
    """Background (H, W, 3) float32: flat, gradient, texture or blurred clutter around ``bg``.

    Variation stays within a fraction of the text/background luma ``gap`` so the text stays readable.
    """
    spread = min(80.0, 0.7 * gap)
    out = np.empty((h, w, 3), np.float32)
    out[:] = bg
    r = rng.random()
    if r < 0.3:
        return out
    if r < 0.55:  # linear gradient to a nearby colour
        other = np.clip(bg + np.array([rng.uniform(-spread, spread) for _ in range(3)], np.float32), 0, 255)
        t = _ramp(h, w, rng)[..., None]
        return out * (1 - t) + other * t
    if r < 0.74:  # texture: smooth blobs plus fine grain
        amp = rng.uniform(0.15, 0.6) * spread
        tex = _smooth_noise(nrng, h, w, rng.uniform(2, max(3.0, h / 2)), rng.choice([1, 3])) * amp
        return np.clip(out + tex, 0, 255)
    if r < 0.8:  # stripes: siding, blinds, brick courses, corrugated metal
        t = _ramp(h, w, rng) * rng.uniform(3, 12) * 2 * math.pi
        return np.clip(out + (np.sin(t) * rng.uniform(0.2, 0.5) * spread)[..., None], 0, 255)
    im = Image.fromarray(out.astype(np.uint8))  # clutter: soft shapes in nearby colours
    draw = ImageDraw.Draw(im)
    for _ in range(rng.randint(2, 6)):
        col = tuple(int(v) for v in np.clip(bg + np.array([rng.uniform(-spread, spread) for _ in range(3)]), 0, 255))
        x0, y0 = rng.uniform(-w / 2, w), rng.uniform(-h / 2, h)
        box = [x0, y0, x0 + rng.uniform(3, w), y0 + rng.uniform(3, h)]
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)(box, fill=col)
    im = im.filter(ImageFilter.GaussianBlur(rng.uniform(0.5, max(1.0, h / 6))))
    return np.asarray(im, np.float32)


class MissingPhotosError(NoFontsError):
    """The street style's background photographs are not installed (a NoFontsError, so every command that reports
    a generator set-up problem in one line reports this one too; make_sample does not retry it)."""


@functools.lru_cache(maxsize=1)
def _photos() -> tuple[np.ndarray, ...]:
    """The street style's background photographs (RGB uint8, at most 512 px a side), loaded once per process."""
    import importlib.util

    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        raise MissingPhotosError("the street style draws backgrounds from scikit-image's sample photographs: "
                                 "pip install scikit-image (or pip install -e '.[street]')")
    folder = os.path.join(list(spec.submodule_search_locations)[0], "data")
    out = []
    for name in PHOTO_FILES:
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            continue
        im = Image.open(path).convert("RGB")
        im.thumbnail((512, 512))
        out.append(np.asarray(im))
    if not out:
        raise MissingPhotosError(f"no sample photographs found in {folder}: reinstall scikit-image")
    return tuple(out)


def _photo_background(h: int, w: int, bg: np.ndarray, gap: float, rng: random.Random,
                      photos: Sequence[np.ndarray] = ()) -> np.ndarray:
    """A crop of a natural photograph (of ``photos``, else scikit-image's), scaled to (H, W), its tones squeezed
    around ``bg`` within the contrast gap."""
    photos = photos or _photos()
    photo = photos[rng.randrange(len(photos))]
    ph, pw = photo.shape[:2]
    scale = rng.uniform(0.5, 3.0)
    cw, ch = min(pw, max(4, round(w * scale))), min(ph, max(4, round(h * scale)))
    x0, y0 = rng.randint(0, pw - cw), rng.randint(0, ph - ch)
    crop = Image.fromarray(photo[y0:y0 + ch, x0:x0 + cw]).resize((w, h), Image.Resampling.BILINEAR)
    arr = np.asarray(crop, np.float32)
    if rng.random() < 0.5:
        arr = arr.mean(axis=2, keepdims=True).repeat(3, axis=2)  # keep the structure, take the colour from bg
    dev = arr - arr.mean(axis=(0, 1))
    span = float(np.abs(dev).max()) or 1.0
    return np.clip(bg + dev * (rng.uniform(0.3, 0.75) * gap / span), 0, 255)


def _ramp(h: int, w: int, rng: random.Random) -> np.ndarray:
    """A linear ramp (H, W) from 0 to 1 in a random direction."""
    ang = rng.uniform(0, 2 * math.pi)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    t = xx * math.cos(ang) + yy * math.sin(ang)
    t -= t.min()
    return t / max(float(t.max()), 1e-3)


def _blend(img: np.ndarray, mask: np.ndarray, color: np.ndarray | float, opacity: float = 1.0) -> np.ndarray:
    """Paint ``color`` over ``img`` through ``mask`` (uint8 (H, W)); colour may be (3,) or (H, W, 3)."""
    a = mask.astype(np.float32)[..., None] * (opacity / 255.0)
    return img * (1 - a) + color * a


def _compose(stack: np.ndarray, clutter: np.ndarray | None, style: dict[str, Any], rng: random.Random,
             nrng: np.random.Generator) -> np.ndarray:
    """Colour the mask layers over a background; returns (H, W, 3) float32."""
    h, w = stack.shape[:2]
    bg_col, fg_col = _palette(rng, style["severity"] < 0.3)
    gap = abs(_luma(fg_col) - _luma(bg_col))
    if style.get("photo"):  # SynthOptions.photos: a wallpaper photograph behind the line
        bg = _photo_background(h, w, bg_col, gap, rng, wallpapers())
    elif style.get("street") and rng.random() < 0.35:
        bg = _photo_background(h, w, bg_col, gap, rng)
    else:
        bg = _background(h, w, bg_col, gap, rng, nrng)
    img = bg
    if style["shadow"]:
        shadow_col = _color(rng, 0, 60) if rng.random() < 0.7 else fg_col * 0.5
        img = _blend(img, stack[..., 2], shadow_col, rng.uniform(0.5, 1.0))
    if clutter is not None:
        img = _blend(img, clutter, fg_col if rng.random() < 0.6 else _palette(rng)[1], rng.uniform(0.6, 1.0))
    if style["hollow"]:  # outline letters: the stroke (in the text colour) carries the contrast
        return _blend(_blend(img, stack[..., 1], fg_col), stack[..., 0], bg)
    if style["stroke"]:
        lf = _luma(fg_col)
        stroke_col = _color(rng, 0, max(0.0, lf - 70)) if lf > 127 else _color(rng, min(255.0, lf + 70), 255)
        img = _blend(img, stack[..., 1], stroke_col)
    return _blend(img, stack[..., 0], _fill_colour(fg_col, h, w, rng, nrng))


def _fill_colour(fg: np.ndarray, h: int, w: int, rng: random.Random, nrng: np.random.Generator) -> np.ndarray:
    """Text colour: flat, a gradient, or worn/metallic texture (mottled paint, light on relief)."""
    r = rng.random()
    if r < 0.15:
        other = np.clip(fg + np.array([rng.uniform(-60, 60) for _ in range(3)], np.float32), 0, 255)
        t = _ramp(h, w, rng)[..., None]
        return fg * (1 - t) + other * t
    if r < 0.25:
        tex = _smooth_noise(nrng, h, w, rng.uniform(1.5, 6.0), 1) * rng.uniform(15, 45)
        return np.clip(fg + tex, 0, 255)
    return fg


def _lighting(img: np.ndarray, rng: random.Random) -> np.ndarray:
    """Uneven light: a brightness ramp, or a hard-edged shadow across part of the crop."""
    h, w = img.shape[:2]
    r = rng.random()
    if r < 0.3:
        k = rng.uniform(0.2, 0.7)
        gain = 1 - k / 2 + k * _ramp(h, w, rng)
        return img * gain[..., None]
    if r < 0.38:
        t = _ramp(h, w, rng)
        edge = rng.uniform(0.3, 0.7)
        soft = rng.uniform(0.02, 0.2)
        dark = np.clip((t - edge) / soft, 0, 1) * rng.uniform(0.3, 0.6)
        return img * (1 - dark)[..., None]
    return img


# ---------------------------------------------------------------------------- camera
_MOTION_KERNELS = (
    (0, 0, 0, 1, 1, 1, 0, 0, 0),  # horizontal
    (0, 1, 0, 0, 1, 0, 0, 1, 0),  # vertical
    (1, 0, 0, 0, 1, 0, 0, 0, 1),  # diagonal
    (0, 0, 1, 0, 1, 0, 1, 0, 0),
)


def _camera(img: np.ndarray, rng: random.Random, nrng: np.random.Generator, opts: SynthOptions,
            sev: float, street: bool | None = None) -> Image.Image:
    """Resize to the output height and add low resolution, blur, noise and colour jitter.

    ``sev`` in [0, 1] scales how likely and how strong the degradations are, so that they do
    not all pile up on one image and make it unreadable.
    """
    h, w = img.shape[:2]
    H = opts.height
    out_w = max(1, round(w * H / h * rng.uniform(0.8, 1.2)))
    if opts.max_width:
        out_w = min(out_w, opts.max_width)
    im = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))
    R = Image.Resampling
    resample = rng.choice([R.BILINEAR, R.BICUBIC, R.LANCZOS, R.BOX])
    street = opts.style == "street" if street is None else street
    if rng.random() < (0.1 + 0.5 * sev if street else 0.4 * sev):  # low resolution, scaled back up
        f = rng.uniform(0.4, 0.7) if street else 1 - sev * rng.uniform(0.3, 0.6)  # street: text ~13-22 px high
        im = im.resize((max(1, round(out_w * f)), max(2, round(H * f))), resample)
        resample = rng.choice([R.BILINEAR, R.BICUBIC, R.NEAREST])
    im = im.resize((out_w, H), resample)
    r = rng.random() * (0.8 if street else 1.0)
    if r < 0.1 + 0.3 * sev:
        im = im.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 0.4 + 0.8 * sev)))
    elif r < 0.1 + 0.4 * sev:
        im = im.filter(ImageFilter.Kernel((3, 3), rng.choice(_MOTION_KERNELS), scale=3))
    arr = np.asarray(im, np.float32)
    if rng.random() < 0.3:  # contrast and brightness jitter
        arr = (arr - 128) * rng.uniform(1 - 0.25 * sev, 1.2) + 128 + rng.uniform(-25, 25)
    if rng.random() < 0.5:
        sigma = rng.uniform(1, 2 + 8 * sev)
        arr = arr + nrng.normal(0, sigma, arr.shape if rng.random() < 0.5 else arr.shape[:2] + (1,))  # colour/grey
    if rng.random() < 0.05:
        arr = 255 - arr
    im = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    if rng.random() < 0.08:
        im = im.convert("L").convert("RGB")
    return im


# ---------------------------------------------------------------------------- public API
def render_word(text: str, rng: random.Random, fonts: list[str], opts: SynthOptions) -> Image.Image:
    """Render ``text`` as a scene-text-like word crop: RGB, ``opts.height`` pixels tall.

    Raises ValueError when no font in ``fonts`` draws every character of ``text``.
    """
    picker = font_picker(tuple(fonts), script_chars(opts))
    info = picker.pick(text, rng)
    latin = _latin_face(text, info, picker, rng) if opts.mixed_fonts and info.cjk and rng.random() < opts.mixed_fonts \
        else None
    nrng = np.random.default_rng(rng.getrandbits(63))
    H = opts.height
    cap = H * (rng.uniform(0.5, 0.95) if rng.random() < 0.85 else rng.uniform(0.25, 0.45))  # low res
    fs = max(8, round(cap / info.cap_height))
    # the Western face at the CJK face's own capital height, give or take a tenth (documents mix them so)
    stack, style = _layers(text, info, fs, rng, latin and (latin, max(
        8, round(fs * info.cap_height / latin.cap_height * rng.uniform(0.9, 1.1)))),
        jitter=bool(opts.jitter and rng.random() < opts.jitter))
    if opts.weight and rng.random() < opts.weight:
        stack = _reweigh(stack, rng, fs)
    if opts.squeeze and rng.random() < opts.squeeze:
        stack = _squeeze(stack, rng)
    if opts.elastic and rng.random() < opts.elastic:
        stack = _elastic(stack, rng, fs)
    if opts.photos:
        style["photo"] = rng.random() < opts.photos
    style["severity"] = sev = rng.random()
    street = style["street"] = opts.style == "street" or bool(opts.street and rng.random() < opts.street)
    stack = _warp(stack, rng, fs, street)
    if rng.random() < (0.2 if street else 0.06):
        stack = _curve(stack, rng, fs, street)
    stack = _crop(stack, _crop_box(stack, rng))
    clutter = _clutter(stack, rng, fonts, fs, opts) if opts.clutter and rng.random() < 0.25 else None
    img = _lighting(_compose(stack, clutter, style, rng, nrng), rng)
    return _camera(img, rng, nrng, opts, sev, street)


def _latin_face(text: str, info: FontInfo, picker, rng: random.Random) -> FontInfo | None:
    """SynthOptions.mixed_fonts: a Western face that draws every ASCII run of ``text`` (None when the line has no
    ASCII run, or nothing but ASCII)."""
    ascii_runs = "".join(_ASCII_RUN.findall(text))
    if not ascii_runs or len(ascii_runs) == len(text.replace(" ", "")):
        return None
    try:
        face = picker.pick(ascii_runs, rng)
    except ValueError:
        return None
    return None if face.cjk else face


def sample_rng(seed: int, index: int) -> random.Random:
    """The RNG of sample ``index`` in the data set ``seed`` (independent of workers)."""
    return random.Random(seed * 0x1_0000_0000 + index)


def encode_image(img: Image.Image, rng: random.Random, opts: SynthOptions) -> bytes:
    """JPEG bytes at a random quality in ``opts.jpeg_quality`` (artefacts are part of the data)."""
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=rng.randint(*opts.jpeg_quality))
    return buf.getvalue()


def make_sample(index: int, seed: int, fonts: Sequence[str], opts: SynthOptions) -> tuple[bytes, str]:
    """Sample ``index`` of data set ``seed``: (JPEG bytes, label); the same in every process."""
    rng = sample_rng(seed, index)
    for _ in range(20):
        text = sample_text(rng, opts)
        label = text_label(text, opts.charset)
        try:
            img = render_word(text, rng, list(fonts), opts)
        except ValueError:  # no font draws this text: draw another
            continue
        return encode_image(img, rng, opts), label  # type: ignore[return-value]
    raise NoFontsError(f"sample {index}: the fonts cannot draw the texts of charset {opts.charset!r}")


def check_options(opts: SynthOptions, fonts: Sequence[str]) -> None:
    """Fail early, in the calling process, on a bad word list, charset or font set.

    Text lines: every character of the alphabet must be drawn by some font (no tofu, no silently
    missing characters), else a one-line error counts and shows the missing ones.
    """
    alphabet = Charset.from_spec(opts.charset).chars
    if text_mode(opts) == "words" and _beyond_ascii(opts.charset):
        never = [c for c in alphabet if c not in RENDERABLE and c != " "]
        raise ValueError(f"charset {opts.charset!r}: scene-text words are ASCII, so {len(never)} of {len(alphabet)} "
                         f"characters would never appear: {describe(never)}; use text lines (--text lines)")
    if text_mode(opts) == "lines":
        missing = uncovered(alphabet, fonts)
        if missing:
            raise NoFontsError(
                f"charset {opts.charset!r}: {len(missing)} of {len(alphabet)} characters cannot be drawn by any of "
                f"the {len(fonts)} font(s): {describe(missing)}; install fonts that have them (CJK: apt-get install "
                f"{' '.join(CJK_FONT_PACKAGES)}) or pass --fonts DIR")
    if opts.style == "street" or opts.street:
        _photos()  # a missing scikit-image fails here, not in a worker halfway through
    if opts.photos:
        try:
            wallpapers()  # ... and missing wallpapers too
        except NoPhotosError as e:
            raise MissingPhotosError(str(e)) from None
    make_sample(0, 0, fonts, opts)


def contact_sheet(samples: Iterable[tuple[bytes, str]], cols: int = 6, cell_w: int = 200,
                  label_font: ImageFont.FreeTypeFont | ImageFont.ImageFont | None = None) -> Image.Image:
    """A PNG-ready grid of encoded samples with their labels underneath (for eyeballing data).

    ``label_font``: a font for the labels (one that draws them, e.g. a CJK font for Chinese lines).
    """
    items = [(Image.open(io.BytesIO(data)).convert("RGB"), label) for data, label in samples]
    if not items:
        raise ValueError("no samples for the contact sheet")
    line_h = 14 if label_font is None else int(getattr(label_font, "size", 12)) + 4
    cell_h = max(im.height for im, _ in items) + line_h
    rows = (len(items) + cols - 1) // cols
    sheet = Image.new("RGB", (cols * cell_w, rows * cell_h), "white")
    draw = ImageDraw.Draw(sheet)
    for i, (im, label) in enumerate(items):
        x, y = (i % cols) * cell_w, (i // cols) * cell_h
        if im.width > cell_w - 4:
            im = im.resize((cell_w - 4, im.height))
        sheet.paste(im, (x + 2, y + 1))
        draw.text((x + 2, y + im.height + 1), label, fill=(200, 0, 0), font=label_font)
    return sheet


def label_font_for(text: str, fonts: Sequence[str], opts: SynthOptions,
                   size: int = 14) -> ImageFont.FreeTypeFont | None:
    """A font that draws every character of ``text`` (for contact-sheet labels); None = PIL's default."""
    try:
        return load_font(font_picker(tuple(fonts), script_chars(opts)).pick(text, random.Random(0)).path, size)
    except ValueError:
        return None


def iter_samples(num: int, seed: int, fonts: Sequence[str], opts: SynthOptions, workers: int = 1,
                 start: int = 0) -> Iterator[tuple[bytes, str]]:
    """Samples ``start .. start+num-1`` in order, rendered by ``workers`` processes."""
    job: Callable[[int], tuple[bytes, str]] = partial(make_sample, seed=seed, fonts=tuple(fonts), opts=opts)
    indices = range(start, start + num)
    if workers <= 1 or num < 2:
        yield from map(job, indices)
        return
    chunk = max(1, min(64, num // (workers * 8)))
    with multiprocessing.Pool(workers) as pool:
        yield from pool.imap(job, indices, chunksize=chunk)


RENDERED_KEY = b"crnn-rendered"  # a rendered set's stamp: rendered_stamp() as JSON


def generate_lmdb(out: str, num: int, seed: int = 0, workers: int = 0, fonts_dir: str | None = None,
                  opts: SynthOptions | None = None, progress: bool = True, overwrite: bool = False,
                  for_run: bool = False) -> int:
    """Render ``num`` samples into a new LMDB at ``out`` (standard layout); return the count. The set stores what it
    is (``RENDERED_KEY``: :func:`rendered_stamp`; ``for_run``: a run renders it for itself, and renders it again
    when it would render it otherwise), so that a run can tell a set rendered otherwise from its own.

    ``workers=0`` uses every core. The result depends only on ``seed``, ``opts`` and the fonts.
    """
    from crnn.data.lmdb_io import write_lmdb

    if num < 1:
        raise ValueError(f"num must be >= 1, got {num}")
    if os.path.lexists(out) and not overwrite:
        raise FileExistsError(f"{out} already exists; choose another path or pass --overwrite")
    opts = opts or SynthOptions()
    fonts = find_fonts(fonts_dir, opts.split)
    check_options(opts, fonts)
    workers = workers or os.cpu_count() or 1
    samples = iter_samples(num, seed, fonts, opts, workers)
    stamp = json.dumps(rendered_stamp(num, seed, opts, for_run), sort_keys=True).encode("utf-8")
    return write_lmdb(samples, out, progress=progress, overwrite=overwrite, total=num, meta={RENDERED_KEY: stamp})


def rendered_stamp(num: int, seed: int, opts: SynthOptions, for_run: bool = False) -> dict[str, Any]:
    """What a rendered set is: its size, seed and options, and whether a run rendered it for itself (``for``: run)
    or someone asked for it (``crnn-synth``: user), as :func:`generate_lmdb` stores them in the set."""
    return {"for": "run" if for_run else "user", "num": num, "seed": seed,
            **json.loads(json.dumps(dataclasses.asdict(opts)))}


def _stamp(path: str | os.PathLike) -> dict[str, Any] | None:
    from crnn.data.lmdb_io import read_key

    if not os.path.isfile(os.path.join(path, "data.mdb")):
        return None
    raw = read_key(path, RENDERED_KEY)
    return None if raw is None else json.loads(raw)


def rendered_for_run(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds a set a run rendered for itself (and may render again)."""
    stamp = _stamp(path)
    return stamp is not None and stamp.get("for") == "run"


def stale_rendering(path: str | os.PathLike, num: int, seed: int, opts: SynthOptions) -> str | None:
    """How the set a run rendered for itself at ``path`` differs from what ``num``, ``seed`` and ``opts`` render
    (``height 32 -> 48, seed 7 -> 8``); None where it is the same, and where ``path`` holds no set a run rendered
    (absent, rendered by ``crnn-synth``, a set of the user's own, or rendered before sets were stamped): a caller
    renders over a stale set only, never over those."""
    old = _stamp(path)
    if old is None or old.get("for") != "run":
        return None
    new = rendered_stamp(num, seed, opts, for_run=True)
    changed = [f"{k} {old.get(k, '-')} -> {new.get(k, '-')}" for k in sorted(set(old) | set(new))
               if old.get(k) != new.get(k)]
    return ", ".join(changed) or None


def warn_rendering_again(path: str | os.PathLike, why: str) -> None:
    """The one warning before a run renders a set of its own again (``why``: :func:`stale_rendering`)."""
    log.warning("%s was rendered otherwise than this run renders it (%s): rendering it again", path, why)


def kept_height(path: str | os.PathLike, height: int, probe: int = 16) -> int | None:
    """For a set a run did not render for itself (the user's own, ``crnn-synth``'s, or rendered before sets were
    stamped): the one height its images have (its stamp's, else that of its first ``probe`` images), where it is
    not ``height``; None otherwise."""
    from crnn.data.lmdb_io import NUM_SAMPLES_KEY, READERS, image_key

    stamp = _stamp(path)
    if stamp is not None:
        return stamp["height"] if stamp.get("for") != "run" and stamp["height"] != height else None
    if not os.path.isfile(os.path.join(path, "data.mdb")):
        return None
    heights = set()
    with READERS.borrow(path) as env, env.begin(buffers=False) as txn:
        n = int(txn.get(NUM_SAMPLES_KEY) or 0)
        for i in range(1, min(n, probe) + 1):
            data = txn.get(image_key(i))
            if data is None:
                return None
            with Image.open(io.BytesIO(data)) as im:
                heights.add(im.height)
    return heights.pop() if len(heights) == 1 and height not in heights else None


def warn_kept_height(path: str | os.PathLike, opts: SynthOptions, key: str) -> None:
    """One warning where a set kept as it is (:func:`kept_height`) has images of another height than the run
    renders."""
    found = kept_height(path, opts.height)
    if found is not None:
        log.warning("%s: kept as it is (no run rendered it for itself), though its images are %d px high where this "
                    "run renders such a set %d px high: if it was rendered for another model, delete it to have it "
                    "rendered anew (or name another path in %s)", path, found, opts.height, key)


class SynthDataset:
    """Map-style dataset rendering sample ``i`` on the fly, byte-identical to ``generate_lmdb``.

    Items are ``(image, label)`` like the LMDB datasets; ``transform`` is applied to the image.
    Works with ``torch.utils.data.DataLoader`` (any worker count) without importing torch here.
    """

    def __init__(self, num: int, seed: int = 0, opts: SynthOptions | None = None,
                 transform: Callable[[Image.Image], Any] | None = None,
                 fonts: Sequence[str] | None = None, fonts_dir: str | None = None) -> None:
        self.num, self.seed = num, seed
        self.opts = opts or SynthOptions()
        self.transform = transform
        self.fonts = tuple(fonts) if fonts else tuple(find_fonts(fonts_dir, self.opts.split))
        check_options(self.opts, self.fonts)

    def __len__(self) -> int:
        return self.num

    def __getitem__(self, i: int) -> tuple[Any, str]:
        if not 0 <= i < self.num:
            raise IndexError(f"sample {i} out of range 0..{self.num - 1}")
        data, label = make_sample(i, self.seed, self.fonts, self.opts)
        img: Any = Image.open(io.BytesIO(data)).convert("RGB")
        return (self.transform(img) if self.transform else img), label


def synth_options(cfg: Any, style: str = "default") -> "SynthOptions":
    """What a config's rendered training data is (``cfg``: a crnn Config, read for ``model.charset`` and
    ``data.*``): English words (defaults), or text lines of model.charset beyond ASCII. The trainer renders this, and
    fine-tuning's ``data.rehearsal_style: base`` renders it from the config stored in the starting checkpoint."""
    from crnn.data.words import text_mode

    lines = SynthOptions(charset=cfg.model.charset, height=cfg.data.height, max_len=cfg.data.max_label_length,
                         text="lines", style=style, line_len=cfg.data.synth_line_len,
                         uniform_share=cfg.data.synth_uniform_share, mixed_fonts=cfg.data.synth_mixed_fonts,
                         squeeze=cfg.data.synth_squeeze, weight=cfg.data.synth_weight, jitter=cfg.data.synth_jitter,
                         photos=cfg.data.synth_photos, elastic=cfg.data.synth_elastic,
                         traditional=cfg.data.synth_traditional)
    if text_mode(SynthOptions(charset=cfg.model.charset)) == "lines":
        return lines
    d = cfg.data
    levers = dict(squeeze=d.synth_squeeze, weight=d.synth_weight, jitter=d.synth_jitter, photos=d.synth_photos,
                  signs=d.synth_signs, street=d.synth_street, elastic=d.synth_elastic, traditional=d.synth_traditional)
    # words are rendered as high as the model reads them (a 48 px recipe's words were rendered 32 px high and scaled
    # up until 2026-11-29)
    if not any(levers.values()):  # the English recipes before the levers: the same bytes
        return SynthOptions(text="words", style=style, height=d.height)
    # a case-sensitive alphabet with a space (printable95) keeps phrases and case in its labels
    return SynthOptions(text="words", style=style, height=d.height, charset=cfg.model.charset,
                        max_len=d.max_label_length, **levers)
