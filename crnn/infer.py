"""Inference library: a :class:`Recognizer` built from any checkpoint, batched prediction on images or files.

    rec = Recognizer.from_checkpoint("weights/crnn_en.pt")   # or a shipped name: "en", "en_alnum36", "zh"
    rec.predict_images([Image.open("word.png")])      # [("Hello", 0.97)]
    for p in rec.predict_paths(["a.jpg", "b.png"]):   # Prediction(path, text, confidence, error)
        ...

Images are resized as the model was trained (the stored ``data`` config: height, fixed width or keep-ratio,
grayscale or RGB), except that a keep-ratio line may be wider than the training cap ``data.max_width``: its width
follows the image up to :data:`INFER_MAX_WIDTH` (T = W/4 time steps must cover the characters of a long line), and a
line wider than that is squeezed with a :class:`SqueezeWarning`. Images of equal resized width share a batch, so a
prediction never depends on which other images were passed with it (no padding between images).
"""
from __future__ import annotations

import glob
import os
import re
import warnings
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from numbers import Integral, Real
from pathlib import Path
from typing import TextIO

import torch
from PIL import Image, ImageOps, UnidentifiedImageError

import crnn
from crnn.charset import Charset
from crnn.config import READ_WIDTH_SCALE_RANGE, Config, load_config
from crnn.data.collate import read_at_own_width, split_by_width  # noqa: F401 (public here too)
from crnn.data.transforms import INFER_MAX_WIDTH, ResizeNormalize
from crnn.data.vertical import VERTICAL_MODES, is_vertical, vertical_candidates, vertical_note, vertical_summary
from crnn.decode import DECODE_METHODS, WordList, decode, decoder_options
from crnn.engine.checkpoint import Checkpoint, build_from_checkpoint, load_checkpoint
from crnn.engine.evaluate import reading_context
from crnn.model import CRNN

__all__ = ["Recognizer", "Prediction", "InferenceError", "ImageReadError", "AMP_MODES", "AMP_HELP", "IMAGE_EXTENSIONS",
           "resolve_device", "load_image", "width_batches", "split_by_width", "read_at_own_width", "default_weights",
           "fallback_spec", "read_lexicon", "read_word_list", "WEIGHTS_BY_NAME", "WEIGHTS_READS", "weights_folder",
           "resolve_weights", "shipped_names_help", "INFER_MAX_WIDTH", "SqueezeWarning", "VerticalWarning",
           "PrecisionWarning", "VerticalCandidates", "FallbackWeightsWarning", "find_images", "expand_inputs",
           "EMPTY_IMAGE", "UNRECOGNISED_IMAGE", "reading_geometry", "WORD_LIST_HINT"]

# reading precision: off (float32) | auto (bf16 where measured faster here) | bf16 (on a CPU: the weights held in
# bfloat16; on CUDA: autocast) | fp16 (CUDA autocast)
AMP_MODES = ("off", "auto", "bf16", "fp16")
AMP_HELP = ("reading precision: off (float32, the default), auto (bf16 where one crop measures faster here), bf16 (on "
            "a CPU the weights held in bfloat16: 1.2-1.9x on CPUs with native bf16 kernels, e.g. Zen 4/5 or AMX "
            "Xeons, slower on others; on CUDA autocast), fp16 (CUDA autocast)")
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".pbm", ".pgm", ".ppm")
EMPTY_IMAGE = "empty (0 bytes)"  # the reason for an empty file, here and in crnn-serve's answers
UNRECOGNISED_IMAGE = "not an image (unrecognised format)"
CHUNK = 512  # images loaded and predicted together by predict_paths (bounds memory on huge inputs)
# The shipped models by name (files in weights/ of the package checkout); "en" is the default everywhere.
WEIGHTS_BY_NAME = {"en": "crnn_en.pt", "en_alnum36": "crnn_vgg_small.pt", "zh": "crnn_zh_lines.pt"}
# what each name reads, for --help texts and messages (weights/README.md has the cards)
WEIGHTS_READS = {"en": "English words and short lines in printable ASCII, case and punctuation kept",
                 "en_alnum36": "English words as lower-case 0-9a-z, fixed 32x100 input",
                 "zh": "Chinese text lines"}
