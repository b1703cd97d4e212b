"""Fine-tuning without forgetting: rehearsal data mixed into every batch, and the base domain scored before and after.

* ``data.rehearsal`` (+ ``data.rehearsal_ratio``): a source of what the base model already knew - synthetic words in
  the base model's style that the run generates (``data.rehearsal_num``), or a general set the user names - added to
  ``data.train`` so that each batch draws that share from it.
* ``train.base_val``: general held-out sets (a synthetic one generated with another seed, ``train.base_val_num``, or
  real crops the user names) scored at step 0, at every validation and at the end with ``train.base_protocol``
  (``auto``: the protocol of the starting checkpoint's alphabet, so an ``alnum36`` base is scored case-insensitive
  as it was trained). The log, TensorBoard (``base/<name>/...``) and the run's summary show before and after.
"""
from __future__ import annotations

import logging
from pathlib import Path

import torch

from crnn.charset import Charset
from crnn.config import Config
from crnn.engine.evaluate import evaluate
from crnn.engine.runtime import Runtime, TrainingError
from crnn.metrics import format_rates, resolve_protocol

log = logging.getLogger("crnn")

BASE_VAL_SEED_OFFSET = 1_000_003  # the synthetic base-domain held-out set: another seed than the rehearsal data
KEPT_METRICS = ("samples", "word_acc", "cer", "ned_similarity")


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


def base_style_options(cfg: Config):
    """What the base models were trained on: English scene-text words in the default style (labels printable94,
    folded to the model's alphabet when the data set opens)."""
    from crnn.data.synth import SynthOptions

    return SynthOptions(text="words", height=cfg.data.height)


def synth_jobs(cfg: Config) -> list[tuple[str, int, int]]:
    """(path, number, seed) of the base-style synthetic sets this config asks for and that do not exist yet."""
    jobs = []
    if cfg.data.rehearsal and cfg.data.rehearsal_num > 0:
        jobs.append((cfg.data.rehearsal, cfg.data.rehearsal_num, cfg.data.rehearsal_seed))
    if cfg.train.base_val_num > 0:
        jobs += [(p, cfg.train.base_val_num, cfg.data.rehearsal_seed + BASE_VAL_SEED_OFFSET + i)
                 for i, p in enumerate(cfg.train.base_val)]
    return [(p, n, s) for p, n, s in jobs if not Path(p).exists()]


def generate_base_style(cfg: Config, progress: bool) -> None:
    """Generate the missing base-style synthetic sets (rehearsal data and held-out base-domain sets)."""
    from crnn.data.synth import generate_lmdb

    for path, num, seed in synth_jobs(cfg):
        log.info("generating %d synthetic base-style words into %s (seed %d)", num, path, seed)
        generate_lmdb(path, num, seed=seed, workers=cfg.data.synth_workers, progress=progress,
                      opts=base_style_options(cfg))


class ValSets(dict):
    """The validation loaders by path (the user's sets: they choose best.pt) plus the base-domain sets.

    ``last`` holds the latest metrics of every set, ``before`` those measured at step 0."""

    def __init__(self, user: dict, base: dict, base_protocol: str) -> None:
        super().__init__(user)
        self.base = base
        self.base_protocol = base_protocol
        self.last: dict[str, dict] = {}

    def __bool__(self) -> bool:
        return bool(len(self) or self.base)


def base_protocol(cfg: Config, base_charset: Charset | None, charset: Charset) -> str:
    """``train.base_protocol`` resolved: ``auto`` follows the alphabet the starting weights were trained with."""
    return resolve_protocol(cfg.train.base_protocol, (base_charset or charset).chars)


def build_base_loaders(cfg: Config, rt: Runtime, geom: dict) -> dict:
    """Eval loaders of ``train.base_val`` (sharded across ranks like data.val)."""
    from crnn.data.datasets import DatasetError
    from crnn.data.loader import build_eval_loader

    out = {}
    for p in cfg.train.base_val:
        try:
            out[p] = build_eval_loader(p, **geom, batch_size=cfg.data.batch_size,
                                       num_workers=min(cfg.data.num_workers, 1), rank=rt.rank,
                                       world_size=rt.world_size)
        except DatasetError as e:
            raise TrainingError(f"train.base_val: {e}") from None
    return out


def validate_base(model, vals: ValSets, charset: Charset, cfg: Config, rt: Runtime, step: int, tb) -> None:
    """Score the base-domain sets (a collective under DDP); log one line each and write ``base/<name>/*``."""
    for name, loader in vals.base.items():
        res = evaluate(model, loader, charset, rt.device, protocol=vals.base_protocol, decoder=cfg.train.decoder,
                       amp=cfg.train.amp, max_examples=0)
        m = {k: res.metrics[k] for k in KEPT_METRICS}
        vals.last[name] = m
        if not rt.main:
            continue
        log.info("base %s @ %d: %s  (%d samples, %s)", name, step, format_rates(m, res.cer_first), m["samples"],
                 vals.base_protocol)
        if tb is not None:
            tag = Path(name).name or name
            for k in ("word_acc", "cer", "ned_similarity"):
                tb.add_scalar(f"base/{tag}/{k}", m[k], step)


def forgetting_report(before: dict, after: dict, base: list[str], user: list[str]) -> list[str]:
    """Lines comparing word accuracy before and after, base domain first: ``base svt_train: 63.4 % -> 62.7 %
    (-0.7 points)``."""
    lines = []
    for kind, names in (("base", base), ("your data", user)):
        for name in names:
            if name in before and name in after:
                a, b = 100 * before[name]["word_acc"], 100 * after[name]["word_acc"]
                lines.append(f"{kind} {name}: {a:.1f} % -> {b:.1f} % ({b - a:+.1f} points)")
    return lines


def cnn_frozen(cfg: Config, step: int) -> bool:
    """Whether the CNN is frozen at ``step``: ``train.freeze_cnn_steps`` N > 0 freezes it for steps 0..N-1, -1 for
    the whole run."""
    n = cfg.train.freeze_cnn_steps
    return n < 0 or step < n


def set_cnn_frozen(bare, frozen: bool, step: int, main: bool) -> None:
    """Freeze or unfreeze the CNN: its weights (no gradients are computed for them: a frozen step is also faster)
    and its BatchNorm running statistics (momentum 0 while frozen, so that the features the base model read its
    domain with stay exactly as they were; a batch is still normalised by its own statistics in training mode).
    Logs only when the state changes."""
    params = list(bare.cnn.parameters())
    if all(p.requires_grad != frozen for p in params):
        return
    for p in params:
        p.requires_grad_(not frozen)
    for m in bare.cnn.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            if frozen:
                m._crnn_momentum = getattr(m, "_crnn_momentum", m.momentum)
                m.momentum = 0.0
            elif hasattr(m, "_crnn_momentum"):
                m.momentum = m._crnn_momentum
                del m._crnn_momentum
    if main:
        log.info("step %d: CNN %s (train.freeze_cnn_steps)", step, "frozen" if frozen else "unfrozen: training "
                 "every layer from here")


def check_freeze(cfg: Config, mode: str) -> None:
    """DDP fixes the set of trained parameters when it wraps the model: only a whole-run freeze (-1) works there."""
    if mode == "ddp" and cfg.train.freeze_cnn_steps > 0:
        raise TrainingError(f"train.freeze_cnn_steps={cfg.train.freeze_cnn_steps}: unfreezing during a run is not "
                            "possible under DDP; use -1 (frozen for the whole run) or 0")
