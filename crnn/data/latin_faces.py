"""The Latin web faces: hundreds of Fontsource families (npm) for English words and the Latin inside Chinese lines.

``crnn/data/latin_faces.tsv`` lists every Latin face file the generator may draw beside the system fonts, one row each
(written by ``scripts/latin_faces.py --write``): its role (``train``, or ``heldout``: a whole designer or foundry kept
out of training, for a synthetic check in faces no training face shares a designer with), its category (serif,
sans-serif, display, handwriting, monospace), distributor, npm package and version, the file, the family, the variant
(``400-normal``, ``700-normal``, ``400-italic``), the designer or foundry and the licence as the package's metadata
gives them (its copyright holder), the parent design where the family's Latin comes from another one (recorded by
hand; empty otherwise), and ``source``: the woff2 file of the package's ``latin`` subset that the file is made from.

:func:`fetch_latin_faces` downloads each package's tarball from the npm registry (a few at a time), converts the
wanted woff2 files to TrueType with fontTools into ``latin/`` of the font cache (:func:`crnn.data.faces.font_cache_dir`)
and keeps nothing else; files already there are skipped, so an interrupted fetch resumes. The roles reach the
generator through :func:`crnn.data.faces.face_role` (matched by file name), like the CJK faces'.
"""
from __future__ import annotations

import csv
import functools
import io
import os
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass

from crnn.data.font_cache import FaceError, font_cache_dir

LATIN_MANIFEST = os.path.join(os.path.dirname(__file__), "latin_faces.tsv")
LATIN_COLUMNS = ("role", "category", "distributor", "package", "version", "file", "family", "variant", "designer",
                 "parent", "licence", "source")
LATIN_ROLES = ("train", "heldout")
CATEGORIES = ("serif", "sans-serif", "display", "handwriting", "monospace")
VARIANTS = ("400-normal", "700-normal", "400-italic")  # regular, bold, italic: what each family contributes
SUBFOLDER = "latin"
DEFAULT_REGISTRY = "https://registry.npmjs.org/"


@dataclass(frozen=True)
class LatinFace:
    """One row of the Latin manifest (see the module doc)."""

    role: str
    category: str
    distributor: str
    package: str
    version: str
    file: str
    family: str
    variant: str
    designer: str
    parent: str
    licence: str
    source: str

    @property
    def npm(self) -> bool:
        """Always fetched from the npm registry (the CJK manifest's ``Face`` has the same property)."""
        return True


@functools.lru_cache(maxsize=2)
def load_latin_manifest(path: str = LATIN_MANIFEST) -> tuple[LatinFace, ...]:
    """Every row of the Latin face manifest (``#`` lines are comments); none when the file is absent."""
    if not os.path.isfile(path):
        return ()
    with open(path, encoding="utf-8") as f:
        rows = [ln for ln in f if ln.strip() and not ln.startswith("#")]
    out = []
    for i, row in enumerate(csv.reader(rows, delimiter="\t", quoting=csv.QUOTE_NONE)):
        if i == 0 and tuple(row) == LATIN_COLUMNS:
            continue
        if len(row) != len(LATIN_COLUMNS) or row[0] not in LATIN_ROLES or row[1] not in CATEGORIES:
            raise ValueError(f"{path}: bad row {row!r}: want {len(LATIN_COLUMNS)} tab-separated fields, role one of "
                             f"{', '.join(LATIN_ROLES)}, category one of {', '.join(CATEGORIES)}")
        out.append(LatinFace(*row))
    return tuple(out)


def latin_faces(role: str | None = None) -> list[LatinFace]:
    """The Latin manifest's faces, all or those of one role."""
    return [f for f in load_latin_manifest() if role in (None, f.role)]


def latin_face(path: str) -> LatinFace | None:
    """The manifest row of a font file (matched by file name), or None when it is no Latin web face."""
    return _by_file().get(os.path.basename(path).lower())