# a name whose file is absent in this checkout reads with this one instead, with a warning
FALLBACK_NAME = {"en": "en_alnum36"}
# names whose model this release does not ship yet: what a user can do instead (docs/chinese.md)
NOT_YET_SHIPPED = {"zh": "it comes with the crnn checkout (git pull), or train one with bash scripts/zh_sitting.sh "
                         "start (docs/chinese.md, 'Train a Chinese line model') and copy runs/zh/last.pt there"}
SHIPPED_MODEL = WEIGHTS_BY_NAME["en"]
_GLOB_MAGIC = re.compile(r"[*?[]")


class InferenceError(ValueError):
    """Bad inference settings (device, AMP mode, decoder); one-line message with the fix."""


class ImageReadError(OSError):
    """One image file could not be read; the message is the reason (the path is reported separately)."""


@dataclass
class Prediction:
    """The result for one input file: text and confidence, or the reason it could not be read."""

    path: str
    text: str | None
    confidence: float | None
    error: str | None = None

    def to_dict(self) -> dict:
        """JSON-ready form; ``error`` only when the file failed."""
        d = {"path": self.path, "text": self.text, "confidence": self.confidence}
        if self.error is not None:
            d["error"] = self.error
        return d


def resolve_device(name: str) -> torch.device:
    """auto | cpu | cuda | cuda:N -> torch.device; asking for CUDA without CUDA is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise InferenceError(f"unknown device {name!r}; use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InferenceError(f"device {name} requested but CUDA is not available; use --device cpu or auto")
    if device.type not in ("cpu", "cuda"):
        raise InferenceError(f"unsupported device {name!r}; use auto, cpu, cuda or cuda:N")
    return device


class FallbackWeightsWarning(UserWarning):
    """The shipped model asked for is not in this checkout; another one reads instead (the message names both)."""


class PrecisionWarning(UserWarning):
    """amp=bf16 asked for on a CPU without native bf16 kernels: it reads, but slower than float32."""


class SqueezeWarning(UserWarning):
    """A keep-ratio line wider than the inference cap was squeezed to it (fewer time steps than its width asks)."""


class VerticalWarning(UserWarning):
    """A crop much taller than wide (vertical text?) was read as it is (``vertical="warn"``, the default)."""


class VerticalCandidates(tuple):
    """The preprocessed tensors of one vertical crop, one per way of making it a horizontal line (``vertical`` stack,
    rotate or auto; crnn.data.vertical.vertical_candidates): all are read, the most confident reading is the crop's."""


def weights_folder() -> Path:
    """The ``weights/`` folder of the package checkout (where the shipped models live)."""
    return Path(crnn.__file__).resolve().parent.parent / "weights"


def shipped_names_help() -> str:
    """The shipped names and what each reads, for a ``--weights`` help text."""
    return ", ".join(f"{name} ({WEIGHTS_READS[name]}; weights/{file})" for name, file in WEIGHTS_BY_NAME.items())


def resolve_weights(weights: str | os.PathLike | None, folder: str | os.PathLike | None = None) -> Path:
    """A ``--weights`` value -> checkpoint path: None = the default (en), a path that exists wins, then a name.

    Names are the keys of :data:`WEIGHTS_BY_NAME` (``en``, ``en_alnum36``, ``zh``); a name whose file is absent
    falls back to :data:`FALLBACK_NAME`'s file with a :class:`FallbackWeightsWarning` where it has one, else is an
    InferenceError naming the file. Anything else is returned as a path (loading it reports a missing file).
    """
    if weights is None:
        return default_weights() if folder is None else default_weights(folder)
    path = Path(weights)
    if not path.exists() and str(weights) not in WEIGHTS_BY_NAME and _looks_like_a_name(str(weights)):
        raise InferenceError(f"weights {weights!r}: no such file, and not a shipped model's name "
                             f"({', '.join(WEIGHTS_BY_NAME)}){_did_you_mean(str(weights))}; pass one of those names "
                             "or the path to a checkpoint (.pt)")
    if path.exists() or str(weights) not in WEIGHTS_BY_NAME:
        return path
    folder = Path(folder) if folder is not None else weights_folder()
    name = str(weights)
    file = folder / WEIGHTS_BY_NAME[name]
    if file.is_file():
        return file
    spare = FALLBACK_NAME.get(name)
    if spare is not None and (folder / WEIGHTS_BY_NAME[spare]).is_file():
        warnings.warn(f"shipped model {name!r} is {file}, which is not there; reading with {spare!r} "
                      f"({WEIGHTS_BY_NAME[spare]}: {WEIGHTS_READS[spare]}) instead. Get {file.name} with the crnn "
                      f"checkout (git pull), or pass --weights", FallbackWeightsWarning, stacklevel=2)
        return folder / WEIGHTS_BY_NAME[spare]
    how = NOT_YET_SHIPPED.get(name, "get it with the crnn checkout (git pull)")
    raise InferenceError(f"shipped model {name!r} is {file}, which is not there; {how}, "
                         f"or pass --weights PATH to a checkpoint")


