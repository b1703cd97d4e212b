"""Batching: stack (and right-pad) images, encode targets, skip and count undecodable samples."""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any

import torch

from crnn.charset import Charset


@dataclass
class Batch:
    """One batch. ``targets`` are concatenated class ids (empty without a charset).

    ``widths`` are the image widths before right-padding; ``num_skipped`` counts samples of
    this batch whose image could not be decoded (they are not in the batch). ``len(batch)``
    can be 0 when every sample was skipped.
    """

    images: torch.Tensor  # (B, C, H, W) float32
    targets: torch.Tensor  # (sum(target_lengths),) int64
    target_lengths: torch.Tensor  # (B,) int64
    labels: list[str]
    widths: torch.Tensor  # (B,) int64
    num_skipped: int = 0

    def __len__(self) -> int:
        return len(self.labels)

    def pin_memory(self) -> "Batch":
        """Page-locked copy of the tensors (called by DataLoader when ``pin_memory=True``)."""
        return replace(self, images=self.images.pin_memory(), targets=self.targets.pin_memory(),
                       target_lengths=self.target_lengths.pin_memory(), widths=self.widths.pin_memory())

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "Batch":
        """Copy of the batch with its tensors on ``device``."""
        def move(t: torch.Tensor) -> torch.Tensor:
            return t.to(device, non_blocking=non_blocking)
        return replace(self, images=move(self.images), targets=move(self.targets),
                       target_lengths=move(self.target_lengths), widths=move(self.widths))


