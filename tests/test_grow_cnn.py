"""tools/grow_cnn.py and the width-parameterised VGG: a model grown wider or deeper reads exactly as the trained one, in
eval and in train mode, its new channels train, and a grown pack keeps its counters."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from crnn.charset import Charset
from crnn.config import Config, ConfigError, load_config
from crnn.engine.checkpoint import build_from_checkpoint, load_checkpoint, model_checkpoint, save_checkpoint
from crnn.model import ResBlock, build_model

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "tools" / "grow_cnn.py"
sys.path.insert(0, str(REPO / "tools"))

from grow_cnn import grow_cnn  # noqa: E402
from widen_lstm import logits_difference  # noqa: E402


def _trained_like(variant: str = "vgg_small_w8", classes: int = 11, **kw) -> torch.nn.Module:
    """A model whose every weight and BN statistic is non-trivial (random), in eval mode."""
    torch.manual_seed(0)
    model = build_model(variant, 1, classes, 16, **kw)
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if t.is_floating_point():
                t.copy_(torch.rand_like(t) + 0.5 if "running_var" in name else torch.randn_like(t) * 0.3)
    return model.eval()


def _logits(model: torch.nn.Module, x: torch.Tensor, train: bool) -> torch.Tensor:
    with torch.no_grad():
        return model.train(train)(x)


def test_width_and_depth_build_from_one_parameterised_vgg():
    """vgg_small_w8 at twice its widths has vgg_w8's convolutions (with its own LSTM size); residual blocks sit after
    the 2nd, 3rd and 4th pools; the plain layout keeps every vgg checkpoint's layer indices."""
    wide, paper = build_model("vgg_small_w8", 1, 11, 128, cnn_width=2.0), build_model("vgg_w8", 1, 11, 128)
    assert {k: v.shape for k, v in wide.state_dict().items()} == {k: v.shape for k, v in paper.state_dict().items()}
    assert [m.out_channels for m in build_model("vgg_small", 1, 11, cnn_width=1.5).cnn
            if isinstance(m, torch.nn.Conv2d)] == [48, 96, 192, 192, 384, 384, 384]
    deep = build_model("vgg_small", 1, 11, res_blocks=2)
    blocks = [(i, m.conv1.in_channels) for i, m in enumerate(deep.cnn) if isinstance(m, ResBlock)]
    assert [c for _, c in blocks] == [64, 64, 128, 128, 256, 256]
    assert isinstance(deep.cnn[blocks[0][0] - 1], torch.nn.MaxPool2d)
    x = torch.rand(2, 1, 32, 100)
    assert deep(x).shape == build_model("vgg_small", 1, 11)(x).shape == (2, 26, 11)
    plain = build_model("vgg_small", 1, 11, cnn_width=1.0, res_blocks=0)
    assert list(plain.state_dict()) == list(build_model("vgg_small", 1, 11).state_dict())
    with pytest.raises(ValueError, match="apply to the VGG variants .* not 'resnet18'"):
        build_model("resnet18", 1, 11, res_blocks=1)
    with pytest.raises(ConfigError, match="model.cnn_width must be positive"):
        load_config(None, ["model.cnn_width=0"])


def test_a_residual_block_starts_as_an_identity():
    block = ResBlock(8).train()
    x = torch.rand(2, 8, 4, 10)
    assert torch.equal(block(x), x) and torch.equal(block.eval()(x), x)
    bare = ResBlock(8, batch_norm=False)
    assert torch.equal(bare(x), x)


@pytest.mark.parametrize("variant,width,blocks", [("vgg_small_w8", 2.0, 0), ("vgg_small_w8", 1.5, 0),
                                                  ("vgg_small", 1.0, 1), ("vgg_small_w8", 1.5, 1)])
def test_grown_model_reads_as_the_trained_one_in_eval_and_train_mode(variant, width, blocks):
    model = _trained_like(variant)
    grown = grow_cnn(model, width, blocks)
    assert (grown.cnn_width, grown.res_blocks) == (width, blocks)
    x = torch.rand(3, 1, 32, 96)
    for train in (False, True):
        torch.testing.assert_close(_logits(grown, x, train), _logits(model, x, train), rtol=0, atol=1e-5)
    assert logits_difference(model, grown) <= 1e-5