@functools.lru_cache(maxsize=1)
def _by_file() -> dict[str, LatinFace]:
    """The manifest's faces by lower-case file name."""
    return {f.file.lower(): f for f in load_latin_manifest()}


def latin_dir(cache: str | None = None) -> str:
    """Where the Latin faces live: ``latin/`` of the font cache."""
    return os.path.join(cache or font_cache_dir(), SUBFOLDER)


def face_file(package: str, variant: str) -> str:
    """The cache file name of one variant of a Fontsource package: ``<id>-latin-<weight>-<style>.ttf``."""
    return f"{package.rsplit('/', 1)[-1]}-latin-{variant}.ttf"


def face_source(package: str, variant: str) -> str:
    """The woff2 file of a Fontsource package (inside its tarball, below ``package/``) that makes a variant."""
    return f"files/{package.rsplit('/', 1)[-1]}-latin-{variant}.woff2"


def tarball_url(package: str, version: str, registry: str | None = None) -> str:
    """The registry address of a package's tarball (``$npm_config_registry``, else the public registry)."""
    base = (registry or os.environ.get("npm_config_registry") or DEFAULT_REGISTRY).rstrip("/")
    return f"{base}/{package}/-/{package.rsplit('/', 1)[-1]}-{version}.tgz"


def download(url: str, tries: int = 3, timeout: float = 120) -> bytes:
    """The bytes at ``url``; retried with a short pause on network errors, FaceError with the reason at the end."""
    for attempt in range(tries):
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r:
                return r.read()
        except urllib.error.HTTPError as e:
            if e.code < 500 or attempt == tries - 1:
                raise FaceError(f"{url}: HTTP {e.code} {e.reason}") from e
        except (urllib.error.URLError, OSError) as e:
            if attempt == tries - 1:
                raise FaceError(f"{url}: {getattr(e, 'reason', e)}") from e
        time.sleep(1 + 2 * attempt)
    raise FaceError(f"{url}: no answer")  # not reached


def tar_members(data: bytes, names: Iterable[str]) -> dict[str, bytes]:
    """The files ``names`` (paths below ``package/``) of an npm tarball given as bytes; those absent are left out."""
    want = {f"package/{n}" for n in names}
    out = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for m in tar:
                if m.isfile() and m.name in want:
                    out[m.name.removeprefix("package/")] = tar.extractfile(m).read()  # type: ignore[union-attr]
    except (tarfile.TarError, EOFError, OSError) as e:
        raise FaceError(f"not a readable npm tarball: {type(e).__name__}: {e}") from e
    return out


STYLE_NAMES = {"400-normal": "Regular", "700-normal": "Bold", "400-italic": "Italic", "700-italic": "Bold Italic"}


def webfont_to_ttf(data: bytes, out: str, family: str | None = None, variant: str | None = None) -> int:
    """Write a woff2/woff/ttf font given as bytes as a plain TrueType (or CFF) file at ``out``, atomically; returns
    how many characters it maps. ``family`` and ``variant`` (``400-normal`` ...): the names it is given (see
    :func:`set_names`)."""
    from fontTools.ttLib import TTFont

    font = TTFont(io.BytesIO(data), recalcTimestamp=False)  # the same bytes from the same woff2
    font.flavor = None
    if family and variant:
        set_names(font, family, STYLE_NAMES.get(variant, variant))
    tmp = f"{out}.{os.getpid()}.tmp"  # one name per process: two fetches at once (two shells) each write their own
    font.save(tmp)
    os.replace(tmp, out)
    return len(font.getBestCmap() or {})


