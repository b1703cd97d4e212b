"""Text-recognition datasets: LMDB (one or many) and image folders with a ``gt.txt``.

Every dataset yields ``(image, label)``: ``image`` is the decoded (and transformed) image, or
``None`` when its bytes cannot be decoded; the collate function skips and counts those.
Labels are filtered once, at creation, when a charset is given (see :class:`LabelFilter`).
"""
from __future__ import annotations

import io
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import lmdb
import numpy as np
from PIL import Image
from torch.utils.data import ConcatDataset, Dataset

from crnn.charset import Charset
from crnn.data.label_index import LabelIndex, code_fingerprint, load_or_build
from crnn.data.lmdb_io import NUM_SAMPLES_KEY, READERS, image_key, label_key

log = logging.getLogger(__name__)

Transform = Callable[[Image.Image], Any]
DECODE_ERRORS = (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError)
DROP_REASONS = ("empty", "too_long", "unknown_char")


class DatasetError(ValueError):
    """A dataset path or file is unusable; the message names the path and the fix."""


class DataError(ValueError):
    """A run's data settings cannot be met (:mod:`crnn.data.feed`); the message names the config key and the fix."""


class LabelFilter:
    """Normalise labels with a charset and decide which to keep; counts drops per reason."""

    def __init__(self, charset: Charset | None, max_label_length: int | None) -> None:
        self.charset = charset
        self.max_label_length = max_label_length
        self.dropped: dict[str, int] = dict.fromkeys(DROP_REASONS, 0)
        self.trimmed = {"chars": 0, "samples": 0}  # unknown=drop: characters removed from kept labels

    def __call__(self, label: str) -> str | None:
        """Return the normalised label, or ``None`` (and count why) when it is dropped."""
        norm, reason, lost = self.decide(label)
        if reason is None:
            self.trimmed["chars"] += lost
            self.trimmed["samples"] += lost > 0
            return norm
        self.dropped[reason] += 1
        return None

    def decide(self, label: str) -> tuple[str | None, str | None, int]:
        """(normalised label, drop reason or None, characters the unknown=drop policy removed); counts nothing."""
        if self.charset is None:
            return label, None, 0
        before = self.charset.stats["dropped_chars"]
        norm = self.charset.normalize(label)
        return norm, self.reason(norm), self.charset.stats["dropped_chars"] - before

    def reason(self, norm: str | None) -> str | None:
        """Why a normalised label is dropped (one of DROP_REASONS), or None when it is kept."""
        if self.charset is None:
            return None
        if norm is None:
            return "unknown_char"
        if not norm:
            return "empty"
        if self.max_label_length is not None and len(norm) > self.max_label_length:
            return "too_long"
        return None

    def fingerprint(self) -> dict:
        """Everything that decides which labels are kept (the key of the cached label index)."""
        return {"charset": self.charset.to_dict() if self.charset is not None else None,
                "max_label_length": self.max_label_length,
                "code": code_fingerprint(LabelFilter.reason, LabelFilter.decide, *[getattr(type(self.charset), f) for f in
                                                               ("normalize", "_fold") if hasattr(self.charset, f)])}


def decode_image(data: bytes | memoryview) -> Image.Image | None:
    """Decode encoded image bytes fully; ``None`` when they are corrupt or empty."""
    try:
        img = Image.open(io.BytesIO(data))
        img.load()
    except DECODE_ERRORS:
        return None
    if img.width < 1 or img.height < 1:
        return None
    return img


