"""The CJK faces and where each comes from: which ones train, which are held out, and the web-font packages.

``crnn/data/cjk_faces.tsv`` lists every CJK face file the Chinese line model may meet, one row each: its role
(``train``; ``heldout``: the first yardstick's faces, kept out of training; ``dev`` / ``final``: the honest
yardstick's faces, held out by design - no designer, foundry or parent design shared with a training face), its
style, distributor and package (Debian or npm) with version, the file, the family, the designer or foundry and the
parent design. Training never draws a face whose role is not ``train`` (:func:`face_role`), matched by file name.

Faces from the npm registry come as web fonts: a tarball whose ``woff2`` slices each hold a part of the font's
characters (by Unicode range). :func:`fetch_webfont` packs the package with ``npm pack``, merges the slices of one
style into one TrueType file with fontTools and keeps it in the font cache (:func:`font_cache_dir`), which
:func:`crnn.data.fonts.find_fonts` searches beside the system font folders.
"""
from __future__ import annotations

import csv
import fnmatch
import functools
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from crnn.data.font_cache import FaceError, font_cache_dir  # noqa: F401  (both are part of this module's API)

MANIFEST = os.path.join(os.path.dirname(__file__), "cjk_faces.tsv")
ROLES = ("train", "heldout", "dev", "final")
DROPPED_TABLES = ("GSUB", "GPOS", "GDEF", "BASE", "JSTF", "vhea", "vmtx", "VORG", "DSIG")
COLUMNS = ("role", "style", "distributor", "package", "version", "file", "family", "designer", "parent", "source")


@dataclass(frozen=True)
class Face:
    """One row of the manifest (see the module doc); ``source``: for npm faces, the glob of the package's woff2
    slices that make this file (inside the tarball, below ``package/``); empty for Debian faces."""

    role: str
    style: str
    distributor: str
    package: str
    version: str
    file: str
    family: str
    designer: str
    parent: str
    source: str = ""

    @property
    def npm(self) -> bool:
        """Fetched from the npm registry (its slices named by ``source``), not installed by a system package."""
        return bool(self.source)


@functools.lru_cache(maxsize=1)
def load_manifest(path: str = MANIFEST) -> tuple[Face, ...]:
    """Every row of the face manifest (``#`` lines are comments)."""
    with open(path, encoding="utf-8") as f:
        rows = [ln for ln in f if ln.strip() and not ln.startswith("#")]
    out = []
    for i, row in enumerate(csv.reader(rows, delimiter="\t")):
        if i == 0 and tuple(row[:len(COLUMNS)]) == COLUMNS:
            continue
        if len(row) < len(COLUMNS) - 1 or row[0] not in ROLES:
            raise ValueError(f"{path}: bad row {row!r}: want {len(COLUMNS) - 1}-{len(COLUMNS)} tab-separated fields, "
                             f"role one of {', '.join(ROLES)}")
        out.append(Face(*row[:len(COLUMNS)]))
    return tuple(out)


def faces(role: str | None = None) -> list[Face]:
    """The manifest's faces, all or those of one role."""
    return [f for f in load_manifest() if role in (None, f.role)]


def face_role(path: str) -> str:
    """The manifest role of a font file (matched by file name, in this manifest or the Latin one,
    :mod:`crnn.data.latin_faces`); ``train`` for any file they do not list."""
    face = _by_file().get(os.path.basename(path).lower())
    return face.role if face else "train"


def face_package(path: str) -> str:
    """The package a font file came in (the manifests', matched by file name), else its folder."""
    face = _by_file().get(os.path.basename(path).lower())
    return face.package if face else os.path.dirname(path)


@functools.lru_cache(maxsize=1)
def _by_file() -> dict:
    """The faces of both manifests (CJK and Latin) by lower-case file name."""
    from crnn.data.latin_faces import load_latin_manifest  # imports this module: loaded on first use

    return {f.file.lower(): f for f in (*load_manifest(), *load_latin_manifest())}


def merge_slices(paths: list[str], out: str) -> int:
    """Merge woff2/woff/ttf/otf slices of one font into one TrueType file at ``out`` (atomically); returns how many
    characters it maps. Slices with PostScript outlines (CFF, often CID-keyed, which the merger cannot join) are
    turned into TrueType outlines first."""
    from fontTools.merge import Merger, Options

    part = f"{out}.{os.getpid()}.tmp"  # one name per process: two fetches at once each write their own
    with tempfile.TemporaryDirectory() as tmp:
        paths = [_truetype_slice(p, os.path.join(tmp, f"{i}.ttf")) for i, p in enumerate(sorted(paths))]
        # layout tables (shaping) are left out: the generator draws with basic layout, and slices made by different
        # subsetters carry empty script lists the merger cannot join
        font = Merger(options=Options(drop_tables=list(DROPPED_TABLES))).merge(paths)
        font.flavor = None
        font.save(part)
    os.replace(part, out)
    return len(font.getBestCmap())


