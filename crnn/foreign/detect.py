"""Recognise checkpoints written by other CRNN repositories from their key names (nothing is loaded or run here).

Keys are the plain keys after ``clean_state_dict`` (no ``module.`` prefix). ``container`` is where the weights
were found in the file: ``bare`` (a state dict saved as such) or ``state_dict`` (``{'state_dict': ..., ...}``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = ["Detection", "SOURCES", "detect", "convert_command", "foreign_hint"]

SOURCES = {
    "meijieru": "meijieru/crnn.pytorch",
    "sierkinhane": "Sierkinhane/CRNN_Chinese_Characters_Rec",
    "clovaai": "clovaai/deep-text-recognition-benchmark",
    "easyocr": "JaidedAI/EasyOCR",
}
_MEIJIERU_KEY = re.compile(r"^(cnn\.(conv|batchnorm)\d+\.|rnn\.[01]\.(rnn|embedding)\.)")
_CLOVA_PREFIXES = ("Transformation.", "FeatureExtraction.", "SequenceModeling.", "Prediction.")
_CRAFT_PREFIXES = ("basenet.", "upconv", "conv_cls.")  # EasyOCR's text detector, craft_mlt_25k.pth
EASYOCR_G2_CONV0 = 32  # EasyOCR's generation-2 VGG (output_channel 256) starts with 32 channels, clovaai's with 64
EASYOCR_G1_HIDDEN = 512  # EasyOCR's generation-1 recognisers: clovaai's ResNet extractor with hidden_size 512
CRAFT_PROBLEM = ("it is EasyOCR's CRAFT text detector (basenet.*, upconv*, conv_cls.*: craft_mlt_25k.pth), not a "
                 "recogniser; crnn reads the word crops a detector finds")
G1_PROBLEM = ("it is an EasyOCR generation-1 recogniser (ResNet feature extractor, hidden 512: latin.pth, "
              "chinese.pth, ...); crnn imports the generation-2 ones (VGG, *_g2.pth)")
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


def clova_problem(keys: list[str]) -> str:
    """Why a clovaai state dict is not None-VGG-BiLSTM-CTC ("" when it is)."""
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


def _easyocr(state: dict[str, torch.Tensor], keys: list[str], problem: str) -> Detection | None:
    """An EasyOCR recogniser among clovaai-layout files: its width-256 VGG (g2) or its hidden-512 ResNet (g1)."""
    classes = _classes(state, "Prediction.weight")
    if not problem and _classes(state, "FeatureExtraction.ConvNet.0.weight") == EASYOCR_G2_CONV0:
        return Detection("easyocr", classes)
    hidden = state.get("SequenceModeling.0.rnn.weight_hh_l0")
    resnet = any(k.startswith("FeatureExtraction.ConvNet.conv0_1.") for k in keys)
    g1 = resnet and isinstance(hidden, torch.Tensor) and hidden.dim() == 2 and hidden.shape[1] == EASYOCR_G1_HIDDEN
    if g1 and "Prediction.weight" in state and not any(k.startswith("Transformation.") for k in keys):
        return Detection("easyocr", classes, G1_PROBLEM)
    return None


def detect(state: dict[str, torch.Tensor], container: str = "bare") -> Detection | None:
    """The repository a plain-keyed state dict comes from, or None when its keys are not a known foreign layout."""
    keys = list(state)
    if keys and all(k.startswith(_CRAFT_PREFIXES) for k in keys):
        return Detection("easyocr", None, CRAFT_PROBLEM)
    if keys and all(k.startswith(_CLOVA_PREFIXES) for k in keys):
        problem = clova_problem(keys)
        return _easyocr(state, keys, problem) or Detection("clovaai", _classes(state, "Prediction.weight"), problem)
    if any(_MEIJIERU_KEY.match(k) for k in keys):
        classes = _classes(state, "rnn.1.embedding.weight")
        chinese = classes != ALNUM36_CLASSES and (container == "state_dict" or (classes or 0) > LARGE_ALPHABET)
        return Detection("sierkinhane" if chinese else "meijieru", classes)
    return None


def convert_command(det: Detection, path: str) -> str:
    """The crnn-convert-ckpt command line that converts the file (with --charset where it cannot default)."""
    cmd = f"crnn-convert-ckpt {path} OUT --from {det.source}"
    if det.source == "easyocr":
        from crnn.foreign.easyocr import g2_models, model_name  # here: that module imports this one

        name = model_name(path)
        known = name is not None and len(g2_models()[name]["characters"]) + 1 == det.num_classes
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
