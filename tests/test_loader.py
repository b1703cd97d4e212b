"""Collate, samplers and loaders: padding, skipped samples, rank sharding, epochs, ratios, workers."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from crnn.charset import Charset
from crnn.data.collate import Batch, Collate
from crnn.data.loader import build_eval_loader, build_train_loader
from crnn.data.samplers import RatioBatchSampler, ShardSampler
from tests.test_datasets import make_lmdb

ALNUM = Charset.from_spec("alnum36")
SIZE = dict(height=8, width=12, keep_ratio=False, max_width=40, channels=1)


def _labels(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def _train(sources, **kw):
    args = dict(SIZE, batch_size=4, num_workers=0, max_label_length=25, augment=False, seed=7)
    args.update(kw)
    return build_train_loader(sources, ALNUM, **args)


def _epoch(loader, epoch: int) -> list[str]:
    loader.set_epoch(epoch)
    return [lab for batch in loader for lab in batch.labels]


def test_collate_pads_skips_and_encodes():
    imgs = [torch.ones(1, 8, 10), None, torch.ones(1, 8, 13)]
    batch = Collate(ALNUM, width_multiple=4)(list(zip(imgs, ["ab", "zz", "c"])))
    assert isinstance(batch, Batch) and len(batch) == 2 and batch.num_skipped == 1
    assert batch.images.shape == (2, 1, 8, 16)  # max width 13 rounded up to 16
    assert batch.widths.tolist() == [10, 13]
    assert torch.equal(batch.images[0, :, :, 10:], torch.zeros(1, 8, 6))  # right-padded with 0
    assert batch.labels == ["ab", "c"]
    assert batch.targets.tolist() == [11, 12, 13] and batch.target_lengths.tolist() == [2, 1]
    moved = batch.to("cpu")
    assert torch.equal(moved.images, batch.images) and moved.labels == batch.labels


def test_collate_without_charset_and_all_skipped():
    batch = Collate(None, width_multiple=1)([(torch.zeros(1, 8, 12), "Raw-Label!")])
    assert batch.labels == ["Raw-Label!"] and batch.targets.numel() == 0 and batch.target_lengths.tolist() == [0]
    empty = Collate(ALNUM, empty_shape=(1, 8, 12))([(None, "a"), (None, "b")])
    assert len(empty) == 0 and empty.num_skipped == 2 and empty.images.shape == (0, 1, 8, 12)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="pinning needs a CUDA GPU (torch.cuda.is_available() is False)")
def test_batch_pin_memory():
    batch = Collate(ALNUM)([(torch.zeros(1, 8, 12), "a")]).pin_memory()
    assert batch.images.is_pinned() and batch.targets.is_pinned()


def test_train_loader_corrupt_sample_counted(tmp_path):
    path = make_lmdb(tmp_path / "c", _labels("s", 8), corrupt=(3,))
    loader = _train([{"path": path}], batch_size=8)
    batches = list(loader)
    assert len(batches) == 1 and batches[0].num_skipped == 1 and "s3" not in batches[0].labels


def test_two_ranks_disjoint_and_reshuffled(tmp_path):
    path = make_lmdb(tmp_path / "d", _labels("s", 20))
    ranks = [_train([{"path": path}], rank=r, world_size=2) for r in (0, 1)]
    assert [len(r) for r in ranks] == [2, 2]  # 10 per rank, drop_last -> 2 batches of 4
    e0 = [_epoch(r, 0) for r in ranks]
    assert not set(e0[0]) & set(e0[1]) and all(len(e) == 8 for e in e0)
    e1 = [_epoch(r, 1) for r in ranks]
    assert e1[0] != e0[0] and not set(e1[0]) & set(e1[1])
    assert _epoch(ranks[0], 0) == e0[0]  # the same epoch replays exactly


@pytest.mark.parametrize("ratio", [None, 1.0])
def test_skip_batches_resumes_mid_epoch(tmp_path, ratio):
    path = make_lmdb(tmp_path / "r", _labels("r", 20))
    loader = _train([{"path": path, "ratio": ratio}])
    loader.set_epoch(3)
    full = [b.labels for b in loader]
    loader.set_epoch(3)
    assert [b.labels for b in loader.skip_batches(2)] == full[2:]
    assert [b.labels for b in loader] == full  # the skip applies to one pass only


def test_concatenated_sources_without_ratio(tmp_path):
    a = make_lmdb(tmp_path / "a", _labels("a", 6))
    b = make_lmdb(tmp_path / "b", _labels("b", 6))
    loader = _train([{"path": a, "ratio": None}, {"path": b}], batch_size=4)
    seen = _epoch(loader, 0)
    assert len(loader) == 3 and len(seen) == 12 and set(seen) == set(_labels("a", 6) + _labels("b", 6))


def test_ratio_sampler_proportions_per_batch():
    sampler = RatioBatchSampler([100, 10, 1000], [0.5, 0.25, 0.25], batch_size=10, seed=1)
    offsets = [0, 100, 110, 1110]
    for batch in sampler:
        counts = Counter(next(s for s in range(3) if offsets[s] <= i < offsets[s + 1]) for i in batch)
        assert counts[0] == 5 and counts[1] in (2, 3) and counts[2] in (2, 3) and len(batch) == 10


def test_ratio_sampler_ranks_disjoint_and_epochs_differ():
    def draw(rank: int, epoch: int) -> list[int]:
        s = RatioBatchSampler([40, 40], [1, 3], batch_size=4, seed=3, rank=rank, world_size=2, num_batches=5)
        s.set_epoch(epoch)
        return [i for b in s for i in b]
    r0, r1 = draw(0, 0), draw(1, 0)
    assert not set(r0) & set(r1)
    assert sum(i < 40 for i in r0) == 5  # source 0 gets 1 of 4 slots in each of 5 batches
    assert draw(0, 1) != r0 and draw(0, 0) == r0


def test_train_loader_with_ratios(tmp_path):
    a = make_lmdb(tmp_path / "a", _labels("a", 30))
    b = make_lmdb(tmp_path / "b", _labels("b", 6))
    loader = _train([{"path": a, "ratio": 0.5}, {"path": b, "ratio": 0.5}], batch_size=4)
    assert len(loader) == 9  # an epoch has as many batches as the concatenation would
    for batch in loader:
        assert sum(lab.startswith("a") for lab in batch.labels) == 2


def test_ratio_must_be_all_or_none(tmp_path):
    a = make_lmdb(tmp_path / "a", _labels("a", 8))
    with pytest.raises(ValueError, match="every training source has a ratio or none"):
        _train([{"path": a, "ratio": 0.5}, {"path": a}])


def test_too_few_samples_is_a_clear_error(tmp_path):
    path = make_lmdb(tmp_path / "s", ["a", "b", "-"])
    with pytest.raises(ValueError, match="too few for one batch"):
        _train([{"path": path}], batch_size=4)


@pytest.mark.slow
def test_workers_0_1_2_give_same_samples(tmp_path):
    path = make_lmdb(tmp_path / "w", _labels("w", 16))
    runs = []
    for workers in (0, 1, 2):
        loader = _train([{"path": path}], num_workers=workers)
        loader.dataset[0]  # the main process has the LMDB open before workers fork
        loader.set_epoch(2)
        batches = list(loader)
        runs.append(([b.labels for b in batches], torch.cat([b.images for b in batches])))
    for labels, images in runs[1:]:
        assert labels == runs[0][0] and torch.equal(images, runs[0][1])


def test_eval_loader_shards_exactly(tmp_path):
    labels = ["Raw", "a-b", "", "x" * 40] + _labels("e", 7)
    path = make_lmdb(tmp_path / "e", labels)
    seen = []
    for rank in range(3):
        loader = build_eval_loader(path, **SIZE, batch_size=2, num_workers=0, rank=rank, world_size=3)
        seen.extend(lab for batch in loader for lab in batch.labels)
    assert seen == labels  # raw labels, every sample exactly once, none dropped


def test_shard_sampler_covers_once():
    shards = [list(ShardSampler(10, r, 4)) for r in range(4)]
    assert sum(shards, []) == list(range(10)) and [len(s) for s in shards] == [2, 3, 2, 3]


def test_keep_ratio_batches_pad_to_multiple_of_4(tmp_path):
    path = make_lmdb(tmp_path / "k", _labels("k", 4))  # 20x8 images -> width 20 at height 8
    loader = build_eval_loader(path, height=8, width=12, keep_ratio=True, max_width=18, channels=3,
                               batch_size=4, num_workers=0)
    batch = next(iter(loader))
    assert batch.images.shape == (4, 3, 8, 20) and batch.widths.tolist() == [18] * 4
    assert np.allclose(batch.images[:, :, :, 18:].numpy(), 0)


def test_training_never_forks_for_validation_and_a_hung_worker_times_out(tmp_path):
    """Validation loaders in training read in the training process (a worker forked anew at every validation, from a
    process with live threads, once hung for good and stopped a DDP run); the training loader's persistent workers
    raise after WORKER_TIMEOUT seconds without a batch instead of waiting for ever (torchrun then restarts the group
    from last.pt)."""
    from PIL import Image

    from crnn.config import load_config
    from crnn.data.loader import WORKER_TIMEOUT
    from crnn.data.feed import build

    folder = tmp_path / "words"
    folder.mkdir()
    for i in range(8):
        Image.new("L", (40, 16), 30 * i).save(folder / f"{i}.png")
    (folder / "gt.txt").write_text("".join(f"{i}.png\tw{i}\n" for i in range(8)), encoding="utf-8")
    cfg = load_config(None, [f"data.train=[{{path: {folder}}}]", f"data.val=[{folder}, {folder}/gt.txt]",
                             "data.num_workers=2", "data.batch_size=2", f"train.output_dir={tmp_path / 'run'}"])
    feed = build(cfg, ALNUM)
    train, vals = feed.train, feed.val
    assert len(vals) == 2 and all(loader.num_workers == 0 for loader in vals.values())
    assert train.loader.num_workers == 2 and train.loader.timeout == WORKER_TIMEOUT >= 300
    assert _train([{"path": str(folder)}]).loader.timeout == 0  # no workers, nothing to wait for