def _truetype_slice(path: str, tmp: str) -> str:
    """``path`` itself when it has TrueType outlines; else a copy at ``tmp`` whose CFF outlines are turned into
    quadratic TrueType ones (fontTools' otf2ttf recipe: Cu2QuPen into TTGlyphPen, at most 1 unit off)."""
    from fontTools.pens.cu2quPen import Cu2QuPen
    from fontTools.pens.ttGlyphPen import TTGlyphPen
    from fontTools.ttLib import TTFont, newTable

    font = TTFont(path)
    if "CFF " not in font:
        return path
    order, glyphs = font.getGlyphOrder(), font.getGlyphSet()
    glyf = newTable("glyf")
    glyf.glyphOrder, glyf.glyphs = order, {}
    for name in order:
        pen = TTGlyphPen(None)
        glyphs[name].draw(Cu2QuPen(pen, 1.0, reverse_direction=True))
        glyf.glyphs[name] = pen.glyph()
    font["glyf"], font["loca"] = glyf, newTable("loca")
    for tag in ("CFF ", "VORG"):
        if tag in font:
            del font[tag]
    glyf.compile(font)
    for name in order:  # left side bearings follow the new outlines' xMin
        width, _ = font["hmtx"][name]
        font["hmtx"][name] = (width, getattr(glyf[name], "xMin", 0))
    maxp = font["maxp"] = newTable("maxp")
    maxp.tableVersion, maxp.maxZones, maxp.maxComponentElements = 0x00010000, 1, 0
    for field in ("maxTwilightPoints", "maxStorage", "maxFunctionDefs", "maxInstructionDefs", "maxStackElements",
                  "maxSizeOfInstructions"):
        setattr(maxp, field, 0)
    font["post"].formatType, font["post"].extraNames, font["post"].mapping = 2.0, [], {}
    font.sfntVersion, font.flavor = "\000\001\000\000", None
    font.save(tmp)
    return tmp


def fetch_webfont(face: Face, cache: str | None = None, tarballs: str | None = None) -> str:
    """The merged TrueType file of an npm face, fetched and merged on first use. ``tarballs``: a folder holding
    ``npm pack`` outputs already (no npm call then). Raises FaceError with the reason and the fix."""
    if not face.npm:
        raise FaceError(f"{face.file}: not an npm face ({face.distributor})")
    cache = cache or font_cache_dir()
    out = os.path.join(cache, face.file)
    if os.path.isfile(out):
        return out
    os.makedirs(cache, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tgz = _tarball(face, tarballs, tmp)
        with tarfile.open(tgz) as tar:
            members = [m for m in tar.getmembers()
                       if m.isfile() and fnmatch.fnmatch(m.name.removeprefix("package/"), face.source)]
            if not members:
                raise FaceError(f"{face.package}@{face.version}: no file matches {face.source!r}")
            for m in members:
                m.name = f"slice{len(os.listdir(tmp))}_{os.path.basename(m.name)}"
                tar.extract(m, tmp, filter="data")
        slices = [os.path.join(tmp, n) for n in os.listdir(tmp) if n.startswith("slice")]
        try:
            merge_slices(slices, out)
        except Exception as e:  # fontTools raises many kinds on slices it cannot join
            raise FaceError(f"{face.package}@{face.version}: cannot merge its slices: {type(e).__name__}: {e}") from e
    return out


def _tarball(face: Face, tarballs: str | None, tmp: str) -> str:
    """The package's tarball: from ``tarballs`` when it is there, else ``npm pack`` into ``tmp``."""
    name = face.package.lstrip("@").replace("/", "-") + f"-{face.version}.tgz"
    if tarballs and os.path.isfile(os.path.join(tarballs, name)):
        return os.path.join(tarballs, name)
    npm = shutil.which("npm")
    if npm is None:
        raise FaceError(f"{face.family}: npm is missing (apt-get install npm), needed to fetch {face.package}")
    spec = f"{face.package}@{face.version}"
    run = subprocess.run([npm, "pack", spec, "--pack-destination", tmp, "--silent"],
                         capture_output=True, text=True, timeout=600)
    path = os.path.join(tmp, name)
    if run.returncode != 0 or not os.path.isfile(path):
        why = " ".join((run.stderr or run.stdout).split())[-300:]
        raise FaceError(f"npm pack {spec} failed: {why}")
    if tarballs:
        os.makedirs(tarballs, exist_ok=True)
        shutil.copy(path, os.path.join(tarballs, name))
    return path


def fetch_faces(wanted: Iterable[Face], cache: str | None = None, tarballs: str | None = None,
                say: Callable[[str], None] = print) -> tuple[list[str], list[str]]:
    """Fetch every npm face of ``wanted``: (paths fetched or found, one-line problems)."""
    done, problems = [], []
    wanted = [f for f in wanted if f.npm]
    for i, face in enumerate(wanted, 1):
        try:
            done.append(fetch_webfont(face, cache, tarballs))
            say(f"[{i}/{len(wanted)}] {face.family} ({face.role}): {done[-1]}")
        except (FaceError, OSError, subprocess.SubprocessError) as e:
            problems.append(f"{face.family}: {' '.join(str(e).split())}")
            say(f"[{i}/{len(wanted)}] {face.family}: FAILED: {problems[-1]}")
    return done, problems
