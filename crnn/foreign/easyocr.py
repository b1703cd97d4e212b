"""JaidedAI/EasyOCR generation-2 recognisers (``english_g2.pth``, ``latin_g2.pth``, ``zh_sim_g2.pth``, ...) <->
crnn's ``vgg_easyocr`` variant, and the three files of an EasyOCR custom recogniser (``.pth``, ``.yaml``, ``.py``).

Their network (``easyocr/model/vgg_model.py``: ``Model(input_channel=1, output_channel=256, hidden_size=256,
num_class)``) is clovaai's None-VGG-BiLSTM-CTC at width 256: ``FeatureExtraction.ConvNet`` (convs 32-64-128-128-
256-256-256, bias on 1-4 and 7, BatchNorm on 5 and 6), ``AdaptiveAvgPool2d((None, 1))`` over the height a 64 px
input leaves (3 rows), ``SequenceModeling.{0,1}`` = BiLSTM(h) + ``linear`` Linear(2h, h) each, and ``Prediction``
Linear(h, classes). ``vgg_easyocr`` has the same modules under our names, nothing fused, so both directions are a
rename and a round trip is bit-identical. The files are saved from ``nn.DataParallel`` (``module.`` keys, which
EasyOCR's loader expects); the character list is not in them: EasyOCR keeps it in ``easyocr/config.py`` (copied to
``easyocr_g2.json`` here) or, for a custom model, in the ``.yaml`` beside its network file. Its input path is
``data.pad: easyocr`` (:mod:`crnn.data.easyocr_input`).
"""
from __future__ import annotations

import importlib.util
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
import yaml

from crnn.charset import Charset, CharsetError
from crnn.foreign.common import (CLOVA_PREFIXES, ForeignFormatError, Imported, check_fits, clova_dims,
                                 clova_problem, fill_batches_tracked, need, rename)
from crnn.model import build_model

__all__ = ["to_ours", "from_ours", "g2_models", "model_name", "find_charset", "read_custom_yaml", "EasyOcrCharset",
           "custom_model_files", "recognise", "VARIANT", "HEIGHT", "MAX_WIDTH", "G2_WIDTHS", "CRAFT_PROBLEM",
           "G1_PROBLEM"]

VARIANT, HEIGHT = "vgg_easyocr", 64
MAX_WIDTH = 4096  # EasyOCR reads a crop at any width; crnn's cap (wider crops are squeezed to it)
G2_WIDTHS = ("EasyOCR's generation-2 network (output_channel 256: convs 32-64-128-128-256-256-256) is the one crnn "
             "imports as vgg_easyocr (a 512-wide file is clovaai's: --from clovaai)")
PREFIXES = [("FeatureExtraction.ConvNet.", "cnn."), ("SequenceModeling.0.rnn.", "rnn1.lstm."),
            ("SequenceModeling.0.linear.", "rnn1.proj."), ("SequenceModeling.1.rnn.", "rnn2.lstm."),
            ("SequenceModeling.1.linear.", "rnn2.proj."), ("Prediction.", "head.")]
CRAFT_PREFIXES = ("basenet.", "upconv", "conv_cls.")  # EasyOCR's text detector, craft_mlt_25k.pth
G2_CONV0 = 32  # EasyOCR's generation-2 VGG (output_channel 256) starts with 32 channels, clovaai's with 64
G1_HIDDEN = 512  # EasyOCR's generation-1 recognisers: clovaai's ResNet extractor with hidden_size 512
CRAFT_PROBLEM = ("it is EasyOCR's CRAFT text detector (basenet.*, upconv*, conv_cls.*: craft_mlt_25k.pth), not a "
                 "recogniser; crnn reads the word crops a detector finds")
G1_PROBLEM = ("it is an EasyOCR generation-1 recogniser (ResNet feature extractor, hidden 512: latin.pth, "
              "chinese.pth, ...); crnn imports the generation-2 ones (VGG, *_g2.pth)")
NETWORK_PY = '''"""Network of an EasyOCR custom recogniser written by crnn-convert-ckpt --to easyocr:
EasyOCR's own generation-2 model (easyocr/model/vgg_model.py), Model(input_channel, output_channel, hidden_size,
num_class)."""
from easyocr.model.vgg_model import Model  # noqa: F401
'''


@lru_cache(maxsize=1)
def g2_models() -> dict[str, dict[str, Any]]:
    """EasyOCR's shipped generation-2 models: name -> {filename, lang_list, characters} (from its config.py)."""
    with open(Path(__file__).with_name("easyocr_g2.json"), encoding="utf-8") as f:
        return json.load(f)["models"]