class _TextDataset(Dataset):
    """Shared item logic: decode, transform, normalise the label."""

    def __init__(self, source: str, charset: Charset | None, max_label_length: int | None,
                 transform: Transform | None) -> None:
        self.source = source
        self.charset = charset
        self.max_label_length = max_label_length
        self.transform = transform
        self.dropped: dict[str, int] = {}
        self.trimmed = {"chars": 0, "samples": 0}
        self.num_stored = 0

    def _item(self, data: bytes | memoryview | None, raw_label: str) -> tuple[Any, str]:
        """Build the ``(image, label)`` pair; the label was accepted by the filter at creation."""
        img = decode_image(data) if data is not None else None
        if img is not None and self.transform is not None:
            img = self.transform(img)
        label = raw_label
        if self.charset is not None:
            label = self.charset.normalize(raw_label) or ""
        return img, label

    def _log_summary(self, kept: int) -> None:
        """One line: how many samples were kept and why the others were dropped."""
        drops = ", ".join(f"{k}={v}" for k, v in self.dropped.items() if v)
        log.info("%s: %d of %d samples kept%s", self.source, kept, self.num_stored,
                 f" (dropped: {drops})" if drops else "")
        if self.trimmed["chars"]:
            log.warning("%s: model.unknown=drop removed %d character(s) outside the alphabet from %d kept label(s); "
                        "their images still show them", self.source, self.trimmed["chars"], self.trimmed["samples"])


class LmdbDataset(_TextDataset):
    """One LMDB in the standard layout; the environment is opened lazily in each worker process."""

    def __init__(self, path: str | os.PathLike, charset: Charset | None = None, max_label_length: int | None = 25,
                 transform: Transform | None = None) -> None:
        super().__init__(_lmdb_dir(path), charset, max_label_length, transform)
        self._env: lmdb.Environment | None = None
        self._env_pid = -1
        self._indices = self._scan_labels(LabelFilter(charset, max_label_length))
        self._log_summary(len(self._indices))

    def _scan_labels(self, keep: LabelFilter) -> np.ndarray:
        """Check the LMDB, then return the kept 1-based indices: from the on-disk cache, or scanned once."""
        try:
            with READERS.borrow(self.source) as env, env.begin() as txn:
                n = _read_num_samples(txn, self.source)
                self.num_stored = n
                if env.stat()["entries"] < 2 * n + 1 or (n > 0 and txn.get(image_key(n)) is None):
                    raise DatasetError(f"{self.source}: num-samples says {n} but fewer samples are stored; "
                                       "the LMDB is truncated — recreate it with crnn-create-lmdb")
            index = load_or_build(self.source, keep.fingerprint(), lambda: self._build_index(keep, n))
        except lmdb.Error as e:
            raise DatasetError(f"{self.source}: not a readable LMDB ({e}); recreate it with crnn-create-lmdb") from None
        self.dropped = {**dict.fromkeys(DROP_REASONS, 0), **{k: index.dropped.get(k, 0) for k in DROP_REASONS}}
        self.trimmed = {"chars": index.dropped.get("trimmed_chars", 0),
                        "samples": index.dropped.get("trimmed_samples", 0)}
        self._index_how = index.how  # built | reused | uncached
        return index.kept

    def _build_index(self, keep: LabelFilter, n: int) -> LabelIndex:
        """Scan every label once into a boolean mask (no per-sample Python list); repeated labels are decided once."""
        mask = np.zeros(n + 1, dtype=bool)  # mask[i]: sample i is kept (index 0 unused)
        decided: dict[bytes, tuple[str | None, int]] = {}  # raw label -> (drop reason or None, characters trimmed)
        counts = dict.fromkeys((*DROP_REASONS, "trimmed_chars", "trimmed_samples"), 0)
        with READERS.borrow(self.source) as env, env.begin(buffers=False) as txn:
            for i in range(1, n + 1):
                raw = txn.get(label_key(i))
                if raw not in decided:
                    if len(decided) > 1_000_000:
                        decided.clear()
                    decided[raw] = keep.decide(_decode_label(raw, i, self.source))[1:]
                reason, lost = decided[raw]
                if reason is None:
                    mask[i] = True
                    counts["trimmed_chars"] += lost
                    counts["trimmed_samples"] += lost > 0
                else:
                    counts[reason] += 1
        return LabelIndex(np.flatnonzero(mask).astype(_index_dtype(n)), n, counts)

    @property
    def env(self) -> lmdb.Environment:
        """The read-only environment of this process, opened on first use (after a fork: reopened)."""
        if self._env is None or self._env_pid != os.getpid():
            self._env = READERS.get(self.source)
            self._env_pid = os.getpid()
        return self._env

    def __len__(self) -> int:
        return len(self._indices)

    def __getitem__(self, i: int) -> tuple[Any, str]:
        idx = int(self._indices[i])
        with self.env.begin(buffers=False) as txn:
            data = txn.get(image_key(idx))
            label = _read_label(txn, idx, self.source)
        return self._item(data, label)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_env"], state["_env_pid"] = None, -1
        return state


