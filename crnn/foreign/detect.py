"""Recognise checkpoints written by other CRNN repositories from their key names (nothing is loaded or run here).

Detection stands on the importers (each knows its own files) and they on :mod:`crnn.foreign.common`.
Keys are the plain keys after ``clean_state_dict`` (no ``module.`` prefix). ``container`` is where the weights
were found in the file: ``bare`` (a state dict saved as such) or ``state_dict`` (``{'state_dict': ..., ...}``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import torch

from crnn.foreign import easyocr
from crnn.foreign.common import CLOVA_PREFIXES, SOURCES, clova_problem

__all__ = ["Detection", "SOURCES", "detect", "convert_command", "foreign_hint"]

_MEIJIERU_KEY = re.compile(r"^(cnn\.(conv|batchnorm)\d+\.|rnn\.[01]\.(rnn|embedding)\.)")
ALNUM36_CLASSES = 37
LARGE_ALPHABET = 1000  # more classes than this on meijieru's network: a Chinese model, i.e. Sierkinhane's
# (as is a {'state_dict': ...} file that is not 0-9a-z; a 37-class model is meijieru's whatever the container)


@dataclass(frozen=True)
class Detection:
    """What a foreign state dict looks like: its source repository, class count and (if any) why we cannot load it."""

    source: str  # a key of SOURCES
    num_classes: int | None
    problem: str = ""  # non-empty: a model of that repository that crnn cannot represent

    @property
    def name(self) -> str:
        """The repository, e.g. ``meijieru/crnn.pytorch``."""
        return SOURCES[self.source]


def _classes(state: dict[str, torch.Tensor], key: str) -> int | None:
    t = state.get(key)
    return int(t.shape[0]) if isinstance(t, torch.Tensor) and t.dim() >= 1 else None


def detect(state: dict[str, torch.Tensor], container: str = "bare") -> Detection | None:
    """The repository a plain-keyed state dict comes from, or None when its keys are not a known foreign layout."""
    keys = list(state)
    easy = easyocr.recognise(state)
    if easy is not None:
        return Detection("easyocr", _classes(state, "Prediction.weight"), easy)
    if keys and all(k.startswith(CLOVA_PREFIXES) for k in keys):
        return Detection("clovaai", _classes(state, "Prediction.weight"), clova_problem(keys))
    if any(_MEIJIERU_KEY.match(k) for k in keys):
        classes = _classes(state, "rnn.1.embedding.weight")
        chinese = classes != ALNUM36_CLASSES and (container == "state_dict" or (classes or 0) > LARGE_ALPHABET)
        return Detection("sierkinhane" if chinese else "meijieru", classes)
    return None


def convert_command(det: Detection, path: str) -> str:
    """The crnn-convert-ckpt command line that converts the file (with --charset where it cannot default)."""
    cmd = f"crnn-convert-ckpt {path} OUT --from {det.source}"
    if det.source == "easyocr":
        name = easyocr.model_name(path)
        known = name is not None and len(easyocr.g2_models()[name]["characters"]) + 1 == det.num_classes
        if known or Path(path).with_suffix(".yaml").is_file():
            return cmd
        chars = f"{det.num_classes - 1} " if det.num_classes else ""
        return cmd + f" --charset MODEL|FILE.yaml|ALPHABET  (its {chars}characters; MODEL e.g. english_g2)"
    if det.num_classes != ALNUM36_CLASSES:
        chars = f"{det.num_classes - 1} " if det.num_classes else ""
        cmd += f" --charset ALPHABET  (its {chars}characters" + (
            ", e.g. char_std_5990.txt)" if det.source == "sierkinhane" else ")")
    return cmd


def foreign_hint(state: dict[str, torch.Tensor], container: str, path: str) -> str:
    """One line saying what a foreign file is and how to convert it ("" when it is not foreign)."""
    det = detect(state, container)
    if det is None:
        return ""
    if det.problem:
        return f"{path} looks like a {det.name} checkpoint that crnn cannot import: {det.problem}"
    return f"{path} looks like a {det.name} checkpoint: {convert_command(det, path)}"
