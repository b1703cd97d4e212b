"""Font discovery and glyph coverage for the synthetic text generator.

Fonts come from the system font folders (or one folder given by the user). A font is kept when
it loads, is not a symbol/dingbat/math font, and really draws ``a``-``z``. Per character we know
whether the font has a glyph (never a tofu box), and whether it is an all-caps display face whose
lower-case letters are drawn as capitals (then lower case counts as missing, so labels stay true).
"""
from __future__ import annotations

import functools
import math
import os
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass

from PIL import ImageFont

SYSTEM_FONT_DIRS: tuple[str, ...] = (
    "/usr/share/fonts",
    "/usr/local/share/fonts",
    "~/.fonts",
    "~/.local/share/fonts",
)
FONT_EXTS = (".ttf", ".otf", ".ttc")
# Symbol, dingbat, icon and math faces map letters to pictures; none of them is a word font.
EXCLUDE_RE = re.compile(
    r"symbol|dingbat|d050000l|emoji|icon|awesome|math|braille|ornament|webfont|wingding|powerline"
    # letters in key-cap boxes, inverse/outline OCR variants, unreadable display faces
    r"|biolinum_k|ocrb[efx]\b|flatline|winks|f500|ferrite",
    re.I,
)
# Handwriting, script and fancy display faces are rare on real signs: their folders weigh less.
RARE_STYLE_RE = re.compile(
    r"kristi|breip|havana|sjfonts|femkeklaver|isabella|dancingscript|kaushan|lobster|leckerli|humor-sans"
    r"|blankenburg|cherrybomb|staypuft|dustin|okolaks|bajaderka|fantasma|le-murmure|cabinsketch|summersby"
    r"|eurofurence|engadget|radisnoir|apropal|comfortaa|rocknroll|yusei|klaudia|rampart|train",
    re.I,
)
RARE_STYLE_WEIGHT = 0.3
# Signs favour heavy weights: when a folder has bold files, they are drawn this often.
BOLD_FILE_RE = re.compile(r"bold|black|heavy|semibold|demi|\bbd\b|-b\.", re.I)
BOLD_SHARE = 0.45
# ... and are rarely italic: upright files are preferred this often (shear adds some slant anyway).
ITALIC_FILE_RE = re.compile(r"italic|oblique|slanted|kursiv", re.I)
UPRIGHT_SHARE = 0.7
# Hairline weights vanish at 32 px, more so after blur and downscaling.
THIN_STYLE_RE = re.compile(r"hairline|thin|extra ?light|ultra ?light", re.I)
PRINTABLE = string.digits + string.ascii_letters + string.punctuation
# Debian packages the built-in data was made with. BASE: common text faces. EXTRA: signage, display,
# condensed, slab, typewriter, OCR, script and handwriting faces (about 200 MB) for more variety.
FONT_PACKAGES_FILE = os.path.join(os.path.dirname(__file__), "font_packages.txt")


def font_packages() -> list[str]:
    """Debian font packages the generator was tuned with (one per line in font_packages.txt)."""
    with open(FONT_PACKAGES_FILE, encoding="utf-8") as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]


BASE_FONT_PACKAGES: tuple[str, ...] = tuple(font_packages()[:8])
APT_HINT = "apt-get install " + " ".join(BASE_FONT_PACKAGES)
_PROBE_SIZE = 20
_MISSING_PROBE = "\U0010fffd"  # private-use codepoint: no font maps it, so it draws .notdef


class NoFontsError(FileNotFoundError):
    """Raised when no usable font is found."""


@dataclass(frozen=True)
class FontInfo:
    """What the generator needs to know about one font file."""

    path: str
    family: str
    style: str
    chars: frozenset[str]  # printable ASCII characters the font really draws
    caps_only: bool
    cap_height: float  # height of "H" as a fraction of the font size (to size text evenly)


def _mask_signature(font: ImageFont.FreeTypeFont, ch: str) -> tuple | None:
    """Bounding box and pixels of one glyph, or None when it draws nothing."""
    mask = font.getmask(ch)
    box = mask.getbbox()
    if box is None:
        return None
    return box, bytes(mask)


@functools.lru_cache(maxsize=None)
def font_info(path: str) -> FontInfo | None:
    """Probe a font file; None when it cannot be loaded or cannot draw a-z."""
    try:
        font = ImageFont.truetype(path, _PROBE_SIZE, layout_engine=ImageFont.Layout.BASIC)
        family, style = font.getname()
    except (OSError, ValueError):
        return None
    family, style = family or os.path.basename(path), style or ""
    if EXCLUDE_RE.search(os.path.basename(path)) or EXCLUDE_RE.search(family):
        return None
    if THIN_STYLE_RE.search(style) or THIN_STYLE_RE.search(family) or THIN_STYLE_RE.search(os.path.basename(path)):
        return None
    notdef = _mask_signature(font, _MISSING_PROBE)
    sigs = {ch: _mask_signature(font, ch) for ch in PRINTABLE}
    chars = {ch for ch, sig in sigs.items() if sig is not None and sig != notdef}
    # Three or more characters sharing one picture are a placeholder box, not glyphs.
    same: dict[tuple, list[str]] = {}
    for ch in chars:
        same.setdefault(sigs[ch], []).append(ch)
    chars -= {ch for group in same.values() if len(group) >= 3 for ch in group}
    lower = string.ascii_lowercase
    if not set(lower) <= chars or len({sigs[c] for c in lower}) < 20:
        return None
    caps_only = sum(sigs[c] == sigs[c.upper()] for c in lower) >= 20
    if caps_only:
        chars -= set(lower)
    box = sigs["H"][0] if sigs["H"] is not None else (0, 0, 0, int(0.7 * _PROBE_SIZE))
    cap_height = min(max((box[3] - box[1]) / _PROBE_SIZE, 0.3), 1.2)
    return FontInfo(path, family, style, frozenset(chars), caps_only, cap_height)


