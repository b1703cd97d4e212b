"""Export a CRNN to TorchScript or ONNX with dynamic batch and width, verified against PyTorch before it is kept.

The exported graph maps images ``[B, C, H, W]`` (normalised as the model's data config says: [-1, 1] unless its
``data.mean``/``data.std`` differ) to logits ``[B, T, K]`` (blank = 0). Width is dynamic: a keep-ratio model reads a
line at its own width up to the metadata's ``max_width`` (the inference cap; ``train_max_width`` is training's).
The charset and preprocessing settings travel inside the file: TorchScript extra file ``crnn.json``,
ONNX ``metadata_props`` key ``crnn``.
"""
from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

from crnn.charset import Charset
from crnn.config import Config
from crnn.data.transforms import INFER_MAX_WIDTH
from crnn.model import CRNN

__all__ = ["ExportError", "ExportReport", "ExportableCRNN", "FORMATS", "export_model", "export_metadata",
           "check_shapes", "verify_torchscript", "verify_onnx"]

FORMATS = ("onnx", "torchscript")
ONNX_OPSET = 17
METADATA_KEY = "crnn"


class ExportError(ValueError):
    """The export failed or its outputs do not match PyTorch (nothing is written)."""


@dataclass
class ExportReport:
    """What was written and how it was checked."""

    path: str
    format: str
    verified_with: str  # "torch.jit.load" | "onnxruntime" | "" (not verified)
    max_abs_diff: float | None
    shapes: list[tuple[int, ...]] = field(default_factory=list)
    note: str = ""


class ExportableCRNN(nn.Module):
    """Trace-friendly forward of a CRNN: the same layers, without Python-level shape checks."""

    def __init__(self, model: CRNN) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor) -> torch.Tensor:  # (B, C, H, W) -> (B, T, K)
        feats = self.model.cnn(images).mean(dim=2)  # (B, C', T): H' is 1 at the trained height
        return self.model.sequence(feats.transpose(1, 2))  # (B, T, K)


def export_metadata(model: CRNN, charset: Charset, cfg: Config) -> dict:
    """Everything a runtime needs to preprocess and decode: charset, geometry, output layout."""
    d = cfg.data
    default = d.mean == 0.5 and d.std == 0.5
    normalize = "pixel / 127.5 - 1" if default else f"(pixel / 255 - {d.mean}) / {d.std}"
    return {"format": "crnn-export", "version": 1, "variant": model.variant, "charset": charset.to_dict(),
            "blank": 0, "in_channels": model.in_channels, "height": d.height, "width": d.width,
            "keep_ratio": d.keep_ratio, "max_width": max(d.max_width, INFER_MAX_WIDTH),
            "train_max_width": d.max_width, "min_width": d.min_width, "width_step": d.width_step,
            "width_scale": d.read_width_scale,
            "normalize": normalize, "mean": d.mean,
            "std": d.std, "interpolation": d.interpolation, "pad": d.pad,
            "input": "images [batch, channels, height, width]", "output": "logits [batch, time, classes]"}


