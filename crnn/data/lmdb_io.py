"""Read and write the standard text-recognition LMDB layout.

Layout (as used by CRNN, ASTER, PARSeq and most STR benchmarks): ``b"num-samples"`` -> ASCII
decimal count; for ``i`` in ``1..count``: ``b"image-%09d"`` -> encoded image file bytes
(PNG/JPEG as-is) and ``b"label-%09d"`` -> UTF-8 label. A writer may add keys of its own beside them (``meta``; crnn's
synthetic sets say what they were rendered as): readers of the layout ignore them.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import socket
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import islice

import lmdb

from crnn.progress import track

log = logging.getLogger(__name__)

NUM_SAMPLES_KEY = b"num-samples"
INITIAL_MAP_SIZE = 1 << 26  # 64 MiB; doubled on demand


def image_key(index: int) -> bytes:
    """Key of the image stored at 1-based ``index``."""
    return b"image-%09d" % index


def label_key(index: int) -> bytes:
    """Key of the label stored at 1-based ``index``."""
    return b"label-%09d" % index


def open_readonly(path: str | os.PathLike) -> lmdb.Environment:
    """Open an LMDB directory for reading, safe for many reader processes (no lock, no readahead)."""
    return lmdb.open(os.fspath(path), readonly=True, lock=False, readahead=False, meminit=False,
                     max_readers=1, subdir=True)


class ReaderRegistry:
    """Read-only environments of the current process, one per LMDB directory.

    LMDB (and py-lmdb, which enforces it) forbids opening one environment twice in a process,
    and a forked child inherits its parent's handles. So every dataset reading the same path
    shares one handle, and after a fork the child closes the inherited handles (that only
    unmaps them in the child) before opening its own.
    """

    def __init__(self) -> None:
        self._pid = os.getpid()
        self._envs: dict[str, lmdb.Environment] = {}

    def get(self, path: str | os.PathLike) -> lmdb.Environment:
        """This process's environment for ``path``, opened on first use."""
        self._drop_inherited()
        key = os.path.realpath(path)
        env = self._envs.get(key)
        if env is None:
            env = self._envs[key] = open_readonly(key)
        return env

    @contextmanager
    def borrow(self, path: str | os.PathLike) -> Iterator[lmdb.Environment]:
        """The shared environment if this process has one, else a temporary one closed afterwards."""
        self._drop_inherited()
        env = self._envs.get(os.path.realpath(path))
        if env is not None:
            yield env
            return
        env = open_readonly(path)
        try:
            yield env
        finally:
            env.close()

    def _drop_inherited(self) -> None:
        """After a fork, close the parent's handles in this process and start empty."""
        if self._pid == os.getpid():
            return
        for env in self._envs.values():
            try:
                env.close()
            except lmdb.Error:
                pass
        self._envs, self._pid = {}, os.getpid()


# Process-wide on purpose (see ReaderRegistry): a per-dataset handle cannot be made safe.
READERS = ReaderRegistry()


def read_key(path: str | os.PathLike, key: bytes) -> bytes | None:
    """The value of ``key`` in the LMDB at ``path`` (None where it has no such key)."""
    with READERS.borrow(path) as env, env.begin(buffers=False) as txn:
        return txn.get(key)


def write_lmdb(samples: Iterable[tuple[bytes, str]], out: str | os.PathLike, *, commit_every: int = 1000,
               progress: bool = False, overwrite: bool = False, total: int | None = None,
               map_size: int = INITIAL_MAP_SIZE, meta: dict[bytes, bytes] | None = None) -> int:
    """Write ``(image_bytes, label)`` pairs to a new LMDB at ``out`` atomically; return the sample count.
    ``meta``: more keys, written with ``num-samples`` (none may be a sample's key or ``num-samples``).

    Data goes to ``out + ".tmp-<host>-<pid>"`` and is renamed to ``out`` only when complete; on any
    error the temporary directory is removed. An existing ``out`` is refused unless ``overwrite``.
    The host name keeps the leftover cleanup of a shared folder to this machine's own dead writers.
    """
    out = os.fspath(out).rstrip(os.sep) or os.sep
    if commit_every < 1:
        raise ValueError(f"commit_every must be >= 1, got {commit_every}")
    if os.path.lexists(out) and not overwrite:
        raise FileExistsError(f"{out} already exists; choose another output path or pass overwrite=True (--overwrite)")
    meta = dict(meta or {})
    clash = [k for k in meta if k == NUM_SAMPLES_KEY or re.fullmatch(rb"(image|label)-\d{9}", k)]
    if clash:
        raise ValueError(f"meta keys may not be the layout's own: {clash[0]!r}")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = f"{out}.tmp-{_host()}-{os.getpid()}"
    if os.path.lexists(tmp):
        _remove(tmp)
    remove_abandoned_writes(out)
    try:
        count = _write_all(samples, tmp, commit_every, progress, total, map_size, meta)
        _move_into_place(tmp, out)
    except BaseException:
        _remove(tmp)
        raise
    log.info("wrote %d samples to %s", count, out)
    return count


