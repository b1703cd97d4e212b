"""crnn-export: TorchScript and ONNX with dynamic batch/width match PyTorch to 1e-4; writes are atomic."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn

import crnn.export as export_mod
from crnn.charset import Charset
from crnn.cli.export import main
from crnn.config import Config
from crnn.engine.checkpoint import model_checkpoint, save_checkpoint
from crnn.export import ExportError
from crnn.model import build_model


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, nn.Module]:
    """A tiny keep-ratio vgg_small checkpoint with non-default BN statistics, and the model itself."""
    cfg = Config()
    cfg.model.hidden, cfg.data.width, cfg.data.keep_ratio = 16, 48, True
    cs = Charset.from_spec("alnum36")
    torch.manual_seed(0)
    model = build_model("vgg_small", 1, cs.num_classes, 16)
    model.train()
    with torch.no_grad():
        model(torch.rand(4, 1, 32, 48) * 2 - 1)  # move the BN running stats away from their init
    model.eval()
    path = tmp_path_factory.mktemp("w") / "tiny.pt"
    save_checkpoint(model_checkpoint(model, cfg, cs), path)
    return path, model


def inputs() -> list[torch.Tensor]:
    """Shapes not used by the exporter's own checks: other batch sizes and widths."""
    gen = torch.Generator().manual_seed(1)
    return [torch.rand(2, 1, 32, 60, generator=gen) * 2 - 1, torch.rand(5, 1, 32, 124, generator=gen) * 2 - 1]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp" in p.name)


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:FutureWarning")
def test_torchscript_export_matches_pytorch(trained, tmp_path, capsys):
    path, model = trained
    out = tmp_path / "crnn.ts"
    assert main(["--weights", str(path), "--format", "torchscript", "--out", str(out)]) == 0
    assert "checked with torch.jit.load" in capsys.readouterr().out
    extra = {"crnn.json": ""}
    loaded = torch.jit.load(str(out), map_location="cpu", _extra_files=extra)
    meta = json.loads(extra["crnn.json"])
    assert meta["charset"]["chars"] == Charset.from_spec("alnum36").chars and meta["keep_ratio"] is True
    with torch.no_grad():
        for x in inputs():
            ref, got = model(x), loaded(x)  # (B, T, K)
            assert got.shape == ref.shape
            assert (got - ref).abs().max().item() <= 1e-4
    assert leftovers(tmp_path) == []


def test_onnx_export_matches_pytorch(trained, tmp_path, capsys):
    import onnx  # installed by the dev extra: the test must run, not skip
    import onnxruntime as ort
    path, model = trained
    out = tmp_path / "crnn.onnx"
    assert main(["--weights", str(path), "--format", "onnx", "--out", str(out), "--width", "64"]) == 0
    assert "checked with onnxruntime on inputs 1x1x32x64, 3x1x32x100" in capsys.readouterr().out
    meta = {p.key: p.value for p in onnx.load(str(out)).metadata_props}
    assert json.loads(meta["crnn"])["height"] == 32
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    with torch.no_grad():
        for x in inputs():
            ref = model(x).numpy()  # (B, T, K)
            got = sess.run(None, {"images": x.numpy()})[0]
            assert got.shape == ref.shape
            assert np.abs(got - ref).max() <= 1e-4
    assert leftovers(tmp_path) == []


def test_failed_verification_keeps_the_old_file_and_leaves_no_temp(trained, tmp_path, capsys, monkeypatch):
    path, _ = trained
    out = tmp_path / "crnn.onnx"
    out.write_bytes(b"previous export")

    def mismatch(*args, **kwargs):
        raise ExportError("exported outputs differ from PyTorch by 3.00e-02 (> 0.0001) for input (1, 1, 32, 48)")

    monkeypatch.setattr(export_mod, "verify_onnx", mismatch)
    assert main(["--weights", str(path), "--format", "onnx", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("crnn-export: error: exported outputs differ") and len(err.splitlines()) == 1
    assert out.read_bytes() == b"previous export"
    assert leftovers(tmp_path) == []


def test_onnx_without_onnxruntime_is_written_with_a_message(trained, tmp_path, capsys, monkeypatch):
    path, _ = trained
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime -> ImportError
    out = tmp_path / "m.onnx"
    assert main(["--weights", str(path), "--format", "onnx", "--out", str(out)]) == 0
    assert "onnxruntime is not installed: not verified" in capsys.readouterr().out
    assert out.stat().st_size > 0


def test_bad_inputs(trained, tmp_path, capsys):
    path, _ = trained
    assert main(["--weights", str(tmp_path / "nope.pt"), "--format", "onnx", "--out", str(tmp_path / "a")]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["--weights", str(path), "--format", "torchscript", "--out", str(tmp_path)]) == 1
    assert "is a directory" in capsys.readouterr().err
    assert main(["--weights", str(path), "--format", "onnx", "--out", str(tmp_path / "b"), "--width", "4"]) == 1
    assert "at least 8" in capsys.readouterr().err


def test_onnx_without_the_onnx_package_is_a_one_line_error(trained, tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnx" else real(name, *a))
    path = trained[0] if isinstance(trained, tuple) else trained
    out = tmp_path / "m.onnx"
    assert main(["--weights", str(path), "--format", "onnx", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("crnn-export: error: ONNX export needs the onnx package") and len(err.splitlines()) == 1
    assert not out.exists()