def model_name(path: str | Path) -> str | None:
    """The shipped model a file name stands for (``english_g2.pth`` -> english_g2, ``telugu.pth`` -> telugu_g2)."""
    stem = Path(path).stem
    return next((n for n, m in g2_models().items() if stem in (n, Path(m["filename"]).stem)), None)


def _dim(state: dict[str, torch.Tensor], key: str, dim: int) -> int | None:
    t = state.get(key)
    return int(t.shape[dim]) if isinstance(t, torch.Tensor) and t.dim() > dim else None


def recognise(state: dict[str, torch.Tensor]) -> str | None:
    """Whether a plain-keyed state dict is an EasyOCR file: "" for a generation-2 recogniser crnn imports, the
    reason for one of its files crnn cannot import (CRAFT, generation 1), None when it is not EasyOCR's."""
    keys = list(state)
    if keys and all(k.startswith(CRAFT_PREFIXES) for k in keys):
        return CRAFT_PROBLEM
    if not keys or not all(k.startswith(CLOVA_PREFIXES) for k in keys):
        return None
    if not clova_problem(keys) and _dim(state, "FeatureExtraction.ConvNet.0.weight", 0) == G2_CONV0:
        return ""
    resnet = any(k.startswith("FeatureExtraction.ConvNet.conv0_1.") for k in keys)
    g1 = resnet and _dim(state, "SequenceModeling.0.rnn.weight_hh_l0", 1) == G1_HIDDEN
    if g1 and "Prediction.weight" in state and not any(k.startswith("Transformation.") for k in keys):
        return G1_PROBLEM
    return None


@dataclass
class EasyOcrCharset:
    """A character list for an EasyOCR file, where it came from, and what a custom model's .yaml adds."""

    charset: Charset
    origin: str  # e.g. "english_g2 (EasyOCR's config)" or "custom.yaml"
    height: int = HEIGHT  # the .yaml's imgH
    lang_list: list[str] = field(default_factory=lambda: ["en"])
    model: str | None = None  # the shipped model's name


def read_custom_yaml(path: Path) -> EasyOcrCharset:
    """The ``character_list``, ``imgH`` and ``lang_list`` of an EasyOCR custom-model .yaml."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ForeignFormatError(f"cannot read EasyOCR model config {path}: {str(e).splitlines()[0]}") from None
    chars = data.get("character_list") if isinstance(data, dict) else None
    if not isinstance(chars, str) or not chars:
        raise ForeignFormatError(f"{path} has no character_list: not an EasyOCR custom-model .yaml")
    height = data.get("imgH") or HEIGHT
    if not isinstance(height, int) or height < 16:
        raise ForeignFormatError(f"{path}: imgH must be an integer of at least 16, got {height!r}")
    langs = data.get("lang_list") or ["en"]
    try:
        charset = Charset(chars)
    except CharsetError as e:
        raise ForeignFormatError(f"{path}: character_list: {e}") from None
    return EasyOcrCharset(charset, str(path), height, [str(x) for x in langs])


def _from_spec(spec: str) -> EasyOcrCharset:
    """--charset: a shipped model's name, a custom model's .yaml, or any crnn charset spec (name, file, characters)."""
    if spec.endswith((".yaml", ".yml")):
        return read_custom_yaml(Path(spec))
    shipped = {alias: n for n, m in g2_models().items() for alias in (n, Path(m["filename"]).stem)}
    if spec in shipped:
        m = g2_models()[shipped[spec]]
        return EasyOcrCharset(Charset(m["characters"]), f"{shipped[spec]} (EasyOCR's config)", HEIGHT,
                              m["lang_list"], shipped[spec])
    return EasyOcrCharset(Charset.from_spec(spec), f"--charset {spec}")


def find_charset(spec: str | None, num_classes: int, path: str | Path) -> EasyOcrCharset:
    """The alphabet of an EasyOCR file: ``--charset``, else ``NAME.yaml`` beside it, else its shipped model name."""
    path = Path(path)
    beside, shipped = path.with_suffix(".yaml"), model_name(path)
    if spec is not None:
        found = _from_spec(spec)
    elif beside.is_file():
        found = read_custom_yaml(beside)
    elif shipped is not None:
        found = _from_spec(shipped)
    else:
        raise ForeignFormatError(
            f"{path} is an EasyOCR recogniser with {num_classes} classes ({num_classes - 1} characters + blank) "
            f"and no {beside.name} beside it; pass --charset with a shipped model's name ({', '.join(g2_models())}), "
            "its custom-model .yaml, or the alphabet itself")
    if len(found.charset) != num_classes - 1:
        raise ForeignFormatError(
            f"{found.origin} has {len(found.charset)} characters but {path.name} has {num_classes} classes "
            f"({num_classes - 1} characters + blank); give the character list it was trained with")
    return found


def to_ours(state: dict[str, torch.Tensor], height: int = HEIGHT, max_width: int = MAX_WIDTH) -> Imported:
    """Map a plain-keyed EasyOCR generation-2 state dict onto crnn's ``vgg_easyocr`` (a rename)."""
    keys = list(state)
    problem = recognise(state) or (clova_problem(keys) if keys and all(k.startswith(CLOVA_PREFIXES) for k in keys)
                                   else "")
    if problem:
        raise ForeignFormatError(problem)
    in_channels, hidden, num_classes = clova_dims(state, "easyocr")
    mapped, origin = rename(state, PREFIXES, "easyocr")
    expected = build_model(VARIANT, in_channels, num_classes, hidden).state_dict()
    notes = [f"EasyOCR's modules map one to one onto {VARIANT} (nothing folded or fused)"]
    if fill_batches_tracked(mapped, expected):
        notes.append("the file has no num_batches_tracked: set to 0")
    check_fits(mapped, expected, origin, "easyocr", G2_WIDTHS)
    data = {"height": height, "width": 4 * height, "keep_ratio": True, "pad": "easyocr", "max_width": max_width,
            "interpolation": "bicubic", "mean": 0.5, "std": 0.5}
    return Imported(mapped, VARIANT, in_channels, hidden, num_classes, data, notes)


