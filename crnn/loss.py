"""CTC loss on batch-first logits: the one place where [B, T, K] becomes [T, B, K]."""
from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

from crnn.charset import BLANK


class CTCResult(NamedTuple):
    """Mean CTC loss and the number of samples whose label cannot fit in the model's T."""

    loss: torch.Tensor
    num_unfit: int


def ctc_fits(targets: torch.Tensor, target_lengths: torch.Tensor, input_lengths: torch.Tensor) -> torch.Tensor:
    """Boolean [B]: whether each label fits in its T under CTC (length + adjacent repeats <= T)."""
    return ctc_min_steps(targets, target_lengths) <= input_lengths


def ctc_min_steps(targets: torch.Tensor, target_lengths: torch.Tensor) -> torch.Tensor:
    """[B]: the fewest time steps CTC needs for each label: its length plus its adjacent repeated characters."""
    if targets.numel() == 0:
        return target_lengths.clone()
    same = F.pad((targets[1:] == targets[:-1]).long(), (1, 0))  # (sum L,), 1 where a char repeats its predecessor
    starts = torch.cumsum(target_lengths, 0) - target_lengths
    same[starts[target_lengths > 0]] = 0  # a sample's first char never repeats the previous sample's last
    sample = torch.repeat_interleave(torch.arange(len(target_lengths)), target_lengths.cpu())
    repeats = torch.zeros_like(target_lengths).index_add_(0, sample.to(same.device), same)
    return target_lengths + repeats


def ctc_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    target_lengths: torch.Tensor,
    input_lengths: torch.Tensor | None = None,
) -> CTCResult:
    """CTC loss for logits [B, T, K] (any dtype; computed in float32), mean over the batch.

    Samples whose label cannot be aligned within T contribute zero (``zero_infinity``) and are counted.
    """
    B, T, _ = logits.shape
    if input_lengths is None:
        input_lengths = torch.full((B,), T, dtype=torch.long)
    input_lengths = input_lengths.to(torch.long).cpu()
    targets, target_lengths = targets.to(torch.long).cpu(), target_lengths.to(torch.long).cpu()
    log_probs = logits.float().log_softmax(-1).permute(1, 0, 2)  # (T, B, K): the only permute, next to the loss
    loss = F.ctc_loss(log_probs, targets.to(logits.device), input_lengths, target_lengths,
                      blank=BLANK, reduction="mean", zero_infinity=True)
    num_unfit = int((~ctc_fits(targets, target_lengths, input_lengths)).sum())
    return CTCResult(loss, num_unfit)