def test_growing_a_grown_model_again_keeps_its_blocks():
    """A model that already has blocks and wider convolutions grows on: its blocks are carried, not reset."""
    model = _trained_like("vgg_small_w8", cnn_width=1.5, res_blocks=1)
    grown = grow_cnn(model, 2.0, 2)
    x = torch.rand(2, 1, 32, 64)
    for train in (False, True):
        torch.testing.assert_close(_logits(grown, x, train), _logits(model, x, train), rtol=0, atol=1e-5)


def test_a_grown_model_that_differs_is_caught():
    """The check before writing can fail: one outgoing weight of a new channel set non-zero changes the logits."""
    model = _trained_like("vgg_small_w8")
    grown = grow_cnn(model, 2.0)
    convs = [m for m in grown.cnn if isinstance(m, torch.nn.Conv2d)]
    with torch.no_grad():
        convs[1].weight[0, 40] += 1.0  # the second conv reads the first one's new channel 40 (of 64; 32 were old)
    assert logits_difference(model, grown) > 1e-3


def test_new_channels_are_not_dead():
    """Zero outgoing weights, random incoming ones: a step moves the weights that read the new channels, and the next
    one reaches the new channels' own incoming weights."""
    model = _trained_like("vgg_small_w8")
    grown = grow_cnn(model, 2.0).train()
    opt = torch.optim.SGD(grown.parameters(), lr=0.1)
    first, second = [m for m in grown.cnn if isinstance(m, torch.nn.Conv2d)][:2]
    x = torch.rand(2, 1, 32, 64)
    for step in range(2):
        opt.zero_grad()
        grown(x).log_softmax(-1)[..., 1].sum().backward()
        assert second.weight.grad[:32, 32:].abs().sum() > 0  # old outputs reading new inputs
        if step == 1:
            assert first.weight.grad[32:].abs().sum() > 0  # the new channels' own weights
        opt.step()


def test_refuses_what_it_cannot_grow():
    with pytest.raises(ValueError, match="only the VGG variants with BatchNorm grow"):
        grow_cnn(build_model("resnet18", 1, 11), 2.0)
    with pytest.raises(ValueError, match="only the VGG variants with BatchNorm grow"):
        grow_cnn(build_model("vgg_small", 1, 11, batch_norm=False), 2.0)
    with pytest.raises(ValueError, match="must not be below the model's own"):
        grow_cnn(_trained_like("vgg_small", cnn_width=2.0), 1.5)
    with pytest.raises(ValueError, match="and one of them above it"):
        grow_cnn(_trained_like("vgg_small"), 1.0, 0)


def test_a_grown_pack_keeps_its_counters_and_reads_the_same(tmp_path: Path):
    from crnn.engine.checkpoint import sitting_pack
    from crnn.engine.state import is_sitting_pack

    src, out = tmp_path / "pack.pt", tmp_path / "grown.pt"
    cfg = Config()
    cfg.model.variant, cfg.model.hidden = "vgg_small_w8", 16
    counters = {"step": 900, "images_seen": 57_600, "cpu_seconds": 4321.0}
    model = _trained_like("vgg_small_w8", classes=37)
    save_checkpoint(sitting_pack(model_checkpoint(model, cfg, Charset.from_spec("alnum36"), step=900, state=counters,
                                                  optimizer={})), src)
    r = subprocess.run([sys.executable, str(SCRIPT), str(src), str(out), "--cnn-width", "2", "--res-blocks", "1"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "cnn_width 1 -> 2, res_blocks 0 -> 1" in r.stdout and "a sitting pack at step 900" in r.stdout
    ck = load_checkpoint(out)
    assert is_sitting_pack(ck) and ck.raw["state"] == counters and ck.step == 900
    assert (ck.config["model"]["cnn_width"], ck.config["model"]["res_blocks"]) == (2.0, 1)
    narrow, _, _ = build_from_checkpoint(load_checkpoint(src))
    grown, _, _ = build_from_checkpoint(ck)
    x = torch.rand(2, 1, 32, 80)
    torch.testing.assert_close(_logits(grown, x, False), _logits(narrow, x, False), rtol=0, atol=1e-5)
    r = subprocess.run([sys.executable, str(SCRIPT), str(src), str(tmp_path / "no.pt")], capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.returncode == 2 and "give --cnn-width, --res-blocks or both" in r.stderr
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "missing.pt"), str(tmp_path / "no.pt"),
                        "--cnn-width", "2"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith("grow_cnn: error: ") and not (tmp_path / "no.pt").exists()
