"""Fine-tuning's data: the rehearsal source mixed into every batch and the base-domain sets, rendered in the base
model's style (what acts on the model - the base pull, freezing, the teacher - is :mod:`crnn.engine.finetune`).

* ``data.rehearsal`` (+ ``data.rehearsal_ratio``): a source of what the base model already knew - synthetic words in
  the base model's style that the run generates (``data.rehearsal_num``), or a general set the user names - added to
  ``data.train`` so that each batch draws that share from it.
* ``train.base_val`` with ``train.base_val_num``: a synthetic held-out set of the base domain, another seed.
* ``data.rehearsal_style: base``: the rehearsal words (and ``train.base_val_num``'s held-out words) rendered as the
  starting checkpoint was trained, from the ``data.synth_*`` keys of its stored config, which the caller loads and
  passes in (``start``).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from crnn.config import Config
from crnn.data.datasets import DataError

log = logging.getLogger("crnn")

BASE_VAL_SEED_OFFSET = 1_000_003  # the synthetic base-domain held-out set: another seed than the rehearsal data


def training_sources(cfg: Config) -> list[dict]:
    """``data.train`` plus the rehearsal source: the user's sources share ``1 - rehearsal_ratio`` of each batch
    (in their own ratios, equal shares when none is given), the rehearsal source the rest."""
    d = cfg.data
    if not d.rehearsal:
        return list(d.train)
    ratios = [float(s.get("ratio", 1.0)) for s in d.train]
    total = sum(ratios) or 1.0
    user = [{**s, "ratio": (1 - d.rehearsal_ratio) * r / total} for s, r in zip(d.train, ratios)]
    return [*user, {"path": d.rehearsal, "ratio": d.rehearsal_ratio}]


def base_style_options(cfg: Config, style: str = "default"):
    """What the base models were trained on: English scene-text words (labels printable94, folded to the model's
    alphabet when the data set opens) in ``style``: default, or street (the shipped model's last synthetic stage)."""
    from crnn.data.synth import SynthOptions

    return SynthOptions(text="words", height=cfg.data.height, style=style)


def _wanted(cfg: Config) -> list[tuple[str, int, int, str]]:
    """(path, number, seed, style) of every base-style synthetic set this config asks for (the rehearsal words in
    ``data.rehearsal_style``, the held-out base-domain words in the default style - or in the start's own, ``base``,
    when the rehearsal words are)."""
    jobs = []
    if cfg.data.rehearsal and cfg.data.rehearsal_num > 0:
        jobs.append((cfg.data.rehearsal, cfg.data.rehearsal_num, cfg.data.rehearsal_seed, cfg.data.rehearsal_style))
    if cfg.train.base_val_num > 0:
        style = "base" if cfg.data.rehearsal_style == "base" else "default"
        jobs += [(p, cfg.train.base_val_num, cfg.data.rehearsal_seed + BASE_VAL_SEED_OFFSET + i, style)
                 for i, p in enumerate(cfg.train.base_val)]
    return jobs


def set_options(cfg: Config, style: str, start: Config | None):
    """The SynthOptions a set of ``style`` is rendered with (``base``: from ``start``, the config stored in
    ``train.init_weights``)."""
    return start_synth_options(cfg, start) if style == "base" else base_style_options(cfg, style)


def synth_jobs(cfg: Config, start: Config | None = None) -> list[tuple[str, int, int, str]]:
    """(path, number, seed, style) of the base-style synthetic sets this config asks for that are to be rendered:
    those that do not exist yet, and those crnn rendered otherwise than this run renders them (another number, seed
    or style, or - style ``base`` - another start's height or data engine: judged where ``start`` is given)."""
    from crnn.data.synth import stale_rendering

    return [(path, num, seed, style) for path, num, seed, style in _wanted(cfg)
            if not Path(path).exists() or ((style != "base" or start is not None)
                                           and stale_rendering(path, num, seed, set_options(cfg, style, start)))]


def needs_start_config(cfg: Config) -> bool:
    """Whether generating this config's sets, or telling whether those it has are still its own, needs the config
    stored in ``train.init_weights``."""
    from crnn.data.synth import rendered_for_run

    return any(style == "base" and (not Path(path).exists() or rendered_for_run(path))
               for path, _, _, style in _wanted(cfg))


def start_synth_options(cfg: Config, start: Config | None):
    """``data.rehearsal_style: base``: the SynthOptions of the data ``train.init_weights`` was trained on - its
    alphabet, text kind, style and levers - from ``start``, the config stored in it. A start without a stored config,
    or one trained on stored LMDBs (whose style its config does not say), is a DataError naming the styles to use."""
    from crnn.data.synth import synth_options  # the trainer's own: the words the start was rendered

    if start is None or not (start.data.synth_online or start.data.synth_num > 0):
        why = "stores no config" if start is None else (
            "names no rendered training data in its config (no data.synth_online or data.synth_num: stored sets, "
            "or converted)")
        raise DataError(f"data.rehearsal_style=base: {cfg.train.init_weights} {why}, so its style is unknown; use "
                        "data.rehearsal_style=default or street, or name a set of your own in data.rehearsal")
    return synth_options(start, start.data.synth_style)


def describe_options(opts: Any) -> str:
    """``printable95 words, style default, signs 0.25, street 0.35, ...``: the SynthOptions a set is rendered with."""
    levers = [f"{k} {getattr(opts, k):g}" for k in ("signs", "street", "squeeze", "weight", "jitter", "photos",
                                                     "elastic", "traditional") if getattr(opts, k)]
    return ", ".join([f"{opts.charset} {opts.text}", f"style {opts.style}", *levers])


def generate_base_style(cfg: Config, progress: bool, start: Config | None = None) -> None:
    """Generate the missing base-style synthetic sets (rehearsal data and held-out base-domain sets); ``start``: the
    config stored in ``train.init_weights``, needed where :func:`needs_start_config` says so."""
    from crnn.data.synth import generate_lmdb, stale_rendering, warn_kept_height, warn_rendering_again

    jobs = synth_jobs(cfg, start)
    for path, num, seed, style in _wanted(cfg):
        if (path, num, seed, style) not in jobs and (style != "base" or start is not None):
            warn_kept_height(path, set_options(cfg, style, start), "data.rehearsal or train.base_val")
    start_opts = start_synth_options(cfg, start) if any(job[3] == "base" for job in jobs) else None
    for path, num, seed, style in jobs:
        opts = start_opts if style == "base" else base_style_options(cfg, style)
        if Path(path).exists():
            warn_rendering_again(path, stale_rendering(path, num, seed, opts))
        elif style == "base":
            real = ", ".join(f"{share:.0%} from {p}" for p, share in start.data.real_sources())
            log.info("generating %d synthetic samples into %s (seed %d) as %s was trained: %s%s", num, path, seed,
                     cfg.train.init_weights, describe_options(opts),
                     f" (not the real crops it also trained on: {real})" if real else "")
        else:
            log.info("generating %d synthetic base-style words into %s (seed %d%s)", num, path, seed,
                     "" if style == "default" else f", style {style}")
        generate_lmdb(path, num, seed=seed, workers=cfg.data.synth_workers, progress=progress, opts=opts,
                      overwrite=True, for_run=True)
