"""The data room's entry for a training run: a config's data section turned into loaders, in two steps.

:func:`prepare` makes what must exist on disk (the synthetic LMDBs the config names, fine-tuning's rehearsal and
base-domain sets); the caller runs it on one process first, then on each machine's first. :func:`build` returns a
:class:`Feed`: the training stream (stored sets mixed in their shares, the rehearsal source, or lines rendered on the
fly with real crops mixed in), the validation loaders, the line the log prints about it, and the fonts the run
records. Both take plain values (rank, world size, the config stored in the starting checkpoint), never engine
objects: nothing under ``crnn.data`` imports ``crnn.engine``. Errors are :class:`~crnn.data.datasets.DataError`
whose message starts with the config key.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from torch.utils.data import DataLoader

from crnn.charset import Charset
from crnn.config import Config
from crnn.data.datasets import DataError, DatasetError
from crnn.data.loader import TrainLoader, build_eval_loader, build_train_loader, preprocess_options, read_options
from crnn.data.rehearsal import generate_base_style, training_sources

if TYPE_CHECKING:
    from crnn.data.online import RealMix

log = logging.getLogger("crnn")

VAL_SEED_OFFSET = 10_000_019  # a synthetic data.val set: another seed than the training data


@dataclass
class Feed:
    """What a run is fed: ``train`` (a TrainLoader), ``val`` (data.val loaders by path), ``base_val``
    (train.base_val loaders by path), ``description`` (one log line) and ``fonts`` (the faces rendered on the fly,
    None for stored sets)."""

    train: TrainLoader
    val: dict[str, DataLoader]
    base_val: dict[str, DataLoader]
    description: str
    fonts: list | None = None

    def loaders(self) -> list[DataLoader]:
        """Every DataLoader of the run (the training one first)."""
        return [self.train.loader, *self.val.values(), *self.base_val.values()]


def check(cfg: Config) -> None:
    """Refuse data settings that cannot work together."""
    d = cfg.data
    if d.synth_online and d.rehearsal:
        raise DataError(f"data.rehearsal={d.rehearsal} is not read when data.synth_online renders every batch: set "
                        f"data.rehearsal= (empty), or mix that set into the rendered lines with "
                        f"data.synth_real={d.rehearsal} data.synth_real_share={d.rehearsal_ratio:g}")
    for path, _ in d.real_sources() if d.synth_online else []:
        if not Path(path).exists():
            raise DataError(f"data.synth_real: {path}: no such file or directory; {_real_fix(path)}")


# the English recipe's real-crop folders (configs/shipped_en.yaml) and the --source that builds each
EN_REAL = {"en_real_train": "", "ic15_real_train": " --source ic15_train"}


def _real_fix(path: str) -> str:
    """What to do about a data.synth_real folder that is not there: build it where it is the English recipe's."""
    name = Path(path).name
    if name in EN_REAL:
        return (f"build the English recipe's real crops there (python -m crnn.data.en_dev --trainable {path}"
                f"{EN_REAL[name]}) or correct the path")
    return "correct the path: an LMDB, or a folder with a gt.txt of relative/path<TAB>label lines"


def prepare(cfg: Config, *, progress: bool, start: Config | None = None) -> None:
    """Generate the synthetic LMDBs that the config names but that do not exist yet (the same data from the same
    seed wherever it runs), and again those crnn rendered otherwise (another height, number, seed or lever: each set
    stores what it was rendered as); a set of the user's own is never rendered over. A train entry's ``synth_seed`` /
    ``synth_style`` override ``data.synth_seed`` / ``data.synth_style`` for that source. ``start``: the config stored
    in ``train.init_weights``, for ``data.rehearsal_style: base`` (:func:`crnn.data.rehearsal.needs_start_config`)."""
    check(cfg)
    d = cfg.data
    jobs = [] if d.synth_online else [(s["path"], d.synth_num, s.get("synth_seed", d.synth_seed),
                                       s.get("synth_style", d.synth_style)) for s in d.train]
    jobs += [(p, d.synth_val_num, d.synth_seed + VAL_SEED_OFFSET, d.synth_style) for p in d.val]
    for path, num, seed, style in jobs:
        if num <= 0:
            continue
        from crnn.data.synth import (generate_lmdb, stale_rendering, synth_options, warn_kept_height,
                                      warn_rendering_again)

        opts = synth_options(cfg, style)
        if Path(path).exists():  # kept, unless crnn rendered it otherwise than this config renders it
            stale = stale_rendering(path, num, seed, opts)
            if not stale:
                warn_kept_height(path, opts, "data.train or data.val")
                continue
            warn_rendering_again(path, stale)
        else:
            log.info("generating %d synthetic %s into %s (seed %d%s)", num,
                     "samples" if opts.text == "words" else f"text lines for {cfg.model.charset}", path, seed,
                     "" if style == "default" else f", style {style}")
        generate_lmdb(path, num, seed=seed, workers=d.synth_workers, progress=progress, opts=opts, overwrite=True,
                      for_run=True)
    generate_base_style(cfg, progress, start)  # rehearsal data and base-domain held-out sets (fine-tuning)


