"""Samplers: shuffled rank shards, proportional mixing of several training sources, and exact eval sharding.

No sampler holds a per-sample Python list or a whole-dataset permutation: a shuffled order is a seeded pseudo-random
permutation (:class:`Permutation`) evaluated only at the positions a rank reads, a chunk at a time, so a rank's memory
is bounded by the chunk, not by the dataset (16 M samples would otherwise be a 16 M-element list per rank per epoch).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any

import numpy as np
import torch
from torch.utils.data import Sampler

CHUNK = 1 << 16  # positions evaluated at a time
_M1, _M2, _S = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xD6E8FEB86659FD93), np.uint64(32)


class Permutation:
    """A seeded pseudo-random permutation of ``range(n)`` that maps any array of positions to samples.

    A balanced Feistel network over the smallest even-bit power of two >= ``n`` (a bijection there), restricted to
    ``range(n)`` by cycle walking (re-applied while a value falls outside; a bijection on ``range(n)`` as well). Nothing
    of size ``n`` is ever built.
    """

    ROUNDS = 6

    def __init__(self, n: int, *key: int) -> None:
        if n < 1:
            raise ValueError(f"a permutation needs n >= 1, got {n}")
        self.n = n
        self.half = max(1, (max(n - 1, 1).bit_length() + 1) // 2)
        self.mask = np.uint64((1 << self.half) - 1)
        self.keys = np.random.SeedSequence([k & 0xFFFF_FFFF_FFFF for k in key]).generate_state(self.ROUNDS, np.uint64)

    def _encrypt(self, x: np.ndarray) -> np.ndarray:
        left, right, h = x >> np.uint64(self.half), x & self.mask, np.uint64(self.half)
        for k in self.keys:
            z = (right + k) * _M1
            z = (z ^ (z >> _S)) * _M2
            left, right = right, left ^ ((z ^ (z >> _S)) & self.mask)
        return (left << h) | right

    def __call__(self, positions: np.ndarray) -> np.ndarray:
        """The samples at ``positions`` (each in ``range(n)``) of this permutation, as int64."""
        out = self._encrypt(np.asarray(positions, dtype=np.uint64))
        outside = out >= self.n
        while outside.any():
            out[outside] = self._encrypt(out[outside])
            outside = out >= self.n
        return out.astype(np.int64)

    def shard(self, rank: int, world_size: int, stop: int) -> Iterator[int]:
        """Samples at positions ``rank, rank + world_size, ... < stop``, computed a chunk at a time."""
        step = CHUNK * world_size
        for start in range(rank, stop, step):
            yield from self(np.arange(start, min(start + step, stop), world_size, dtype=np.uint64)).tolist()


class ShuffledShardSampler(Sampler[int]):
    """Rank ``rank``'s share of a fresh shuffle of ``range(n)`` each epoch (DistributedSampler with drop_last).

    The epoch's order is one permutation shared by every rank; rank ``r`` takes positions ``r::world_size`` of its
    first ``n - n % world_size`` (equal shares, disjoint). The permutation does not depend on ``world_size``, so two
    ranks with batch b read together exactly what one process with batch 2b reads.
    """

    def __init__(self, n: int, rank: int = 0, world_size: int = 1, seed: int = 0) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside world_size {world_size}")
        self.n, self.rank, self.world_size, self.seed = n, rank, world_size, seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch; each epoch draws a different, reproducible order."""
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n // self.world_size

    def __iter__(self) -> Iterator[int]:
        if self.n < self.world_size:
            return iter(())
        usable = self.n - self.n % self.world_size
        return Permutation(self.n, self.seed, self.epoch).shard(self.rank, self.world_size, usable)


