"""What every foreign-checkpoint module shares: the repositories' names, the result and error types, renaming and
checking keys, and the clovaai layout that clovaai's and EasyOCR's files have in common.

The ground of crnn.foreign: it imports no other module of the package; the importers (one module per source) stand
on it, and detection (:mod:`crnn.foreign.detect`) stands on them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn as nn

__all__ = ["SOURCES", "ForeignFormatError", "Imported", "need", "rename", "check_fits", "conv_bn_layers",
           "fill_batches_tracked", "clova_dims", "clova_problem", "CLOVA_PREFIXES"]

SOURCES = {
    "meijieru": "meijieru/crnn.pytorch",
    "sierkinhane": "Sierkinhane/CRNN_Chinese_Characters_Rec",
    "clovaai": "clovaai/deep-text-recognition-benchmark",
    "easyocr": "JaidedAI/EasyOCR",
}
CLOVA_PREFIXES = ("Transformation.", "FeatureExtraction.", "SequenceModeling.", "Prediction.")


class ForeignFormatError(ValueError):
    """A foreign checkpoint that cannot be represented or read (one line naming the key and why)."""


@dataclass
class Imported:
    """A foreign state dict turned into ours: plain crnn keys, the model shape and the preprocessing it needs."""

    state: dict[str, torch.Tensor]
    variant: str
    in_channels: int
    hidden: int
    num_classes: int
    data: dict[str, Any]  # data-config settings: width, interpolation, mean, std, keep_ratio, pad, max_width
    notes: list[str] = field(default_factory=list)  # what was changed on the way (folded biases, fused layers)


def need(state: dict[str, torch.Tensor], key: str, source: str) -> torch.Tensor:
    """``state[key]``, or a ForeignFormatError saying the file is not that repository's CRNN."""
    if key not in state:
        raise ForeignFormatError(f"no {key} in the file: not a {SOURCES[source]} CRNN checkpoint")
    return state[key]


def rename(state: dict[str, torch.Tensor], prefixes: list[tuple[str, str]], source: str
           ) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Rename keys by prefix ``(theirs, ours)``; returns (renamed state, our key -> their key) for messages."""
    out: dict[str, torch.Tensor] = {}
    origin: dict[str, str] = {}
    for key, value in state.items():
        match = next(((t, o) for t, o in prefixes if key.startswith(t)), None)
        if match is None:
            raise ForeignFormatError(f"unexpected key {key}: not part of {SOURCES[source]}'s CRNN as crnn imports it")
        new = match[1] + key[len(match[0]):]
        out[new], origin[new] = value, key
    return out, origin


def _shape(t: torch.Tensor | torch.Size) -> str:
    return "[" + ", ".join(map(str, tuple(t))) + "]"


def check_fits(state: dict[str, torch.Tensor], template: dict[str, torch.Tensor], origin: dict[str, str],
               source: str, why: str) -> None:
    """Every template key present with the template's shape; else one line naming the foreign key and ``why``."""
    for key, want in template.items():
        if key not in state:
            raise ForeignFormatError(f"the file has no weights for {key} (expected from {SOURCES[source]}); "
                                     "it is not a complete checkpoint of that network")
        if state[key].shape != want.shape:
            theirs = origin.get(key, key)
            raise ForeignFormatError(f"{theirs} has shape {_shape(state[key].shape)} where crnn needs "
                                     f"{_shape(want.shape)}: {why}")
    extra = [k for k in state if k not in template]
    if extra:
        raise ForeignFormatError(f"unexpected key {origin.get(extra[0], extra[0])}: no place for it in crnn's model")


def conv_bn_layers(cnn: nn.Sequential) -> list[tuple[int, int, int | None]]:
    """``(i, conv index, BN index or None)`` for the i-th Conv2d of a backbone, in order."""
    found: list[tuple[int, int, int | None]] = []
    children = list(cnn)
    for j, layer in enumerate(children):
        if isinstance(layer, nn.Conv2d):
            bn = j + 1 if j + 1 < len(children) and isinstance(children[j + 1], nn.BatchNorm2d) else None
            found.append((len(found), j, bn))
    return found


def fill_batches_tracked(state: dict[str, torch.Tensor], template: dict[str, torch.Tensor]) -> bool:
    """Add ``num_batches_tracked = 0`` where the template has it and the file does not (torch < 0.4.1 files)."""
    missing = [k for k in template if k.endswith(".num_batches_tracked") and k not in state]
    for key in missing:
        state[key] = torch.zeros((), dtype=torch.long)
    return bool(missing)


def clova_dims(state: dict, source: str) -> tuple[int, int, int]:
    """(input channels, LSTM hidden size, classes) of a clovaai-layout state dict (clovaai's VGG-BiLSTM-CTC and
    EasyOCR's generation-2 models share it); a channel count crnn cannot build is a ForeignFormatError."""
    in_channels = int(need(state, "FeatureExtraction.ConvNet.0.weight", source).shape[1])
    hidden = int(need(state, "SequenceModeling.0.rnn.weight_hh_l0", source).shape[1])
    num_classes = int(need(state, "Prediction.weight", source).shape[0])
    if in_channels not in (1, 3):
        raise ForeignFormatError(f"FeatureExtraction.ConvNet.0.weight takes {in_channels} input channels; "
                                 "crnn supports 1 or 3")
    return in_channels, hidden, num_classes


def clova_problem(keys: list[str]) -> str:
    """Why a clovaai-layout state dict is not None-VGG-BiLSTM-CTC ("" when it is)."""
    if any(k.startswith("Transformation.") for k in keys):
        return "it has a TPS rectification stage (Transformation.*), which crnn does not have"
    if any(k.startswith(("Prediction.attention_cell.", "Prediction.generator.")) for k in keys):
        return "its prediction head is attention (Prediction.attention_cell.*); crnn decodes CTC only"
    feats = [k for k in keys if k.startswith("FeatureExtraction.")]
    if any("GRCL" in k for k in feats):
        return "its feature extractor is RCNN (GRCL blocks); crnn imports the VGG extractor only"
    if any(not re.match(r"^FeatureExtraction\.ConvNet\.\d+\.", k) for k in feats):
        return "its feature extractor is ResNet; crnn imports the VGG extractor only"
    if not any(k.startswith("SequenceModeling.") for k in keys):
        return "it has no BiLSTM (SequenceModeling None); crnn needs the BiLSTM sequence model"
    return ""
