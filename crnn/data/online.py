"""Training batches rendered on the fly (``data.synth_online``): new text in every batch, nothing stored.

A pre-rendered LMDB costs disk, a generation pass before training, and its lines repeat once an epoch is over; a run
that spans many sittings on different machines would have to carry it or make it again. Here the loader's workers
render each batch from its own seeds instead: batch ``b`` is the same wherever and whenever it is made (any worker
count, any rank, after any resume), and a run never sees a line twice.

Every line of one batch has the same number of characters (drawn per batch, as ``crnn-synth`` draws it per line), so
keep-ratio lines of one batch are about equally wide and padding them to the widest wastes little: with lengths mixed
freely in a batch of 32, half of the pixels a step computes on were padding.

Batch ``b`` holds samples ``b * batch_size .. (b + 1) * batch_size - 1`` of the generator's seed, so a data set made
with ``crnn-synth --seed S --line-len N`` and these batches draw from the same stream of per-sample RNGs.
"""
from __future__ import annotations

import dataclasses
import io
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from PIL import Image
from torch.utils.data import Dataset, Sampler

from crnn.data.collate import Batch
from crnn.data.lines import line_length
from crnn.data.real_augment import RealAugment
from crnn.data.synth import SynthOptions, check_options, find_fonts, make_sample
from crnn.data.words import text_mode

__all__ = ["SynthBatches", "RealMix", "OnlineBatchSampler"]


class SynthBatches:
    """Map-style dataset whose item ``g`` is a list of ``pool`` collated batches (use with ``batch_size=None``):
    batches ``g * pool .. (g + 1) * pool - 1``.

    Text lines, ``opts.line_len`` 0: each batch draws its length like a line of ``crnn-synth`` does (2..max_len, now
    and then 1) and every line of it has that length; a fixed ``line_len`` keeps every batch at it. Scene-text words
    (English alphabets) keep their own lengths. ``pool`` > 1: the lines of the pool's batches are sorted by their
    resized width and cut into batches again (in a seeded order), so that a batch pads its lines to a width close to
    their own: lines of one length still differ in width (fonts, sizes, narrow digits and Latin letters).

    ``real`` (a data set of transformed ``(image, label)`` pairs, e.g. real crops with light augmentation) and
    ``real_share``: that share of samples is a real crop instead, which one and where decided by the seed and the
    sample's index alone (the same batch on any worker, rank or resume); 0 renders exactly what it rendered before.
    Several sources, each with its share: ``real`` a :class:`RealMix` (``real_share`` unused).
    """

    def __init__(self, opts: SynthOptions, batch_size: int, seed: int, transform: Callable[[Image.Image], Any],
                 collate: Callable[[list], Batch], batches_per_epoch: int, fonts: Sequence[str] | None = None,
                 pool: int = 1, real: Dataset | RealMix | None = None, real_share: float = 0.0) -> None:
        if batch_size < 1 or batches_per_epoch < 1 or pool < 1:
            raise ValueError(f"batch_size, batches_per_epoch and pool must be >= 1, got {batch_size}, "
                             f"{batches_per_epoch}, {pool}")
        if not isinstance(real, RealMix):
            if not 0.0 <= real_share <= 1.0 or (real_share > 0 and not real):
                raise ValueError(f"real_share must be within 0..1 and needs a non-empty real data set, got "
                                 f"{real_share}")
            real = RealMix([real], [real_share], seed) if real_share > 0 else None
        self.opts, self.batch_size, self.seed, self.pool = opts, batch_size, seed, pool
        self.transform, self.collate = transform, collate
        self.batches_per_epoch = batches_per_epoch
        self.real = real
        self.fonts = tuple(fonts) if fonts else tuple(find_fonts(None, opts.split))
        check_options(opts, self.fonts)  # a missing font or word list fails here, not in a worker

    def __len__(self) -> int:
        return self.batches_per_epoch // self.pool

    def length_of(self, b: int) -> int:
        """The number of characters of every line of batch ``b`` (0 for words: their lengths vary freely)."""
        if text_mode(self.opts) != "lines":
            return 0
        return line_length(random.Random(f"{self.seed}/batch/{b}"), self.opts.max_len, self.opts.line_len)

    def lines(self, b: int) -> list[tuple[Any, str]]:
        """The transformed lines of batch ``b`` (samples ``b * batch_size ...`` of the seed), in order."""
        if b < 0:
            raise IndexError(f"batch {b} is negative")
        opts = dataclasses.replace(self.opts, line_len=self.length_of(b))
        first = b * self.batch_size
        items = []
        for i in range(first, first + self.batch_size):
            real = self.real.draw(i) if self.real is not None else None
            if real is not None:  # a real crop instead
                items.append(real)
                continue
            data, label = make_sample(i, self.seed, self.fonts, opts)
            items.append((self.transform(Image.open(io.BytesIO(data)).convert("RGB")), label))
        return items

    def __getitem__(self, g: int) -> list[Batch]:
        first = g * self.pool
        if self.pool == 1:
            return [self.collate(self.lines(first))]
        items = [it for b in range(first, first + self.pool) for it in self.lines(b)]
        items.sort(key=lambda it: it[0].shape[-1])  # stable: equal widths keep their order
        chunks = [items[i:i + self.batch_size] for i in range(0, len(items), self.batch_size)]
        random.Random(f"{self.seed}/pool/{g}").shuffle(chunks)  # not narrowest to widest in turn
        return [self.collate(c) for c in chunks]


