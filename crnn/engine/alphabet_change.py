"""Start from weights trained on another alphabet: keep, add and drop output rows by character.

Every variant ends in one ``nn.Linear`` whose outputs are the classes (blank = row 0, character ``i`` of the alphabet
= row ``i + 1``). :func:`adapt_head` rewrites that layer's weight and bias in a checkpoint state so that it fits a
model built for another alphabet:

* a character in both alphabets keeps its row (matched by character, not by index; the blank row stays row 0);
* when the base alphabet folds case (``alnum36``: lower case only, its labels were lower-cased) and the new one has
  upper case, an upper-case letter starts from its lower-case row: the base model read ``A`` as ``a``. These count
  as ``from lower case``, not as new;
* every other new character gets a fresh row: weight drawn as ``nn.Linear`` draws it (uniform in
  +-1/sqrt(fan_in)), bias = the mean bias of the base's characters, from a fixed seed (all DDP ranks agree);
* characters the new alphabet does not have are dropped.

The CNN and LSTM weights are untouched, so for every kept character the logits are exactly the base model's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn

from crnn.charset import Charset
from crnn.engine.checkpoint import Checkpoint, CheckpointError, unwrap_model

__all__ = ["AlphabetChange", "adapt_head", "output_layer_keys", "charset_of_checkpoint", "fit_alphabet"]

FRESH_ROW_SEED = 20_240_526  # fresh rows are the same on every rank and in every run


@dataclass
class AlphabetChange:
    """What :func:`adapt_head` did, by character."""

    kept: list[str] = field(default_factory=list)  # in both alphabets: their rows are copied
    folded: list[str] = field(default_factory=list)  # upper-case letters started from the base's lower-case row
    new: list[str] = field(default_factory=list)  # fresh rows
    dropped: list[str] = field(default_factory=list)  # base characters the new alphabet does not have
    reordered: bool = False  # kept characters moved to other rows

    @property
    def unchanged(self) -> bool:
        """Same characters in the same order: the state was not touched."""
        return not (self.folded or self.new or self.dropped or self.reordered)

    def describe(self) -> str:
        """One log line, e.g. ``alphabet change: 36 kept, 26 from lower case, 32 new ('$', '€', ...), 0 dropped``."""
        parts = [f"{len(self.kept)} kept" + (" (moved to their new rows)" if self.reordered else "")]
        if self.folded:
            parts.append(f"{len(self.folded)} upper-case letters start from their lower-case rows (the base "
                         "alphabet folds case)")
        parts.append(f"{len(self.new)} new{_chars(self.new)}")
        parts.append(f"{len(self.dropped)} dropped{_chars(self.dropped)}")
        return "alphabet change: " + ", ".join(parts)


def _chars(chars: list[str], limit: int = 12) -> str:
    if not chars:
        return ""
    shown = "".join(chars[:limit])
    return f" ({shown!r}{f' +{len(chars) - limit} more' if len(chars) > limit else ''})"


def output_layer_keys(model: nn.Module) -> tuple[str, str]:
    """(weight key, bias key) of the model's output layer: its last ``nn.Linear`` with ``num_classes`` outputs."""
    bare = unwrap_model(model)
    classes = getattr(bare, "num_classes", None)
    found = [name for name, m in bare.named_modules()
             if isinstance(m, nn.Linear) and m.bias is not None and m.out_features == classes]
    if not found:
        raise CheckpointError(f"cannot find the output layer of this model (no nn.Linear with {classes} outputs)")
    return f"{found[-1]}.weight", f"{found[-1]}.bias"


def charset_of_checkpoint(stored: dict | None, path: str) -> Charset:
    """The alphabet a checkpoint was trained with; a bare state dict (none stored) cannot be remapped."""
    if stored is None:
        raise CheckpointError(f"{path} stores no alphabet, so its output rows cannot be matched to model.charset: "
                              f"convert it first with crnn-convert-ckpt {path} OUT --from SOURCE --charset "
                              "ALPHABET (the alphabet it was trained with), then use OUT")
    try:
        return Charset.from_dict(stored)
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{path}: stored charset is invalid: {e}") from None