def _candidate_files(dirs: Sequence[str]) -> list[str]:
    """Font files under ``dirs`` (recursive, sorted, real paths, no duplicates)."""
    found: set[str] = set()
    for d in dirs:
        for root, _, files in os.walk(os.path.expanduser(d), followlinks=True):
            for name in files:
                if name.lower().endswith(FONT_EXTS):
                    found.add(os.path.realpath(os.path.join(root, name)))
    return sorted(found)


def find_fonts(fonts_dir: str | None = None) -> list[str]:
    """Usable font files, sorted; one file per (family, style). Raises NoFontsError if none."""
    if fonts_dir is not None and not os.path.isdir(fonts_dir):
        raise NoFontsError(f"fonts folder {fonts_dir!r} does not exist")
    dirs = [fonts_dir] if fonts_dir is not None else list(SYSTEM_FONT_DIRS)
    seen: set[tuple[str, str]] = set()
    fonts: list[str] = []
    for path in _candidate_files(dirs):
        info = font_info(path)
        if info is None or (info.family, info.style) in seen:
            continue
        seen.add((info.family, info.style))
        fonts.append(path)
    if not fonts:
        raise NoFontsError(
            f"no usable .ttf/.otf fonts found in {', '.join(dirs)}; "
            f"install some ({APT_HINT}) or pass --fonts DIR"
        )
    return fonts


@functools.lru_cache(maxsize=4096)
def load_font(path: str, size: int) -> ImageFont.FreeTypeFont:
    """A FreeType font at a pixel size (cached per process; basic layout: fast, with kerning)."""
    return ImageFont.truetype(path, size, layout_engine=ImageFont.Layout.BASIC)


class FontPicker:
    """Draws fonts that can render a given text, balanced across font folders.

    Folders roughly correspond to font packages: each folder gets a weight of
    sqrt(number of files in it), so a 400-font collection does not drown the rest, and
    folders of handwriting/script/fancy faces (``RARE_STYLE_RE``) weigh 0.3 of that.
    Fonts are probed lazily, the first time they are drawn.
    """

    def __init__(self, fonts: Sequence[str]) -> None:
        if not fonts:
            raise NoFontsError("the font list is empty")
        self.fonts = list(fonts)
        groups: dict[str, list[str]] = {}
        for path in self.fonts:
            groups.setdefault(os.path.dirname(path), []).append(path)
        self.groups = [groups[k] for k in sorted(groups)]
        # per group, keyed (bold?, upright?); an empty choice falls back to the wider one
        self.pools: list[dict[tuple[bool, bool], list[str]]] = []
        for g in self.groups:
            bold = [p for p in g if BOLD_FILE_RE.search(os.path.basename(p))] or g
            self.pools.append({(False, False): g, (False, True): _upright(g),
                               (True, False): bold, (True, True): _upright(bold)})
        self.weights = [math.sqrt(len(g)) * (RARE_STYLE_WEIGHT if RARE_STYLE_RE.search(g[0]) else 1.0)
                        for g in self.groups]

    def pick(self, text: str, rng) -> FontInfo:
        """A random font that draws every non-space character of ``text``; ValueError if none."""
        need = set(text) - {" "}
        for _ in range(8):
            g = rng.choices(range(len(self.groups)), weights=self.weights)[0]
            group = self.pools[g][(rng.random() < BOLD_SHARE, rng.random() < UPRIGHT_SHARE)]
            info = font_info(group[rng.randrange(len(group))])
            if info is not None and need <= info.chars:
                return info
        able = [i for i in map(font_info, self.fonts) if i is not None and need <= i.chars]
        if not able:
            raise ValueError(f"no font can draw all of {text!r}")
        return able[rng.randrange(len(able))]


def _upright(paths: list[str]) -> list[str]:
    """The non-italic files of ``paths`` (all of them when every one is italic)."""
    return [p for p in paths if not ITALIC_FILE_RE.search(os.path.basename(p))] or paths


@functools.lru_cache(maxsize=8)
def font_picker(fonts: tuple[str, ...]) -> FontPicker:
    """A cached FontPicker for a tuple of font paths."""
    return FontPicker(fonts)