def _write_all(samples: Iterable[tuple[bytes, str]], path: str, commit_every: int, progress: bool,
               total: int | None, map_size: int, meta: dict[bytes, bytes]) -> int:
    """Write every sample in chunks of ``commit_every`` plus ``num-samples`` and ``meta``; return the count."""
    env = lmdb.open(path, map_size=map_size, subdir=True, meminit=False)
    try:
        it: Iterator = iter(track(samples, total, desc="lmdb", unit="img", enabled=progress))
        count = 0
        while True:
            chunk = _encode_chunk(islice(it, commit_every), start=count + 1)
            count += len(chunk) // 2
            if not chunk:
                break
            _put_chunk(env, chunk)
        _put_chunk(env, [(NUM_SAMPLES_KEY, str(count).encode("ascii")), *meta.items()])
        env.sync()
    finally:
        env.close()
    return count


def _encode_chunk(samples: Iterable[tuple[bytes, str]], start: int) -> list[tuple[bytes, bytes]]:
    """Turn samples into key/value pairs numbered from ``start``; reject wrong types by index."""
    pairs: list[tuple[bytes, bytes]] = []
    for i, sample in enumerate(samples, start):
        try:
            image, label = sample
        except (TypeError, ValueError):
            raise TypeError(f"sample {i}: expected an (image_bytes, label) pair, got {type(sample).__name__}") from None
        if not isinstance(image, (bytes, bytearray, memoryview)):
            raise TypeError(f"sample {i}: image must be encoded bytes, got {type(image).__name__}")
        if not isinstance(label, str):
            raise TypeError(f"sample {i}: label must be str, got {type(label).__name__}")
        pairs.append((image_key(i), bytes(image)))
        pairs.append((label_key(i), label.encode("utf-8")))
    return pairs


def _put_chunk(env: lmdb.Environment, pairs: list[tuple[bytes, bytes]]) -> None:
    """Write ``pairs`` in one transaction, doubling the map size and retrying when it is full."""
    while True:
        try:
            with env.begin(write=True) as txn:
                for key, value in pairs:
                    txn.put(key, value)
            return
        except lmdb.MapFullError:
            new_size = env.info()["map_size"] * 2
            log.debug("lmdb map full; growing to %d bytes", new_size)
            env.set_mapsize(new_size)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def _host() -> str:
    """This machine's name as it appears in temporary folder names."""
    return socket.gethostname().replace(os.sep, "_") or "localhost"


def remove_abandoned_writes(out: str) -> list[str]:
    """Delete ``out.tmp-<host>-<pid>`` / ``out.old-<host>-<pid>`` left by a writer of this machine that was killed
    (its pid no longer runs here). Another machine's folders are never touched: its pids mean nothing here.
    (``out.tmp-<pid>`` without a host, from older versions, is treated as this machine's.)"""
    parent, name = os.path.split(os.path.abspath(out))
    removed = []
    for entry in sorted(os.listdir(parent)) if os.path.isdir(parent) else []:
        m = re.fullmatch(re.escape(name) + r"\.(?:tmp|old)-(?:(?P<host>.+)-)?(?P<pid>\d+)", entry)
        if not m or m.group("host") not in (None, _host()):
            continue
        pid = int(m.group("pid"))
        if pid != os.getpid() and not _pid_alive(pid):
            _remove(os.path.join(parent, entry))
            removed.append(entry)
            log.warning("removed %s, left behind by an interrupted writer", os.path.join(parent, entry))
    return removed


def _move_into_place(tmp: str, out: str) -> None:
    """Rename ``tmp`` to ``out``; an existing ``out`` is moved aside first and removed after."""
    if not os.path.lexists(out):
        os.replace(tmp, out)
        return
    old = f"{out}.old-{_host()}-{os.getpid()}"
    os.replace(out, old)
    try:
        os.replace(tmp, out)
    except BaseException:
        os.replace(old, out)
        raise
    _remove(old)


def _remove(path: str) -> None:
    """Remove a file or directory tree if present."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.remove(path)
