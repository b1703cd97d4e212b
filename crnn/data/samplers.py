"""Samplers: proportional mixing of several training sources, and exact eval sharding."""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any

import torch
from torch.utils.data import Sampler


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
        streams = [self._stream(s, self._generator(s)) for s in range(len(self.sizes))]
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

    def _stream(self, s: int, gen: torch.Generator) -> Iterator[int]:
        """Endless global indices of source ``s`` for this rank: permutation after permutation."""
        n = self.sizes[s]
        usable = n - n % self.world_size  # equal share per rank, so no rank sees another's sample
        while True:
            perm = torch.randperm(n, generator=gen)[:usable]
            for i in perm[self.rank::self.world_size].tolist():
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
