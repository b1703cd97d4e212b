"""Train and eval data loaders built from dataset paths."""
from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from crnn.charset import Charset
from crnn.data.collate import Batch, Collate
from crnn.data.datasets import ConcatTextDataset, DatasetError, open_dataset
from crnn.data.samplers import RatioBatchSampler, ShardSampler, ShuffledShardSampler, SkippableSampler
from crnn.data.transforms import ResizeNormalize

log = logging.getLogger(__name__)


class TrainLoader:
    """A training DataLoader that yields :class:`Batch` and reshuffles via :meth:`set_epoch`.

    ``sampler`` is the loader's (batch) sampler; ``per_batch`` is how many of its items make a
    batch (``batch_size`` for a sample sampler, 1 for a batch sampler).
    """

    def __init__(self, loader: DataLoader, sampler: SkippableSampler, per_batch: int) -> None:
        self.loader = loader
        self.sampler = sampler
        self.per_batch = per_batch

    @property
    def dataset(self) -> Dataset:
        """The (concatenated) training dataset."""
        return self.loader.dataset

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch's shuffle; call before iterating each epoch."""
        self.sampler.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Batch]:
        return iter(self.loader)

    def skip_batches(self, n: int) -> Iterator[Batch]:
        """Iterate the current epoch from batch ``n`` on; skipped batches are never loaded."""
        self.sampler.skip_next(n * self.per_batch)
        return iter(self.loader)


def stop_workers(loader: "TrainLoader | DataLoader") -> None:
    """Shut down a loader's persistent worker processes now, not whenever the loader happens to be collected.

    The workers ignore SIGTERM (the trainer's ``_worker_init``: a signal to the process group must reach only the
    training process), so the fallback of Python's exit, SIGTERM to daemonic children and then join, waits forever on
    them. A loader kept alive until exit (an exception's traceback in a reference cycle, as on a DDP rank that lost
    contact) then hung the process until torchrun's SIGKILL."""
    dl = loader.loader if isinstance(loader, TrainLoader) else loader
    it = getattr(dl, "_iterator", None)
    dl._iterator = None
    if it is not None and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()


# A training loader's worker that sends no batch for this long has hung (a worker forked while another thread held a
# lock can wait forever): the loader raises, the run fails instead of waiting for ever, and under torchrun the group
# restarts from last.pt. A pool of rendered batches takes seconds; starting a worker takes under a minute.
WORKER_TIMEOUT = 600


def make_transform(*, height: int, width: int, keep_ratio: bool, max_width: int, channels: int,
                   augment: bool = False, interpolation: str = "bilinear", mean: float = 0.5, std: float = 0.5,
                   pad: str = "batch", min_width: int = 8, width_step: int = 1,
                   width_scale: float = 1.0) -> ResizeNormalize:
    """The image transform shared by training and evaluation (preprocessing as in the model's data config;
    ``width_scale``: reading only, :func:`read_options`)."""
    return ResizeNormalize(height=height, width=width, keep_ratio=keep_ratio, max_width=max_width,
                           channels=channels, augment=augment, min_width=min_width, interpolation=interpolation,
                           mean=mean, std=std, pad=pad, width_step=width_step, width_scale=width_scale)


def make_collate(charset: Charset | None, *, height: int, width: int, keep_ratio: bool, channels: int,
                 pad: str = "batch") -> Collate:
    """Collate that pads keep-ratio batches to a multiple of 4 pixels (edge-padded images are already equal;
    EasyOCR-padded ones are padded to the batch's widest by repeating their last column, as EasyOCR does)."""
    multiple = 4 if keep_ratio and pad == "batch" else 1
    return Collate(charset, width_multiple=multiple, empty_shape=(channels, height, width), pad_edge=pad == "easyocr")