def _looks_like_a_name(weights: str) -> bool:
    """A bare word such as ``eng`` (no folder, no file suffix): meant as a shipped model's name."""
    return bool(re.fullmatch(r"[\w-]+", weights))


def _did_you_mean(weights: str) -> str:
    """`` (did you mean 'en'?)`` for a near miss of a shipped name, else ""."""
    import difflib

    close = difflib.get_close_matches(weights.lower(), list(WEIGHTS_BY_NAME), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def default_weights(folder: str | os.PathLike | None = None) -> Path:
    """The default model: ``en`` (``weights/crnn_en.pt``) next to the package; where it is absent, the former
    default ``en_alnum36`` with a :class:`FallbackWeightsWarning`, else the first ``weights/*.pt`` (warned too)."""
    folder = Path(folder) if folder is not None else weights_folder()
    if (folder / SHIPPED_MODEL).is_file() or (folder / WEIGHTS_BY_NAME[FALLBACK_NAME["en"]]).is_file():
        return resolve_weights("en", folder)
    found = sorted(folder.glob("*.pt"))
    if not found:
        raise InferenceError(f"no shipped model in {folder}; pass --weights PATH (a .pt file from crnn-train)")
    warnings.warn(f"the default model {folder / SHIPPED_MODEL} is not there; reading with {found[0].name}, the "
                  f"first .pt file there. Get {SHIPPED_MODEL} with the crnn checkout (git pull), or pass --weights",
                  FallbackWeightsWarning, stacklevel=2)
    return found[0]


def fallback_spec(config_path: str | None, charset_spec: str | None) -> tuple[Config | None, Charset | None]:
    """Config and charset for a bare state dict (which stores neither): from --config and/or --charset."""
    if config_path is None and charset_spec is None:
        return None, None
    cfg = load_config(config_path)
    if charset_spec is not None:
        cfg.model.charset = charset_spec
    return cfg, Charset.from_config(cfg.model)


def read_lexicon(path: str | os.PathLike) -> list[str]:
    """Words for lexicon decoding: one per line (blank lines skipped)."""
    try:
        with open(path, encoding="utf-8") as f:
            words = [w.strip() for w in f if w.strip()]
    except (OSError, UnicodeDecodeError) as e:
        raise InferenceError(f"cannot read lexicon {path}: {getattr(e, 'strerror', None) or e}") from None
    if not words:
        raise InferenceError(f"lexicon {path} holds no words; give one word per line")
    return words


WORD_LIST_HINT = ("one word per line, or 'word count' per line for a frequency list, compared as lower-case 0-9a-z; "
                  "Debian and Ubuntu: apt install wamerican gives /usr/share/dict/american-english")


def read_word_list(path: str | os.PathLike) -> WordList:
    """A word prior's list (``--words``): one word per line, or ``word count`` lines (a frequency list), kept in the
    36-class form (crnn.decode.WordList.from_lines)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            words = WordList.from_lines(f, source=os.fspath(path))
    except OSError as e:
        raise InferenceError(f"cannot read the word list {path}: {e.strerror or e}; {WORD_LIST_HINT}") from None
    except ValueError as e:
        raise InferenceError(str(e)) from None
    if not len(words):
        raise InferenceError(f"the word list {path} holds no words of Latin letters or digits "
                             f"({WORD_LIST_HINT})")
    return words


def set_threads(threads: int | None) -> None:
    """``--threads`` of crnn-predict and crnn-eval: torch's intra-op threads for this process (None: torch's default);
    below 1 raises InferenceError."""
    if threads is None:
        return
    if threads < 1:
        raise InferenceError(f"--threads must be at least 1, got {threads}")
    torch.set_num_threads(threads)


def load_image(path: str | os.PathLike) -> Image.Image:
    """Open and fully decode an image file, applying its EXIF orientation; raise ImageReadError with the reason."""
    p = Path(path)
    if p.is_dir():
        raise ImageReadError("is a directory")
    if p.is_file() and p.stat().st_size == 0:
        raise ImageReadError(EMPTY_IMAGE)
    try:
        with Image.open(p) as img:
            img.load()
            return ImageOps.exif_transpose(img)  # a decoded copy, rotated when the EXIF says so
    except FileNotFoundError:
        raise ImageReadError("no such file") from None
    except PermissionError:
        raise ImageReadError("permission denied") from None
    except UnidentifiedImageError:
        raise ImageReadError(UNRECOGNISED_IMAGE) from None
    except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError) as e:
        raise ImageReadError(f"cannot decode image ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None


def _natural_key(path: str) -> list:
    """Sort key that puts 2.jpg before 10.jpg."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path)]


