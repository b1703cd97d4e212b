"""The filtered label index of an LMDB, built once and cached on disk for every rank, worker and restart.

The index is the sorted array of 1-based sample ids whose label survives the charset and length filter. Scanning
every label costs seconds per million samples, so the result is kept as ``crnn-index-<key>.npy`` plus a
``crnn-index-<key>.json`` that records what it was built from:

* ``<key>`` hashes the filter (charset, ``max_label_length``, the code of the filter itself and a format version);
* the json holds the LMDB's identity (size and mtime of ``data.mdb``): a changed LMDB makes the cache stale and it is
  rebuilt in place.

Caches live next to the LMDB when that folder is writable, else under ``$CRNN_CACHE_DIR`` (default
``~/.cache/crnn``)``/label-index/``. One process per machine builds (an exclusive ``fcntl`` lock on a ``.lock`` file;
the others wait and then read its result); files are written to temporaries and renamed, the json last, so a reader
never sees half a cache even where the lock does not reach across machines. The array is opened memory-mapped:
every rank and DataLoader worker on a machine shares the same pages.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

try:
    import fcntl
except ImportError:  # Windows: no lock; the atomic renames still keep every reader safe (a few may build)
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

INDEX_VERSION = 1  # bump when the meaning of a kept index changes
CACHE_ENV = "CRNN_CACHE_DIR"


@dataclass
class LabelIndex:
    """Kept 1-based sample ids of one LMDB and what the filter dropped."""

    kept: np.ndarray  # (K,) int32/int64, sorted
    num_stored: int
    dropped: dict[str, int] = field(default_factory=dict)
    how: str = "built"  # built | reused | uncached


def code_fingerprint(*functions: Callable) -> str:
    """A hash of the byte code and constants of ``functions``: a changed filter invalidates every cache."""
    h = hashlib.sha256()
    for fn in functions:
        code = fn.__code__
        h.update(code.co_code)
        h.update(repr([c for c in code.co_consts if not hasattr(c, "co_code")]).encode())
        h.update(repr(code.co_names).encode())
    return h.hexdigest()[:16]


def lmdb_identity(lmdb_dir: str) -> dict:
    """What makes a cache stale: the size and modification time of ``data.mdb``."""
    st = os.stat(os.path.join(lmdb_dir, "data.mdb"))
    return {"data_mdb_size": st.st_size, "data_mdb_mtime_ns": st.st_mtime_ns}


def cache_dirs(lmdb_dir: str) -> list[Path]:
    """Where a cache may live, in order: next to the LMDB, then the per-user cache folder."""
    real = os.path.realpath(lmdb_dir)
    base = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "crnn")
    return [Path(real), base / "label-index" / hashlib.sha256(real.encode()).hexdigest()[:16]]


def load_or_build(lmdb_dir: str, fingerprint: dict, build: Callable[[], LabelIndex]) -> LabelIndex:
    """The cached index for ``(lmdb_dir, fingerprint)``; built (by one process per machine) when missing or stale."""
    key = hashlib.sha256(json.dumps({"v": INDEX_VERSION, **fingerprint}, sort_keys=True).encode()).hexdigest()[:16]
    ident = lmdb_identity(lmdb_dir)
    dirs = cache_dirs(lmdb_dir)
    for d in dirs:
        found = _read(d / f"crnn-index-{key}", ident, quiet=True)
        if found is not None:
            return found
    target = next((d for d in dirs if _writable(d)), None)
    if target is None:
        log.warning("%s: no writable place for the label index (the LMDB folder and %s are read-only); "
                    "scanning the labels in memory (set %s to a writable folder)", lmdb_dir, dirs[1], CACHE_ENV)
        index = build()
        index.how = "uncached"
        return index
    stem = target / f"crnn-index-{key}"
    with _exclusive(stem.with_suffix(".lock"), lmdb_dir):
        found = _read(stem, ident)  # built by another process while this one waited
        if found is not None:
            return found
        t0 = time.perf_counter()
        index = build()
        _write(stem, index, ident, lmdb_dir)
    log.info("%s: label index built in %.1f s (%d of %d kept), cached as %s.npy", lmdb_dir,
             time.perf_counter() - t0, len(index.kept), index.num_stored, stem)
    return index


def _writable(d: Path) -> bool:
    """Whether ``d`` exists (or can be created) and accepts new files."""
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(d, os.W_OK | os.X_OK)


@contextlib.contextmanager
def _exclusive(lock_path: Path, what: str) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path``; say so once when another process holds it."""
    if fcntl is None:
        yield
        return
    with open(lock_path, "a+b") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("%s: waiting for another process that is building its label index", what)
            fcntl.flock(f, fcntl.LOCK_EX)
        except OSError:  # a filesystem without locks (some NFS set-ups): the atomic renames still keep readers safe
            pass
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(f, fcntl.LOCK_UN)


def _read(stem: Path, ident: dict, quiet: bool = False) -> LabelIndex | None:
    """The cache at ``stem`` when it is complete and was built from this very LMDB (else None, stale logged)."""
    meta_path, npy = stem.with_suffix(".json"), stem.with_suffix(".npy")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("lmdb") != ident:
            if not quiet:
                log.info("%s is stale (data.mdb changed since it was built); rebuilding it", meta_path)
            return None
        if npy.stat().st_size != meta["npy_bytes"]:
            return None
        kept = np.load(npy, mmap_mode="r")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    log.info("%s: label index reused from %s (%d of %d kept)", meta["source"], npy, len(kept), meta["num_stored"])
    return LabelIndex(kept, meta["num_stored"], meta["dropped"], how="reused")


def _write(stem: Path, index: LabelIndex, ident: dict, source: str) -> None:
    """Write ``.npy`` then ``.json`` (the json is the commit mark), each through a temporary and a rename."""
    host = os.uname().nodename
    npy, meta_path = stem.with_suffix(".npy"), stem.with_suffix(".json")
    tmp_npy = npy.with_name(f"{npy.name}.{host}.{os.getpid()}.tmp")
    tmp_meta = meta_path.with_name(f"{meta_path.name}.{host}.{os.getpid()}.tmp")
    try:
        with open(tmp_npy, "wb") as f:
            np.save(f, np.ascontiguousarray(index.kept))
        os.replace(tmp_npy, npy)
        meta = {"source": source, "lmdb": ident, "num_stored": index.num_stored, "dropped": index.dropped,
                "npy_bytes": npy.stat().st_size, "version": INDEX_VERSION}
        tmp_meta.write_text(json.dumps(meta), encoding="utf-8")
        os.replace(tmp_meta, meta_path)
    except OSError as e:
        log.warning("could not write the label index cache %s (%s); it is rebuilt next time", npy, e.strerror or e)
    finally:
        for t in (tmp_npy, tmp_meta):
            t.unlink(missing_ok=True)
