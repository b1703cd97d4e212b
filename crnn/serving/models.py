"""The models a service holds, by name: loading (the weights-by-name table of crnn-predict), preprocessing, the
forward pass and the per-request decoding.

Preprocessing and decoding are :class:`crnn.infer.Recognizer`'s own (the engine behind ``crnn.Recognizer`` and
``crnn-predict``), so a reading from the service equals theirs for the same image. Only the forward pass is split
from the decoding: the batcher runs the network on images from many requests at once, and each request decodes its
own rows with its own options (decoder, lexicon, per-character confidences).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from PIL import Image

from crnn.decode import Lexicon, WordList, decode, decoder_options
from crnn.engine.evaluate import reading_context
from crnn.infer import WEIGHTS_BY_NAME, Recognizer, resolve_weights
from crnn.serving.align import char_confidences
from crnn.serving.errors import ServeError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class ReadOptions:
    """How one request wants its images decoded."""

    decoder: str = "greedy"
    beam_width: int = 10
    lexicon: Lexicon | None = None
    characters: bool = False  # per-character confidences
    vertical: str = "warn"  # crops at least twice as tall as wide: warn | stack | rotate | auto | off (crnn-predict)


def parse_weights(specs: list[str]) -> dict[str, str]:
    """``--weights`` values -> {name: weights}: a shipped name (``en``, ``en_alnum36``, ``zh``), ``NAME=PATH``, or a
    path (named by its file stem). The first is the default model."""
    models: dict[str, str] = {}
    for spec in specs or ["en"]:
        if "=" in spec and not Path(spec).exists():
            name, weights = spec.split("=", 1)
        elif spec in WEIGHTS_BY_NAME and not Path(spec).exists():
            name, weights = spec, spec
        else:
            name, weights = Path(spec).stem, spec
        if not NAME.match(name) or not weights:
            raise ServeError(f"--weights {spec!r}: give a shipped name ({', '.join(WEIGHTS_BY_NAME)}), NAME=PATH "
                             "or a checkpoint path; a NAME is letters, digits, '.', '_' or '-'")
        if name in models:
            raise ServeError(f"two models are named {name!r}; name them apart: --weights NAME=PATH")
        models[name] = weights
    return models


class ModelSlot:
    """One named model: its weights, preprocessing, forward pass and decoding."""

    def __init__(self, name: str, weights: str | os.PathLike, device: str = "auto", amp: str = "off", *,
                 words: WordList | None = None) -> None:
        self.name = name
        self.weights = resolve_weights(weights)
        self.engine = Recognizer.from_checkpoint(self.weights, device, amp)
        self.charset = self.engine.charset
        self.words = words  # crnn-serve --words: the word decoder's list (None: no word decoder)

    def describe(self) -> dict:
        """What GET /v1/models tells about this model."""
        cfg, t = self.engine.config, self.engine.transform
        geometry = ({"height": t.height, "keep_ratio": True, "max_width": t.max_width} if t.keep_ratio
                    else {"height": t.height, "keep_ratio": False, "width": t.width})
        return {"name": self.name, "weights": str(self.weights), "variant": cfg.model.variant,
                "classes": self.charset.num_classes, "channels": cfg.model.in_channels, **geometry,
                "device": str(self.engine.device),
                "decoders": ["greedy", "beam"] + (["word"] if self.words is not None else [])}

    def prepare(self, image: Image.Image, vertical: str = "warn") -> tuple[list[torch.Tensor], str]:
        """PIL image -> the model's ``[C, H, W]`` inputs as crnn-predict makes them (one; of a tall crop with
        ``vertical`` stack, rotate or auto, one per way of making it a horizontal line, the most confident reading to
        be kept), and the squeeze or vertical-text note ("" if none)."""
        from crnn.data.vertical import vertical_candidates, vertical_note

        lines = vertical_candidates(image, vertical)
        if lines:
            return [self.engine.transform(x) for x in lines], self.engine.squeeze_note(*lines[0].size)
        note = self.engine.squeeze_note(*image.size) or (vertical_note(*image.size) if vertical == "warn" else "")
        return [self.engine.transform(image)], note

    @torch.inference_mode()
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Equal-width images ``[B, C, H, W]`` -> float32 logits ``[B, T, K]`` on the CPU."""
        engine = self.engine
        with reading_context(engine.model, engine.device, engine.amp):
            logits = engine.model(images.to(engine.device, non_blocking=True))  # (B, T, K)
        return logits.float().cpu()

    def lexicon(self, words: list[str]) -> Lexicon:
        """A request's word list prepared once for this model's alphabet."""
        return Lexicon(words, self.charset)

    def read(self, logits: torch.Tensor, opts: ReadOptions) -> dict:
        """One image's logits ``[T, K]`` -> {"text", "confidence"[, "characters"]} as Recognizer decodes them."""
        kw = decoder_options(opts.decoder, opts.beam_width, opts.lexicon, self.words)
        text, conf = decode(logits[None], self.charset, method=opts.decoder, **kw)[0]
        out: dict = {"text": text, "confidence": conf}
        if opts.characters:
            ids = [self.charset.index.get(c) for c in text]
            probs = char_confidences(logits.log_softmax(-1), ids) if None not in ids else [None] * len(text)
            out["characters"] = [{"char": c, "confidence": p} for c, p in zip(text, probs)]
        return out
