"""Datasets: LMDB and gt.txt folders, label filtering, corrupt images, error messages, transforms."""
from __future__ import annotations

import io
import logging
import os
import pickle

import lmdb
import numpy as np
import pytest
import torch
from PIL import Image

from crnn.charset import Charset
from crnn.data.datasets import (ConcatTextDataset, DatasetError, FolderGtDataset, LmdbDataset, decode_image,
                                open_dataset)
from crnn.data.lmdb_io import write_lmdb
from crnn.data.transforms import ResizeNormalize


def png_bytes(w: int = 20, h: int = 8, value: int = 0, mode: str = "L", fmt: str = "PNG") -> bytes:
    """A tiny image whose pixels encode ``value`` (first pixel) so samples can be told apart."""
    arr = np.full((h, w, 3) if mode == "RGB" else (h, w), 128, dtype=np.uint8)
    arr.flat[0] = value % 256
    buf = io.BytesIO()
    Image.fromarray(arr, mode).save(buf, fmt)
    return buf.getvalue()


def plain_lmdb(path, pairs: list[tuple[bytes, bytes]], num_samples: bytes | None) -> None:
    """An independent minimal writer: plain lmdb calls, one transaction, no crnn code."""
    env = lmdb.open(str(path), map_size=1 << 24)
    with env.begin(write=True) as txn:
        for i, (img, label) in enumerate(pairs, 1):
            txn.put(f"image-{i:09d}".encode(), img)
            txn.put(f"label-{i:09d}".encode(), label)
        if num_samples is not None:
            txn.put(b"num-samples", num_samples)
    env.close()


def make_lmdb(path, labels: list[str], corrupt: tuple[int, ...] = ()) -> str:
    """LMDB via write_lmdb; sample ``i`` has first pixel ``i``; indices in ``corrupt`` get garbage bytes."""
    write_lmdb([(b"not an image" if i in corrupt else png_bytes(value=i), lab) for i, lab in enumerate(labels)],
               path)
    return str(path)


ALNUM = Charset.from_spec("alnum36")


def test_reads_independently_written_lmdb(tmp_path):
    imgs = [png_bytes(value=i) for i in range(3)]
    plain_lmdb(tmp_path / "p", [(b, lab.encode()) for b, lab in zip(imgs, ["Ab", "cd", "é!"])], b"3")
    ds = LmdbDataset(tmp_path / "p", charset=None)
    assert len(ds) == 3 and ds.num_stored == 3
    got = [ds[i] for i in range(3)]
    assert [lab for _, lab in got] == ["Ab", "cd", "é!"]  # raw labels without a charset
    for i, (img, _) in enumerate(got):
        assert np.array_equal(np.asarray(img), np.asarray(Image.open(io.BytesIO(imgs[i]))))


def test_round_trip_with_writer_and_transform(tmp_path):
    path = make_lmdb(tmp_path / "w", ["hello", "World"])
    ds = LmdbDataset(path, charset=ALNUM, transform=ResizeNormalize(height=8, width=12))
    img, label = ds[1]
    assert label == "world"  # normalised by the charset (alnum36 lowercases)
    assert img.shape == (1, 8, 12) and img.dtype == torch.float32
    assert ds.dropped == {"empty": 0, "too_long": 0, "unknown_char": 0}


def test_label_filtering_counts_reasons(tmp_path):
    labels = ["ok", "", "a-b", "x" * 6, "fine", "CAPS"]
    path = make_lmdb(tmp_path / "f", labels)
    ds = LmdbDataset(path, charset=ALNUM, max_label_length=5)
    assert len(ds) == 3
    assert [ds[i][1] for i in range(3)] == ["ok", "fine", "caps"]
    assert [np.asarray(ds[i][0]).flat[0] for i in range(3)] == [0, 4, 5]  # the right images stay paired
    assert ds.dropped == {"empty": 1, "too_long": 1, "unknown_char": 1}
    raw = LmdbDataset(path, charset=None)
    assert len(raw) == 6 and raw[2][1] == "a-b"


def test_drop_policy_can_empty_a_label(tmp_path):
    path = make_lmdb(tmp_path / "d", ["--", "a-b"])
    ds = LmdbDataset(path, charset=Charset.from_spec("alnum36", unknown="drop"))
    assert [ds[i][1] for i in range(len(ds))] == ["ab"]
    assert ds.dropped["empty"] == 1


