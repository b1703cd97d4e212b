"""Training state: the counters a checkpoint carries, saving it, the output folder, and resuming from it."""
from __future__ import annotations

import logging
import os
import random
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from crnn.config import Config, dump_config
from crnn.engine.checkpoint import CheckpointError, load_checkpoint, load_model_weights, model_checkpoint, \
    save_checkpoint
from crnn.engine.runtime import Runtime, TrainingError

log = logging.getLogger("crnn")


@dataclass
class TrainState:
    """Counters that a checkpoint carries so a resumed run continues where it stopped."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    best_metric: float = -1.0
    images_seen: int = 0
    skipped_images: int = 0
    unfit_labels: int = 0
    nonfinite_steps: int = 0


def rng_state() -> dict:
    """RNG states as plain data (weights_only-loadable)."""
    st = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        st["cuda"] = torch.cuda.get_rng_state_all()
    return st


def set_rng_state(st: dict) -> None:
    """Inverse of :func:`rng_state`."""
    torch.set_rng_state(st["torch"])
    random.setstate(_to_tuple(st["python"]))
    if "cuda" in st and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(st["cuda"])


def _to_tuple(x):
    return tuple(_to_tuple(v) for v in x) if isinstance(x, (list, tuple)) else x


def save_training_checkpoint(path: Path, model, cfg, charset, opt, sched, scaler, st: TrainState) -> None:
    """Full training state to ``path`` (main process only; callers barrier afterwards)."""
    ck = model_checkpoint(model, cfg, charset, kind="training", step=st.step, epoch=st.epoch,
                          best_metric=st.best_metric, optimizer=opt.state_dict(), scheduler=sched.state_dict(),
                          scaler=scaler.state_dict() if scaler else None, rng=rng_state(),
                          state=vars(st).copy())
    save_checkpoint(ck, path)


def resume_path(cfg: Config, rt: Runtime) -> Path | None:
    """The checkpoint to resume from: explicit path, ``auto`` (last.pt if present), or none."""
    r = cfg.train.resume or ("auto" if rt.mode == "ddp" else "none")
    if r == "none":
        return None
    if r == "auto":
        p = Path(cfg.train.output_dir) / "last.pt"
        return p if p.is_file() else None
    if not Path(r).is_file():
        raise TrainingError(f"train.resume={r}: file not found (use train.resume=auto to continue the output folder)")
    return Path(r)


def restore(path: Path, model, opt, sched, scaler, cfg: Config) -> TrainState:
    """Load a training checkpoint into model/optimizer/scheduler/scaler and return its counters."""
    try:
        ck = load_checkpoint(str(path))
        if ck.kind != "training":
            raise TrainingError(f"{path} holds weights only; use train.init_weights={path} to start from it")
        load_model_weights(model, ck.model_state, strict=True)
    except CheckpointError as e:
        raise TrainingError(_checkpoint_problem("train.resume", path, e) + "; resume from another checkpoint "
                            "(e.g. best.pt) with train.resume=PATH, or start afresh with train.resume=none") from None
    stored = (ck.config or {}).get("train", {}).get("optimizer", cfg.train.optimizer)
    if stored != cfg.train.optimizer:
        raise TrainingError(f"train.resume={path}: it was trained with train.optimizer={stored}, this run asks for "
                            f"{cfg.train.optimizer}; resume with train.optimizer={stored}, or start a new run from its "
                            f"weights with train.init_weights={path}")
    try:
        opt.load_state_dict(ck.raw["optimizer"])
        sched.load_state_dict(ck.raw["scheduler"])
        if scaler is not None and ck.raw.get("scaler"):
            scaler.load_state_dict(ck.raw["scaler"])
        set_rng_state(ck.raw["rng"])
    except (KeyError, ValueError, TypeError, RuntimeError) as e:
        raise TrainingError(f"train.resume={path}: its optimizer/scheduler state does not fit this run "
                            f"(train.optimizer={cfg.train.optimizer}; {type(e).__name__}: {e}); start a new run from "
                            f"its weights with train.init_weights={path}") from None
    st = TrainState(**{k: v for k, v in ck.raw.get("state", {}).items() if k in TrainState.__dataclass_fields__})
    log.info("resumed from %s at step %d (epoch %d)", path, st.step, st.epoch)
    return st


def _checkpoint_problem(key: str, path, e: Exception) -> str:
    """One line: the config key, the file and what is wrong with it (the path only once)."""
    msg = str(e)
    return f"{key}: {msg}" if str(path) in msg else f"{key}={path}: {msg}"


_STALE_TMP = re.compile(r".+\.pt\.\d+\.tmp")


def remove_stale_temporaries(out: Path) -> list[Path]:
    """Delete ``*.pt.<pid>.tmp`` left in ``out`` by a save that was killed half-way; returns what was removed."""
    if not out.is_dir():
        return []
    stale = [p for p in out.iterdir() if _STALE_TMP.fullmatch(p.name) and p.is_file()]
    for p in stale:
        p.unlink(missing_ok=True)
    if stale:
        log.info("removed %d half-written checkpoint file(s) left by an interrupted save: %s", len(stale),
                 ", ".join(p.name for p in stale))
    return stale


def check_output_dir(out: Path) -> None:
    """Fail early, before any data work, when ``out`` cannot become a writable folder (nothing is created)."""
    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise TrainingError(f"train.output_dir={out}: cannot create it, {probe} is a file, not a folder; "
                            "choose another train.output_dir")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise TrainingError(f"train.output_dir={out}: {probe} is not writable; choose another train.output_dir")


def create_output_dir(cfg: Config) -> None:
    """Create the output folder and write the resolved config.yaml into it (atomically)."""
    out = Path(cfg.train.output_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        tmp = out / f"config.yaml.{os.getpid()}.tmp"
        tmp.write_text(dump_config(cfg), encoding="utf-8")
        os.replace(tmp, out / "config.yaml")
    except OSError as e:
        raise TrainingError(f"train.output_dir={out}: cannot write there ({e.strerror or e}); "
                            "choose a writable train.output_dir") from None
