"""crnn-export: TorchScript and ONNX with dynamic batch/width match PyTorch to 1e-4; writes are atomic."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
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


# ------------------------------------------------------------------------------------- the export, read elsewhere
@pytest.fixture(scope="module")
def exported_en(tmp_path_factory) -> dict[str, Path]:
    """The shipped en model exported as ONNX and TorchScript, the two commands of docs/export.md."""
    folder = tmp_path_factory.mktemp("exported")
    files = {"onnx": folder / "crnn.onnx", "torchscript": folder / "crnn.ts.pt"}
    for fmt, out in files.items():
        assert main(["--weights", "en", "--format", fmt, "--out", str(out)]) == 0
    return files


def _page_snippet() -> str:
    """The ```python block of docs/export.md that runs the ONNX file with onnxruntime."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "export.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "onnxruntime" in b]
    assert len(blocks) == 1, "docs/export.md shows one onnxruntime snippet"
    return blocks[0]


def test_the_export_page_reads_the_onnx_file_without_crnn_as_crnn_predict_reads_the_pt(exported_en, tmp_path):
    """docs/export.md's snippet, run as written on crnn.onnx beside word.png (with no crnn import), prints the text
    and confidence crnn-predict gives for the shipped en model the file was exported from."""
    import crnn

    samples = sorted((Path(__file__).resolve().parent.parent / "weights" / "samples").glob("synth_*.png"))
    assert samples
    reader = crnn.Recognizer("en", device="cpu")
    shutil.copy(exported_en["onnx"], tmp_path / "crnn.onnx")
    check = "\nimport sys\nassert not any(m == 'crnn' or m.startswith('crnn.') for m in sys.modules)\n"
    for sample in samples:
        shutil.copy(sample, tmp_path / "word.png")
        res = subprocess.run([sys.executable, "-c", _page_snippet() + check], cwd=tmp_path, capture_output=True,
                             text=True, timeout=120)
        assert res.returncode == 0, res.stderr[-2000:]
        text, conf = res.stdout.rsplit(maxsplit=1)
        want = reader.read(sample)
        assert text == want.text, sample.name
        assert float(conf) == pytest.approx(want.confidence, abs=2e-4), sample.name


@pytest.mark.parametrize("fmt,what,runtime", [("onnx", "an ONNX model", "onnxruntime"),
                                              ("torchscript", "a TorchScript model", "torch.jit.load")])
def test_an_exported_file_passed_as_weights_is_refused_in_one_line_saying_what_it_is(exported_en, fmt, what, runtime,
                                                                                      capsys):
    from crnn.cli import convert_ckpt, predict, serve

    path = exported_en[fmt]
    sample = str(Path(__file__).resolve().parent.parent / "weights" / "samples" / "synth_2.png")
    want = (f"{path} is {what} exported by crnn-export (vgg_small), not a checkpoint: pass the .pt file it was "
            f"exported from (or a shipped model's name, e.g. en), or run the export without crnn, with {runtime} "
            "(docs/export.md)")
    for prog, run, code in [("crnn-predict", lambda: predict.main(["--weights", str(path), sample]), 2),
                            ("crnn-convert-ckpt", lambda: convert_ckpt.main(["--info", str(path)]), 1),
                            ("crnn-serve", lambda: serve.main(["--weights", str(path), "--port", "0"]), 2)]:
        assert run() == code, prog
        out, err = capsys.readouterr()
        assert err == f"{prog}: error: {want}\n" and out == "", prog


def test_an_onnx_file_from_elsewhere_is_named_as_onnx(tmp_path):
    from crnn.engine.checkpoint import CheckpointError, load_checkpoint

    (tmp_path / "other.onnx").write_bytes(b"\x08\x07\x12\x07pytorch")  # no crnn metadata
    with pytest.raises(CheckpointError, match=r"other.onnx is an ONNX model, not a checkpoint"):
        load_checkpoint(tmp_path / "other.onnx")
    (tmp_path / "broken.pt").write_bytes(b"\x08\x07\x12\x07pytorch")
    with pytest.raises(CheckpointError, match=r"broken.pt is not a readable checkpoint \(truncated or corrupt\?\)$"):
        load_checkpoint(tmp_path / "broken.pt")


def test_a_48px_model_exports_and_the_page_snippet_reads_it_as_crnn_does(tmp_path, capsys):
    """A file trained on 48 px crops (the h48 candidates of issues 57 and 60), read 1.1x wider: its ONNX export
    stores both, matches PyTorch on 48 px inputs (the CNN's two leftover rows averaged in the graph too), and
    docs/export.md's snippet, reading the geometry from the metadata, prints what crnn.Recognizer reads."""
    import onnx
    import onnxruntime as ort

    import crnn

    cfg = Config()
    cfg.model.hidden, cfg.data.keep_ratio, cfg.data.height, cfg.data.width = 16, True, 48, 72
    cfg.data.read_width_scale = 1.1
    cs = Charset.from_spec("alnum36")
    torch.manual_seed(3)
    model = build_model("vgg_small", 1, cs.num_classes, 16)
    model.train()
    with torch.no_grad():
        model(torch.rand(4, 1, 48, 72) * 2 - 1)
    model.eval()
    weights, out = tmp_path / "h48.pt", tmp_path / "crnn.onnx"
    save_checkpoint(model_checkpoint(model, cfg, cs), weights)
    assert main(["--weights", str(weights), "--format", "onnx", "--out", str(out)]) == 0
    assert "1x1x48x" in capsys.readouterr().out
    meta = json.loads({p.key: p.value for p in onnx.load(str(out)).metadata_props}["crnn"])
    assert (meta["height"], meta["width_scale"]) == (48, 1.1)
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    x = torch.rand(2, 1, 48, 100, generator=torch.Generator().manual_seed(4)) * 2 - 1
    with torch.no_grad():
        ref = model(x).numpy()
    got = sess.run(None, {"images": x.numpy()})[0]
    assert got.shape == ref.shape == (2, 26, cs.num_classes) and np.abs(got - ref).max() <= 1e-4
    reader = crnn.Recognizer(str(weights), device="cpu")
    sample = Path(__file__).resolve().parent.parent / "weights" / "samples" / "synth_2.png"
    shutil.copy(sample, tmp_path / "word.png")
    res = subprocess.run([sys.executable, "-c", _page_snippet()], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    text, conf = res.stdout.rstrip("\n").rsplit(" ", 1)  # print(text, confidence): text may be empty
    want = reader.read(sample)
    assert text == want.text and float(conf) == pytest.approx(want.confidence, abs=2e-4)
