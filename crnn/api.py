"""The public Python API, exported as ``crnn.Recognizer``, ``crnn.load_config``, ``crnn.train``, ``crnn.evaluate``
and ``crnn.serve``.

    import crnn
    reader = crnn.Recognizer()                      # the shipped model in weights/ (English, "en"; "zh": Chinese lines)
    print(reader.read("word.png"))                  # Reading(text='Hello', confidence=0.97)

A thin, stable layer over :mod:`crnn.infer` (preprocessing and batching, shared with ``crnn-predict``),
:func:`crnn.engine.trainer.fit` (``crnn-train``) and ``crnn-eval``'s evaluation. Errors are the library's own
exceptions with the one-line messages the command-line tools print after ``crnn-...: error:``; bad arguments and
inputs raise ``ValueError`` subclasses, unreadable image files ``OSError`` (``ImageReadError``), failed training runs
``RuntimeError`` (``TrainingError``). This module imports torch only when a model is loaded, trained or evaluated.
"""
from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Union, overload

from crnn.config import Config, ConfigError, apply_overrides, config_from_dict, config_to_dict
from crnn.config import load_config as _load_config

if TYPE_CHECKING:
    import numpy as np
    import torch
    from PIL import Image

    from crnn.yardstick.readers import Reader

__all__ = ["Recognizer", "Reading", "TrainSummary", "load_config", "train", "evaluate", "serve"]

ImageInput = Union[str, os.PathLike, "Image.Image", "np.ndarray"]
CHANNEL_ORDERS = ("RGB", "BGR")
CHUNK = 512  # inputs preprocessed and predicted together (bounds memory for long lists)


@dataclass
class _Tally:
    """Tall crops read as they are within :meth:`Recognizer.warn_once`, and how many images were read there."""

    tall: list[tuple[str, int, int]] = field(default_factory=list)
    total: int = 0


class Reading(NamedTuple):
    """The text read from one image and its confidence (the probability of that text under the model, 0-1)."""

    text: str
    confidence: float


@dataclass(frozen=True)
class TrainSummary:
    """What :func:`train` did: where the checkpoints are, how far it got, and the final metrics."""

    output_dir: Path
    last: Path | None  # output_dir/last.pt (the trained weights of the last step)
    best: Path | None  # output_dir/best.pt (best mean validation word accuracy); None without validation sets
    step: int  # optimizer steps reached
    steps: int  # train.steps asked for
    ended: str  # "done", or "stop_after" (train.stop_after paused it; train.resume=auto continues)
    best_word_acc: float | None  # best mean validation word accuracy seen; None without validation sets
    images_seen: int
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)  # per data.val path: the final model's
    # samples, word_acc, cer, ned_similarity (1-NED; "ned" = the same, deprecated), computed as crnn-eval does
    # (train.protocol, train.decoder)
    before: dict[str, dict[str, float]] = field(default_factory=dict)  # per data.val and train.base_val path:
    # the same metrics at step 0 (recorded when train.base_val is set), to set "after" against
    base_metrics: dict[str, dict[str, float]] = field(default_factory=dict)  # per train.base_val path: the final
    # model's metrics on the base domain (train.base_protocol); with ``before``: what fine-tuning forgot
    data_wait_share: float | None = None  # share of step time spent waiting for batches (this sitting, rank 0)
    health: list[str] = field(default_factory=list)  # the training-health warnings given, in words (docs/training.md)
    interpolated: Path | None = None  # output_dir/interpolated.pt (train.interpolate_base < 1): the model to read;
    # ``metrics`` and ``base_metrics`` are then its own


def _one_line(e: BaseException) -> str:
    """The message on one line, as the command-line tools print it."""
    return " ".join(str(e).split()) or type(e).__name__