def build_train_loader(sources: Sequence[dict[str, Any]], charset: Charset, *, height: int, width: int,
                       keep_ratio: bool, max_width: int, channels: int, batch_size: int, num_workers: int,
                       max_label_length: int | None, augment: bool, seed: int, rank: int = 0,
                       world_size: int = 1, interpolation: str = "bilinear", mean: float = 0.5, std: float = 0.5,
                       pad: str = "batch", min_width: int = 8, width_step: int = 1) -> TrainLoader:
    """Training loader over ``sources`` (``{"path", "ratio"}``): shuffled, sharded by rank, drop_last."""
    if not sources:
        raise DatasetError("no training sources given; set data.train to at least one dataset path")
    transform = make_transform(height=height, width=width, keep_ratio=keep_ratio, max_width=max_width,
                               channels=channels, augment=augment, interpolation=interpolation, mean=mean, std=std,
                               pad=pad, min_width=min_width, width_step=width_step)
    parts = [open_dataset(s["path"], charset, max_label_length, transform) for s in sources]
    for src, part in zip(sources, parts):
        if len(part) == 0:
            raise DatasetError(f"{src['path']}: no usable samples after label filtering "
                               f"(dropped: {getattr(part, 'dropped', {})}); check the charset and max_label_length")
    dataset = ConcatTextDataset(parts)
    ratios = _ratios(sources)
    common: dict[str, Any] = dict(
        num_workers=num_workers, collate_fn=make_collate(charset, height=height, width=width,
                                                         keep_ratio=keep_ratio, channels=channels, pad=pad),
        pin_memory=torch.cuda.is_available(), persistent_workers=num_workers > 0,
        timeout=WORKER_TIMEOUT if num_workers > 0 else 0, generator=torch.Generator().manual_seed(seed + rank))
    if ratios is None:
        sampler = SkippableSampler(ShuffledShardSampler(len(dataset), rank, world_size, seed))
        if len(sampler) < batch_size:
            raise DatasetError(f"{len(dataset)} training samples are too few for one batch of {batch_size} "
                               f"per rank on {world_size} ranks; lower the batch size or add data")
        loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=True, **common)
        per_batch = batch_size
    else:
        sampler = SkippableSampler(RatioBatchSampler([len(p) for p in parts], ratios, batch_size, seed=seed,
                                                     rank=rank, world_size=world_size))
        loader = DataLoader(dataset, batch_sampler=sampler, **common)
        per_batch = 1
    log.info("train data: %d samples from %d source(s), %d batches of %d per epoch on rank %d",
             len(dataset), len(parts), len(loader), batch_size, rank)
    return TrainLoader(loader, sampler, per_batch)


