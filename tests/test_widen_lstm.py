"""tools/widen_lstm.py: a grown model reads exactly as the trained one, and its new units train."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from crnn.charset import Charset
from crnn.config import Config
from crnn.engine.checkpoint import build_from_checkpoint, load_checkpoint, model_checkpoint, save_checkpoint
from crnn.model import build_model

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "tools" / "widen_lstm.py"
sys.path.insert(0, str(REPO / "tools"))

from widen_lstm import widen_lstm  # noqa: E402


def _trained_like(variant: str, hidden: int, classes: int = 11) -> torch.nn.Module:
    """A model whose every weight and BN statistic is non-trivial (random), in eval mode."""
    torch.manual_seed(0)
    model = build_model(variant, 1, classes, hidden)
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if t.is_floating_point():
                t.copy_(torch.rand_like(t) + 0.5 if "running_var" in name else torch.randn_like(t) * 0.3)
    return model.eval()


@pytest.mark.parametrize("variant,wide", [("vgg_small", 24), ("vgg_small_w8", 40), ("vgg_small", 17)])
def test_grown_model_reads_as_the_trained_one(variant: str, wide: int) -> None:
    model = _trained_like(variant, 16)
    grown = widen_lstm(model, wide)
    assert grown.hidden == wide and grown.rnn2.hidden_size == wide and grown.head.in_features == 2 * wide
    x = torch.rand(3, 1, 32, 64)
    with torch.no_grad():
        torch.testing.assert_close(grown(x), model(x), rtol=0, atol=1e-5)
    for key, value in model.cnn.state_dict().items():
        assert torch.equal(grown.cnn.state_dict()[key], value)


def test_new_units_are_not_dead() -> None:
    """Zero outgoing weights, random incoming ones: the first step moves the head's new columns, the second reaches
    the new units' own rows (a grown model whose new units never trained would be capacity in name only)."""
    model = _trained_like("vgg_small", 16)
    grown = widen_lstm(model, 24).train()
    opt = torch.optim.SGD(grown.parameters(), lr=0.1)
    x = torch.rand(2, 1, 32, 64)
    new_rows = [g * 24 + i for g in range(4) for i in range(16, 24)]  # the new units' rows of each gate block
    for step in range(2):
        opt.zero_grad()
        grown(x).log_softmax(-1)[..., 1].sum().backward()
        head_new = torch.cat([grown.head.weight.grad[:, 16:24], grown.head.weight.grad[:, 40:48]], 1)
        assert head_new.abs().sum() > 0
        if step == 1:
            assert grown.rnn2.weight_ih_l0.grad[new_rows].abs().sum() > 0
            assert grown.rnn2.weight_hh_l0_reverse.grad[new_rows].abs().sum() > 0
        opt.step()


def test_refuses_what_it_cannot_grow() -> None:
    with pytest.raises(ValueError, match="hidden size 16 must exceed the model's own, 16"):
        widen_lstm(_trained_like("vgg_small", 16), 16)
    with pytest.raises(ValueError, match="projected BiLSTM"):
        widen_lstm(build_model("vgg_easyocr", 1, 11), 300)


def test_command_writes_a_loadable_grown_checkpoint(tmp_path: Path) -> None:
    src, out = tmp_path / "small.pt", tmp_path / "wide.pt"
    model = _trained_like("vgg_small", 16, classes=37)
    cfg = Config()
    cfg.model.variant, cfg.model.hidden = "vgg_small", 16
    save_checkpoint(model_checkpoint(model, cfg, Charset.from_spec("alnum36")), src)
    r = subprocess.run([sys.executable, str(SCRIPT), str(src), str(out), "--hidden", "20"], capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "hidden 16 -> 20" in r.stdout and "logits equal" in r.stdout
    grown, charset, grown_cfg = build_from_checkpoint(load_checkpoint(out))
    assert grown_cfg.model.hidden == 20 and len(charset) == 36
    x = torch.rand(2, 1, 32, 80)
    with torch.no_grad():
        torch.testing.assert_close(grown(x), model(x), rtol=0, atol=1e-5)
    r = subprocess.run([sys.executable, str(SCRIPT), str(src), str(tmp_path / "no.pt"), "--hidden", "8"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode != 0 and r.stderr.strip() == "widen_lstm: error: hidden size 8 must exceed the model's own, 16"
    assert not (tmp_path / "no.pt").exists()


def test_a_sitting_pack_stays_a_pack_with_its_counters(tmp_path: Path) -> None:
    """Growing the committed pack of a run: the grown file resumes at the pack's step, lines seen and CPU-seconds."""
    from crnn.engine.checkpoint import sitting_pack
    from crnn.engine.state import is_sitting_pack

    src, out = tmp_path / "pack.pt", tmp_path / "grown.pt"
    cfg = Config()
    cfg.model.variant, cfg.model.hidden = "vgg_small", 16
    counters = {"step": 700, "images_seen": 44_800, "cpu_seconds": 1234.5}
    save_checkpoint(sitting_pack(model_checkpoint(_trained_like("vgg_small", 16, classes=37), cfg,
                                                  Charset.from_spec("alnum36"), step=700, state=counters,
                                                  optimizer={})), src)
    r = subprocess.run([sys.executable, str(SCRIPT), str(src), str(out), "--hidden", "24"], capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "a sitting pack at step 700 (44,800 lines seen)" in r.stdout
    ck = load_checkpoint(out)
    assert is_sitting_pack(ck) and ck.raw["state"] == counters and ck.step == 700
    assert {v.dtype for v in ck.model_state.values() if v.is_floating_point()} == {torch.float16}
    narrow, _, _ = build_from_checkpoint(load_checkpoint(src))
    grown, _, _ = build_from_checkpoint(ck)
    x = torch.rand(2, 1, 32, 80)
    with torch.no_grad():
        torch.testing.assert_close(grown(x), narrow(x), rtol=0, atol=1e-5)