def _source_rows(old: Charset, new: Charset) -> tuple[list[int | None], AlphabetChange]:
    """For each class of ``new`` (blank first), the row of ``old`` it starts from (None = fresh)."""
    change = AlphabetChange()
    rows: list[int | None] = [0]
    for j, c in enumerate(new.chars, 1):
        if c in old.index:
            rows.append(old.index[c])
            change.kept.append(c)
            change.reordered |= old.index[c] != j
        elif old.lowercase and c.lower() != c and c.lower() in old.index:
            rows.append(old.index[c.lower()])
            change.folded.append(c)
        else:
            rows.append(None)
            change.new.append(c)
    used = set(change.kept) | {c.lower() for c in change.folded}
    change.dropped = [c for c in old.chars if c not in used]
    return rows, change


def adapt_head(state: dict[str, torch.Tensor], old_charset: Charset, new_charset: Charset,
               model: nn.Module) -> tuple[dict[str, torch.Tensor], AlphabetChange]:
    """``state`` (plain keys, trained on ``old_charset``) with its output layer rewritten for ``new_charset``.

    ``model`` is the model the state will be loaded into (built for ``new_charset``); it names the output layer.
    Returns a new dict (the input is not modified) and what changed; unchanged alphabets return ``state`` itself.
    """
    w_key, b_key = output_layer_keys(model)
    if w_key not in state or b_key not in state:
        raise CheckpointError(f"the checkpoint has no {w_key}/{b_key} (the output layer of this model); it is from "
                              "another architecture")
    weight, bias = state[w_key], state[b_key]  # [K_old, F], [K_old]
    if weight.shape[0] != old_charset.num_classes:
        raise CheckpointError(f"{w_key}: checkpoint has {weight.shape[0]} classes but its stored alphabet has "
                              f"{len(old_charset)} characters + blank")
    expected = unwrap_model(model).state_dict()[w_key].shape[0]
    if expected != new_charset.num_classes:
        raise CheckpointError(f"the model has {expected} classes, the new alphabet {new_charset.num_classes}")
    rows, change = _source_rows(old_charset, new_charset)
    if change.unchanged:
        return state, change
    fan_in = weight.shape[1]
    gen = torch.Generator().manual_seed(FRESH_ROW_SEED)
    bound = 1.0 / math.sqrt(fan_in)
    w32, b32 = weight.float(), bias.float()
    mean_bias = b32[1:].mean() if b32.shape[0] > 1 else b32.new_zeros(())
    new_w = torch.empty(new_charset.num_classes, fan_in)
    new_b = torch.empty(new_charset.num_classes)
    for j, src in enumerate(rows):
        if src is None:
            new_w[j] = torch.rand(fan_in, generator=gen) * 2 * bound - bound
            new_b[j] = mean_bias
        else:
            new_w[j], new_b[j] = w32[src], b32[src]
    out = dict(state)
    out[w_key], out[b_key] = new_w.to(weight.dtype), new_b.to(bias.dtype)
    return out, change


def fit_alphabet(ck: Checkpoint, charset: Charset,
                 model: nn.Module) -> tuple[dict[str, torch.Tensor], AlphabetChange | None, Charset | None]:
    """(state to load into ``model``, what changed, the checkpoint's alphabet) for starting from ``ck``.

    A checkpoint without a stored alphabet (a bare state dict) loads as it is when its output layer has as many
    classes as ``charset``; otherwise it cannot be remapped and the error says how to convert it."""
    w_key, _ = output_layer_keys(model)
    if ck.charset is None:
        head = ck.model_state.get(w_key)
        if head is not None and head.dim() == 2 and head.shape[0] != charset.num_classes:
            charset_of_checkpoint(None, ck.path)  # raises: nothing to match the rows by
        return ck.model_state, None, None
    base = charset_of_checkpoint(ck.charset, ck.path)
    state, change = adapt_head(ck.model_state, base, charset, model)
    return state, change, base
