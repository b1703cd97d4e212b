"""Weight-space interpolation between a starting model and its fine-tuned descendant (WiSE-FT).

``theta = (1 - alpha) * theta_start + alpha * theta_tuned`` for every tensor both models share, BatchNorm running
statistics included; ``alpha = 1`` is the fine-tuned model exactly, ``alpha = 0`` reads every character the start
had as the start read it. The output layer is matched by character, as fine-tuning matched it
(:mod:`crnn.engine.alphabet_change`): rows of characters both alphabets have interpolate; rows the start did not have
(new characters, and upper-case letters of a start whose alphabet folds case) are the fine-tuned rows. Fine-tuning
moves the weights little enough that the straight line between the two stays in a low-loss region for both tasks
(Wortsman et al. 2022, "Robust fine-tuning of zero-shot models"): part of the way back keeps most of the new text and
gives back most of what was forgotten.

A uniform model soup (Wortsman et al. 2022, "Model soups") goes first where there are several fine-tunes of the same
start (other seeds, same alphabet): their plain average, tensor by tensor, averages out what each run's own data order
and augmentation did to it; the soup is then interpolated like one fine-tuned model. ``cnn_alpha`` gives the
convolutional layers (``cnn.*``) a share of their own.
"""
from __future__ import annotations

import dataclasses

import torch
import torch.nn as nn

from crnn.charset import Charset
from crnn.engine.alphabet_change import _source_rows, charset_of_checkpoint, output_layer_keys
from crnn.engine.checkpoint import Checkpoint, CheckpointError, weights_only_checkpoint

__all__ = ["interpolate_states", "interpolate_checkpoints", "check_alpha", "soup_checkpoints", "CNN_PREFIX"]

CNN_PREFIX = "cnn."  # the convolutional backbone of every variant (what train.freeze_cnn_steps freezes)


def check_alpha(alpha: float, what: str = "alpha") -> None:
    """``alpha`` must lie in [0, 1] (the share of the fine-tuned model)."""
    if not 0 <= alpha <= 1:
        raise CheckpointError(f"{what}: the share of the fine-tuned weights must be within 0..1, got {alpha}")


def _mismatch(start: dict, tuned: dict, head: tuple[str, ...],
              names: tuple[str, str] = ("the fine-tuned model", "the start")) -> str:
    """'' when the two states fit (same keys; same shapes except the output layer's class count), else one line;
    ``names``: how the message calls ``tuned`` and ``start``."""
    a, b = names
    missing, extra = sorted(set(tuned) - set(start)), sorted(set(start) - set(tuned))
    if missing or extra:
        return (f"not the same architecture: {a} has {len(missing)} tensors {b} lacks "
                f"({', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}), {b} {len(extra)} it lacks "
                f"({', '.join(extra[:3])}{' ...' if len(extra) > 3 else ''})")
    for k, v in tuned.items():
        shape, other = tuple(v.shape), tuple(start[k].shape)
        if shape != other and not (k in head and shape[1:] == other[1:]):
            return f"not the same architecture: {k} is {list(shape)} in {a}, {list(other)} in {b}"
    return ""


