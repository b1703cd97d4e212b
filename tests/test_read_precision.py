"""Reading in bf16: CRNN.hold_weights_in, Recognizer(amp="bf16" | "auto") on a CPU, and the evaluation and service
paths that must read the same way (no autocast around weights that are bf16 already)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from crnn.engine import autotune
from crnn.engine.eval_datasets import EvalSettings, evaluate_datasets
from crnn.engine.evaluate import reading_context
from crnn.infer import Recognizer
from crnn.model import build_model

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "weights" / "samples" / "synth_2.png"  # truth: IMMEDIATELY


def _tiny():
    torch.manual_seed(0)
    return build_model("vgg_small", 1, 11, hidden=16).eval()


def test_hold_weights_in_bf16_keeps_float32_logits_and_undoes():
    model = _tiny()
    x = torch.rand(2, 1, 32, 64)
    with torch.inference_mode():
        ref = model(x)
        model.hold_weights_in(torch.bfloat16)
        assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
        assert model.weights_dtype == torch.bfloat16
        out = model(x)  # float32 images in: cast inside
    assert out.dtype == torch.float32 and out.shape == ref.shape
    torch.testing.assert_close(out, ref, rtol=0.05, atol=0.05)  # bf16 rounding, not another network
    assert not torch.equal(out, ref)  # bf16 really ran
    model.hold_weights_in(torch.float32)
    assert {p.dtype for p in model.parameters()} == {torch.float32} and model.weights_dtype is None
    with pytest.raises(ValueError, match="floating-point"):
        model.hold_weights_in(torch.int8)


def test_reading_context_skips_autocast_only_for_weights_held_in_bf16():
    model = _tiny()
    with reading_context(model, torch.device("cpu"), "bf16"):
        assert torch.is_autocast_enabled("cpu")  # float32 weights: autocast as before (training, validation)
    model.hold_weights_in(torch.bfloat16)
    with reading_context(model, torch.device("cpu"), "bf16"):
        assert not torch.is_autocast_enabled("cpu")
    with reading_context(_tiny(), torch.device("cpu"), "off"):
        assert not torch.is_autocast_enabled("cpu")


def test_recognizer_bf16_on_cpu_holds_bf16_weights_and_reads_the_same_text():
    fp32 = Recognizer.from_checkpoint("en", device="cpu")
    bf16 = Recognizer.from_checkpoint("en", device="cpu", amp="bf16")
    assert bf16.amp == "bf16" and {p.dtype for p in bf16.model.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in fp32.model.parameters()} == {torch.float32}
    from crnn.infer import load_image

    (t32, c32), = fp32.predict_images([load_image(SAMPLE)])
    (t16, c16), = bf16.predict_images([load_image(SAMPLE)])
    assert t32 == t16 == "IMMEDIATELY"
    assert c16 == pytest.approx(c32, abs=0.02) and c16 != c32


def test_auto_without_native_bf16_reads_in_float32(monkeypatch):
    monkeypatch.setattr(autotune, "cpu_bf16_capable", lambda: False)
    rec = Recognizer.from_checkpoint("en", device="cpu", amp="auto")
    assert rec.amp == "off" and rec.amp_reason == "this CPU has no native bf16 kernels"
    assert {p.dtype for p in rec.model.parameters()} == {torch.float32}


@pytest.mark.parametrize("speedup, expected", [(1.6, "bf16"), (1.05, "off")])
def test_auto_keeps_bf16_only_when_measured_faster(monkeypatch, speedup, expected):
    monkeypatch.setattr(autotune, "cpu_bf16_capable", lambda: True)
    monkeypatch.setattr(autotune, "measure_read_bf16_speedup", lambda *a, **k: speedup)
    rec = Recognizer.from_checkpoint("en", device="cpu", amp="auto")
    assert rec.amp == expected and f"{speedup:.2f}x" in rec.amp_reason
    assert {p.dtype for p in rec.model.parameters()} == {torch.bfloat16 if expected == "bf16" else torch.float32}


def test_measured_speedup_leaves_the_model_alone():
    model = _tiny()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    speedup = autotune.measure_read_bf16_speedup(model, 1, 32, 64, reps=2)
    assert speedup > 0
    assert {p.dtype for p in model.parameters()} == {torch.float32} and model.weights_dtype is None
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_crnn_eval_reads_and_says_bf16(tmp_path):
    shutil.copy(SAMPLE, tmp_path / "a.png")
    (tmp_path / "gt.txt").write_text("a.png\tIMMEDIATELY\n", encoding="utf-8")
    runs = {amp: evaluate_datasets(str(tmp_path), "en", EvalSettings(device="cpu", amp=amp)) for amp in ("off", "bf16")}
    assert runs["off"]["amp"] == "off" and runs["bf16"]["amp"] == "bf16"
    assert runs["off"]["overall"]["word_acc"] == runs["bf16"]["overall"]["word_acc"] == 1.0


def test_bf16_on_a_cpu_without_native_kernels_warns_once_and_still_reads(monkeypatch, recwarn):
    from crnn.infer import PrecisionWarning

    monkeypatch.setattr(autotune, "cpu_bf16_capable", lambda: False)
    rec = Recognizer.from_checkpoint("en", device="cpu", amp="bf16")
    got = [w for w in recwarn if w.category is PrecisionWarning]
    assert len(got) == 1 and "no native bf16 kernels" in str(got[0].message) and "--amp off" in str(got[0].message)
    assert rec.amp == "bf16"
    monkeypatch.setattr(autotune, "cpu_bf16_capable", lambda: True)
    Recognizer.from_checkpoint("en", device="cpu", amp="bf16")
    assert len([w for w in recwarn if w.category is PrecisionWarning]) == 1  # none where the kernels are native


def test_crnn_predict_says_the_precision_warning_in_one_line(monkeypatch, capsys):
    from crnn.cli.predict import main

    monkeypatch.setattr(autotune, "cpu_bf16_capable", lambda: False)
    assert main(["--device", "cpu", "--amp", "bf16", str(SAMPLE)]) == 0
    out, err = capsys.readouterr()
    assert out.split("\t")[1] == "IMMEDIATELY"
    assert err.splitlines()[0].startswith("crnn-predict: warning: amp=bf16: this CPU has no native bf16 kernels")


def test_auto_needs_no_measurement_off_the_cpu():
    assert autotune.unmeasured_choice(torch.device("cpu")) is None  # the CPU is measured
    meta = autotune.choose_read_amp(_tiny(), torch.device("meta"), 1, 32, 64)
    assert (meta.amp, meta.reason) == ("off", "no automatic choice for device type 'meta'")