def find_images(folder: str | os.PathLike) -> list[str]:
    """Image files at or below ``folder`` (common extensions, case-insensitive), naturally sorted."""
    found = []
    for root, dirs, files in os.walk(folder, followlinks=True):
        dirs.sort()
        found += [os.path.join(root, f) for f in files if f.lower().endswith(IMAGE_EXTENSIONS)]
    return sorted(found, key=_natural_key)


def _expand_one(item: str) -> list[str]:
    """One path, folder or glob -> file paths (a missing file stays, to be reported per file)."""
    if os.path.isdir(item):
        found = find_images(item)
        if not found:
            raise InferenceError(f"{item}: no images (.jpg, .png, ...) in this folder or below")
        return found
    if os.path.lexists(item) or not _GLOB_MAGIC.search(item):
        return [item]
    matches = sorted(glob.glob(item, recursive=True), key=_natural_key)
    if not matches:
        raise InferenceError(f"{item}: no files match this pattern")
    return [f for m in matches for f in (find_images(m) if os.path.isdir(m) else [m])]


def expand_inputs(items: Iterable[str], stdin: TextIO | None = None) -> list[str]:
    """Files, folders (searched recursively), globs and ``-`` (one path per line of ``stdin``) as an ordered list of
    files, what crnn-predict reads; raises InferenceError for an empty folder, a glob matching nothing, or no paths."""
    paths: list[str] = []
    for item in items:
        if item == "-" and stdin is not None:
            for line in stdin:
                if line.strip():
                    paths += _expand_one(line.rstrip("\r\n"))
        else:
            paths += _expand_one(item)
    if not paths:
        raise InferenceError("no input images (stdin gave no paths)")
    return paths


def reading_geometry(config: Config, width_step: int | None = None, width_scale: float | None = None) -> Config:
    """``config`` with ``data.width_step`` / ``data.read_width_scale`` replaced for reading (None keeps the
    checkpoint's own; a copy where one changes). InferenceError for a width_step that is no whole number from 1 to
    the model's data.max_width, a width_scale outside the 0.5..2 a checkpoint's data.read_width_scale may take, or
    either changing the widths of a model that reads at a fixed width."""
    d = config.data
    if width_step is not None and (isinstance(width_step, bool) or not isinstance(width_step, Integral)
                                   or not 1 <= width_step <= d.max_width):
        raise InferenceError(f"width_step must be a whole number of pixels from 1 (off) to the model's data.max_width "
                             f"({d.max_width}), got {width_step!r}")
    lo, hi = READ_WIDTH_SCALE_RANGE
    if width_scale is not None and (isinstance(width_scale, bool) or not isinstance(width_scale, Real)
                                    or not lo <= width_scale <= hi):
        raise InferenceError(f"width_scale must be a number within {lo:g}..{hi:g} (1: the trained widths), got "
                             f"{width_scale!r}")
    step = d.width_step if width_step is None else int(width_step)
    scale = d.read_width_scale if width_scale is None else float(width_scale)
    if (step, scale) == (d.width_step, d.read_width_scale):
        return config
    if (step != 1 or scale != 1) and not (d.keep_ratio and d.pad == "batch"):
        raise InferenceError("width_step and width_scale change keep-ratio widths; this model reads every crop at "
                             f"{d.width} px (data.keep_ratio false or data.pad {d.pad}): leave them out")
    return replace(config, data=replace(d, width_step=step, read_width_scale=scale))


