"""train.amp=auto: the probe leaves the model alone, the choice follows the measurement, the run records the choice."""
from __future__ import annotations

import pytest
import torch

from crnn.engine import autotune
from crnn.engine.distributed import resolve_ddp_comm
from crnn.model import build_model


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model("vgg_small", 1, 11, 32)


def test_probe_measures_a_copy_and_leaves_the_model_untouched():
    model = _model().train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    speedup = autotune.measure_bf16_speedup(model, 1, 32, 64, 2, channels_last=False, reps=1)
    assert speedup > 0 and speedup == speedup  # a finite ratio
    after = model.state_dict()
    for k in before:  # BatchNorm running statistics included: the probe trained a deep copy
        assert torch.equal(before[k], after[k]), k
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("speedup,expected", [(2.0, "bf16"), (1.09, "off"), (0.8, "off")])
def test_cpu_choice_follows_the_measured_speedup(monkeypatch, speedup, expected):
    monkeypatch.setattr(autotune, "cpu_bf16_capable", lambda: True)
    monkeypatch.setattr(autotune, "measure_bf16_speedup", lambda *a, **k: speedup)
    choice = autotune.choose_amp(_model(), torch.device("cpu"), 1, 32, 100, 64, True)
    assert choice.amp == expected and choice.speedup == speedup
    assert f"{speedup:.2f}x the fp32 step" in choice.reason


def test_cpu_without_native_bf16_is_not_measured(monkeypatch):
    monkeypatch.setattr(autotune, "cpu_bf16_capable", lambda: False)
    monkeypatch.setattr(autotune, "measure_bf16_speedup", lambda *a, **k: pytest.fail("must not probe"))
    choice = autotune.choose_amp(_model(), torch.device("cpu"), 1, 32, 100, 64, False)
    assert (choice.amp, choice.reason) == ("off", "this CPU has no native bf16 kernels")


@pytest.mark.parametrize("comm,amp,expected", [("auto", "bf16", "bf16"), ("auto", "off", "fp32"),
                                               ("auto", "fp16", "fp32"), ("fp32", "bf16", "fp32"),
                                               ("fp16", "off", "fp16")])
def test_ddp_comm_auto_follows_the_resolved_amp(comm, amp, expected):
    assert resolve_ddp_comm(comm, amp) == expected


def test_training_with_amp_auto_logs_and_records_the_choice(tmp_path, words_lmdb, monkeypatch, capsys):
    """The run resolves auto once; config.yaml and the checkpoint hold the chosen mode, never "auto"."""
    from crnn.cli.train import main as train_main

    monkeypatch.setattr(autotune, "cpu_bf16_capable", lambda: True)
    monkeypatch.setattr(autotune, "measure_bf16_speedup", lambda *a, **k: 1.7)
    out = tmp_path / "run"
    assert train_main([f"data.train=[{{path: {words_lmdb}}}]", "data.val=[]", "data.batch_size=4",
                       "data.num_workers=0", "train.steps=1", "train.tensorboard=false", "train.val_every=0",
                       "train.amp=auto", f"train.output_dir={out}"]) == 0
    assert "train.amp=auto -> bf16: a bf16 training step measured 1.70x the fp32 step" in capsys.readouterr().err
    ck = torch.load(out / "last.pt", map_location="cpu", weights_only=True)
    assert ck["config"]["train"]["amp"] == "bf16"
    assert "amp: bf16" in (out / "config.yaml").read_text()


@pytest.mark.parametrize("amp,line", [("bf16", "mixed precision: bf16 (train.amp)"),
                                      ("off", "mixed precision: off (train.amp) - float32 throughout")])
def test_a_run_with_its_precision_set_names_it_in_the_log(tmp_path, words_lmdb, capsys, amp, line):
    """train.amp set by hand is named in the log as auto's choice is: what scripts/lever_probe.sh compares between
    its arms (it read "as set" for both arms of a pinned probe and could not tell them apart)."""
    from crnn.cli.train import main as train_main

    assert train_main([f"data.train=[{{path: {words_lmdb}}}]", "data.val=[]", "data.batch_size=4",
                       "data.num_workers=0", "train.steps=1", "train.tensorboard=false", "train.val_every=0",
                       f"train.amp={amp}", f"train.output_dir={tmp_path / 'run'}"]) == 0
    err = capsys.readouterr().err
    assert line in err and "train.amp=auto ->" not in err