def set_names(font, family: str, style: str) -> None:
    """Name a font ``family`` / ``style``. Google's static instances of a variable design keep the names of its
    default instance (the 400 and 700 files of Montserrat both say "Montserrat Thin"), which would make them a
    hairline face, and one face twice, to the generator."""
    name = font["name"]
    for rec in [r for r in name.names if r.nameID in (16, 17, 21, 22)]:
        name.removeNames(nameID=rec.nameID)
    ps = f"{family}-{style}".replace(" ", "")
    for name_id, text in ((1, family), (2, style), (3, ps), (4, f"{family} {style}"), (6, ps)):
        name.setName(text, name_id, 3, 1, 0x409)
        if name.getName(name_id, 1, 0, 0) is not None:
            name.setName(text, name_id, 1, 0, 0)


def fetch_package(package: str, version: str, faces: list[LatinFace], cache: str | None = None) -> list[str]:
    """The files of ``faces`` (all of one package), downloaded and converted unless present; their paths."""
    folder = latin_dir(cache)
    paths = [os.path.join(folder, f.file) for f in faces]
    todo = [(f, p) for f, p in zip(faces, paths) if not os.path.isfile(p)]
    if not todo:
        return paths
    os.makedirs(folder, exist_ok=True)
    files = tar_members(download(tarball_url(package, version)), {f.source for f, _ in todo})
    missing = sorted({f.source for f, _ in todo} - set(files))
    if missing:
        raise FaceError(f"{package}@{version}: no {', '.join(missing)} in its tarball")
    for face, path in todo:
        try:
            webfont_to_ttf(files[face.source], path, face.family, face.variant)
        except Exception as e:  # fontTools raises many kinds on a font it cannot read
            raise FaceError(f"{package}@{version}: cannot convert {face.source}: {type(e).__name__}: {e}") from e
    return paths


def prune(keep: Iterable[str], cache: str | None = None) -> list[str]:
    """Remove the font files of the Latin folder that ``keep`` (file names) does not name - those of an older
    manifest, which the generator would otherwise draw - and leftover temporary files; the names removed."""
    folder, keep = latin_dir(cache), {k.lower() for k in keep}
    gone = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.endswith(".tmp") or (name.lower().endswith((".ttf", ".otf")) and name.lower() not in keep):
            os.remove(os.path.join(folder, name))
            gone.append(name)
    return gone


def by_package(wanted: Iterable[LatinFace]) -> dict[tuple[str, str], list[LatinFace]]:
    """Faces grouped by (package, version), in the order first seen: one download each."""
    out: dict[tuple[str, str], list[LatinFace]] = {}
    for f in wanted:
        out.setdefault((f.package, f.version), []).append(f)
    return out


def fetch_latin_faces(wanted: Iterable[LatinFace], cache: str | None = None, jobs: int = 4, every: int = 50,
                      say: Callable[[str], None] = print) -> tuple[list[str], list[str]]:
    """Fetch every face of ``wanted`` missing from the cache, ``jobs`` packages at a time: (paths fetched or found,
    one-line problems, one per package that failed). Says one line per ``every`` faces, one per failure, and the
    count at the end."""
    packages = by_package(wanted)
    total = sum(len(v) for v in packages.values())
    done: list[str] = []
    problems: list[str] = []
    t0, seen, reported = time.time(), 0, 0
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(fetch_package, pkg, ver, fs, cache): (pkg, ver, fs)
                   for (pkg, ver), fs in packages.items()}
        for fut in as_completed(futures):
            pkg, ver, fs = futures[fut]
            try:
                done += fut.result()
            except (FaceError, OSError) as e:
                problems.append(f"{pkg}@{ver} ({len(fs)} file(s)): {' '.join(str(e).split())}")
                say(f"latin faces: FAILED {problems[-1]}")
            seen += len(fs)
            if seen - reported >= every:
                reported = seen
                say(f"latin faces: {seen}/{total} files ({len(problems)} packages failed, {time.time() - t0:.0f} s)")
    say(f"latin faces: {len(done)} of {total} file(s) in {latin_dir(cache)} ({len(packages)} packages, "
        f"{len(problems)} failed, {time.time() - t0:.0f} s)")
    return sorted(done), problems
