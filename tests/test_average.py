"""train.ema_decay: a moving average of the weights is what a run validates, saves and ships; resume stays exact."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from crnn.cli.convert_ckpt import main as convert_main
from crnn.config import ConfigError, load_config
from crnn.engine import trainer
from crnn.engine.average import WeightAverage
from crnn.engine.trainer import fit
from tests.test_train import _overrides

COMMON = ["train.steps=6", "train.save_every=0", "train.val_every=0", "train.optimizer=adam", "train.lr=3e-3",
          "train.ema_decay=0.9"]


def _load(path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def test_the_average_follows_the_formula_with_its_warm_up():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    avg = WeightAverage(net, 0.5)
    expected = {k: v.clone() for k, v in net.state_dict().items()}
    for n in range(4):
        with torch.no_grad():
            for p in net.parameters():
                p.add_(torch.randn_like(p))
        net.train()(torch.randn(5, 3))  # BatchNorm statistics move, num_batches_tracked counts
        d = min(0.5, (1 + n) / (10 + n))  # 0.1, 0.18, 0.25, 0.3: the warm-up is below 0.5 throughout
        raw = net.state_dict()
        for k, v in raw.items():
            expected[k] = d * expected[k] + (1 - d) * v if v.is_floating_point() else v.clone()
        avg.update(net)
    got = avg.model.state_dict()
    for k, v in expected.items():
        torch.testing.assert_close(got[k], v, rtol=0, atol=1e-6, msg=k)
    assert int(got["1.num_batches_tracked"]) == 4 and avg.updates == 4
    assert not avg.model.training and not any(p.requires_grad for p in avg.model.parameters())
    assert all(p.requires_grad for p in net.parameters())  # the trained model is untouched


def test_decay_must_be_below_one():
    with pytest.raises(ConfigError, match=r"train.ema_decay: must be 0 \(off\) or below 1"):
        load_config(None, ["train.ema_decay=1.0"])


def test_checkpoints_hold_the_average_as_model_and_resume_exactly(tmp_path, words_lmdb):
    straight = fit(load_config(None, _overrides(tmp_path / "a", words_lmdb, None, *COMMON)))
    assert straight["step"] == 6
    a = _load(tmp_path / "a/run/last.pt")
    assert a["state"]["ema_updates"] == 6 and set(a["train_model"]) == set(a["model"])
    assert any(not torch.equal(a["model"][k], a["train_model"][k]) for k in a["model"])

    fit(load_config(None, _overrides(tmp_path / "b", words_lmdb, None, *COMMON, "train.stop_after=3")))
    fit(load_config(None, _overrides(tmp_path / "b", words_lmdb, None, *COMMON, "train.resume=auto")))
    b = _load(tmp_path / "b/run/last.pt")
    for key in ("model", "train_model"):
        for k in a[key]:
            torch.testing.assert_close(b[key][k], a[key][k], rtol=0, atol=1e-6, msg=f"{key}.{k}")

    # a weights-only copy and a sitting pack keep the average and drop the raw weights
    assert convert_main([str(tmp_path / "a/run/last.pt"), str(tmp_path / "w.pt"), "--weights-only"]) == 0
    assert convert_main([str(tmp_path / "a/run/last.pt"), str(tmp_path / "p.pt"), "--pack"]) == 0
    for name in ("w.pt", "p.pt"):
        obj = _load(tmp_path / name)
        assert "train_model" not in obj and "optimizer" not in obj
        for k, v in a["model"].items():
            torch.testing.assert_close(obj["model"][k].to(v.dtype), v, rtol=0, atol=2e-3 * (1 + v.abs().max()))


def test_a_run_without_an_average_writes_no_raw_copy(tmp_path, words_lmdb):
    fit(load_config(None, _overrides(tmp_path, words_lmdb, None, "train.steps=2", "train.val_every=0")))
    ck = _load(tmp_path / "run/last.pt")
    assert "train_model" not in ck and ck["state"]["ema_updates"] == 0


def test_validation_scores_the_average_and_logs_the_raw_weights(tmp_path, words_lmdb, val_lmdb, monkeypatch,
                                                                capfd):
    seen = []
    validate_all = trainer.validate_all

    def spy(model, *args, **kwargs):
        seen.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        return validate_all(model, *args, **kwargs)

    monkeypatch.setattr(trainer, "validate_all", spy)
    fit(load_config(None, _overrides(tmp_path, words_lmdb, val_lmdb, "train.steps=4", "train.val_every=4",
                                     "train.ema_decay=0.9")))
    ck = _load(tmp_path / "run/last.pt")
    assert len(seen) == 1
    for k, v in ck["model"].items():
        torch.testing.assert_close(seen[0][k], v, rtol=0, atol=0, msg=k)
    err = capfd.readouterr().err
    assert "weight average: decay 0.9 (about the last 10 steps), started from the current weights" in err
    assert "step 4: " in err and "weight average CER" in err and "raw weights CER" in err
