"""write_lmdb: layout, round trip, map growth, atomicity and overwrite policy."""
from __future__ import annotations

import os

import lmdb
import pytest

from crnn.data.lmdb_io import image_key, label_key, open_readonly, write_lmdb


def _samples(n: int, size: int = 10) -> list[tuple[bytes, str]]:
    return [(bytes([i % 256]) * size + os.urandom(4), f"wörd{i}") for i in range(n)]


def _read_all(path) -> dict[bytes, bytes]:
    env = open_readonly(path)
    try:
        with env.begin() as txn:
            return dict(txn.cursor())
    finally:
        env.close()


def test_round_trip_layout(tmp_path):
    samples = _samples(7)
    out = tmp_path / "a.lmdb"
    assert write_lmdb(samples, out, commit_every=3) == 7
    kv = _read_all(out)
    assert kv[b"num-samples"] == b"7"
    assert set(kv) == {b"num-samples"} | {image_key(i) for i in range(1, 8)} | {label_key(i) for i in range(1, 8)}
    assert image_key(1) == b"image-000000001" and label_key(12) == b"label-000000012"
    for i, (img, label) in enumerate(samples, 1):
        assert kv[image_key(i)] == img
        assert kv[label_key(i)].decode("utf-8") == label
    assert os.listdir(tmp_path) == ["a.lmdb"]  # no temp dir left behind


def test_generator_empty_and_parent_dirs(tmp_path):
    assert write_lmdb((s for s in _samples(5)), tmp_path / "new" / "dir" / "g", commit_every=1) == 5
    assert _read_all(tmp_path / "new" / "dir" / "g")[b"num-samples"] == b"5"
    assert write_lmdb(iter([]), tmp_path / "e") == 0
    assert _read_all(tmp_path / "e") == {b"num-samples": b"0"}


def test_map_grows_when_full(tmp_path):
    big = [(os.urandom(300_000), str(i)) for i in range(8)]  # 2.4 MB into a 256 KiB map
    out = tmp_path / "big"
    assert write_lmdb(big, out, commit_every=3, map_size=1 << 18) == 8
    kv = _read_all(out)
    assert [kv[image_key(i)] for i in range(1, 9)] == [b for b, _ in big]


def test_refuses_existing_output_unless_overwrite(tmp_path):
    out = tmp_path / "x"
    write_lmdb(_samples(2), out)
    with pytest.raises(FileExistsError, match="overwrite"):
        write_lmdb(_samples(3), out)
    assert _read_all(out)[b"num-samples"] == b"2"
    write_lmdb(_samples(3), out, overwrite=True)
    assert _read_all(out)[b"num-samples"] == b"3"
    assert sorted(os.listdir(tmp_path)) == ["x"]


def _failing(n_good: int):
    yield from _samples(n_good)
    raise RuntimeError("source broke")


def test_failure_leaves_nothing(tmp_path):
    out = tmp_path / "bad"
    with pytest.raises(RuntimeError, match="source broke"):
        write_lmdb(_failing(5), out, commit_every=2)
    assert os.listdir(tmp_path) == []


def test_failure_keeps_previous_output_on_overwrite(tmp_path):
    out = tmp_path / "keep"
    write_lmdb(_samples(2), out)
    with pytest.raises(TypeError, match="sample 2: label must be str"):
        write_lmdb([(b"ok", "a"), (b"ok", 5)], out, overwrite=True)
    assert _read_all(out)[b"num-samples"] == b"2"
    assert os.listdir(tmp_path) == ["keep"]


def test_readable_by_plain_lmdb(tmp_path):
    out = tmp_path / "p"
    write_lmdb([(b"\x89PNG", "hi")], out)
    env = lmdb.open(str(out), readonly=True, lock=False)
    with env.begin() as txn:
        assert txn.get(b"num-samples") == b"1"
        assert txn.get(b"label-000000001") == b"hi"
    env.close()


def test_leftovers_of_a_killed_writer_are_removed_and_a_live_writers_kept(tmp_path, caplog):
    """A writer killed by SIGKILL/SIGTERM leaves ``out.tmp-<pid>``; the next write to ``out`` removes it."""
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    out = tmp_path / "set.lmdb"
    stale, live, other = (tmp_path / f"set.lmdb.tmp-{dead_pid}", tmp_path / f"set.lmdb.tmp-{os.getppid()}",
                          tmp_path / f"other.lmdb.tmp-{dead_pid}")
    for d in (stale, live, other):
        d.mkdir()
        (d / "data.mdb").write_bytes(b"partial")
    caplog.set_level("WARNING", logger="crnn")
    assert write_lmdb(_samples(2), out) == 2
    assert not stale.exists() and live.exists() and other.exists()
    assert f"removed {stale}, left behind by an interrupted writer" in caplog.text