def check_shapes(cfg: Config, width: int) -> list[tuple[int, int, int, int]]:
    """Verification inputs with different batch sizes and widths (a keep-ratio model: also a line 4x as wide)."""
    c, h = cfg.model.in_channels, cfg.data.height
    long = [(1, c, h, 4 * max(width, cfg.data.max_width))] if cfg.data.keep_ratio else []
    return [(1, c, h, width), (3, c, h, width + 36)] + long


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence tracer and deprecation chatter; the result is verified numerically instead."""
    with warnings.catch_warnings():
        for cat in (torch.jit.TracerWarning, FutureWarning, DeprecationWarning, UserWarning):
            warnings.simplefilter("ignore", cat)
        yield


def _write_torchscript(net: nn.Module, path: Path, example: torch.Tensor, meta: dict) -> None:
    """Trace ``net`` (dynamic batch and width hold for these layers) and save it with the metadata."""
    with _quiet(), torch.no_grad():
        traced = torch.jit.trace(net, example, check_trace=False)
        torch.jit.save(traced, str(path), _extra_files={"crnn.json": json.dumps(meta)})


def _write_onnx(net: nn.Module, path: Path, example: torch.Tensor, meta: dict, opset: int) -> None:
    """Legacy (TorchScript-based) exporter: the robust path for batch-first LSTMs with dynamic axes."""
    import importlib.util

    if importlib.util.find_spec("onnx") is None:
        raise ExportError("ONNX export needs the onnx package: pip install onnx onnxruntime (or pip install "
                          "'crnn[export]'); --format torchscript needs nothing extra")
    try:
        with _quiet(), torch.no_grad():
            torch.onnx.export(net, (example,), str(path), dynamo=False, opset_version=opset,
                              input_names=["images"], output_names=["logits"],
                              dynamic_axes={"images": {0: "batch", 3: "width"}, "logits": {0: "batch", 1: "time"}})
    except Exception as e:  # the exporter raises many types; report one line
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ExportError(f"torch.onnx.export failed: {first}") from None
    import onnx
    proto = onnx.load(str(path))
    entry = proto.metadata_props.add()
    entry.key, entry.value = METADATA_KEY, json.dumps(meta)
    onnx.save(proto, str(path))


def _compare(run: Callable[[torch.Tensor], np.ndarray], net: nn.Module, shapes: Sequence[tuple[int, ...]],
             atol: float) -> float:
    """Max |exported - PyTorch| over seeded random inputs of each shape; ExportError above ``atol``."""
    gen = torch.Generator().manual_seed(0)
    worst = 0.0
    for shape in shapes:
        x = torch.rand(shape, generator=gen) * 2 - 1  # (B, C, H, W) in [-1, 1]
        with torch.no_grad():
            ref = net(x).numpy()  # (B, T, K)
        got = run(x)
        if got.shape != ref.shape:
            raise ExportError(f"exported model gives shape {tuple(got.shape)} for input {shape}, PyTorch {ref.shape}")
        worst = max(worst, float(np.abs(got - ref).max()))
        if worst > atol:
            raise ExportError(f"exported outputs differ from PyTorch by {worst:.2e} (> {atol:g}) for input {shape}")
    return worst


def verify_torchscript(path: Path, net: nn.Module, shapes: Sequence[tuple[int, ...]], atol: float) -> float:
    """Reload the TorchScript file and compare it with ``net``."""
    with _quiet():
        loaded = torch.jit.load(str(path), map_location="cpu")

    def run(x: torch.Tensor) -> np.ndarray:
        with torch.no_grad():
            return loaded(x).numpy()
    return _compare(run, net, shapes, atol)


def verify_onnx(path: Path, net: nn.Module, shapes: Sequence[tuple[int, ...]], atol: float) -> float | None:
    """Run the ONNX file with onnxruntime and compare it with ``net``; None when onnxruntime is missing."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return _compare(lambda x: sess.run(None, {"images": x.numpy()})[0], net, shapes, atol)


def export_model(model: CRNN, charset: Charset, cfg: Config, out: str | os.PathLike, fmt: str, *,
                 width: int | None = None, atol: float = 1e-4, opset: int = ONNX_OPSET) -> ExportReport:
    """Export, verify on two batch sizes and widths, then move into place atomically (nothing left on failure).

    ``model`` is moved to the CPU in float32 (in place) for the export.
    """
    if fmt not in FORMATS:
        raise ExportError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    width = width or cfg.data.width
    if width < 8:
        raise ExportError(f"--width must be at least 8 pixels, got {width}")
    out = Path(out)
    if out.is_dir():
        raise ExportError(f"{out} is a directory; give a file name inside it, e.g. {out / 'crnn.onnx'}")
    model = model.cpu().float().eval()
    net = ExportableCRNN(model).eval()  # verified below against model.forward itself
    meta = export_metadata(model, charset, cfg)
    shapes = check_shapes(cfg, width)
    example = torch.zeros(shapes[0])  # (1, C, H, W)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        if fmt == "torchscript":
            _write_torchscript(net, tmp, example, meta)
            diff, how, note = verify_torchscript(tmp, model, shapes, atol), "torch.jit.load", ""
        else:
            _write_onnx(net, tmp, example, meta, opset)
            diff, how = verify_onnx(tmp, model, shapes, atol), "onnxruntime"
            note = "" if diff is not None else "onnxruntime is not installed: not verified (pip install onnxruntime)"
            how = how if diff is not None else ""
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return ExportReport(str(out), fmt, how, diff, [tuple(s) for s in shapes], note)