def build(cfg: Config, charset: Charset, *, rank: int = 0, world_size: int = 1) -> Feed:
    """The run's loaders: training (sharded by rank, rehearsal data mixed in) and validation (data.val, and
    train.base_val's sets), read as crnn-eval reads (data.read_width_scale)."""
    check(cfg)
    d = cfg.data
    geom = dict(height=d.height, width=d.width, keep_ratio=d.keep_ratio, max_width=d.max_width,
                channels=cfg.model.in_channels, **preprocess_options(d))
    if d.synth_online:
        train = _online_loader(cfg, charset, geom, rank, world_size)
    else:
        try:
            train = build_train_loader(training_sources(cfg), charset, **geom, batch_size=d.batch_size,
                                       num_workers=d.num_workers, max_label_length=d.max_label_length,
                                       augment=d.augment, seed=cfg.train.seed, rank=rank, world_size=world_size)
        except DatasetError as e:
            raise DataError(f"data.train: {e}") from None
    read_geom = {**geom, **read_options(d)}
    val = _eval_loaders("data.val", d.val, read_geom, d.batch_size, rank, world_size)
    base_val = _eval_loaders("train.base_val", cfg.train.base_val, read_geom, d.batch_size, rank, world_size)
    fonts = getattr(train.loader.dataset, "fonts", None) if d.synth_online else None
    if fonts is not None and rank == 0:
        log_faces(fonts, charset.chars)
    real = getattr(train.loader.dataset, "real", None) if d.synth_online else None
    return Feed(train, val, base_val, describe_training(cfg, real), fonts)


def _eval_loaders(key: str, paths: list[str], geom: dict, batch_size: int, rank: int,
                  world_size: int) -> dict[str, DataLoader]:
    """Validation loaders by path, sharded across ranks. They read in the training process itself: a validation
    loader with workers forks them anew at every validation, from a process with live threads (loader queues, DDP,
    TensorBoard), and one such fork hung for good in its child (the English run, step 5,000 on rank 1, 2026-11-27)
    with the other rank waiting."""
    out = {}
    for p in paths:
        try:
            out[p] = build_eval_loader(p, **geom, batch_size=batch_size, num_workers=0, rank=rank,
                                       world_size=world_size)
        except DatasetError as e:
            raise DataError(f"{key}: {e}") from None
    return out


def _online_loader(cfg: Config, charset: Charset, geom: dict, rank: int, world_size: int) -> TrainLoader:
    """data.synth_online: batches rendered by the loader's workers (:mod:`crnn.data.online`)."""
    from crnn.data.loader import RealSourceError, build_online_loader
    from crnn.data.real_augment import RealAugment
    from crnn.data.synth import NoFontsError, synth_options

    d = cfg.data
    try:
        return build_online_loader(synth_options(cfg, d.synth_style), charset, **geom, batch_size=d.batch_size,
                                   num_workers=d.num_workers, augment=d.augment, seed=d.synth_seed,
                                   batches_per_epoch=max(1, d.synth_num // (d.batch_size * world_size)),
                                   rank=rank, world_size=world_size, pool=d.synth_pool,
                                   real=d.real_sources(), real_augment=RealAugment.from_data(d))
    except RealSourceError as e:
        raise DataError(f"data.synth_real: {e}") from None
    except (ValueError, NoFontsError) as e:
        raise DataError(f"data.synth_online: {e}") from None


def log_faces(fonts: list, alphabet: str) -> None:
    """Say which faces the rendered lines are drawn from, and warn where a face manifest's training faces are missing
    (:func:`crnn.data.fonts.describe_faces`): a run without them trains, on other faces than its recipe names."""
    from crnn.data.fonts import describe_faces

    line, warnings = describe_faces(fonts, alphabet)
    log.info(line)
    for warning in warnings:
        log.warning(warning)


def describe_training(cfg: Config, real: RealMix | None = None) -> str:
    """One line on where the training batches come from (``data.train: a 45 %, b 45 %, rehearsal r 10 %``);
    rendered batches name their real crops' sources and shares, with each source's crops where ``real`` (the
    loader's :class:`~crnn.data.online.RealMix`) is given, and the effects that change them."""
    if cfg.data.synth_online:
        return "data.synth_online: every training batch is rendered on the fly; data.train is not read" + \
            _describe_real(cfg, real)
    sources = training_sources(cfg)
    if all(s.get("ratio") is None for s in sources):
        together = " (shuffled together)" if len(sources) > 1 else ""
        return f"data.train: {', '.join(str(s['path']) for s in sources)}{together}"
    total = sum(float(s["ratio"]) for s in sources) or 1.0
    parts = [f"{'rehearsal ' if cfg.data.rehearsal and s['path'] == cfg.data.rehearsal else ''}{s['path']} "
             f"{100 * float(s['ratio']) / total:.0f} %" for s in sources]
    return f"data.train: {', '.join(parts)} of every batch"



def _describe_real(cfg: Config, real: RealMix | None) -> str:
    """``; real crops in 15 % of samples: a 5 % (1,000 crops), b 10 % (3,996 crops), changed by blur 0.2`` ("" with
    none), and the paths given a share of 0, which nothing else would show to be idle."""
    sources, unused = cfg.data.real_sources(), cfg.data.real_unused()
    idle = f"; no real crops from {', '.join(unused)} (data.synth_real_share 0)" if unused else ""
    if not sources:
        return idle
    from crnn.data.real_augment import RealAugment

    counts = real.counts() if real is not None else [None] * len(sources)
    parts = [f"{path} {100 * share:g} %" + (f" ({n:,} crops)" if n is not None else "")
             for (path, share), n in zip(sources, counts)]
    effects = RealAugment.from_data(cfg.data).describe()
    return (f"; real crops in {100 * sum(s for _, s in sources):g} % of samples: {', '.join(parts)}"
            + (f", changed by {effects}" if effects else "") + idle)
