"""Per-image records for the evaluation report: a loader that keeps each image's index and size, and the gather."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from crnn.data.collate import Batch, Collate
from crnn.data.datasets import open_dataset
from crnn.data.loader import make_collate, make_transform
from crnn.data.samplers import ShardSampler
from crnn.engine.distributed import all_gather_object
from crnn.report.analysis import Sample


@dataclass
class IndexedBatch(Batch):
    """A :class:`Batch` that also knows each kept image's dataset index and stored size (width, height)."""

    indices: list[int] = field(default_factory=list)
    sizes: list[tuple[int, int]] = field(default_factory=list)


class _Indexed(Dataset):
    """``(tensor | None, label, index, (w, h))`` per item: the stored image measured, then transformed."""

    def __init__(self, dataset: Dataset, transform) -> None:
        self.dataset, self.transform = dataset, transform

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int) -> tuple[Any, str, int, tuple[int, int]]:
        img, label = self.dataset[i]
        if img is None:
            return None, label, i, (0, 0)
        return self.transform(img), label, i, img.size


class _IndexedCollate:
    """Collate ``_Indexed`` items with the eval collate, keeping indices and sizes of the decodable images."""

    def __init__(self, inner: Collate) -> None:
        self.inner = inner

    def __call__(self, items: list) -> IndexedBatch:
        batch = self.inner([(img, label) for img, label, _, _ in items])
        kept = [(i, size) for img, _, i, size in items if img is not None]
        base = {f.name: getattr(batch, f.name) for f in fields(Batch)}
        return IndexedBatch(**base, indices=[i for i, _ in kept], sizes=[s for _, s in kept])


def build_report_loader(path: str, *, height: int, width: int, keep_ratio: bool, max_width: int, channels: int,
                        batch_size: int, num_workers: int, rank: int = 0, world_size: int = 1,
                        interpolation: str = "bilinear", mean: float = 0.5, std: float = 0.5,
                        pad: str = "batch", min_width: int = 8, width_step: int = 1,
                        width_scale: float = 1.0) -> DataLoader:
    """``build_eval_loader``'s loader (same shards, same preprocessing) yielding :class:`IndexedBatch` es."""
    transform = make_transform(height=height, width=width, keep_ratio=keep_ratio, max_width=max_width,
                               channels=channels, interpolation=interpolation, mean=mean, std=std, pad=pad,
                               min_width=min_width, width_step=width_step, width_scale=width_scale)
    dataset = _Indexed(open_dataset(path, charset=None), transform)
    collate = _IndexedCollate(make_collate(None, height=height, width=width, keep_ratio=keep_ratio,
                                           channels=channels, pad=pad))
    return DataLoader(dataset, batch_size=batch_size, sampler=ShardSampler(len(dataset), rank, world_size),
                      num_workers=num_workers, drop_last=False, pin_memory=torch.cuda.is_available(),
                      collate_fn=collate)


class SampleRecorder:
    """``on_batch`` hook for :func:`crnn.engine.evaluate.evaluate` that keeps one :class:`Sample` per image."""

    def __init__(self) -> None:
        self.samples: list[Sample] = []

    def __call__(self, batch: IndexedBatch, readings: list[tuple[str, float]]) -> None:
        for i, (w, h), label, (text, conf) in zip(batch.indices, batch.sizes, batch.labels, readings):
            self.samples.append(Sample(int(i), label, text, float(conf), int(w), int(h)))

    def gathered(self) -> list[Sample]:
        """Every rank's samples in dataset order (collective under DDP: every rank must call it)."""
        mine = [tuple(vars(s).values()) for s in self.samples]  # plain tuples pickle small and fast
        return sorted((Sample(*t) for rank in all_gather_object(mine) for t in rank), key=lambda s: s.index)


def image_reader(path: str):
    """``index -> PIL image as stored`` (None when it cannot be decoded) for one dataset, opened once."""
    dataset = open_dataset(path, charset=None)

    def read(index: int) -> Image.Image | None:
        return dataset[index][0]
    return read