def interpolate_states(start: dict[str, torch.Tensor], start_charset: Charset | None, tuned: dict[str, torch.Tensor],
                       tuned_charset: Charset, head: tuple[str, str], alpha: float,
                       cnn_alpha: float | None = None) -> dict[str, torch.Tensor]:
    """The interpolated state (plain keys, the fine-tuned model's layout and dtypes); ``head`` = (weight key, bias
    key) of the output layer. ``start_charset`` None: the start has the fine-tuned alphabet row for row.
    ``cnn_alpha``: the share of the fine-tuned weights for the ``cnn.*`` tensors (None: ``alpha``)."""
    check_alpha(alpha)
    if cnn_alpha is not None:
        check_alpha(cnn_alpha, "cnn_alpha")
    why = _mismatch(start, tuned, head)
    if why:
        raise CheckpointError(why)
    rows = (list(range(tuned_charset.num_classes)) if start_charset is None
            else _shared_rows(start_charset, tuned_charset))
    if start[head[0]].shape[0] != (start_charset or tuned_charset).num_classes:
        raise CheckpointError(f"{head[0]}: the start has {start[head[0]].shape[0]} classes but its alphabet has "
                              f"{len((start_charset or tuned_charset))} characters + blank")
    out = {}
    for k, t in tuned.items():
        s = start[k]
        if not t.is_floating_point():  # BatchNorm's num_batches_tracked: the fine-tuned count
            out[k] = t.clone()
        elif k in head:  # [K, F] / [K]: shared rows interpolate, the others stay fine-tuned
            mixed = t.float().clone()
            for j, src in enumerate(rows):
                if src is not None:
                    mixed[j] = torch.lerp(s[src].float(), t[j].float(), alpha)
            out[k] = mixed.to(t.dtype)
        else:
            a = cnn_alpha if cnn_alpha is not None and k.startswith(CNN_PREFIX) else alpha
            out[k] = torch.lerp(s.float(), t.float(), a).to(t.dtype)
    return out


def _shared_rows(start: Charset, tuned: Charset) -> list[int | None]:
    """For each class of ``tuned`` (blank first), the row of ``start`` with the same character, else None (new, or an
    upper-case letter the start folded into lower case: the start never had a row of its own for it)."""
    rows, change = _source_rows(start, tuned)
    folded = set(change.folded)
    return [None if j and tuned.chars[j - 1] in folded else r for j, r in enumerate(rows)]


def interpolate_checkpoints(start: Checkpoint, tuned: Checkpoint, model: nn.Module,
                            alpha: float, cnn_alpha: float | None = None) -> dict[str, torch.Tensor]:
    """:func:`interpolate_states` for two loaded checkpoints; ``model`` is built for the fine-tuned one (it names
    the output layer). A start without a stored alphabet must have the fine-tuned model's classes."""
    tuned_cs = charset_of_checkpoint(tuned.charset, tuned.path)
    start_cs = None if start.charset is None else charset_of_checkpoint(start.charset, start.path)
    try:
        return interpolate_states(start.model_state, start_cs, tuned.model_state, tuned_cs, output_layer_keys(model),
                                  alpha, cnn_alpha)
    except CheckpointError as e:
        raise CheckpointError(f"cannot interpolate {start.path} and {tuned.path}: {e}") from None


def soup_checkpoints(tuned: list[Checkpoint]) -> Checkpoint:
    """The uniform soup of several fine-tunes of one start: the first checkpoint (its config, alphabet, metadata) with
    every floating tensor replaced by the mean over all of them (BatchNorm statistics included; integer counters are
    the first's). They must share architecture and alphabet, character for character."""
    first = tuned[0]
    for other in tuned[1:]:
        why = _soup_mismatch(first, other)
        if why:
            raise CheckpointError(f"cannot average {first.path} and {other.path}: {why}")
    state = {}
    for k, t in first.model_state.items():
        if t.is_floating_point():
            state[k] = (sum(c.model_state[k].float() for c in tuned) / len(tuned)).to(t.dtype)
        else:
            state[k] = t.clone()
    raw = weights_only_checkpoint(dict(first.raw))
    raw.update(model=state, soup=[str(c.path) for c in tuned])
    return dataclasses.replace(first, model_state=state, raw=raw, kind="weights")


def _soup_mismatch(a: Checkpoint, b: Checkpoint) -> str:
    """'' when ``a`` and ``b`` can be averaged (same variant, keys, shapes and alphabet), else the reason."""
    if a.variant and b.variant and a.variant != b.variant:
        return f"not the same architecture: variant {a.variant} and {b.variant}"
    if a.charset is not None and b.charset is not None:
        ca, cb = (charset_of_checkpoint(c.charset, c.path).chars for c in (a, b))
        if ca != cb:
            return (f"their alphabets differ ({len(ca)} and {len(cb)} characters"
                    f"{', in another order' if sorted(ca) == sorted(cb) else ''}): average only fine-tunes of the "
                    "same start with the same model.charset")
    return _mismatch(b.model_state, a.model_state, (), (str(a.path), str(b.path)))
