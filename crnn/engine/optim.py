"""Optimizer, learning-rate schedule and gradient scaler of a training run."""
from __future__ import annotations

import math

import torch
import torch.nn as nn

from crnn.config import Config
from crnn.engine.runtime import Runtime, TrainingError


def build_optimizer(cfg: Config, model: nn.Module) -> torch.optim.Optimizer:
    """Adam / AdamW / Adadelta over the trainable parameters (a CNN frozen by train.freeze_cnn_steps included:
    it joins when unfrozen; a parameter without a gradient is not updated)."""
    t = cfg.train
    params = [p for p in model.parameters() if p.requires_grad or t.freeze_cnn_steps]
    if t.optimizer == "adam":
        return torch.optim.Adam(params, lr=t.lr, weight_decay=t.weight_decay)
    if t.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=t.lr, weight_decay=t.weight_decay)
    if t.optimizer == "sgd":
        return torch.optim.SGD(params, lr=t.lr, momentum=0.9, weight_decay=t.weight_decay)
    return torch.optim.Adadelta(params, lr=t.lr, rho=0.9, weight_decay=t.weight_decay)


def lr_factor(step: int, cfg: Config, cpu_seconds: float = 0.0) -> float:
    """Multiplier of the base LR at ``step``: linear warm-up, then cosine / one-cycle / constant. With
    ``train.schedule_over: cpu_hours`` the cosine's progress after the warm-up is the share of ``train.cpu_hours``
    spent (``cpu_seconds``: the run's count, the same on every rank) instead of the share of ``train.steps``."""
    t = cfg.train
    warm = min(t.warmup_steps, t.steps - 1) if t.steps > 1 else 0
    if t.schedule == "onecycle":
        warm = max(warm, int(0.3 * t.steps))
    if step < warm:
        start = 0.04 if t.schedule == "onecycle" else 0.0
        return start + (1 - start) * (step + 1) / warm
    if t.schedule == "constant":
        return 1.0
    if t.schedule_over == "cpu_hours":
        progress = cpu_seconds / (3600 * t.cpu_hours)
    else:
        progress = (step - warm) / max(1, t.steps - warm)
    return t.min_lr_ratio + (1 - t.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


def rewarm_factor(step: int, restart: int, warmup: int) -> float:
    """After the optimizer started afresh at step ``restart`` (a run resumed from a sitting pack, with no Adam moments):
    a linear warm-up over ``warmup`` steps, so that the first updates with fresh moments stay small."""
    if restart < 0 or warmup <= 0 or step < restart:
        return 1.0
    return min(1.0, (step - restart + 1) / warmup)


def build_scheduler(cfg: Config, opt: torch.optim.Optimizer, state=None) -> torch.optim.lr_scheduler.LambdaLR:
    """LambdaLR over :func:`lr_factor` (state is just the step count, so resume is exact). ``state``: the run's
    TrainState, whose ``optimizer_restart`` (set when resuming from a sitting pack) adds :func:`rewarm_factor` and
    whose ``cpu_seconds`` drive a schedule over CPU-hours (that count moves every few steps, on every rank alike)."""
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: schedule_factor(s, cfg, state))


def schedule_factor(step: int, cfg: Config, state=None) -> float:
    """The scheduler's multiplier at ``step`` for a run whose counters are ``state`` (None: a fresh run): the
    schedule at its CPU count, times the warm-up again after an optimizer restart."""
    restart = getattr(state, "optimizer_restart", -1) if state is not None else -1
    cpu = getattr(state, "cpu_seconds", 0.0) if state is not None else 0.0
    return lr_factor(step, cfg, cpu) * rewarm_factor(step, restart, cfg.train.warmup_steps)


def build_scaler(cfg: Config, rt: Runtime) -> torch.amp.GradScaler | None:
    """GradScaler for fp16 on CUDA; None otherwise (bf16 needs none)."""
    if cfg.train.amp == "fp16":
        if rt.device.type != "cuda":
            raise TrainingError("train.amp=fp16 needs CUDA; on the CPU use train.amp=bf16")
        return torch.amp.GradScaler("cuda")
    return None