def test_corrupt_image_gives_none_not_a_neighbour(tmp_path):
    path = make_lmdb(tmp_path / "c", ["a", "b", "c"], corrupt=(1,))
    ds = LmdbDataset(path, charset=ALNUM, transform=ResizeNormalize(height=8, width=12))
    assert ds[1] == (None, "b")
    assert ds[0][0] is not None and ds[2][0] is not None


def test_decode_image_rejects_truncated_bytes():
    good = png_bytes(w=40, h=40, fmt="JPEG")
    assert decode_image(good) is not None
    assert decode_image(good[: len(good) // 2]) is None
    assert decode_image(b"") is None


@pytest.mark.parametrize("case, message", [
    ("missing", "no such file or directory"),
    ("empty_dir", "not an LMDB"),
    ("other_dir", "not an LMDB"),
    ("garbage_mdb", "not a readable LMDB"),
    ("no_num_samples", "no 'num-samples' key"),
    ("too_many", "num-samples says 5"),
    ("bad_count", "not a count"),
])
def test_lmdb_errors_name_path_and_fix(tmp_path, case, message):
    path = tmp_path / case
    if case == "empty_dir":
        path.mkdir()
    elif case == "other_dir":
        path.mkdir()
        (path / "readme.txt").write_text("hi")
    elif case == "garbage_mdb":
        path.mkdir()
        (path / "data.mdb").write_bytes(b"\0garbage" * 100)
    elif case != "missing":
        count = {"no_num_samples": None, "too_many": b"5", "bad_count": b"two"}[case]
        plain_lmdb(path, [(png_bytes(), b"a"), (png_bytes(), b"b")], count)
    with pytest.raises(DatasetError, match=message) as info:
        LmdbDataset(path, charset=ALNUM)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(DatasetError, match=str(path)):
        open_dataset(path)


def test_missing_label_inside_count(tmp_path):
    env = lmdb.open(str(tmp_path / "m"), map_size=1 << 22)
    with env.begin(write=True) as txn:
        txn.put(b"num-samples", b"2")
        for k in (b"image-000000001", b"image-000000002", b"label-000000001", b"extra"):
            txn.put(k, b"x")
    env.close()
    with pytest.raises(DatasetError, match="label-000000002 is missing"):
        LmdbDataset(tmp_path / "m")


def test_folder_of_lmdbs_is_concatenated(tmp_path):
    make_lmdb(tmp_path / "root" / "b" / "two", ["c", "d", "e-"])
    make_lmdb(tmp_path / "root" / "a", ["a", "b"])
    ds = open_dataset(tmp_path / "root", charset=ALNUM)
    assert isinstance(ds, ConcatTextDataset)
    assert [ds[i][1] for i in range(len(ds))] == ["a", "b", "c", "d"]
    assert ds.dropped["unknown_char"] == 1
    with pytest.raises(DatasetError, match="open_dataset"):
        LmdbDataset(tmp_path / "root")


def test_open_dataset_dispatch(tmp_path):
    path = make_lmdb(tmp_path / "x", ["a"])
    assert isinstance(open_dataset(path), LmdbDataset)
    assert isinstance(open_dataset(os.path.join(path, "data.mdb")), LmdbDataset)
    folder = _gt_folder(tmp_path / "g", ["IMG/0.png\tAb", "IMG/1.png\tc d"])
    assert isinstance(open_dataset(folder), FolderGtDataset)
    assert isinstance(open_dataset(folder / "gt.txt"), FolderGtDataset)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="no LMDB"):
        open_dataset(tmp_path / "empty")


def test_a_folder_with_gt_txt_and_lmdbs_below_is_refused_not_guessed(tmp_path):
    """A labelled folder with LMDBs inside it (say, rehearsal sets written next to the crops) used to read as the
    LMDBs alone, the gt.txt silently ignored; now it is refused, and each part reads when named."""
    folder = _gt_folder(tmp_path / "g", ["IMG/0.png\tAb", "IMG/1.png\tc d"])
    make_lmdb(folder / "rehearsal.lmdb", ["x", "y", "z"])
    with pytest.raises(DatasetError, match=r"holds a gt.txt and 1 LMDB\(s\) below it .*rehearsal.lmdb.*name one"):
        open_dataset(folder)
    assert len(open_dataset(folder / "gt.txt")) == 2
    assert len(open_dataset(folder / "rehearsal.lmdb")) == 3


def _gt_folder(root, lines: list[str], n_images: int = 2):
    (root / "IMG").mkdir(parents=True)
    for i in range(n_images):
        (root / "IMG" / f"{i}.png").write_bytes(png_bytes(value=i))
    (root / "gt.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_folder_gt_dataset_items_and_filtering(tmp_path):
    root = _gt_folder(tmp_path / "g", ["IMG/0.png\tAb", "", "IMG/1.png\tc d"])
    raw = FolderGtDataset(root)
    assert [lab for _, lab in (raw[0], raw[1])] == ["Ab", "c d"]
    assert np.asarray(raw[1][0]).flat[0] == 1
    ds = FolderGtDataset(root, charset=ALNUM)
    assert len(ds) == 1 and ds[0][1] == "ab" and ds.dropped["unknown_char"] == 1


@pytest.mark.parametrize("lines, message", [
    (["IMG/0.png\ta", "IMG/1.png no tab"], "gt.txt:2: expected 'relative/path<TAB>label'"),
    (["IMG/0.png\ta", "IMG/9.png\tb"], "gt.txt:2: image 'IMG/9.png' not found"),
    (["\tlabel"], "gt.txt:1: empty image path"),
])
def test_folder_gt_bad_lines_name_line_number(tmp_path, lines, message):
    root = _gt_folder(tmp_path / "g", lines)
    with pytest.raises(DatasetError, match=message):
        FolderGtDataset(root)


def test_pickled_dataset_reopens_and_same_path_twice(tmp_path):
    path = make_lmdb(tmp_path / "p", ["a", "b"])
    first = LmdbDataset(path)
    assert first[0][1] == "a"  # environment now open in this process
    second = LmdbDataset(path)  # opening the same LMDB again must not fail
    clone = pickle.loads(pickle.dumps(first))
    assert second[1][1] == "b" and clone[1][1] == "b"


def test_resize_normalize_modes():
    img = Image.fromarray(np.full((10, 40, 3), 255, dtype=np.uint8), "RGB")
    fixed = ResizeNormalize(height=8, width=12)(img)
    assert fixed.shape == (1, 8, 12) and torch.allclose(fixed, torch.ones_like(fixed))
    rgb = ResizeNormalize(height=8, width=12, channels=3)(img.convert("L"))
    assert rgb.shape == (3, 8, 12)
    assert ResizeNormalize(height=8, keep_ratio=True)(img).shape == (1, 8, 32)
    assert ResizeNormalize(height=8, keep_ratio=True, max_width=20)(img).shape == (1, 8, 20)
    tall = Image.new("L", (4, 40), 0)
    out = ResizeNormalize(height=8, keep_ratio=True, min_width=8)(tall)
    assert out.shape == (1, 8, 8) and torch.allclose(out, -torch.ones_like(out))


def test_augment_keeps_shape_and_range():
    torch.manual_seed(0)
    img = Image.fromarray(np.random.default_rng(0).integers(0, 256, (16, 50), dtype=np.uint8), "L")
    t = ResizeNormalize(height=8, width=24, augment=True)
    outs = [t(img) for _ in range(8)]
    assert all(o.shape == (1, 8, 24) and o.min() >= -1 and o.max() <= 1 for o in outs)
    assert any(not torch.equal(outs[0], o) for o in outs[1:])
    assert torch.equal(ResizeNormalize(height=8, width=24)(img), ResizeNormalize(height=8, width=24)(img))


def test_drop_policy_counts_and_logs_removed_characters(tmp_path, caplog):
    path = make_lmdb(tmp_path / "zh", ["中文", "中x文", "识别!!", "yy"])
    with caplog.at_level(logging.INFO, logger="crnn"):
        ds = LmdbDataset(path, charset=Charset("中文识别", unknown="drop"))
    assert [ds[i][1] for i in range(len(ds))] == ["中文", "中文", "识别"]
    assert ds.trimmed == {"chars": 3, "samples": 2} and ds.dropped["empty"] == 1
    assert "model.unknown=drop removed 3 character(s) outside the alphabet from 2 kept label(s)" in caplog.text
