"""Training state: the counters a checkpoint carries, saving it, the output folder, and resuming from it."""
from __future__ import annotations

import logging
import os
import random
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path

import torch

from crnn.config import Config, dump_config
from crnn.engine import distributed as D
from crnn.engine.average import WeightAverage
from crnn.engine.checkpoint import Checkpoint, CheckpointError, clean_state_dict, load_checkpoint, \
    load_model_weights, model_checkpoint, save_checkpoint, unwrap_model
from crnn.engine.optim import schedule_factor
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
    cpu_seconds: float = 0.0  # CPU time of every rank and its loader workers, over every sitting (crnn/engine/curve.py)
    wall_seconds: float = 0.0  # wall time of the training loop, over every sitting
    optimizer_restart: int = -1  # step at which the optimizer started afresh (resumed from a compact sitting pack)
    ema_updates: int = 0  # updates of the weight average (train.ema_decay), over every sitting
    synth_fonts: list = field(default_factory=list)  # data.synth_online: names of the font files lines are drawn from
    before: dict = field(default_factory=dict)  # metrics of data.val and train.base_val at step 0 (fine-tuning)


def record_synth_fonts(st: TrainState, fonts, main: bool) -> None:
    """data.synth_online: keep the names of the font files the run's lines are drawn from in its state, and say so
    when a sitting (perhaps on another machine, with other fonts installed) draws from other files than the sitting
    before: the training data changes with them, which nothing else would show."""
    now = sorted({os.path.basename(str(p)) for p in fonts})
    before = list(st.synth_fonts)
    if main and before and before != now:
        def names(xs: list[str]) -> str:
            return ", ".join(xs[:8]) + (f" and {len(xs) - 8} more" if len(xs) > 8 else "") if xs else "none"

        log.warning("data.synth_online: this sitting draws its lines from %d font files, the sitting before from %d "
                    "(new: %s; gone: %s): the training data changes with them; install the same fonts "
                    "(scripts/setup.sh installs crnn/data/font_packages.txt) to keep it as it was",
                    len(now), len(before), names(sorted(set(now) - set(before))),
                    names(sorted(set(before) - set(now))))
    elif main and not before and st.step > 0:
        log.info("data.synth_online: the checkpoint did not name its fonts (written by an older crnn); from step %d "
                 "the run records them (%d font files)", st.step, len(now))
    st.synth_fonts = now


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


def save_training_checkpoint(path: Path, model, cfg, charset, opt, sched, scaler, st: TrainState,
                             average: WeightAverage | None = None) -> None:
    """Full training state to ``path`` (main process only; callers barrier afterwards). With a weight average, the
    average is the checkpoint's ``model`` (what every reader uses) and the raw weights are ``train_model``."""
    extra = {"train_model": clean_state_dict(unwrap_model(model).state_dict())} if average is not None else {}
    ck = model_checkpoint(average.model if average is not None else model, cfg, charset, kind="training",
                          step=st.step, epoch=st.epoch, best_metric=st.best_metric, optimizer=opt.state_dict(),
                          scheduler=sched.state_dict(), scaler=scaler.state_dict() if scaler else None,
                          rng=rng_state(), state=vars(st).copy(), **extra)
    save_checkpoint(ck, path)


# ----------------------------------------------------------------------------- one decision for every rank
@dataclass
class Sighting:
    """What one rank sees of a checkpoint path on its own disk."""

    host: str
    path: str
    status: str  # absent | ok | unreadable
    step: int = -1


def look_at(path: str | Path | None, read_step: bool) -> Sighting:
    """Whether ``path`` exists here and (with ``read_step``) which step it holds, reading only the pickle (mmap)."""
    host = socket.gethostname()
    if not path or not Path(path).is_file():
        return Sighting(host, str(path or ""), "absent")
    if not read_step:
        return Sighting(host, str(path), "ok")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        pack = obj.get("kind") == "weights" and obj.get("resumable") is True  # a sitting pack resumes too
        step = obj["step"] if obj.get("kind") == "training" or pack else None
        step = step if isinstance(step, int) else None
    except Exception:  # damaged or foreign: the rank that loads it reports what is wrong, by name
        step = None
    return Sighting(host, str(path), "unreadable" if step is None else "ok", -1 if step is None else step)


def choose_source(seen: list[Sighting], newest: bool) -> int | None:
    """The rank whose checkpoint every rank uses (None: nobody has one).

    ``newest``: the highest step wins (an unreadable file wins too, so that its error is reported rather than silently
    starting over), ties go to the lowest rank. Otherwise the lowest rank that has the file, else rank 0 (whose load
    then reports the missing file)."""
    have = [r for r, s in enumerate(seen) if s.status != "absent"]
    if not newest:
        return have[0] if have else 0
    if not have:
        return None
    return max(have, key=lambda r: (seen[r].status == "unreadable", seen[r].step, -r))


