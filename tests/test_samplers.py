"""Shuffled rank shards without per-sample lists: bijective, disjoint, covering, epoch-dependent, memory-bounded."""
from __future__ import annotations

import tracemalloc
from itertools import islice

import numpy as np
import pytest

from crnn.data.samplers import Permutation, RatioBatchSampler, ShuffledShardSampler


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 1000, 4097, 65_537])
def test_permutation_is_a_bijection(n):
    out = Permutation(n, 0, 1)(np.arange(n))
    assert sorted(out.tolist()) == list(range(n))
    if n >= 64:
        assert not np.array_equal(out, np.arange(n))  # really shuffled


@pytest.mark.parametrize("n, world", [(100, 1), (100, 3), (1001, 8), (5, 2)])
def test_shards_are_disjoint_equal_and_cover_all_but_the_remainder(n, world):
    shards = [list(ShuffledShardSampler(n, r, world, seed=5)) for r in range(world)]
    flat = [i for s in shards for i in s]
    assert all(len(s) == n // world == len(ShuffledShardSampler(n, r, world)) for r, s in enumerate(shards))
    assert len(set(flat)) == len(flat) == n - n % world and set(flat) <= set(range(n))


def test_set_epoch_reshuffles_reproducibly():
    s = ShuffledShardSampler(1000, 1, 2, seed=3)
    e0 = list(s)
    s.set_epoch(1)
    e1 = list(s)
    s.set_epoch(0)
    assert list(s) == e0 and e1 != e0 and sorted(e1) != sorted(list(ShuffledShardSampler(1000, 0, 2, seed=3)))
    assert list(ShuffledShardSampler(1000, 1, 2, seed=4)) != e0  # the seed matters


def test_two_ranks_read_together_what_one_process_reads():
    """The order does not depend on world_size: ranks with batch b cover one process's batch 2b (DDP equivalence)."""
    one = list(islice(iter(ShuffledShardSampler(64, 0, 1, seed=0)), 8))
    r0, r1 = (list(islice(iter(ShuffledShardSampler(64, r, 2, seed=0)), 4)) for r in (0, 1))
    assert sorted(r0 + r1) == sorted(one)


def test_memory_is_bounded_by_the_chunk_not_the_dataset():
    """A rank of 8 over 16 M samples starts iterating with well under the 128 MB a full permutation would take."""
    tracemalloc.start()
    it = iter(ShuffledShardSampler(16_000_000, 3, 8, seed=0))
    first = list(islice(it, 1000))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(set(first)) == 1000 and peak < 16 * 2**20, peak


def test_ratio_sampler_ranks_stay_disjoint_over_several_passes():
    """Sources smaller than an epoch's draw are re-permuted each pass; within a pass ranks never share a sample."""
    per_rank = [[i for b in RatioBatchSampler([10, 30], [1, 1], batch_size=4, seed=2, rank=r, world_size=2,
                                              num_batches=5) for i in b] for r in range(2)]
    first_pass = [[i for i in p if i < 10][:5] for p in per_rank]  # 10 samples of source 0 -> 5 per rank per pass
    assert not set(first_pass[0]) & set(first_pass[1])