class PooledTrainLoader(TrainLoader):
    """A TrainLoader whose DataLoader yields lists of ``pool`` batches (:class:`crnn.data.online.SynthBatches`):
    iterated, counted and skipped in batches."""

    def __init__(self, loader: DataLoader, sampler: SkippableSampler, pool: int) -> None:
        super().__init__(loader, sampler, 1)
        self.pool = pool
        self._drop = 0

    def __len__(self) -> int:
        return len(self.loader) * self.pool

    def __iter__(self) -> Iterator[Batch]:
        drop, self._drop = self._drop, 0
        for group in self.loader:
            yield from group[drop:]
            drop = 0

    def skip_batches(self, n: int) -> Iterator[Batch]:
        """Iterate the current epoch from batch ``n`` on: whole pools are skipped unrendered."""
        self.sampler.skip_next(n // self.pool)
        self._drop = n % self.pool
        return iter(self)


def build_online_loader(opts: Any, charset: Charset, *, height: int, width: int, keep_ratio: bool, max_width: int,
                        channels: int, batch_size: int, num_workers: int, augment: bool, seed: int,
                        batches_per_epoch: int, rank: int = 0, world_size: int = 1, interpolation: str = "bilinear",
                        mean: float = 0.5, std: float = 0.5, pad: str = "batch", pool: int = 1,
                        min_width: int = 8, width_step: int = 1, real: Sequence[tuple[str, float]] = (),
                        real_augment: Any = None) -> TrainLoader:
    """Training loader whose workers render every batch on the fly (:mod:`crnn.data.online`): ``opts`` is the
    generator's SynthOptions, ``seed`` its seed; ``pool`` batches at a time are regrouped by line width; rank ``r``
    of ``world_size`` takes every ``world_size``-th pool. ``real``: ``(path, share)`` of each real-crop source mixed
    in (lightly augmented, and by ``real_augment``, a :class:`~crnn.data.real_augment.RealAugment`, before that)."""
    from crnn.data.online import OnlineBatchSampler, SynthBatches, identity

    transform = make_transform(height=height, width=width, keep_ratio=keep_ratio, max_width=max_width,
                               channels=channels, augment=augment, interpolation=interpolation, mean=mean, std=std,
                               pad=pad, min_width=min_width, width_step=width_step)
    collate = make_collate(charset, height=height, width=width, keep_ratio=keep_ratio, channels=channels, pad=pad)
    per_epoch = max(pool, batches_per_epoch - batches_per_epoch % pool)
    real_mix = None
    if any(share > 0 for _, share in real):  # real crops, lightly augmented, labels checked against the alphabet
        real_tf = make_transform(height=height, width=width, keep_ratio=keep_ratio, max_width=max_width,
                                 channels=channels, augment=True, interpolation=interpolation, mean=mean, std=std,
                                 pad=pad, min_width=min_width, width_step=width_step)
        real_mix = open_real_mix(real, charset, opts.max_len, seed, real_tf, real_augment)
    dataset = SynthBatches(opts, batch_size, seed, transform, collate, per_epoch, pool=pool, real=real_mix)
    sampler = SkippableSampler(OnlineBatchSampler(per_epoch // pool, rank, world_size))
    loader = DataLoader(dataset, batch_size=None, sampler=sampler, collate_fn=identity, num_workers=num_workers,
                        pin_memory=torch.cuda.is_available(), persistent_workers=num_workers > 0,
                        timeout=WORKER_TIMEOUT if num_workers > 0 else 0,
                        prefetch_factor=max(1, 4 // pool) if num_workers > 0 else None)
    log.info("train data: rendered on the fly (%s, seed %d), batches of %d lines of one length each%s, %d batches "
             "per epoch on rank %d, new text every epoch", opts.charset, seed, batch_size,
             f", regrouped by width {pool} batches at a time" if pool > 1 else "", per_epoch, rank)
    return PooledTrainLoader(loader, sampler, pool)


class RealSourceError(ValueError):
    """A real-crop source that cannot be mixed in: unreadable, or no crop left once its labels are checked (the
    message names the path and the fix)."""


def open_real_mix(real: Sequence[tuple[str, float]], charset: Charset, max_label_length: int, seed: int,
                  transform: Any, augment: Any = None) -> Any:
    """The :class:`~crnn.data.online.RealMix` of the ``(path, share)`` sources with a share, their labels checked
    against the alphabet; RealSourceError naming a source that cannot be read or of which no crop is left."""
    from crnn.data.online import RealMix

    real = [(path, share) for path, share in real if share > 0]
    sets = []
    for path, _ in real:
        try:
            sets.append(open_dataset(path, charset=charset, max_label_length=max_label_length))
        except DatasetError as e:
            raise RealSourceError(str(e)) from None
        if len(sets[-1]) == 0:
            dropped = getattr(sets[-1], "dropped", {})
            why = ", ".join(f"{k}={n}" for k, n in dropped.items() if n)
            raise RealSourceError(f"{path}: none of its {sum(dropped.values()):,} crops has a label the model's "
                                  f"alphabet writes in at most {max_label_length} characters"
                                  + (f" (dropped: {why})" if why else "") + "; fix its labels or leave it out")
    return RealMix(sets, [share for _, share in real], seed, transform=transform, augment=augment)


def build_eval_loader(path: str, *, height: int, width: int, keep_ratio: bool, max_width: int, channels: int,
                      batch_size: int, num_workers: int, rank: int = 0, world_size: int = 1,
                      interpolation: str = "bilinear", mean: float = 0.5, std: float = 0.5,
                      pad: str = "batch", min_width: int = 8, width_step: int = 1,
                      width_scale: float = 1.0) -> DataLoader:
    """Eval loader with raw labels; rank ``r`` reads a disjoint contiguous shard (no padding, no duplicates)."""
    transform = make_transform(height=height, width=width, keep_ratio=keep_ratio, max_width=max_width,
                               channels=channels, interpolation=interpolation, mean=mean, std=std, pad=pad,
                               min_width=min_width, width_step=width_step, width_scale=width_scale)
    dataset = open_dataset(path, charset=None, transform=transform)
    return DataLoader(dataset, batch_size=batch_size, sampler=ShardSampler(len(dataset), rank, world_size),
                      num_workers=num_workers, drop_last=False, pin_memory=torch.cuda.is_available(),
                      collate_fn=make_collate(None, height=height, width=width, keep_ratio=keep_ratio,
                                              channels=channels, pad=pad))


def preprocess_options(data: Any) -> dict[str, Any]:
    """The preprocessing settings of a data config (``cfg.data``) as keyword arguments for the loaders."""
    return {"interpolation": data.interpolation, "mean": data.mean, "std": data.std, "pad": data.pad,
            "min_width": data.min_width, "width_step": data.width_step}


def read_options(data: Any) -> dict[str, Any]:
    """:func:`preprocess_options` for reading (validation, crnn-eval, crnn-predict): with ``data.read_width_scale``,
    which training leaves out (its lines keep their own widths)."""
    return {**preprocess_options(data), "width_scale": data.read_width_scale}


READING_KEYS = ("height", "keep_ratio", "width", "min_width", "max_width", "width_step", "read_width_scale", "pad",
                "interpolation", "mean", "std")


def reading_changes(stored: dict | None, cfg: Any) -> list[str]:
    """``data.min_width 16 -> 100``: every preprocessing setting in which the run of ``cfg`` (a crnn Config) reads
    crops otherwise than the config stored in ``train.init_weights`` (``stored``; [] without one). ``data.width``
    counts only where a side reads at a fixed width, the keep-ratio limits only where a side keeps the ratio."""
    from crnn.config import DataConfig

    data = (stored or {}).get("data") if isinstance(stored, dict) else None
    if not isinstance(data, dict):
        return []
    default, now = DataConfig(), cfg.data
    was = {k: data.get(k, getattr(default, k)) for k in READING_KEYS}
    keys = [k for k in READING_KEYS
            if not (k == "width" and was["keep_ratio"] and now.keep_ratio)
            and not (k in ("min_width", "max_width", "width_step", "read_width_scale")
                     and not (was["keep_ratio"] or now.keep_ratio))]
    return [f"data.{k} {_shown(was[k])} -> {_shown(getattr(now, k))}" for k in keys if was[k] != getattr(now, k)]


def _shown(value: Any) -> str:
    """A config value as an override writes it (``true``, not ``True``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _ratios(sources: Sequence[dict[str, Any]]) -> list[float] | None:
    """The sources' ratios, or ``None`` when none is set; a partial set is an error."""
    ratios = [s.get("ratio") for s in sources]
    if all(r is None for r in ratios):
        return None
    if any(r is None for r in ratios):
        missing = [s["path"] for s in sources if s.get("ratio") is None]
        raise DatasetError(f"either every training source has a ratio or none does; missing for {missing}")
    if any(float(r) <= 0 for r in ratios):
        raise DatasetError(f"training source ratios must be > 0, got {ratios}")
    return [float(r) for r in ratios]