class RatioBatchSampler(Sampler[list[int]]):
    """Batches that mix several concatenated sources in fixed proportions.

    Source ``s`` owns global indices ``offsets[s] .. offsets[s] + sizes[s] - 1``. Each batch takes
    ``batch_size * ratio_s`` samples from source ``s`` (fractional slots are drawn at random
    with those weights, so the expected share is exact). Each source is walked through a
    seeded permutation that changes every epoch and every pass; rank ``r`` of ``world_size``
    takes positions ``r::world_size`` of it, so ranks draw disjoint samples. A source that runs
    out within an epoch is reshuffled and reused. An epoch has ``num_batches`` batches
    (default: as many as the concatenation would give each rank, ``sum(sizes) // (B * world)``).
    """

    def __init__(self, sizes: Sequence[int], ratios: Sequence[float], batch_size: int, *, seed: int = 0,
                 rank: int = 0, world_size: int = 1, num_batches: int | None = None) -> None:
        if len(sizes) != len(ratios) or not sizes:
            raise ValueError(f"need one ratio per source, got {len(ratios)} ratios for {len(sizes)} sources")
        if any(r <= 0 for r in ratios):
            raise ValueError(f"ratios must be > 0, got {list(ratios)}")
        if any(n < world_size for n in sizes):
            raise ValueError(f"every source needs at least world_size={world_size} samples, sizes are {list(sizes)}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside world_size {world_size}")
        self.sizes = list(sizes)
        self.offsets = [sum(self.sizes[:i]) for i in range(len(self.sizes))]
        total = float(sum(ratios))
        self.weights = [r / total for r in ratios]
        self.batch_size, self.seed, self.rank, self.world_size = batch_size, seed, rank, world_size
        self.num_batches = num_batches if num_batches is not None else sum(sizes) // (batch_size * world_size)
        if self.num_batches < 1:
            raise ValueError(f"{sum(sizes)} samples are too few for one batch of {batch_size} on {world_size} ranks")
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch; each epoch draws a different, reproducible order."""
        self.epoch = epoch

    def __len__(self) -> int:
        return self.num_batches

    def __iter__(self) -> Iterator[list[int]]:
        gen = self._generator(-1)
        streams = [self._stream(s) for s in range(len(self.sizes))]
        for _ in range(self.num_batches):
            counts = self.batch_counts(gen)
            batch = [next(streams[s]) for s, k in enumerate(counts) for _ in range(k)]
            order = torch.randperm(len(batch), generator=gen).tolist()
            yield [batch[i] for i in order]

    def _generator(self, stream: int) -> torch.Generator:
        """A generator for one stream of this epoch, identical on every rank."""
        return torch.Generator().manual_seed(hash((self.seed, self.epoch, stream)) & 0x7FFF_FFFF_FFFF)

    def batch_counts(self, gen: torch.Generator) -> list[int]:
        """Samples per source for one batch: floor of the share plus randomly placed remainders."""
        exact = [w * self.batch_size for w in self.weights]
        counts = [int(x) for x in exact]
        missing = self.batch_size - sum(counts)
        if missing:
            frac = torch.tensor([x - c for x, c in zip(exact, counts)], dtype=torch.float64)
            for s in torch.multinomial(frac, missing, replacement=False, generator=gen).tolist():
                counts[s] += 1
        return counts

    def _stream(self, s: int) -> Iterator[int]:
        """Endless global indices of source ``s`` for this rank: permutation after permutation."""
        n = self.sizes[s]
        usable = n - n % self.world_size  # equal share per rank, so no rank sees another's sample
        for rounds in range(1 << 62):
            for i in Permutation(n, self.seed, self.epoch, s, rounds).shard(self.rank, self.world_size, usable):
                yield self.offsets[s] + i


class ShardSampler(Sampler[int]):
    """Contiguous, non-overlapping shard ``rank`` of ``range(n)``; the shards cover it exactly once."""

    def __init__(self, n: int, rank: int = 0, world_size: int = 1) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside world_size {world_size}")
        self.start = n * rank // world_size
        self.stop = n * (rank + 1) // world_size

    def __len__(self) -> int:
        return self.stop - self.start

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.stop))


class SkippableSampler(Sampler[Any]):
    """Wrap a sampler or batch sampler so that its next pass can start ``n`` items in.

    Resuming mid-epoch then skips indices, not loaded batches. ``set_epoch`` is forwarded.
    """

    def __init__(self, inner: Sampler[Any]) -> None:
        self.inner = inner
        self._skip = 0

    def set_epoch(self, epoch: int) -> None:
        """Forward the epoch to the wrapped sampler."""
        self.inner.set_epoch(epoch)

    def skip_next(self, n: int) -> None:
        """Make the next ``iter()`` drop its first ``n`` items."""
        self._skip = max(0, int(n))

    def __len__(self) -> int:
        return len(self.inner)

    def __iter__(self) -> Iterator[Any]:
        skip, self._skip = self._skip, 0
        return islice(iter(self.inner), skip, None)