class FolderGtDataset(_TextDataset):
    """A folder with ``gt.txt`` lines ``relative/path<TAB>label``; image paths are relative to the folder."""

    def __init__(self, root: str | os.PathLike, charset: Charset | None = None, max_label_length: int | None = 25,
                 transform: Transform | None = None, gt: str = "gt.txt") -> None:
        root = os.fspath(root)
        super().__init__(root, charset, max_label_length, transform)
        keep = LabelFilter(charset, max_label_length)
        entries = list(read_gt(os.path.join(root, gt), root))
        self.num_stored = len(entries)
        self._samples = [(p, lab) for p, lab in entries if keep(lab) is not None]
        self.dropped, self.trimmed = keep.dropped, keep.trimmed
        self._log_summary(len(self._samples))

    def __len__(self) -> int:
        return len(self._samples)

    def __getitem__(self, i: int) -> tuple[Any, str]:
        path, label = self._samples[i]
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            data = None
        return self._item(data, label)


class ConcatTextDataset(ConcatDataset):
    """Several text datasets as one; ``dropped`` sums the children's counts."""

    @property
    def dropped(self) -> dict[str, int]:
        """Drop counts per reason, summed over the children."""
        total: Counter[str] = Counter()
        for d in self.datasets:
            total.update(getattr(d, "dropped", {}))
        return dict(total)


