"""The label-index cache: built once, reused by other processes and restarts, stale after the LMDB changes."""
from __future__ import annotations

import logging
import multiprocessing as mp
import os
import time

import lmdb
import numpy as np
import pytest

from crnn.charset import Charset
from crnn.data import label_index
from crnn.data.datasets import LmdbDataset
from tests.conftest import make_lmdb

LABELS = ["abc", "hello", "x" * 30, "Ünï", "", "ok", "hello"]  # kept: abc, hello, ok, hello (alnum36, max 25)


@pytest.fixture
def lmdb_path(tmp_path):
    return make_lmdb(tmp_path / "d.lmdb", LABELS)


def _open(path, max_len: int = 25) -> LmdbDataset:
    return LmdbDataset(path, Charset.from_spec("alnum36"), max_len)


def test_built_once_then_reused_with_the_same_result(lmdb_path, caplog):
    caplog.set_level(logging.INFO)
    first = _open(lmdb_path)
    assert "label index built" in caplog.text
    caplog.clear()
    second = _open(lmdb_path)  # a second rank, a worker or a restart
    assert "label index reused" in caplog.text and "label index built" not in caplog.text
    assert np.array_equal(first._indices, second._indices) and list(second._indices) == [1, 2, 6, 7]
    assert first.dropped == second.dropped == {"empty": 1, "too_long": 1, "unknown_char": 1}
    assert [second[i][1] for i in range(len(second))] == ["abc", "hello", "ok", "hello"]
    assert len(list(lmdb_path.glob("crnn-index-*.npy"))) == 1


def test_another_filter_gets_its_own_cache(lmdb_path):
    assert len(_open(lmdb_path, 25)) == 4 and len(_open(lmdb_path, 3)) == 2  # max 3 drops "hello" twice
    assert len(list(lmdb_path.glob("crnn-index-*.npy"))) == 2
    assert len(LmdbDataset(lmdb_path)) == len(LABELS)  # no charset: every sample


def test_a_changed_lmdb_makes_the_cache_stale(lmdb_path, caplog):
    _open(lmdb_path)
    time.sleep(0.01)
    env = lmdb.open(str(lmdb_path), map_size=1 << 26)
    with env.begin(write=True) as txn:
        txn.put(b"label-000000001", "a b!".encode())  # now dropped (unknown characters)
    env.close()
    caplog.set_level(logging.INFO)
    ds = _open(lmdb_path)
    assert "is stale" in caplog.text and "label index built" in caplog.text
    assert list(ds._indices) == [2, 6, 7] and ds.dropped["unknown_char"] == 2


def test_read_only_lmdb_folder_caches_in_the_cache_dir(lmdb_path, tmp_path, monkeypatch):
    monkeypatch.setenv(label_index.CACHE_ENV, str(tmp_path / "cache"))
    real = label_index._writable
    monkeypatch.setattr(label_index, "_writable", lambda d: d != lmdb_path.resolve() and real(d))
    assert len(_open(lmdb_path)) == 4
    assert not list(lmdb_path.glob("crnn-index-*")) and len(list((tmp_path / "cache").rglob("crnn-index-*.npy"))) == 1


class _SayWhenWaiting(logging.Handler):
    """Put ("waiting", pid) on a queue when this process starts waiting for another one's label-index build."""

    def __init__(self, queue) -> None:
        super().__init__(logging.INFO)
        self.queue = queue

    def emit(self, record: logging.LogRecord) -> None:
        if "waiting for another process" in record.getMessage():
            self.queue.put(("waiting", os.getpid()))


def _open_in_child(path: str, queue) -> None:
    logger = logging.getLogger(label_index.__name__)
    logger.setLevel(logging.INFO)
    logger.addHandler(_SayWhenWaiting(queue))
    ds = _open(path)
    queue.put(("done", ds._index_how, list(ds._indices)))


@pytest.mark.slow
def test_concurrent_processes_build_it_once(tmp_path, monkeypatch):
    """Three processes (ranks of one machine) open the same LMDB while this one is building its index: each says it
    waits for the lock, none builds, all reuse this one's index. The build is held until all three wait (no clock)."""
    import threading

    from crnn.data.lmdb_io import write_lmdb

    path = tmp_path / "d.lmdb"
    write_lmdb(((b"not decoded here", t) for t in LABELS * 2000), path)
    building, release, mine = threading.Event(), threading.Event(), []
    build = LmdbDataset._build_index

    def held_build(self, *a, **k):  # runs inside load_or_build's lock
        building.set()
        assert release.wait(120), "the three processes never all waited"
        return build(self, *a, **k)

    monkeypatch.setattr(LmdbDataset, "_build_index", held_build)
    builder = threading.Thread(target=lambda: mine.append(_open(path)))
    builder.start()
    assert building.wait(60)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_open_in_child, args=(str(path), queue)) for _ in range(3)]
    for p in procs:
        p.start()
    try:
        early = [queue.get(timeout=120) for _ in procs]  # before the release, a process can only wait
    finally:
        release.set()
        builder.join(timeout=120)
    assert sorted(kind for kind, *_ in early) == ["waiting"] * 3, early
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    assert mine and mine[0]._index_how == "built"
    assert [how for _, how, _ in results] == ["reused"] * 3, results
    assert all(idx == list(mine[0]._indices) for _, _, idx in results) and len(results[0][2]) == 4 * 2000
    assert len(list(path.glob("crnn-index-*.npy"))) == 1 and not [f for f in os.listdir(path) if f.endswith(".tmp")]