@contextmanager
def _keep_root_logging() -> Iterator[None]:
    """Give the root logger its handlers and level back after the trainer has set up its own stderr logging."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        for h in root.handlers[:]:
            if h not in handlers:
                root.removeHandler(h)
        for h in handlers:
            if h not in root.handlers:
                root.addHandler(h)
        root.setLevel(level)


@contextmanager
def _one_line_errors(*types: type[BaseException]) -> Iterator[None]:
    """Re-raise multi-line messages of ``types`` (YAML, OS errors) on one line, keeping the exception type."""
    try:
        yield
    except types as e:
        if "\n" not in str(e):
            raise
        try:
            short = type(e)(_one_line(e))
        except Exception:  # an exception type that cannot be rebuilt from a message: keep it as it is
            raise e from None
        raise short from None


# ----------------------------------------------------------------------------- config
def load_config(path: str | os.PathLike | None = None, overrides: Sequence[str] = ()) -> Config:
    """A YAML recipe (``configs/*.yaml``; None = the defaults) with ``section.key=value`` overrides, validated."""
    if isinstance(overrides, str):
        raise ConfigError(f"overrides must be a list of section.key=value strings, got the string {overrides!r}")
    with _one_line_errors(ConfigError):
        return _load_config(path, list(overrides))


def _as_config(config: Config | str | os.PathLike, overrides: Sequence[str]) -> Config:
    """A Config object or a YAML path, with overrides applied to a copy."""
    if not isinstance(config, Config):
        return load_config(config, overrides)
    if isinstance(overrides, str):
        raise ConfigError(f"overrides must be a list of section.key=value strings, got the string {overrides!r}")
    with _one_line_errors(ConfigError):
        return config_from_dict(apply_overrides(config_to_dict(config), list(overrides)))


# ----------------------------------------------------------------------------- inference
def _array_image(arr: np.ndarray, channels: str, where: str) -> Image.Image:
    """A uint8 H x W or H x W x C array (C = 1, 3 or 4, in ``channels`` order) -> PIL image in RGB order."""
    import numpy as np
    from PIL import Image

    from crnn.infer import InferenceError

    if arr.dtype != np.uint8:
        raise InferenceError(f"{where}: a numpy image must be uint8 (0-255), got {arr.dtype}; "
                             "convert it, e.g. (x * 255).round().astype(np.uint8) for floats in [0, 1]")
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[..., 0]
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] not in (3, 4)):
        raise InferenceError(f"{where}: a numpy image must be H x W (gray) or H x W x C with C = 1, 3 or 4, "
                             f"got shape {arr.shape}; pass several images as a list")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InferenceError(f"{where}: the numpy image is empty (shape {arr.shape})")
    if arr.ndim == 3 and channels == "BGR":
        arr = arr[..., [2, 1, 0, 3][:arr.shape[2]]]  # BGR(A) -> RGB(A)
    return Image.fromarray(np.ascontiguousarray(arr))  # L, RGB or RGBA from the shape


def _is_single(images: object) -> bool:
    """True for one image (path, PIL image, array), False for a list/tuple/iterable of them."""
    import numpy as np
    from PIL import Image

    if isinstance(images, (str, bytes, os.PathLike, Image.Image, np.ndarray)):
        return True
    return not isinstance(images, Iterable)


class Recognizer:
    """Reads the text in cropped word or line images with a trained CRNN (by default the shipped model).

    CRNN reads one line of text per image. For whole pages or photos, find the text with a detector first
    (doctr, mmocr, PaddleOCR, ...) and pass its crops. Images are preprocessed exactly as ``crnn-predict`` does it
    (the checkpoint's height, width and channels) and batched by resized width, so a result never depends on which
    other images were read with it.
    """

    def __init__(self, weights: str | os.PathLike | None = None, *, device: str = "auto", decoder: str | None = None,
                 beam_width: int = 10, lexicon: str | os.PathLike | Sequence[str] | None = None,
                 batch_size: int = 64, amp: str = "off", config: str | os.PathLike | None = None,
                 charset: str | None = None, vertical: str = "warn", width_step: int | None = None,
                 width_scale: float | None = None,
                 words: str | os.PathLike | Sequence[str] | Mapping[str, float] | None = None) -> None:
        """Load ``weights``: a checkpoint path or a shipped model's name (None or "en" = English words in printable
        ASCII with case, "en_alnum36" = English words as lower-case 0-9a-z at 32x100, "zh" = Chinese text lines;
        a path that exists wins over a name). The options are those of crnn-predict.

        ``device``: auto | cpu | cuda | cuda:N. ``decoder``: greedy | beam | word (default: beam when a lexicon is
        given, word when words are, else greedy). ``lexicon``: a word-list file (one word per line) or a list of words;
        the answer is then the most likely lexicon word. ``words``: the same, for a word prior instead (the word
        decoder, crnn-predict ``--words``): a greedy reading that is no listed word gives way to the most probable
        listed reading among the beam's best if it is nearly as probable; others stand. With counts (a file of ``word
        count`` lines, or ``{word: count}``) every reading of letters is weighed by its word's frequency instead
        (crnn.decode.word_decode). ``amp``: off (float32) | auto
        (bf16 where it measures faster here) | bf16 (on a CPU the weights held in bfloat16: faster on CPUs with native
        bf16 kernels) | fp16 (CUDA). ``config`` (a YAML file) and ``charset`` are only needed for a bare state dict that
        stores neither. ``vertical``, for crops at least twice as tall as wide (vertical text?): warn (read them as they
        are, with a VerticalWarning), stack (lay their stacked characters side by side, top first, then read: Chinese
        and Japanese signs), rotate (a quarter turn each way: text running down or up, as on book spines), auto (all of
        those; the most confident reading wins), off (read them as they are). ``width_step`` / ``width_scale``
        (keep-ratio models; None: the checkpoint's own ``data.width_step`` / ``data.read_width_scale``): round each
        resized width to a multiple of ``width_step`` pixels, and multiply it by ``width_scale`` (more time steps per
        character than in training); InferenceError (a ValueError) for a width_step that is no whole number from 1 to
        the model's data.max_width or a width_scale outside 0.5..2 (what a checkpoint's data.read_width_scale may be).
        """
        from crnn.engine.checkpoint import load_checkpoint
        from crnn.infer import Recognizer as Engine
        from crnn.infer import fallback_spec, resolve_weights

        self.weights = resolve_weights(weights)
        ckpt = load_checkpoint(self.weights)
        with _one_line_errors(ConfigError):
            fallback_config, fallback_charset = fallback_spec(None if config is None else str(config), charset)
        if ckpt.config is not None and (config is not None or charset is not None):
            warnings.warn(f"{self.weights} stores its own config and charset; config/charset are ignored",
                          stacklevel=2)
        lexicon_words = _lexicon_words(lexicon)
        prior = _word_list(words)
        self._tally: _Tally | None = None  # inside warn_once(): where tall crops are counted
        self._engine = Engine.from_checkpoint(
            ckpt, device, amp, config=fallback_config, charset=fallback_charset,
            decoder=decoder or ("beam" if lexicon_words is not None else "word" if prior is not None else "greedy"),
            beam_width=beam_width, lexicon=lexicon_words, batch_size=batch_size, vertical=vertical,
            width_step=width_step, width_scale=width_scale, words=prior)

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike, *, device: str = "auto", decoder: str | None = None,
                        beam_width: int = 10, lexicon: str | os.PathLike | Sequence[str] | None = None,
                        batch_size: int = 64, amp: str = "off", config: str | os.PathLike | None = None,
                        charset: str | None = None, vertical: str = "warn", width_step: int | None = None,
                        width_scale: float | None = None,
                        words: str | os.PathLike | Sequence[str] | Mapping[str, float] | None = None
                        ) -> "Recognizer":
        """A Recognizer for any checkpoint this product reads (e.g. ``runs/x/best.pt``); options as in __init__."""
        return cls(path, device=device, decoder=decoder, beam_width=beam_width, lexicon=lexicon,
                   batch_size=batch_size, amp=amp, config=config, charset=charset, vertical=vertical,
                   width_step=width_step, width_scale=width_scale, words=words)

    @property
    def device(self) -> torch.device:
        """The device the model runs on."""
        return self._engine.device

    @property
    def amp(self) -> str:
        """The precision it reads in: off, bf16 or fp16 (``amp="auto"`` resolved on this machine)."""
        return self._engine.amp

    @property
    def width_step(self) -> int:
        """Resized widths are rounded to a multiple of this many pixels (1: not rounded; keep-ratio models)."""
        return self._engine.transform.width_step

    @property
    def width_scale(self) -> float:
        """Resized widths are multiplied by this (1: the trained widths; keep-ratio models)."""
        return self._engine.transform.width_scale

    def __repr__(self) -> str:
        return (f"Recognizer(weights={str(self.weights)!r}, device={str(self.device)!r}, "
                f"decoder={self._engine.decoder!r})")

    @overload
    def read(self, images: ImageInput, *, channels: str = "RGB", return_exceptions: bool = False) -> Reading: ...

    @overload
    def read(self, images: Iterable[ImageInput], *, channels: str = "RGB",
             return_exceptions: bool = False) -> list[Reading]: ...

    def read(self, images, *, channels="RGB", return_exceptions=False):
        """Read one image -> :class:`Reading`, or a list of images -> a list of Readings in the same order.

        An image is a file path, a PIL image, or a uint8 numpy array (H x W gray, or H x W x C with C = 1, 3, 4).
        ``channels`` names the order of an array's colour axis: "RGB" (PIL, imageio, matplotlib) or "BGR" (OpenCV's
        ``cv2.imread``); ``read(bgr, channels="BGR")`` equals ``read(bgr[..., ::-1])`` and reading the file itself.
        It does not apply to paths or PIL images, whose mode says what they hold. A file that cannot be read raises
        ImageReadError (an OSError) naming it; nothing is returned for the other images of that call. With
        ``return_exceptions=True`` (as in ``asyncio.gather``) a list is read to the end instead: an image that cannot
        be read (ImageReadError), a bad array (InferenceError) or an object that is no image (TypeError) gives its
        exception in its place, and every other image its Reading. Crops at least twice as tall as wide, read as they
        are (``vertical="warn"``), give one VerticalWarning per call, with their count.
        """
        from crnn.infer import InferenceError

        if channels not in CHANNEL_ORDERS:
            raise InferenceError(f"channels must be RGB or BGR (the order of a numpy image's last axis), "
                                 f"got {channels!r}")
        tally = self._tally
        if _is_single(images):
            tensor = self._tensor(images, "image", channels, tally.tall if tally is not None else None)
            if tally is not None:
                tally.total += 1
            return Reading(*self._engine.predict_tensors([tensor])[0])
        items = list(images)
        tall: list[tuple[str, int, int]] = []
        out: list[Reading | Exception] = []
        with ThreadPoolExecutor(2) as pool:  # decoding and resizing release the GIL
            for s in range(0, len(items), CHUNK):
                chunk = items[s:s + CHUNK]
                names = [f"image {s + i}" for i in range(len(chunk))]
                talls: list[list[tuple[str, int, int]]] = [[] for _ in chunk]  # one per image: in input order
                loaded = list(pool.map(self._tensor_or_error, chunk, names, [channels] * len(chunk), talls))
                failed = [x for x in loaded if isinstance(x, Exception)]
                if failed and not return_exceptions:
                    raise failed[0]
                out += self._readings(loaded)
                tall += [t for one in talls for t in one]
        if tally is not None:
            tally.tall += tall
            tally.total += len(items)
        else:
            self._engine.warn_tall(tall, len(items), stacklevel=2)
        return out

    @contextmanager
    def warn_once(self) -> Iterator[None]:
        """Within it, crops at least twice as tall as wide that are read as they are (``vertical="warn"``) give one
        VerticalWarning at the end, with their count out of the images read: for a loop that reads one image per call,
        ``with reader.warn_once(): texts = [reader.read(p).text for p in paths]``."""
        outer, self._tally = self._tally, _Tally()
        tally = self._tally
        try:
            yield
        finally:
            self._tally = outer
            self._engine.warn_tall(tally.tall, tally.total, stacklevel=3)

    def _readings(self, loaded: list) -> list[Reading | Exception]:
        """Readings of the preprocessed items of one chunk, each failure's exception left in its place."""
        good = [i for i, x in enumerate(loaded) if not isinstance(x, Exception)]
        read = dict(zip(good, self._engine.predict_tensors([loaded[i] for i in good])))
        return [Reading(*read[i]) if i in read else x for i, x in enumerate(loaded)]

    def _tensor_or_error(self, item: ImageInput, where: str, channels: str,
                         tall: list[tuple[str, int, int]]) -> torch.Tensor | Exception:
        """One input -> its preprocessed tensor, or the exception that says why it cannot be read."""
        from crnn.infer import ImageReadError, InferenceError

        try:
            return self._tensor(item, where, channels, tall)
        except (ImageReadError, InferenceError, TypeError) as e:
            return e

    def _tensor(self, item: ImageInput, where: str, channels: str,
                tall: list[tuple[str, int, int]] | None = None) -> torch.Tensor:
        """One input -> the model's preprocessed ``[C, H, W]`` tensor (``tall``: see Engine.preprocess)."""
        import numpy as np
        from PIL import Image

        from crnn.infer import ImageReadError, load_image

        where_path = item if isinstance(item, (str, os.PathLike)) else None
        if isinstance(item, (str, os.PathLike)):
            try:
                item = load_image(item)
            except ImageReadError as e:
                raise ImageReadError(f"{os.fspath(item)}: {e}") from None
        elif isinstance(item, np.ndarray):
            item = _array_image(item, channels, where)
        elif not isinstance(item, Image.Image):
            raise TypeError(f"{where}: expected a file path, a PIL image or a numpy array, got {type(item).__name__}")
        return self._engine.preprocess(item, os.fspath(where_path) if where_path is not None else where, tall)


def _lexicon_words(lexicon: str | os.PathLike | Sequence[str] | None) -> list[str] | None:
    """A lexicon given as a file (one word per line) or as words."""
    from crnn.infer import InferenceError, read_lexicon

    if lexicon is None:
        return None
    if isinstance(lexicon, (str, os.PathLike)):
        return read_lexicon(lexicon)
    words = [w.strip() for w in lexicon if isinstance(w, str) and w.strip()]
    if not words:
        raise InferenceError("the lexicon holds no words; give a word-list file or a list of words")
    return words


def _word_list(words: str | os.PathLike | Sequence[str] | Mapping[str, float] | None):
    """A word prior's list given as a file (one word, or ``word count``, per line), as words or as ``{word: count}``
    -> crnn.decode.WordList (None: none)."""
    from crnn.decode import WordList
    from crnn.infer import WORD_LIST_HINT, InferenceError, read_word_list

    if words is None or isinstance(words, WordList):
        return words
    if isinstance(words, (str, os.PathLike)):
        return read_word_list(words)
    try:
        prior = WordList(words if isinstance(words, Mapping) else (w for w in words if isinstance(w, str)),
                         source="a list")
    except ValueError as e:
        raise InferenceError(str(e)) from None
    if not len(prior):
        raise InferenceError(f"the word list holds no words of Latin letters or digits ({WORD_LIST_HINT})")
    return prior


# ----------------------------------------------------------------------------- training and evaluation
def train(config: Config | str | os.PathLike, overrides: Sequence[str] = ()) -> TrainSummary:
    """Train as ``crnn-train`` does (same trainer, logs on stderr) from a Config or a YAML path; return a summary.

    ``overrides`` (``section.key=value``) apply to a copy. Like crnn-train it seeds Python's and torch's global
    random generators from ``train.seed``; the root logger's handlers are restored afterwards. Raises ConfigError
    for a bad config, TrainingError (a RuntimeError) when the run fails, and KeyboardInterrupt after Ctrl-C or
    SIGTERM once last.pt is saved (``train.resume=auto`` continues the run).
    """
    from crnn.engine.trainer import fit

    cfg = _as_config(config, overrides)
    with _keep_root_logging(), _one_line_errors(OSError, ValueError):
        result = fit(cfg)
    out = Path(result["output_dir"])
    if result.get("interrupted"):
        raise KeyboardInterrupt(f"training stopped by a signal at step {result['step']}; {out / 'last.pt'} saved "
                                "(continue with train.resume=auto)")
    last, best = out / "last.pt", out / "best.pt"
    interpolated = Path(result["interpolated"]) if result.get("interpolated") else None
    final = interpolated or last
    metrics = _final_metrics(cfg, final) if cfg.data.val and final.is_file() else {}
    best_acc = result.get("best_metric")
    return TrainSummary(out, last if last.is_file() else None, best if best.is_file() else None,
                        int(result["step"]), cfg.train.steps, result["ended"],
                        best_acc if best_acc is not None and best_acc >= 0 else None,
                        int(result.get("images_seen", 0)), metrics, dict(result.get("before") or {}),
                        dict(result.get("base_after") or {}),
                        data_wait_share=result.get("data_wait_share"), health=list(result.get("health", [])),
                        interpolated=interpolated)


def _final_metrics(cfg: Config, last: Path) -> dict[str, dict[str, float]]:
    """Word accuracy, CER and 1-NED of ``last`` on every validation set (the protocol and decoder of training)."""
    report = evaluate(cfg.data.val, weights=last, protocol=cfg.train.protocol, decoder=cfg.train.decoder,
                      batch_size=cfg.data.batch_size, workers=0, worst=0, device=cfg.train.device)
    keys = ("samples", "word_acc", "cer", "ned_similarity", "ned")  # ned: deprecated, for one release
    return {row["path"]: {k: row[k] for k in keys} for row in report["datasets"]}


def evaluate(data: str | os.PathLike | Sequence[str | os.PathLike],
             weights: str | os.PathLike | Sequence[str | os.PathLike] | None = None, *,
             protocol: str = "auto", decoder: str | None = None, beam_width: int = 10,
             batch_size: int = 64, workers: int = 1, worst: int = 5, device: str = "auto", amp: str = "off",
             config: str | os.PathLike | None = None, charset: str | None = None,
             report: str | os.PathLike | None = None, report_errors: int = 500, vertical: str = "warn",
             against: str | Reader | Sequence[str | Reader] | None = None,
             words: str | os.PathLike | None = None) -> dict:
    """Evaluate ``weights`` (None = the shipped model) on labelled data; returns what ``crnn-eval --json`` prints.

    ``data``: an LMDB, a folder of LMDBs or a folder with gt.txt, or a list of them. The result has one row per
    dataset under "datasets" and the pooled counts under "overall" (samples, word_acc, cer, ned_similarity = 1-NED,
    images_per_s, ...). The options are crnn-eval's, with the same defaults. ``report``: also write the HTML report
    there (``crnn-eval --report``; its index.html path is under "report"). ``vertical`` (``crnn-eval --vertical``):
    crops at least twice as tall as wide are read as they are (warn), or each as ``Recognizer(vertical=...)`` reads
    it (stack, rotate, auto); the result then says the mode and, per dataset and pooled, how many crops were tall and
    how many were read as lines ("vertical"). Other readers scored beside it on the same images, one image per call
    (the result's "against", a column each in the report): further checkpoints as a list of ``weights`` (the first is
    the one evaluated; a second ``crnn-eval --weights``), and ``against``: peers by name (ppocr-v4, ppocr-v6, easyocr:
    ``pip install 'crnn[peers]'``; a peer that is not installed is skipped with a warning and listed as skipped) or
    a ``crnn.yardstick.readers.Reader`` of your own (one alone or a list); one process only. ``words``: a word-list
    file for the word decoder (``crnn-eval --words``; ``decoder`` None means word with it, greedy without), the
    result's "words" names it: figures read with a word prior are not lexicon-free ones."""
    from crnn.engine.distributed import cleanup_distributed
    from crnn.engine.eval_datasets import EvalSettings, check_choices, check_settings, evaluate_datasets, other_readers

    first, *more = [weights] if weights is None or isinstance(weights, (str, os.PathLike)) else list(weights) or [None]
    against = [against] if isinstance(against, str) or hasattr(against, "read") else list(against or [])
    settings = EvalSettings(protocol=protocol, decoder=decoder or ("word" if words is not None else "greedy"),
                            beam_width=beam_width, batch_size=batch_size, workers=workers, worst=worst, device=device,
                            amp=amp, report_errors=report_errors, vertical=vertical,
                            words=None if words is None else os.fspath(words))
    check_settings(settings)
    check_choices(settings)
    try:
        with _one_line_errors(ConfigError):
            others = other_readers(against, more, amp, 2, device, vertical) if against or more else ()
            for o in others:
                if getattr(o, "skipped", ""):
                    warnings.warn(f"skipped {o.name}: {o.skipped}", stacklevel=2)
            return evaluate_datasets(data, first, settings, config=config, charset=charset, report=report,
                                     against=others)
    finally:
        cleanup_distributed()


# ----------------------------------------------------------------------------- serving
def serve(weights: str | os.PathLike | Sequence[str | os.PathLike] | dict[str, str | os.PathLike] | None = None, *,
          host: str = "127.0.0.1", port: int = 8000, token: str | None = None, device: str = "auto",
          amp: str = "off", threads: int | None = None, max_batch: int = 32, max_wait_ms: float = 5.0,
          max_queue: int = 256, timeout: float = 30.0, max_images: int = 64, max_image_bytes: int = 8 << 20,
          max_pixels: int = 25_000_000, max_request_bytes: int = 32 << 20,
          words: str | os.PathLike | None = None) -> int:
    """Run the recognition service (``crnn-serve``) in this process until SIGTERM (returns 0) or Ctrl-C (130).

    ``weights``: one model or several - shipped names ("en", "en_alnum36", "zh"), checkpoint paths (named by file stem),
    ``"NAME=PATH"`` strings or a ``{name: weights}`` dict; the first is the default (None: "en"). ``token``: require
    ``Authorization: Bearer TOKEN`` (None: ``$CRNN_SERVE_TOKEN`` if set). The other options are crnn-serve's
    (``crnn-serve --help``; ``words``: its ``--words``, a word-list file for requests with decoder word). Needs the
    serve extra. Raises ServeError (a ValueError) for bad settings or a port in
    use, and the loading errors of :class:`Recognizer` for bad weights, before anything is served.
    """
    from crnn.serving import Limits, ServeOptions, run
    from crnn.serving.service import TOKEN_ENV

    if weights is None:
        specs = ["en"]
    elif isinstance(weights, dict):
        specs = [f"{name}={os.fspath(w)}" for name, w in weights.items()]
    elif isinstance(weights, (str, os.PathLike)):
        specs = [os.fspath(weights)]
    else:
        specs = [os.fspath(w) for w in weights]
    limits = Limits(max_images=max_images, max_image_bytes=max_image_bytes, max_pixels=max_pixels,
                    max_request_bytes=max_request_bytes)
    opts = ServeOptions(weights=specs, host=host, port=port, token=token or os.environ.get(TOKEN_ENV) or None,
                        device=device, amp=amp, threads=threads, max_batch=max_batch, max_wait_ms=max_wait_ms,
                        max_queue=max_queue, timeout_s=timeout, limits=limits,
                        words=None if words is None else os.fspath(words))
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="crnn.serve: %(message)s")
    return run(opts)
