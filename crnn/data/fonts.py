"""Font discovery and glyph coverage for the synthetic text generator.

Fonts come from the system font folders (or one folder given by the user). A font is kept when
it loads, is not a symbol/dingbat/math font, and really draws ``a``-``z``. Per character we know
whether the font has a glyph (never a tofu box), and whether it is an all-caps display face whose
lower-case letters are drawn as capitals (then lower case counts as missing, so labels stay true).
Beyond printable ASCII (Chinese and other scripts), coverage is probed per character of the alphabet
(:func:`glyph_coverage`); CJK fonts are kept out of the draws for ASCII-only text, whose Latin glyphs
they only carry as an extra.
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

from crnn.data.faces import face_package, face_role, font_cache_dir
from crnn.data.lines import is_han

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
    r"|biolinum_k|ocrb[efx]\b|flatline|winks|f500|ferrite"
    # the rare-Han supplements of TW-Kai/TW-Sung (CNS 11643 Ext-B and private-use planes): no common Hanzi, and a
    # copy of the main face's ASCII that would join the Latin faces
    r"|^tw-(kai|sung)-(ext-b|plus)",
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


def font_packages(section: str | None = None) -> list[str]:
    """Debian font packages of font_packages.txt; ``section``: those under ``# section: ...`` (base, extra, cjk,
    cjk-heldout). Any other comment (one whose text before a colon is not a single word) continues its section."""
    out, current = [], None
    with open(FONT_PACKAGES_FILE, encoding="utf-8") as f:
        for ln in map(str.strip, f):
            if ln.startswith("#"):
                head, colon, _ = ln[1:].partition(":")
                if colon and head.strip() and len(head.split()) == 1:
                    current = head.strip()
            elif ln and section in (None, current):
                out.append(ln)
    return out


BASE_FONT_PACKAGES: tuple[str, ...] = tuple(font_packages("base"))
APT_HINT = "apt-get install " + " ".join(BASE_FONT_PACKAGES)
_PROBE_SIZE = 20
_MISSING_PROBE = "\U0010fffd"  # private-use codepoint: no font maps it, so it draws .notdef
HAN_PROBE = "的一是国人"  # a font drawing these is a CJK font ...
HAN_PROBE_TRADITIONAL = "的一是國人"  # ... and so is a traditional-only one (Big5 faces: cwTeX, AR PL Mingti2L Big5)
CJK_FONT_PACKAGES: tuple[str, ...] = tuple(font_packages("cjk"))  # scripts/setup.sh installs them
# train: no held-out face; heldout / dev / final: the Latin faces and the CJK faces of that role only; all: everything
SPLITS = ("train", "heldout", "dev", "final", "all")
_QUICK_PROBE = 24  # characters tried before probing a whole alphabet: a font drawing none of them is skipped


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
    cjk: bool = False  # draws Han characters (kept out of the draws for ASCII-only text)


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
    try:
        return _probe(path, font, family, style)
    except OSError:  # FreeType cannot render its glyphs ("invalid opcode" in a broken hinting program)
        return None


def _probe(path: str, font: ImageFont.FreeTypeFont, family: str, style: str) -> FontInfo | None:
    """:func:`font_info` of a font that loaded."""
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
    cjk = any(len({_mask_signature(font, ch) for ch in probe} - {None, notdef}) == len(probe)
              for probe in (HAN_PROBE, HAN_PROBE_TRADITIONAL))
    return FontInfo(path, family, style, frozenset(chars), caps_only, cap_height, cjk=cjk)


@functools.lru_cache(maxsize=None)
def _drawn(path: str, chars: tuple[str, ...]) -> frozenset[str]:
    """Which of ``chars`` (none printable ASCII) the font draws with its own glyph (not .notdef).

    Han characters are probed only in CJK fonts (:attr:`FontInfo.cjk`); other characters per
    128-code-point block, skipping a large block when none of ``_QUICK_PROBE`` characters spread
    over it is drawn. A skipped glyph costs variety, never a tofu box.
    """
    info = font_info(path)
    try:
        font = ImageFont.truetype(path, _PROBE_SIZE, layout_engine=ImageFont.Layout.BASIC)
    except (OSError, ValueError):
        return frozenset()
    notdef = _mask_signature(font, _MISSING_PROBE)
    blocks: dict[int, list[str]] = {}
    for ch in chars:
        if is_han(ch):
            if info is not None and info.cjk:
                blocks.setdefault(-1, []).append(ch)
        else:
            blocks.setdefault(ord(ch) >> 7, []).append(ch)
    sigs: dict[str, tuple | None] = {}
    for key, block in blocks.items():
        step = max(1, len(block) // _QUICK_PROBE)
        if key >= 0 and len(block) > _QUICK_PROBE and all(
                _mask_signature(font, ch) in (None, notdef) for ch in block[::step][:_QUICK_PROBE]):
            continue
        sigs.update((ch, _mask_signature(font, ch)) for ch in block)
    drawn = {ch for ch, sig in sigs.items() if sig is not None and sig != notdef}
    same: dict[tuple, list[str]] = {}
    for ch in drawn:
        same.setdefault(sigs[ch], []).append(ch)  # type: ignore[arg-type]
    return frozenset(drawn - {ch for group in same.values() if len(group) >= 3 for ch in group})


def glyph_coverage(path: str, alphabet: str) -> frozenset[str]:
    """What the font at ``path`` really draws: its printable ASCII, the characters of ``alphabet`` beyond
    ASCII that it has, and the space."""
    info = font_info(path)
    if info is None:
        return frozenset()
    others = tuple(sorted(set(alphabet) - set(PRINTABLE) - {" "}))
    return info.chars | (_drawn(path, others) if others else frozenset()) | {" "}


def uncovered(alphabet: str, fonts: Sequence[str]) -> list[str]:
    """Characters of ``alphabet`` (in its order) that no font in ``fonts`` draws."""
    left = set(alphabet) - {" "}
    for path in fonts:
        left -= glyph_coverage(path, alphabet)
        if not left:
            break
    return [c for c in dict.fromkeys(alphabet) if c in left]


def _candidate_files(dirs: Sequence[str]) -> list[str]:
    """Font files under ``dirs`` (recursive, sorted, real paths, no duplicates)."""
    found: set[str] = set()
    for d in dirs:
        for root, _, files in os.walk(os.path.expanduser(d), followlinks=True):
            for name in files:
                if name.lower().endswith(FONT_EXTS):
                    found.add(os.path.realpath(os.path.join(root, name)))
    return sorted(found)


def is_heldout_font(path: str) -> bool:
    """A held-out CJK face, never drawn into training data: every face of crnn/data/cjk_faces.tsv whose role is not
    ``train`` (the first yardstick's held-out faces, the honest yardstick's dev and final faces). Matched by file name,
    so a user's own copy of these faces is held out too."""
    return face_role(path) != "train"