class RealMix:
    """Real crops mixed into rendered batches: source ``k`` (a data set of ``(image, label)`` pairs) replaces
    ``shares[k]`` of the samples. Sample ``i`` draws from ``random.Random(f"{seed}/real/{i}")``: one number, which
    falls in a source's share (the shares laid end to end from 0) or past them all (rendered), then the crop of that
    source; with one source exactly the draws of a single ``real_share``. ``augment`` (a
    :class:`~crnn.data.real_augment.RealAugment`) changes the picked crop, its draws keyed by the same seed and
    index, before ``transform``; without them the data sets' own transforms are the whole of it."""

    def __init__(self, sources: Sequence[Dataset], shares: Sequence[float], seed: int,
                 transform: Callable[[Image.Image], Any] | None = None,
                 augment: RealAugment | None = None) -> None:
        if len(sources) != len(shares) or not all(0 <= s <= 1 for s in shares) or sum(shares) > 1 + 1e-9:
            raise ValueError(f"one share within 0..1 per real source, adding up to at most 1, got {list(shares)} "
                             f"for {len(sources)} source(s)")
        empty = [k for k, (src, share) in enumerate(zip(sources, shares)) if share > 0 and not src]
        if empty:
            raise ValueError(f"real source {empty[0]} is empty; a source with a share needs crops")
        self.sources, self.shares, self.seed = list(sources), [float(s) for s in shares], seed
        self.transform, self.augment = transform, augment if augment else None

    def counts(self) -> list[int]:
        """The number of crops of each source."""
        return [len(src) for src in self.sources]

    def draw(self, i: int) -> tuple[Any, str] | None:
        """Sample ``i``'s real crop, transformed (None: sample ``i`` is rendered)."""
        pick = random.Random(f"{self.seed}/real/{i}")
        u, edge = pick.random(), 0.0
        for src, share in zip(self.sources, self.shares):
            edge += share
            if u < edge:
                img, label = src[pick.randrange(len(src))]
                if img is not None and self.augment is not None:
                    img = self.augment(img, label, f"{self.seed}/real/{i}")
                if img is not None and self.transform is not None:
                    img = self.transform(img)
                return img, label
        return None


class OnlineBatchSampler(Sampler[int]):
    """Item ids (batches, or pools of batches) for one rank: epoch ``e`` covers ids ``e * n * world .. (e + 1) * n *
    world - 1``, rank ``r`` takes every ``world``-th of them from ``r``. Every epoch renders new batches;
    ``set_epoch`` selects it."""

    def __init__(self, batches_per_epoch: int, rank: int = 0, world_size: int = 1) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside world_size {world_size}")
        self.n, self.rank, self.world = batches_per_epoch, rank, world_size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch (its batches are new text, not a reshuffle)."""
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[int]:
        base = self.epoch * self.n * self.world
        return iter(range(base + self.rank, base + self.n * self.world, self.world))


def identity(batches: list[Batch]) -> list[Batch]:
    """The loader's collate_fn: items are whole batches already (module level, so that workers can pickle it)."""
    return batches