def read_gt(gt_path: str, root: str) -> Iterator[tuple[str, str]]:
    """Yield ``(absolute image path, label)`` from a ``gt.txt``; a bad line raises naming its number."""
    if not os.path.isfile(gt_path):
        raise DatasetError(f"{gt_path}: no such file; a folder dataset needs a gt.txt with 'path<TAB>label' lines")
    with open(gt_path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            rel, label = parse_gt_line(raw, lineno, gt_path)
            if rel is None:
                continue
            path = os.path.join(root, rel)
            if not os.path.isfile(path):
                raise DatasetError(f"{gt_path}:{lineno}: image {rel!r} not found under {root}; fix or remove the line")
            yield path, label


def parse_gt_line(raw: bytes, lineno: int, gt_path: str) -> tuple[str | None, str]:
    """Split one ``gt.txt`` line into ``(relative path, label)``; blank lines give ``(None, "")``."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DatasetError(f"{gt_path}:{lineno}: line is not valid UTF-8; re-save the file as UTF-8") from None
    if lineno == 1:
        line = line.lstrip("\ufeff")
    line = line.rstrip("\r\n")
    if not line.strip():
        return None, ""
    if "\t" not in line:
        raise DatasetError(f"{gt_path}:{lineno}: expected 'relative/path<TAB>label' but found no tab; fix the line")
    rel, label = line.split("\t", 1)
    if not rel:
        raise DatasetError(f"{gt_path}:{lineno}: empty image path before the tab; fix the line")
    return rel, label


def find_lmdbs(path: str | os.PathLike) -> list[str]:
    """Every directory at or below ``path`` that holds a ``data.mdb``, sorted."""
    found = []
    for dirpath, dirnames, filenames in os.walk(os.fspath(path), followlinks=True):
        dirnames.sort()
        if "data.mdb" in filenames:
            found.append(dirpath)
    return sorted(found)


def open_dataset(path: str | os.PathLike, charset: Charset | None = None, max_label_length: int | None = None,
                 transform: Transform | None = None) -> Dataset:
    """Open an LMDB, a folder of LMDBs (concatenated) or a folder with ``gt.txt``, by what ``path`` is."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise DatasetError(f"{path}: no such file or directory; check the dataset path")
    if os.path.isfile(path):
        if os.path.basename(path) == "data.mdb":
            return LmdbDataset(os.path.dirname(path) or ".", charset, max_label_length, transform)
        return FolderGtDataset(os.path.dirname(path) or ".", charset, max_label_length, transform,
                               gt=os.path.basename(path))
    if os.path.isfile(os.path.join(path, "data.mdb")):
        return LmdbDataset(path, charset, max_label_length, transform)
    lmdbs = find_lmdbs(path)
    if lmdbs and os.path.isfile(os.path.join(path, "gt.txt")):  # which one the user means is not ours to guess
        raise DatasetError(f"{path}: holds a gt.txt and {len(lmdbs)} LMDB(s) below it ({lmdbs[0]}"
                           f"{', ...' if len(lmdbs) > 1 else ''}); name one: {os.path.join(path, 'gt.txt')} for "
                           "the folder's labelled images, or the LMDB folder(s) themselves")
    if lmdbs:
        return ConcatTextDataset([LmdbDataset(p, charset, max_label_length, transform) for p in lmdbs])
    if os.path.isfile(os.path.join(path, "gt.txt")):
        return FolderGtDataset(path, charset, max_label_length, transform)
    raise DatasetError(f"{path}: no LMDB (data.mdb) or gt.txt found in this folder or below; "
                       "point to an LMDB folder, or create one with crnn-create-lmdb")


def _lmdb_dir(path: str | os.PathLike) -> str:
    """Check that ``path`` is a directory holding ``data.mdb``; return it as a string."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise DatasetError(f"{path}: no such file or directory; check the LMDB path")
    if not os.path.isdir(path):
        raise DatasetError(f"{path}: not a directory; an LMDB is a folder holding data.mdb")
    if not os.path.isfile(os.path.join(path, "data.mdb")):
        below = find_lmdbs(path)
        hint = (f"it holds {len(below)} LMDBs below it — use open_dataset() to concatenate them" if below
                else "create one with crnn-create-lmdb")
        raise DatasetError(f"{path}: not an LMDB (no data.mdb); {hint}")
    return path


def _read_num_samples(txn: lmdb.Transaction, path: str) -> int:
    """Parse ``num-samples``; missing or malformed gives a :class:`DatasetError`."""
    raw = txn.get(NUM_SAMPLES_KEY)
    if raw is None:
        raise DatasetError(f"{path}: LMDB has no 'num-samples' key, so it is not in the text-recognition layout; "
                           "recreate it with crnn-create-lmdb")
    try:
        n = int(bytes(raw).decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        n = -1
    if n < 0:
        raise DatasetError(f"{path}: 'num-samples' is {bytes(raw)[:20]!r}, not a count; recreate the LMDB")
    return n


def _index_dtype(n: int) -> type:
    """int32 while the ids fit (half the memory of int64), else int64."""
    return np.int32 if n < 2**31 - 1 else np.int64


def _read_label(txn: lmdb.Transaction, index: int, path: str) -> str:
    """Read and UTF-8 decode one label; missing or undecodable labels raise naming the index."""
    return _decode_label(txn.get(label_key(index)), index, path)


def _decode_label(raw: bytes | None, index: int, path: str) -> str:
    """UTF-8 decode the label stored at ``index``; missing or undecodable labels raise naming the index."""
    if raw is None:
        raise DatasetError(f"{path}: label-{index:09d} is missing although num-samples covers it; "
                           "the LMDB is truncated — recreate it with crnn-create-lmdb")
    try:
        return bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise DatasetError(f"{path}: label-{index:09d} is not valid UTF-8; recreate the LMDB") from None