def shared_checkpoint(key: str, path: str | Path | None, rt: Runtime, newest: bool = False) -> Checkpoint | None:
    """Load the checkpoint that the whole group agrees on, on one rank, and send it to every other rank.

    Every rank says what it sees at ``path`` (output folders need not be shared between machines); one rank loads the
    chosen file and broadcasts it, or broadcasts the one-line problem, which every rank then raises as a
    CheckpointError. Never two ranks at different steps."""
    seen = D.all_gather_object(look_at(path, read_step=newest))
    src = choose_source(seen, newest)
    if src is None:
        return None
    payload: Checkpoint | str | None = None
    if rt.rank == src:
        try:
            payload = load_checkpoint(seen[src].path)
        except CheckpointError as e:
            where = f" (on host {seen[src].host}, rank {src})" if rt.world_size > 1 else ""
            payload = f"{e}{where}"
    payload = D.broadcast_object(payload, src)
    if isinstance(payload, str):
        raise CheckpointError(payload)
    mine = seen[rt.rank]
    if rt.world_size > 1 and rt.rank != src and (mine.status, mine.step) != (seen[src].status, seen[src].step):
        have = "no such file" if mine.status == "absent" else f"{mine.status}, step {mine.step}"
        log.warning("rank %d on %s: %s=%s here has %s; following rank %d's %s on %s%s (sent over the network)",
                    rt.rank, mine.host, key, mine.path, have, src, seen[src].path, seen[src].host,
                    f" at step {payload.step}" if payload.step is not None else "")
    return payload


def resume_checkpoint(cfg: Config, rt: Runtime) -> Checkpoint | None:
    """The checkpoint the group resumes from: explicit path, ``auto`` (the newest last.pt any rank sees), or none."""
    r = cfg.train.resume or ("auto" if rt.mode == "ddp" else "none")
    if r == "none":
        return None
    auto = r == "auto"
    path = Path(cfg.train.output_dir) / "last.pt" if auto else Path(r)
    try:
        if not auto and not any(s.status == "ok" for s in D.all_gather_object(look_at(path, False))):
            raise TrainingError(f"train.resume={r}: file not found (use train.resume=auto to continue the output "
                                "folder)")
        return shared_checkpoint("train.resume", path, rt, newest=auto)
    except CheckpointError as e:
        raise TrainingError(_checkpoint_problem("train.resume", path, e) + "; resume from another checkpoint "
                            "(e.g. best.pt) with train.resume=PATH, or start afresh with train.resume=none") from None


def is_sitting_pack(ck: Checkpoint) -> bool:
    """A weights-only file that still carries a run's counters (``crnn-convert-ckpt last.pt PACK --pack``): what a run
    that spans sittings commits at the end of each one (fp16 weights, step, lines seen, cost; a few MB), and resumes
    from on any machine."""
    return ck.kind == "weights" and ck.raw.get("resumable") is True and isinstance(ck.raw.get("state"), dict)


def restore_pack(ck: Checkpoint, model, opt, sched, cfg: Config) -> TrainState:
    """Resume from a sitting pack: its weights and counters, the schedule at its step; the optimizer has no state to
    load, so Adam's moments start afresh and the learning rate is warmed up again over train.warmup_steps."""
    try:
        load_model_weights(model, {k: v.float() if v.is_floating_point() else v for k, v in ck.model_state.items()},
                           strict=True)
    except CheckpointError as e:
        raise TrainingError(_checkpoint_problem("train.resume", ck.path, e)) from None
    st = TrainState(**{k: v for k, v in ck.raw["state"].items() if k in TrainState.__dataclass_fields__})
    st.optimizer_restart = st.step
    sched.last_epoch = st.step
    for group, base in zip(opt.param_groups, sched.base_lrs):  # the pack's counters: the scheduler's are fresh yet
        group["lr"] = base * schedule_factor(st.step, cfg, st)
    sched._last_lr = [g["lr"] for g in opt.param_groups]
    log.info("resumed from the sitting pack %s at step %d (%d lines seen, %.1f CPU-hours so far); it holds no "
             "optimizer state: %s starts afresh, its learning rate warmed up again over %d steps", ck.path, st.step,
             st.images_seen, st.cpu_seconds / 3600, cfg.train.optimizer, cfg.train.warmup_steps)
    return st


def restore(ck: Checkpoint, model, opt, sched, scaler, cfg: Config) -> TrainState:
    """Load a training checkpoint (or a sitting pack) into model/optimizer/scheduler/scaler; return its counters."""
    path = ck.path
    if is_sitting_pack(ck):
        return restore_pack(ck, model, opt, sched, cfg)
    if ck.kind != "training":
        raise TrainingError(f"{path} holds weights only; use train.init_weights={path} to start from it")
    try:  # with a weight average (train.ema_decay), training continues from the raw weights
        load_model_weights(model, ck.raw.get("train_model") or ck.model_state, strict=True)
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