def width_batches(widths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices grouped by equal width (ascending), each group cut into batches of at most ``batch_size``."""
    groups: dict[int, list[int]] = {}
    for i, w in enumerate(widths):
        groups.setdefault(w, []).append(i)
    return [idx[s:s + batch_size] for w in sorted(groups) for idx in [groups[w]]
            for s in range(0, len(idx), batch_size)]


class Recognizer:
    """A CRNN in eval mode plus its charset and preprocessing; batched, ``inference_mode`` prediction.

    ``max_width``: a keep-ratio model reads a line at its own resized width up to this many pixels (at least the
    trained ``data.max_width``); wider lines are squeezed to it with a :class:`SqueezeWarning`. ``width_step`` /
    ``width_scale`` (None: the checkpoint's own) override ``data.width_step`` / ``data.read_width_scale`` for this
    reader: :func:`reading_geometry`.
    """

    def __init__(self, model: CRNN, charset: Charset, config: Config, device: torch.device | str = "cpu", *,
                 amp: str = "off", decoder: str = "greedy", beam_width: int = 10,
                 lexicon: Sequence[str] | None = None, batch_size: int = 64,
                 max_width: int = INFER_MAX_WIDTH, vertical: str = "warn", width_step: int | None = None,
                 width_scale: float | None = None, words: WordList | Sequence[str] | None = None) -> None:
        config = reading_geometry(config, width_step, width_scale)
        if amp not in AMP_MODES:
            raise InferenceError(f"amp must be one of {', '.join(AMP_MODES)}, got {amp!r}")
        if decoder not in DECODE_METHODS:
            raise InferenceError(f"decoder must be one of {', '.join(DECODE_METHODS)}, got {decoder!r}")
        if lexicon is not None and decoder != "beam":
            raise InferenceError("a lexicon needs the beam decoder; add --decoder beam")
        if decoder == "word" and words is None:
            raise InferenceError("the word decoder needs a word list: add --words FILE")
        if decoder != "word" and words is not None:
            raise InferenceError(f"a word list is read by the word decoder only; add --decoder word, not {decoder}")
        if words is not None and not isinstance(words, WordList):
            try:
                words = WordList(words)
            except ValueError as e:
                raise InferenceError(str(e)) from None
        if words is not None and not len(words):
            raise InferenceError(f"the word list holds no words of Latin letters or digits ({WORD_LIST_HINT})")
        if batch_size < 1 or beam_width < 1:
            raise InferenceError(f"batch_size and beam_width must be >= 1, got {batch_size} and {beam_width}")
        if vertical not in VERTICAL_MODES:
            raise InferenceError(f"vertical must be one of {', '.join(VERTICAL_MODES)}, got {vertical!r}")
        self.vertical = vertical
        self.device = torch.device(device)
        if amp == "fp16" and self.device.type != "cuda":
            raise InferenceError("amp=fp16 needs CUDA; use bf16 on CPU")
        self.model = model.to(self.device).eval()
        if self.device.type == "cpu":  # oneDNN's convolutions run faster on NHWC (benchmarks/README.md, bench_predict)
            self.model.to(memory_format=torch.channels_last)
        self.amp_reason = ""  # amp=auto: why it chose what it did
        if amp == "auto":
            from crnn.engine.autotune import choose_read_amp

            d = config.data
            choice = choose_read_amp(self.model, self.device, config.model.in_channels, d.height,
                                     d.width if not d.keep_ratio else max(d.min_width, 100))
            amp, self.amp_reason = choice.amp, choice.reason
        if amp == "bf16" and self.device.type == "cpu" and not self.amp_reason:
            from crnn.engine.autotune import cpu_bf16_capable

            if not cpu_bf16_capable():
                warnings.warn("amp=bf16: this CPU has no native bf16 kernels, so bf16 reads slower than float32 here; "
                              "use --amp off (or auto, which measures)", PrecisionWarning, stacklevel=2)
        if amp == "bf16" and self.device.type == "cpu" and isinstance(self.model, CRNN):
            # no autocast: it casts every weight on every call; held in bf16 once, a crop reads 1.3x (English) to
            # 1.9x (Chinese) as fast on a CPU with native bf16 kernels (benchmarks/README.md, bench_read.py)
            self.model.hold_weights_in(torch.bfloat16)
        self.charset, self.config = charset, config
        self.amp, self.decoder, self.beam_width, self.batch_size = amp, decoder, beam_width, batch_size
        self.lexicon = list(lexicon) if lexicon is not None else None
        self.words = words
        d = config.data
        self.transform = ResizeNormalize(height=d.height, width=d.width, keep_ratio=d.keep_ratio,
                                         max_width=max(d.max_width, max_width),
                                         min_width=min(d.min_width, max(d.max_width, max_width)),
                                         channels=config.model.in_channels,
                                         interpolation=d.interpolation, mean=d.mean, std=d.std, pad=d.pad,
                                         width_step=d.width_step, width_scale=d.read_width_scale)

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike | Checkpoint, device: str = "auto", amp: str = "off", *,
                        config: Config | None = None, charset: Charset | None = None, **kw) -> "Recognizer":
        """Load any checkpoint layout, or a shipped model by name (``config``/``charset``: for bare state dicts)."""
        dev = resolve_device(device)
        ckpt = path if isinstance(path, Checkpoint) else load_checkpoint(resolve_weights(path))
        model, cs, cfg = build_from_checkpoint(ckpt, "cpu", config=config, charset=charset)
        return cls(model, cs, cfg, dev, amp=amp, **kw)

    def preprocess(self, image: Image.Image, where: str = "an image",
                   tall: list[tuple[str, int, int]] | None = None) -> torch.Tensor:
        """PIL image -> normalised ``[C, H, W]`` tensor as in training; SqueezeWarning when a line is squeezed.

        A crop at least twice as tall as wide (vertical text?): read as it is with a VerticalWarning (``vertical``
        warn; with a ``tall`` list its name and size are appended there instead, for one :meth:`warn_tall` after a
        read of many), as it is (off), or as a :class:`VerticalCandidates` of horizontal lines (stack: its stacked
        characters laid side by side, one per way to cut it; rotate: a quarter turn each way; auto: both;
        crnn.data.vertical), of which predict_tensors keeps the most confident reading."""
        if self.vertical == "warn" and is_vertical(*image.size):
            if tall is None:
                warnings.warn(f"{where}: {vertical_note(*image.size)}", VerticalWarning, stacklevel=2)
            else:
                tall.append((where, *image.size))
        lines = vertical_candidates(image, self.vertical)
        if lines:
            return VerticalCandidates(self.preprocess(line, where) for line in lines)  # type: ignore[return-value]
        note = self.squeeze_note(*image.size)
        if note:
            warnings.warn(f"{where}: {note}", SqueezeWarning, stacklevel=2)
        return self.transform(image)

    @staticmethod
    def warn_tall(tall: list[tuple[str, int, int]], total: int, stacklevel: int = 2) -> None:
        """One VerticalWarning for a read of ``total`` images of which ``tall`` were tall: the crop's own note for
        one, a count with the first names for several (none: nothing)."""
        note = vertical_summary(tall, total)
        if note:
            warnings.warn(note, VerticalWarning, stacklevel=stacklevel + 1)

    def squeeze_note(self, w: int, h: int) -> str:
        """Why a ``w x h`` keep-ratio line gets fewer time steps than its width asks for ("" when it does not)."""
        t = self.transform
        natural = round(w * t.height / max(h, 1))
        if not t.keep_ratio or t.pad != "batch" or natural <= t.max_width:
            return ""
        return (f"{w}x{h} line is {natural} px wide at height {t.height}, squeezed to {t.max_width} px "
                f"({t.max_width // 4} time steps for ~{natural // 4}); cut it into shorter lines")

    @torch.inference_mode()
    def forward_batch(self, images: torch.Tensor) -> list[tuple[str, float]]:
        """Equal-width images ``[B, C, H, W]`` -> one (text, confidence) per image."""
        images = images.to(self.device, non_blocking=True)
        with reading_context(self.model, self.device, self.amp):
            logits = self.model(images)  # (B, T, K)
        kw = decoder_options(self.decoder, self.beam_width, self.lexicon, self.words)
        return decode(logits.float(), self.charset, method=self.decoder, **kw)

    def predict_tensors(self, tensors: Sequence[torch.Tensor]) -> list[tuple[str, float]]:
        """Preprocessed ``[C, H, W]`` tensors -> (text, confidence) in input order, batched by width; of a
        :class:`VerticalCandidates`, the most confident reading (the first of equals)."""
        return [reading for _, reading in self.predict_chosen(tensors)]

    def predict_chosen(self, tensors: Sequence[torch.Tensor]) -> list[tuple[torch.Tensor, tuple[str, float]]]:
        """:meth:`predict_tensors` with the tensor each reading came from: of a :class:`VerticalCandidates`, the
        candidate whose reading was kept (crnn-eval --vertical reads that one in its batches)."""
        flat = [(i, t) for i, item in enumerate(tensors)
                for t in (item if isinstance(item, VerticalCandidates) else (item,))]
        res: list[tuple[str, float] | None] = [None] * len(flat)
        for idx in width_batches([t.shape[-1] for _, t in flat], self.batch_size):
            batch = torch.stack([flat[j][1] for j in idx])  # (B, C, H, W)
            for j, r in zip(idx, self.forward_batch(batch)):
                res[j] = r
        out: list[tuple[torch.Tensor, tuple[str, float]] | None] = [None] * len(tensors)
        for (i, t), r in zip(flat, res):
            if out[i] is None or r[1] > out[i][1][1]:  # type: ignore[index]
                out[i] = (t, r)  # type: ignore[assignment]
        return out  # type: ignore[return-value]

    def predict_images(self, images: Sequence[Image.Image]) -> list[tuple[str, float]]:
        """PIL images -> (text, confidence) in input order; tall crops read as they are: one warning, with a count."""
        tall: list[tuple[str, int, int]] = []
        out = self.predict_tensors([self.preprocess(img, f"image {i}", tall) for i, img in enumerate(images)])
        self.warn_tall(tall, len(images))
        return out

    def _load(self, path: str, tall: list[tuple[str, int, int]]) -> torch.Tensor | VerticalCandidates | str:
        """Preprocessed tensor of one file, or the error text."""
        try:
            return self.preprocess(load_image(path), path, tall)
        except ImageReadError as e:
            return str(e)

    def predict_paths(self, paths: Iterable[str], chunk: int = CHUNK, threads: int = 2) -> Iterator[Prediction]:
        """Predict image files in input order; unreadable files yield a Prediction with ``error`` set.

        Files are read and resized by ``threads`` background threads, one chunk ahead of the model. Tall crops
        (vertical text?) read as they are give one VerticalWarning after the last prediction, with their count.
        """
        paths = list(paths)
        chunks = [paths[s:s + chunk] for s in range(0, len(paths), chunk)]
        talls: list[list[tuple[str, int, int]]] = [[] for _ in paths]  # one per file: in input order
        with ThreadPoolExecutor(max(1, threads)) as pool:
            def submit(k: int) -> list:
                start = k * chunk
                return [pool.submit(self._load, p, talls[start + i]) for i, p in enumerate(chunks[k])]

            ahead = submit(0) if chunks else []
            for k, names in enumerate(chunks):
                current, ahead = ahead, submit(k + 1) if k + 1 < len(chunks) else []
                yield from self._predict_loaded(names, [f.result() for f in current])
        self.warn_tall([t for one in talls for t in one], len(paths))

    def _predict_loaded(self, names: list[str],
                        loaded: list[torch.Tensor | VerticalCandidates | str]) -> Iterator[Prediction]:
        """Predictions for one chunk of already loaded files."""
        ok = [i for i, x in enumerate(loaded) if not isinstance(x, str)]  # a tensor, or VerticalCandidates
        results = dict(zip(ok, self.predict_tensors([loaded[i] for i in ok])))
        for i, name in enumerate(names):
            if i in results:
                text, conf = results[i]
                yield Prediction(name, text, conf)
            else:
                yield Prediction(name, None, None, error=loaded[i])
