"""An exponential moving average of the weights (``train.ema_decay``), the model a run validates, saves and ships.

Training keeps stepping the raw weights; after every optimizer step the average moves towards them::

    avg = d * avg + (1 - d) * raw,   d = min(ema_decay, (1 + n) / (10 + n))   (n = updates so far)

so early on, when the raw weights move fast, the average follows closely, and later it averages over about
``1 / (1 - ema_decay)`` steps, smoothing out the noise of a learning rate that is still high (a run that spans many
sittings spends most of its time there). BatchNorm statistics are averaged alike; integer buffers are copied.

Checkpoints written with an average hold it as ``model`` - what ``crnn-eval``, ``crnn-predict``, ``crnn-export``,
``best.pt``, weights-only copies and sitting packs read - and the raw weights as ``train_model``, which only a resume
reads. Under DDP every rank holds identical raw weights, so every rank keeps the same average without communication.
"""
from __future__ import annotations

import copy

import torch
from torch import nn


class WeightAverage:
    """The moving average of ``bare``'s parameters and buffers, kept in a copy of the model (eval mode, no grads)."""

    def __init__(self, bare: nn.Module, decay: float, updates: int = 0):
        if not 0.0 < decay < 1.0:
            raise ValueError(f"train.ema_decay={decay} must be between 0 and 1 (e.g. 0.999), or 0 for off")
        self.decay = decay
        self.updates = updates
        self.model = copy.deepcopy(bare).eval()
        for p in self.model.parameters():
            p.requires_grad_(False)

    def current_decay(self) -> float:
        return min(self.decay, (1 + self.updates) / (10 + self.updates))

    @torch.no_grad()
    def update(self, bare: nn.Module) -> None:
        d = self.current_decay()
        raw = bare.state_dict()
        for name, avg in self.model.state_dict().items():
            src = raw[name]
            if avg.is_floating_point():
                avg.lerp_(src.to(avg.dtype), 1.0 - d)
            else:
                avg.copy_(src)
        self.updates += 1

    def load(self, state: dict[str, torch.Tensor]) -> None:
        """Set the average (e.g. a checkpoint's ``model`` when it also holds ``train_model``)."""
        self.model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state.items()})
