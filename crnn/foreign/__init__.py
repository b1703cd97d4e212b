"""Checkpoints of other CRNN repositories, read and written in one place (one module per source).

    imported = import_state("meijieru", plain_state)           # -> Imported (our keys, shape, preprocessing)
    cfg, charset = imported_config(imported, "alnum36")        # what our checkpoint stores with it
    theirs = export_state("meijieru", our_state, "vgg")       # the way back: meijieru's plain keys

Nothing here reads files or imports the engine: the caller loads the file (``weights_only``, ``module.`` stripped)
and saves the result.
"""
from __future__ import annotations

import torch

from crnn.charset import BUILTIN_CHARSETS, Charset
from crnn.config import Config, validate
from crnn.foreign import clovaai, easyocr, meijieru, sierkinhane
from crnn.foreign.common import ForeignFormatError, Imported
from crnn.foreign.detect import SOURCES, Detection, convert_command, detect, foreign_hint

__all__ = ["SOURCES", "TARGETS", "DEFAULT_WIDTH", "Detection", "ForeignFormatError", "Imported", "detect",
           "foreign_hint", "convert_command", "import_state", "export_state", "imported_config", "resolve_charset"]

TARGETS = ("meijieru", "easyocr")
DEFAULT_WIDTH = {"meijieru": 100, "sierkinhane": sierkinhane.WIDTH, "clovaai": 100, "easyocr": easyocr.MAX_WIDTH}
DEFAULT_CHARSET = "alnum36"  # meijieru's and clovaai's default alphabet 0-9a-z, blank 0: 37 classes


def import_state(source: str, state: dict[str, torch.Tensor], *, width: int | None = None,
                 pad: bool = False, height: int | None = None) -> Imported:
    """A plain-keyed state dict from ``source`` as crnn weights; ``pad``: clovaai trained with ``--PAD``;
    ``height``: EasyOCR's imgH (64 unless a custom model's .yaml says otherwise); for EasyOCR ``width`` is the cap
    (data.max_width)."""
    if source not in SOURCES:
        raise ForeignFormatError(f"unknown source {source!r}; choose one of {', '.join(SOURCES)}")
    if pad and source != "clovaai":
        raise ForeignFormatError("--pad is clovaai's --PAD option; the other repositories stretch to a fixed width")
    width = width or DEFAULT_WIDTH[source]
    if source == "easyocr":
        return easyocr.to_ours(state, height=height or easyocr.HEIGHT, max_width=width)
    if source == "clovaai":
        return clovaai.to_ours(state, pad=pad, width=width)
    if source == "sierkinhane":
        return sierkinhane.to_ours(state, width=width)
    return meijieru.to_ours(state, width=width)


def export_state(target: str, state: dict[str, torch.Tensor], variant: str, batch_norm: bool = True) -> dict:
    """Our plain-keyed weights in ``target``'s layout (meijieru's for variant vgg, EasyOCR's for vgg_easyocr)."""
    if target not in TARGETS:
        raise ForeignFormatError(f"unknown target {target!r}; crnn writes {', '.join(TARGETS)}")
    if target == "easyocr":
        return easyocr.from_ours(state, variant, batch_norm)
    return meijieru.from_ours(state, variant, batch_norm)


def resolve_charset(spec: str | None, num_classes: int, source: str) -> Charset:
    """The alphabet for an imported model: ``spec`` (size-checked) or alnum36 for a 37-class model."""
    chars = num_classes - 1
    if spec is None:
        if num_classes != len(BUILTIN_CHARSETS[DEFAULT_CHARSET]) + 1:
            raise ForeignFormatError(f"the {SOURCES[source]} model has {num_classes} classes ({chars} characters + "
                                     f"blank); pass --charset with its {chars}-character alphabet (a file or a name)")
        spec = DEFAULT_CHARSET
    charset = Charset.from_spec(spec)
    if len(charset) != chars:
        raise ForeignFormatError(f"--charset {spec} has {len(charset)} characters but the model has {num_classes} "
                                 f"classes ({chars} characters + blank); give the alphabet it was trained with")
    return charset


def imported_config(imported: Imported, charset: Charset) -> Config:
    """Our config for an imported model: variant, shape, geometry and preprocessing (validated)."""
    cfg = Config()
    m = cfg.model
    m.variant, m.in_channels, m.hidden = imported.variant, imported.in_channels, imported.hidden
    m.charset = next((name for name, chars in BUILTIN_CHARSETS.items() if chars == charset.chars), charset.chars)
    m.lowercase, m.unknown = charset.lowercase, charset.unknown
    for key, value in imported.data.items():
        setattr(cfg.data, key, value)
    validate(cfg)
    return cfg
