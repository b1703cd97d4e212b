"""Font discovery and glyph coverage for the synthetic text generator.

Fonts come from the system font folders (or one folder given by the user). A font is kept when
it loads, is not a symbol/dingbat/math font, and really draws ``a``-``z``. Per character we know
whether the font has a glyph (never a tofu box), and whether it is an all-caps display face whose
lower-case letters are drawn as capitals or small capitals (then lower case counts as missing, so labels stay true).
Beyond printable ASCII (Chinese and other scripts), coverage is probed per character of the alphabet
(:func:`glyph_coverage`); CJK fonts are kept out of the draws for ASCII-only text, whose Latin glyphs
they only carry as an extra.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import math
import os
import re
import statistics
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from PIL import ImageFont

from crnn.data.faces import MANIFEST, face_package, face_role, faces, font_cache_dir
from crnn.data.latin_faces import LATIN_MANIFEST, SUBFOLDER, latin_face, load_latin_manifest
from crnn.data.probe_cache import probe_cache

log = logging.getLogger(__name__)

SYSTEM_FONT_DIRS: tuple[str, ...] = (
    "/usr/share/fonts",
    "/usr/local/share/fonts",
    "~/.fonts",
    "~/.local/share/fonts",
)
FONT_EXTS = (".ttf", ".otf", ".ttc")
# Symbol, dingbat, icon and math faces map letters to pictures; none of them is a word font. (icon, not in "GothicOne")
EXCLUDE_RE = re.compile(
    r"symbol|dingbat|d050000l|emoji|icon(?!e)|awesome|math|braille|ornament|webfont|wingding|powerline|barcode"
    # letters in key-cap boxes, inverse/outline OCR variants, unreadable display faces
    r"|biolinum_k|ocrb[efx]\b|flatline|winks|f500|ferrite"
    # the rare-Han supplements of TW-Kai/TW-Sung (CNS 11643 Ext-B and private-use planes): no common Hanzi, and a
    # copy of the main face's ASCII that would join the Latin faces
    r"|^tw-(kai|sung)-(ext-b|plus)"
    # Y.OzFont's fixed-pitch, proportional-kana, other-Latin (X) and JIS90 variants of one hand (26 files in
    # fonts-yozvox-yozfont-standard-kana, the same Kanji): regular and bold, upright and italic, are the design, and
    # the CJK draws weigh a package by sqrt(its files)
    r"|^yoz[rb][a-z](?!_i?\.ttf$)",
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
BOLD_FILE_RE = re.compile(r"bold|black|heavy|semibold|demi|\bbd\b|-b\.|-[6-9]00-(?:normal|italic)\b", re.I)
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
    """Probe a font file; None when it cannot be loaded or cannot draw a-z. What a probe found is kept on disk
    (:mod:`crnn.data.probe_cache`) until the file changes."""
    store = probe_cache(font_cache_dir())
    rec = store.get(path)
    if rec is not None:
        return None if _excluded(path, rec["family"], rec["style"]) else _from_record(path, rec)
    try:
        font = ImageFont.truetype(path, _PROBE_SIZE, layout_engine=ImageFont.Layout.BASIC)
        family, style = font.getname()
    except (OSError, ValueError):
        return None
    family, style = family or os.path.basename(path), style or ""
    if _excluded(path, family, style):
        return None
    try:
        info = _probe(path, font, family, style)
    except OSError:  # FreeType cannot render its glyphs ("invalid opcode" in a broken hinting program)
        info = None
    store.put(path, _to_record(family, style, info))
    return info


def _excluded(path: str, family: str, style: str) -> bool:
    """A symbol/dingbat/math face or a hairline weight, by its file name, family or style."""
    name = os.path.basename(path)
    return bool(EXCLUDE_RE.search(name) or EXCLUDE_RE.search(family) or THIN_STYLE_RE.search(style)
                or THIN_STYLE_RE.search(family) or THIN_STYLE_RE.search(name))


def _to_record(family: str, style: str, info: FontInfo | None) -> dict:
    """What the probe cache keeps of a probe: the names, and the FontInfo fields unless the face was refused."""
    rec: dict = {"family": family, "style": style, "ok": info is not None}
    if info is not None:
        rec.update(chars="".join(sorted(info.chars)), caps_only=info.caps_only, cap_height=info.cap_height,
                   cjk=info.cjk)
    return rec


def _from_record(path: str, rec: dict) -> FontInfo | None:
    """The FontInfo a probe cache record stands for."""
    if not rec["ok"]:
        return None
    return FontInfo(path, rec["family"], rec["style"], frozenset(rec["chars"]), rec["caps_only"], rec["cap_height"],
                    cjk=rec["cjk"])


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
    caps_only = sum(sigs[c] == sigs[c.upper()] for c in lower) >= 20 or _small_caps(path)
    if caps_only:
        chars -= set(lower)
    box = sigs["H"][0] if sigs["H"] is not None else (0, 0, 0, int(0.7 * _PROBE_SIZE))
    cap_height = min(max((box[3] - box[1]) / _PROBE_SIZE, 0.3), 1.2)
    cjk = any(len({_mask_signature(font, ch) for ch in probe} - {None, notdef}) == len(probe)
              for probe in (HAN_PROBE, HAN_PROBE_TRADITIONAL))
    return FontInfo(path, family, style, frozenset(chars), caps_only, cap_height, cjk=cjk)


def _small_caps(path: str, size: int = 40) -> bool:
    """Lower case drawn as small capitals (Cinzel, Cormorant SC, Go Smallcaps, Beteckna): b d h k l rise no higher
    than x and g p q y sink no lower, by the median of each, within 6 % of the size. Such a face reads "positive" as
    POSITIVE, so it draws only text without lower case (as an all-caps face does)."""
    font = ImageFont.truetype(path, size, layout_engine=ImageFont.Layout.BASIC)
    box = {c: font.getbbox(c) for c in "xbdhklgpqy"}
    rise = statistics.median(box["x"][1] - box[c][1] for c in "bdhkl")
    sink = statistics.median(box[c][3] - box["x"][3] for c in "gpqy")
    return rise < 0.06 * size and sink < 0.06 * size


@functools.lru_cache(maxsize=None)
def _drawn(path: str, chars: tuple[str, ...]) -> frozenset[str]:
    """Which of ``chars`` (none printable ASCII) the font draws with its own glyph (not .notdef).

    Han characters are probed only in CJK fonts (:attr:`FontInfo.cjk`); other characters per
    128-code-point block, skipping a large block when none of ``_QUICK_PROBE`` characters spread
    over it is drawn. A skipped glyph costs variety, never a tofu box.
    """
    from crnn.data.lines import is_han  # imports torch (through the charset): not at import, for faces_stamp

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
    others = _beyond_ascii(alphabet)
    return info.chars | (_drawn_stored(path, others) if others else frozenset()) | {" "}


@functools.lru_cache(maxsize=16)
def _beyond_ascii(alphabet: str) -> tuple[str, ...]:
    """The characters of ``alphabet`` beyond printable ASCII and the space, sorted (worked out once per alphabet)."""
    return tuple(sorted(set(alphabet) - set(PRINTABLE) - {" "}))


def _drawn_stored(path: str, chars: tuple[str, ...]) -> frozenset[str]:
    """:func:`_drawn`, kept in the probe cache beside the font's record (per set of characters asked about), so that
    a process drawing Chinese lines does not probe every face over the alphabet again (saved by the caller)."""
    rec = probe_cache(font_cache_dir()).get(path)
    key = _chars_key(chars)
    if rec is not None and key in rec.get("drawn", {}):
        return frozenset(rec["drawn"][key])
    drawn = _drawn(path, chars)
    if rec is not None:
        rec.setdefault("drawn", {})[key] = "".join(sorted(drawn))
        probe_cache(font_cache_dir()).dirty = True
    return drawn


@functools.lru_cache(maxsize=16)
def _chars_key(chars: tuple[str, ...]) -> str:
    """A short name for a set of characters (the probe cache's key for what a font draws of them)."""
    return hashlib.sha256("".join(chars).encode("utf-8")).hexdigest()[:16]


def uncovered(alphabet: str, fonts: Sequence[str]) -> list[str]:
    """Characters of ``alphabet`` (in its order) that no font in ``fonts`` draws."""
    left = set(alphabet) - {" "}
    for path in fonts:
        left -= glyph_coverage(path, alphabet)
        if not left:
            break
    probe_cache(font_cache_dir()).save()
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
    """A held-out face, never drawn into training data: every face of crnn/data/cjk_faces.tsv whose role is not
    ``train`` (the first yardstick's held-out faces, the honest yardstick's dev and final faces) and every held-out
    face of crnn/data/latin_faces.tsv. Matched by file name, so a user's own copy of these faces is held out too."""
    return face_role(path) != "train"


def _in_split(path: str, info: FontInfo, split: str, latin_heldout: bool = False) -> bool:
    """Whether a font belongs to ``split``: held-out faces (CJK or Latin) only to their role's; the Latin training
    faces to every split, for Latin-only text, except to ``heldout`` when held-out Latin faces are there
    (``latin_heldout``: then that split's Latin is theirs alone)."""
    if split == "all":
        return True
    role = face_role(path)
    if split == "train" or role != "train":
        return role == split
    return not info.cjk and not (split == "heldout" and latin_heldout)


def find_fonts(fonts_dir: str | None = None, split: str = "all") -> list[str]:
    """Usable font files, sorted; one file per (family, style). Raises NoFontsError if none.

    ``split``: ``train`` leaves out every held-out face (CJK and Latin); ``heldout``, ``dev`` and ``final`` keep only
    the held-out faces of that role in crnn/data/cjk_faces.tsv and crnn/data/latin_faces.tsv (text in faces no
    training set saw) and the Latin training faces for Latin-only text - except ``heldout`` once held-out Latin faces
    are found: then its Latin is drawn in those alone (a check in Latin faces of designers training never saw);
    ``all`` keeps everything. Searched: ``fonts_dir``, else the system font folders and the web-font cache
    (:func:`crnn.data.faces.font_cache_dir`, with the Latin web faces in its ``latin/`` folder).
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if fonts_dir is not None and not os.path.isdir(fonts_dir):
        raise NoFontsError(f"fonts folder {fonts_dir!r} does not exist")
    dirs = [fonts_dir] if fonts_dir is not None else [*SYSTEM_FONT_DIRS, font_cache_dir()]
    found = [(p, i) for p in _candidate_files(dirs) if (i := font_info(p)) is not None]
    probe_cache(font_cache_dir()).save()
    latin_heldout = split == "heldout" and any(face_role(p) == "heldout" and not i.cjk for p, i in found)
    if split == "heldout":
        log.info("fonts, split heldout: %s", "Latin text in the held-out Latin faces only" if latin_heldout else
                 "no held-out Latin face here (python scripts/latin_faces.py --fetch): Latin text in the training "
                 "Latin faces")
    seen: set[tuple[str, str]] = set()
    fonts: list[str] = []
    for path, info in found:
        if (info.family, info.style) in seen or not _in_split(path, info, split, latin_heldout):
            continue
        seen.add((info.family, info.style))
        fonts.append(path)
    if not fonts:
        raise NoFontsError(
            f"no usable .ttf/.otf fonts found in {', '.join(dirs)}; "
            f"install some ({APT_HINT}) or pass --fonts DIR"
        )
    return fonts


# How the web faces of each manifest are fetched (faces the manifests list as Debian packages come with apt-get)
FETCH_CJK = "python scripts/face_manifest.py --fetch"
FETCH_LATIN = "python scripts/latin_faces.py --fetch"


@dataclass(frozen=True)
class ManifestCount:
    """How many of a face manifest's training files a list of fonts holds, and how to get the missing ones."""

    name: str  # "CJK faces", "Latin web faces"
    manifest: str  # its file, as the repository names it
    found: int
    listed: int  # its training files, less those the generator refuses (``refused``)
    refused: int  # by name (EXCLUDE_RE, thin weights) or by their probe here: never drawn, fetched or not
    fetch: str  # the commands that bring the missing files ("" when none is missing)


def manifest_counts(fonts: Sequence[str], alphabet: str) -> list[ManifestCount]:
    """Per face manifest whose faces draw ``alphabet``'s text, how many of its training files ``fonts`` holds (by
    file name, as :func:`face_role` matches them): the CJK faces when the alphabet has Han characters (no other text
    is drawn in them, :class:`FontPicker`), the Latin web faces when it has ASCII letters, digits or punctuation
    (text of those alone is drawn in them: a digits model's too)."""
    from crnn.data.lines import is_han

    names = {os.path.basename(p).lower() for p in fonts}
    refused = {os.path.basename(p).lower() for p, e in probe_cache(font_cache_dir()).entries.items()
               if not e.get("value", {}).get("ok", True)}  # what find_fonts probed and refused here
    out = []
    if any(map(is_han, alphabet)):
        out.append(_manifest_count("CJK faces", MANIFEST, faces("train"), names, refused, FETCH_CJK))
    if set(alphabet) & set(string.ascii_letters + string.digits + string.punctuation):
        latin = [f for f in load_latin_manifest() if f.role == "train"]
        out.append(_manifest_count("Latin web faces", LATIN_MANIFEST, latin, names, refused, FETCH_LATIN))
    return out


def _manifest_count(name: str, manifest: str, rows: Sequence, names: set[str], refused: set[str],
                    fetch: str) -> ManifestCount:
    """:func:`manifest_counts` for one manifest's training rows (``Face`` or ``LatinFace``)."""
    missing = [f for f in rows if f.file.lower() not in names]
    never = [f for f in missing if f.file.lower() in refused or _excluded(f.file, "", "")]
    missing = [f for f in missing if f not in never]
    debian = sorted({f.package for f in missing if not f.npm})
    how = ([fetch] if any(f.npm for f in missing) else []) + (["apt-get install " + " ".join(debian)] if debian else [])
    return ManifestCount(name, os.path.join("crnn", "data", os.path.basename(manifest)),
                         len(rows) - len(never) - len(missing), len(rows) - len(never), len(never), " and ".join(how))


def describe_faces(fonts: Sequence[str], alphabet: str, fonts_dir: str | None = None) -> tuple[str, list[str]]:
    """The log line on the faces text is rendered in, and one warning per manifest of :func:`manifest_counts` whose
    training files are not all here (the run trains without them). Fonts from the user's own folder ``fonts_dir``:
    that folder and its count, no warning."""
    files = f"{len(fonts):,} font file{'' if len(fonts) == 1 else 's'}"
    if fonts_dir is not None:
        return f"faces: {files} from {fonts_dir}", []
    counts = manifest_counts(fonts, alphabet)
    line = (f"faces: {files} from the system font folders and the web-font cache ({font_cache_dir()})" + "".join(
                f"; {c.name}: {c.found} of the {c.listed} training files of {c.manifest}"
                + (f" ({c.refused} more refused by the generator)" if c.refused else "") for c in counts))
    warnings = [f"faces: {'none' if c.found == 0 else c.listed - c.found} of the {c.listed} training files of "
                f"{c.manifest} ({c.name}) {'is' if c.found == 0 else 'are not'} here, so the text is drawn without "
                f"them; to train as the recipe says, fetch them: {c.fetch}" for c in counts if c.found < c.listed]
    return line, warnings


def faces_stamp(fonts_dir: str | None = None, split: str = "train") -> str:
    """One line naming the faces :func:`find_fonts` gives (``faces none`` when none): the files per source (the
    system font folders, the web-font cache and its Latin ``latin/`` folder, or ``fonts_dir``) and a short hash of
    their sorted file names. Two runs with the same line drew from the same faces."""
    try:
        fonts = find_fonts(fonts_dir, split)
    except NoFontsError:
        return "faces none"
    cache = os.path.realpath(font_cache_dir())
    sources = Counter(_font_source(p, cache, fonts_dir) for p in fonts)
    digest = hashlib.sha256("\n".join(sorted(os.path.basename(p) for p in fonts)).encode("utf-8")).hexdigest()[:16]
    return (f"faces {len(fonts)} files ({', '.join(f'{k} {n}' for k, n in sorted(sources.items()))}), "
            f"names {digest}")


def _font_source(path: str, cache: str, fonts_dir: str | None) -> str:
    """Where a font file of :func:`find_fonts` comes from (``cache``: the real path of the web-font cache)."""
    if fonts_dir is not None:
        return "folder"
    if path.startswith(os.path.join(cache, SUBFOLDER, "")):
        return "web-latin"
    return "web" if path.startswith(os.path.join(cache, "")) else "system"


@functools.lru_cache(maxsize=4096)
def load_font(path: str, size: int) -> ImageFont.FreeTypeFont:
    """A FreeType font at a pixel size (cached per process; basic layout: fast, with kerning)."""
    return ImageFont.truetype(path, size, layout_engine=ImageFont.Layout.BASIC)


class FontPicker:
    """Draws fonts that can render a given text, balanced across font folders and families.

    Folders roughly correspond to font packages: each folder gets a weight of
    sqrt(number of files in it), so a 400-font collection does not drown the rest, and
    folders of handwriting/script/fancy faces (``RARE_STYLE_RE``) weigh 0.3 of that.
    The Latin web faces (crnn/data/latin_faces.tsv, one family per package) are balanced by family: each family
    weighs what the folders weigh per family they hold (:func:`web_family_weight`), handwriting families 0.3 of it,
    so the hundreds of web families and the system fonts are drawn family for family alike.
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
            groups.setdefault(draw_group(path), []).append(path)
        self.groups = [groups[k] for k in sorted(groups)]
        self.family_weight = web_family_weight(self.groups)
        # per group, keyed (bold?, upright?); an empty choice falls back to the wider one
        self.pools: list[dict[tuple[bool, bool], list[str]]] = []
        for g in self.groups:
            bold = [p for p in g if BOLD_FILE_RE.search(os.path.basename(p))] or g
            self.pools.append({(False, False): g, (False, True): _upright(g),
                               (True, False): bold, (True, True): _upright(bold)})
        self.weights = [self._weight(g) for g in self.groups]

    def _weight(self, group: list[str]) -> float:
        """A group's weight in the draws of ASCII-only text (see the class doc)."""
        web = latin_face(group[0])
        if web is not None:
            return self.family_weight * (RARE_STYLE_WEIGHT if web.category == "handwriting" else 1.0)
        return math.sqrt(len(group)) * (RARE_STYLE_WEIGHT if RARE_STYLE_RE.search(group[0]) else 1.0)

    def shares(self) -> dict[str, float]:
        """The share of ASCII-only draws that goes to the Latin web faces and to the other (system) fonts."""
        web = sum(w for g, w in zip(self.groups, self.weights) if latin_face(g[0]) is not None)
        return {"web": web / sum(self.weights), "system": 1 - web / sum(self.weights)}

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
            probe_cache(font_cache_dir()).save()
        return self._cover

    def _pick_script(self, need: set[str], text: str, rng) -> FontInfo:
        """A font among those that draw every character of ``text`` (beyond ASCII), balanced across packages: each
        package (:func:`face_package`) weighs sqrt(its able files), so Noto's fourteen weights or a package of twenty
        variants of one design do not drown the single-file designs; a Latin web family weighs as in :meth:`pick`."""
        groups: dict[str, list[str]] = {}
        for p, chars in self.coverage().items():
            if need <= chars:
                groups.setdefault(face_package(p), []).append(p)
        if not groups:
            raise ValueError(f"no font can draw all of {text!r}")
        able = [groups[k] for k in sorted(groups)]
        weights = [self.family_weight if latin_face(g[0]) else math.sqrt(len(g)) for g in able]
        group = able[rng.choices(range(len(able)), weights=weights)[0]]
        return font_info(group[rng.randrange(len(group))])  # type: ignore[return-value]


def draw_group(path: str) -> str:
    """What Latin draws are balanced over: a Latin web face's package (one family), else the file's folder."""
    web = latin_face(path)
    return web.package if web is not None else os.path.dirname(path)


def web_family_weight(groups: Sequence[Sequence[str]]) -> float:
    """The weight of one Latin web family: the system folders' weights, sqrt(files) each, per family they hold
    (1.0 when there is no system font)."""
    system = [g for g in groups if latin_face(g[0]) is None]
    families = {i.family for g in system for i in map(font_info, g) if i is not None}
    return sum(math.sqrt(len(g)) for g in system) / len(families) if families else 1.0


def _upright(paths: list[str]) -> list[str]:
    """The non-italic files of ``paths`` (all of them when every one is italic)."""
    return [p for p in paths if not ITALIC_FILE_RE.search(os.path.basename(p))] or paths


@functools.lru_cache(maxsize=8)
def font_picker(fonts: tuple[str, ...], alphabet: str = "") -> FontPicker:
    """A cached FontPicker for a tuple of font paths (``alphabet``: the characters beyond ASCII it may meet)."""
    return FontPicker(fonts, alphabet)