class Collate:
    """Turn a list of ``(image, label)`` into a :class:`Batch`.

    Images are right-padded with ``pad_value`` (0 = mid-grey after normalisation) to the batch's
    widest image rounded up to a multiple of ``width_multiple``; with ``pad_edge`` by repeating each image's
    last column instead (EasyOCR pads its batches so). Samples whose image is ``None``
    are dropped and counted. ``empty_shape`` ``(C, H, W)`` shapes the images of an all-skipped batch.
    """

    def __init__(self, charset: Charset | None = None, *, pad_value: float = 0.0, width_multiple: int = 4,
                 empty_shape: tuple[int, int, int] = (1, 32, 100), pad_edge: bool = False) -> None:
        if width_multiple < 1:
            raise ValueError(f"width_multiple must be >= 1, got {width_multiple}")
        self.charset = charset
        self.pad_value = pad_value
        self.width_multiple = width_multiple
        self.empty_shape = empty_shape
        self.pad_edge = pad_edge

    def __call__(self, samples: Sequence[tuple[Any, str]]) -> Batch:
        kept = [(img, label) for img, label in samples if img is not None]
        labels = [label for _, label in kept]
        images = self._stack([img for img, _ in kept])
        widths = torch.tensor([img.shape[-1] for img, _ in kept], dtype=torch.long)
        if self.charset is not None and labels:
            targets, lengths = self.charset.encode(labels)
        else:
            targets = torch.zeros(0, dtype=torch.long)
            lengths = torch.zeros(len(labels), dtype=torch.long)
        return Batch(images, targets, lengths, labels, widths, num_skipped=len(samples) - len(kept))

    def _stack(self, images: list[torch.Tensor]) -> torch.Tensor:
        """``[(C, H, W_i)]`` -> ``(B, C, H, W)``, right-padded to a multiple of ``width_multiple``."""
        if not images:
            return torch.zeros((0, *self.empty_shape))
        c, h = images[0].shape[:2]
        m = self.width_multiple
        width = -(-max(img.shape[-1] for img in images) // m) * m
        if all(img.shape[-1] == width for img in images):
            return torch.stack(images)  # (B, C, H, W)
        out = torch.empty((len(images), c, h, width), dtype=images[0].dtype)  # (B, C, H, W)
        for i, img in enumerate(images):
            w = img.shape[-1]
            out[i, :, :, :w] = img
            out[i, :, :, w:] = img[..., -1:] if self.pad_edge else self.pad_value
        return out


def split_by_width(batch):
    """A right-padded :class:`~crnn.data.collate.Batch` -> batches of images of one unpadded width each, cut to it.

    Every crop is then read at its own width, as :class:`Recognizer` reads it, not at the batch's widest: the padding
    costs time and (through the bidirectional LSTM) can change the reading. Groups come in order of first
    appearance; fields with one entry per image follow their images, ``num_skipped`` stays with the first group.
    """
    widths = [int(w) for w in batch.widths]
    if len(set(widths)) <= 1 and (not widths or widths[0] == batch.images.shape[-1]):
        return [batch]
    groups: dict[int, list[int]] = {}
    for i, w in enumerate(widths):
        groups.setdefault(w, []).append(i)
    n = len(widths)
    targets = list(torch.split(batch.targets, [int(x) for x in batch.target_lengths])) if batch.targets.numel() else []
    out = []
    for k, (w, idx) in enumerate(groups.items()):
        changes = {}
        for f in fields(batch):
            v = getattr(batch, f.name)
            if f.name == "images":
                changes[f.name] = v[idx, ..., :w]  # (b, C, H, w)
            elif f.name == "targets":
                changes[f.name] = torch.cat([targets[i] for i in idx]) if targets else v
            elif f.name == "num_skipped":
                changes[f.name] = v if k == 0 else 0
            elif isinstance(v, torch.Tensor) and v.dim() > 0 and len(v) == n:
                changes[f.name] = v[idx]
            elif isinstance(v, (list, tuple)) and len(v) == n:
                changes[f.name] = type(v)(v[i] for i in idx)
        out.append(replace(batch, **changes))
    return out


def concat_batches(batches: Sequence):
    """Right-padded batches of one dataclass type -> one batch holding all their images (right-padded with zeros to
    the widest): fields with one entry per image are concatenated, ``num_skipped`` summed, anything else taken from
    the first. The padding is never read: :func:`split_by_width` cuts every image back to its own width."""
    if len(batches) == 1:
        return batches[0]
    first, n = batches[0], [len(b.labels) for b in batches]
    changes = {}
    for f in fields(first):
        vals = [getattr(b, f.name) for b in batches]
        if f.name == "images":
            c, h = vals[0].shape[1:3]
            out = vals[0].new_zeros((sum(n), c, h, max(v.shape[-1] for v in vals)))  # (B, C, H, W)
            start = 0
            for v in vals:
                out[start:start + len(v), ..., :v.shape[-1]] = v
                start += len(v)
            changes[f.name] = out
        elif f.name == "targets":
            changes[f.name] = torch.cat(vals)
        elif f.name == "num_skipped":
            changes[f.name] = sum(vals)
        elif all(isinstance(v, torch.Tensor) and v.dim() > 0 and len(v) == k for v, k in zip(vals, n)):
            changes[f.name] = torch.cat(vals)
        elif all(isinstance(v, (list, tuple)) and len(v) == k for v, k in zip(vals, n)):
            changes[f.name] = type(vals[0])(x for v in vals for x in v)
    return replace(first, **changes)


def read_at_own_width(batches: Iterable, pool: int = 512) -> Iterator:
    """:func:`split_by_width` over a loader: what ``crnn-eval`` feeds the model, so that it reads as crnn-predict.

    Batches are pooled until they hold ``pool`` images before they are cut, so that crops of one width meet across
    loader batches (a keep-ratio set read 64 at a time came out in forwards of 2-3 images); no forward holds more
    images than the largest loader batch pooled. ``pool`` 0 cuts each batch alone.
    """
    pooled: list = []
    for batch in batches:
        if not is_dataclass(batch) or not hasattr(batch, "widths"):
            yield batch
            continue
        pooled.append(batch)
        if sum(len(b.labels) for b in pooled) >= pool:
            yield from _cut(pooled)
            pooled = []
    if pooled:
        yield from _cut(pooled)


def _cut(pooled: list) -> Iterator:
    """The pooled batches as equal-width batches of at most the largest pooled batch's size."""
    cap = max(1, max(len(b.labels) for b in pooled))
    for group in split_by_width(concat_batches(pooled)):
        if len(group.labels) <= cap:
            yield group
            continue
        for start in range(0, len(group.labels), cap):
            yield _take(group, start, start + cap)


def _take(batch, start: int, stop: int):
    """Images ``start:stop`` of an equal-width batch (targets follow; ``num_skipped`` stays with the first part)."""
    n = len(batch.labels)
    lengths = [int(x) for x in batch.target_lengths]
    t0, t1 = sum(lengths[:start]), sum(lengths[:stop])
    changes = {}
    for f in fields(batch):
        v = getattr(batch, f.name)
        if f.name == "targets":
            changes[f.name] = v[t0:t1] if v.numel() else v
        elif f.name == "num_skipped":
            changes[f.name] = v if start == 0 else 0
        elif isinstance(v, torch.Tensor) and v.dim() > 0 and len(v) == n:
            changes[f.name] = v[start:stop]
        elif isinstance(v, (list, tuple)) and len(v) == n:
            changes[f.name] = v[start:stop]
    return replace(batch, **changes)