def _in_split(path: str, info: FontInfo, split: str) -> bool:
    """Whether a font belongs to ``split`` (Latin faces belong to every split; held-out CJK faces only to their
    role's)."""
    if split == "all":
        return True
    role = face_role(path)
    return role == "train" if split == "train" else role == split or (role == "train" and not info.cjk)


def find_fonts(fonts_dir: str | None = None, split: str = "all") -> list[str]:
    """Usable font files, sorted; one file per (family, style). Raises NoFontsError if none.

    ``split``: ``train`` leaves out the held-out CJK faces; ``heldout``, ``dev`` and ``final`` keep the Latin faces
    and only the CJK faces of that role in crnn/data/cjk_faces.tsv (text lines in faces no training set saw); ``all``
    keeps everything. Searched: ``fonts_dir``, else the system font folders and the web-font cache
    (:func:`crnn.data.faces.font_cache_dir`).
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if fonts_dir is not None and not os.path.isdir(fonts_dir):
        raise NoFontsError(f"fonts folder {fonts_dir!r} does not exist")
    dirs = [fonts_dir] if fonts_dir is not None else [*SYSTEM_FONT_DIRS, font_cache_dir()]
    seen: set[tuple[str, str]] = set()
    fonts: list[str] = []
    for path in _candidate_files(dirs):
        info = font_info(path)
        if info is None or (info.family, info.style) in seen or not _in_split(path, info, split):
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
    ASCII-only text is drawn from the non-CJK faces; other text from the faces whose probed glyphs
    (:func:`glyph_coverage` over ``alphabet``) include all of its characters, uniformly.
    """

    def __init__(self, fonts: Sequence[str], alphabet: str = "") -> None:
        if not fonts:
            raise NoFontsError("the font list is empty")
        self.fonts = list(fonts)
        self.alphabet = alphabet
        self._cover: dict[str, frozenset[str]] | None = None
        infos = {p: font_info(p) for p in self.fonts}
        # ASCII-only text is drawn with the non-CJK faces (as before CJK fonts were installed) when there are any
        self.latin = [p for p in self.fonts if not (infos[p] is not None and infos[p].cjk)] or self.fonts
        groups: dict[str, list[str]] = {}
        for path in self.latin:
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
        if not need <= set(PRINTABLE):
            return self._pick_script(need, text, rng)
        for _ in range(8):
            g = rng.choices(range(len(self.groups)), weights=self.weights)[0]
            group = self.pools[g][(rng.random() < BOLD_SHARE, rng.random() < UPRIGHT_SHARE)]
            info = font_info(group[rng.randrange(len(group))])
            if info is not None and need <= info.chars:
                return info
        able = [i for i in map(font_info, self.latin) if i is not None and need <= i.chars]
        if not able:
            raise ValueError(f"no font can draw all of {text!r}")
        return able[rng.randrange(len(able))]

    def coverage(self) -> dict[str, frozenset[str]]:
        """Per font, the characters of the alphabet it draws (probed on first use)."""
        if self._cover is None:
            self._cover = {p: glyph_coverage(p, self.alphabet) for p in self.fonts}
        return self._cover

    def _pick_script(self, need: set[str], text: str, rng) -> FontInfo:
        """A font among those that draw every character of ``text`` (beyond ASCII), balanced across packages: each
        package (:func:`face_package`) weighs sqrt(its able files), so Noto's fourteen weights or a package of twenty
        variants of one design do not drown the single-file designs."""
        groups: dict[str, list[str]] = {}
        for p, chars in self.coverage().items():
            if need <= chars:
                groups.setdefault(face_package(p), []).append(p)
        if not groups:
            raise ValueError(f"no font can draw all of {text!r}")
        able = [groups[k] for k in sorted(groups)]
        group = able[rng.choices(range(len(able)), weights=[math.sqrt(len(g)) for g in able])[0]]
        return font_info(group[rng.randrange(len(group))])  # type: ignore[return-value]


def _upright(paths: list[str]) -> list[str]:
    """The non-italic files of ``paths`` (all of them when every one is italic)."""
    return [p for p in paths if not ITALIC_FILE_RE.search(os.path.basename(p))] or paths


@functools.lru_cache(maxsize=8)
def font_picker(fonts: tuple[str, ...], alphabet: str = "") -> FontPicker:
    """A cached FontPicker for a tuple of font paths (``alphabet``: the characters beyond ASCII it may meet)."""
    return FontPicker(fonts, alphabet)