def from_ours(state: dict[str, torch.Tensor], variant: str, batch_norm: bool = True) -> OrderedDict:
    """crnn ``vgg_easyocr`` weights (plain keys) -> the state dict EasyOCR loads (``module.`` keys, its names)."""
    if variant != VARIANT or not batch_norm:
        what = f"variant {variant}" + ("" if batch_norm else " without batch norm")
        raise ForeignFormatError(f"only variant {VARIANT} with batch norm is EasyOCR's network; this model is {what}")
    in_channels = int(state["cnn.0.weight"].shape[1])
    if in_channels != 1:
        raise ForeignFormatError(f"EasyOCR feeds its recogniser grey crops; this model takes {in_channels} channels")
    classes, hidden = int(state["head.weight"].shape[0]), int(state["rnn1.lstm.weight_hh_l0"].shape[1])
    template = build_model(VARIANT, 1, classes, hidden)
    check_fits(state, template.state_dict(), {}, "easyocr", G2_WIDTHS)
    out: OrderedDict[str, torch.Tensor] = OrderedDict()
    for key, value in state.items():
        theirs, ours = next((t, o) for t, o in PREFIXES if key.startswith(o))
        out["module." + theirs + key[len(ours):]] = value
    return out


def custom_model_files(state: dict[str, torch.Tensor], variant: str, batch_norm: bool, charset: Charset,
                       height: int, lang_list: list[str], name: str) -> tuple[OrderedDict, str, str]:
    """(``NAME.pth`` state, ``NAME.yaml`` text, ``NAME.py`` text) of an EasyOCR custom recogniser.

    EasyOCR imports ``NAME.py`` as a module named NAME, so NAME must be an identifier no installed module has.
    """
    theirs = from_ours(state, variant, batch_norm)
    if not name.isidentifier():
        raise ForeignFormatError(f"EasyOCR imports the network as a Python module named after the file: {name!r} "
                                 "is not a valid module name (use letters, digits and _, e.g. my_english.pth)")
    if importlib.util.find_spec(name) is not None:
        raise ForeignFormatError(f"{name!r} is the name of an installed Python module, which EasyOCR would import "
                                 "instead of the network file: choose another file name")
    params = {"input_channel": 1, "output_channel": int(state["cnn.0.weight"].shape[0]) * 8,
              "hidden_size": int(state["head.weight"].shape[1])}
    config = {"network_params": params, "imgH": height, "lang_list": list(lang_list),
              "character_list": charset.chars}
    text = yaml.safe_dump(config, allow_unicode=True, sort_keys=False, width=10 ** 9)
    return theirs, text, NETWORK_PY
