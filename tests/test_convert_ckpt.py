"""crnn-convert-ckpt: both key layouts, weights-only / fp16 shipping, --info, overwrite refusal and exit codes."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

from crnn.charset import Charset
from crnn.cli.convert_ckpt import main
from crnn.config import Config
from crnn.engine.checkpoint import (
    build_from_checkpoint,
    load_checkpoint,
    load_model_weights,
    model_checkpoint,
    save_checkpoint,
    unwrap_model,
)
from crnn.model import build_model, count_parameters

REPO = Path(__file__).resolve().parents[1]
HIDDEN = 32
CHARS = "0123456789"


def make_model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return build_model("vgg_small", 1, len(CHARS) + 1, HIDDEN).eval()


def make_cfg() -> Config:
    cfg = Config()
    cfg.model.variant, cfg.model.hidden, cfg.model.charset = "vgg_small", HIDDEN, CHARS
    return cfg


def images() -> torch.Tensor:
    torch.manual_seed(7)
    return torch.rand(2, 1, 32, 40)  # [B, C, H, W]


def assert_same_state(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]), k


@pytest.fixture
def model() -> nn.Module:
    return make_model()


@pytest.fixture
def training_ckpt(tmp_path, model) -> Path:
    """A full training checkpoint (optimizer state after one step) as the trainer writes it."""
    opt = torch.optim.Adam(model.parameters())
    model(images()).sum().backward()
    opt.step()
    path = tmp_path / "last.pt"
    save_checkpoint(model_checkpoint(model, make_cfg(), Charset(CHARS), step=42, epoch=1, best_metric=0.5,
                                     optimizer=opt.state_dict(), scheduler={"last_epoch": 1}, scaler=None,
                                     rng={"torch": torch.get_rng_state(), "cuda": []}), path)
    return path


@pytest.fixture
def gloo(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def raw(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


# ---------------------------------------------------------------------------------------------- directions
def test_plain_to_module_to_plain_is_exact(tmp_path, training_ckpt, capsys):
    assert main([str(training_ckpt), str(tmp_path / "mod.pt"), "--to", "module"]) == 0
    assert "has plain keys, writing DataParallel/DDP keys (module.)" in capsys.readouterr().out
    mod = raw(tmp_path / "mod.pt")
    assert all(k.startswith("module.") for k in mod["model"])
    assert main([str(tmp_path / "mod.pt"), str(tmp_path / "back.pt"), "--to", "plain"]) == 0
    assert "has DataParallel/DDP keys (module.), writing plain keys" in capsys.readouterr().out
    before, back = raw(training_ckpt), raw(tmp_path / "back.pt")
    assert_same_state(back["model"], before["model"])
    assert back.keys() == before.keys() and back["step"] == 42 and back["kind"] == "training"
    for pid, state in before["optimizer"]["state"].items():  # the rest of the dict passes through untouched
        assert_same_state(back["optimizer"]["state"][pid], state)


def test_module_file_is_what_wrapped_code_expects(tmp_path, training_ckpt, model):
    assert main([str(training_ckpt), str(tmp_path / "mod.pt"), "--to", "module"]) == 0
    dp = nn.DataParallel(make_model(seed=1))
    dp.load_state_dict(raw(tmp_path / "mod.pt")["model"], strict=True)  # plain torch API, no help from us
    assert_same_state(dp.module.state_dict(), model.state_dict())


def test_dp_and_ddp_files_convert_and_load_everywhere(tmp_path, model, gloo):
    torch.save(nn.DataParallel(model).state_dict(), tmp_path / "dp.pt")
    torch.save({"state_dict": DistributedDataParallel(model).state_dict(), "epoch": 3}, tmp_path / "ddp.pt")
    for name in ("dp.pt", "ddp.pt"):
        for to in ("plain", "module"):
            out = tmp_path / f"{name}.{to}.pt"
            assert main([str(tmp_path / name), str(out), "--to", to]) == 0
            ckpt = load_checkpoint(out)
            assert ckpt.source_prefix == ("module." if to == "module" else "")
            for wrap in (lambda m: m, nn.DataParallel, DistributedDataParallel):
                target = wrap(make_model(seed=1))
                load_model_weights(target, ckpt.model_state, strict=True)
                assert_same_state(unwrap_model(target).state_dict(), model.state_dict())
    assert raw(tmp_path / "ddp.pt.plain.pt")["epoch"] == 3  # the container's other entries are kept


# ---------------------------------------------------------------------------------------------- shipping
def test_weights_only_drops_training_state(tmp_path, training_ckpt, model, capsys):
    assert main([str(training_ckpt), str(tmp_path / "w.pt"), "--weights-only"]) == 0
    assert "dropping optimizer, scheduler, scaler, rng" in capsys.readouterr().out
    w = raw(tmp_path / "w.pt")
    assert not {"optimizer", "scheduler", "scaler", "rng"} & set(w) and w["kind"] == "weights"
    assert w["step"] == 42 and w["charset"]["chars"] == CHARS
    assert_same_state(w["model"], model.state_dict())
    assert (tmp_path / "w.pt").stat().st_size < training_ckpt.stat().st_size


def test_half_stores_fp16_and_still_builds_a_float32_model(tmp_path, training_ckpt, model, capsys):
    assert main([str(training_ckpt), str(tmp_path / "h.pt"), "--half"]) == 0
    assert "--half implies --weights-only" in capsys.readouterr().out
    h = raw(tmp_path / "h.pt")
    assert "optimizer" not in h and h["model"]["head.weight"].dtype == torch.float16
    rebuilt, charset, _ = build_from_checkpoint(load_checkpoint(tmp_path / "h.pt"))
    assert charset.chars == CHARS and all(p.dtype == torch.float32 for p in rebuilt.parameters())
    rounded = make_model(seed=1)
    rounded.load_state_dict({k: v.half().float() if v.is_floating_point() else v
                             for k, v in model.state_dict().items()})
    assert torch.equal(rebuilt(images()), rounded(images()))


# ---------------------------------------------------------------------------------------------- --info
def test_info_describes_without_writing(tmp_path, training_ckpt, model, capsys):
    assert main(["--info", str(training_ckpt)]) == 0
    out = capsys.readouterr().out
    assert "kind: training (crnn checkpoint, format version 1)" in out
    assert "layout: plain keys" in out
    assert f"{count_parameters(model):,} parameters" in out and "(float32)" in out
    assert "variant: vgg_small (in_channels 1, hidden 32)" in out
    assert f"charset: 10 chars + blank = 11 classes: '{CHARS}'" in out
    assert "step: 42, epoch: 1, best_metric: 0.5" in out
    assert "training state: optimizer, scheduler, rng" in out
    assert "reads: 32 px high, fixed 100 px wide (data.height" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]


def test_info_on_foreign_dp_state_dict(tmp_path, model, capsys):
    torch.save(nn.DataParallel(model).state_dict(), tmp_path / "dp.pt")
    assert main(["--info", str(tmp_path / "dp.pt")]) == 0
    out = capsys.readouterr().out
    assert "kind: state_dict (bare state dict)" in out and "layout: DataParallel/DDP keys (module.)" in out
    assert "variant: unknown" in out and "charset: not stored (head has 11 classes = 10 chars + blank)" in out


# ---------------------------------------------------------------------------------------------- refusals / exit codes
def test_refuses_to_overwrite_input_without_force(tmp_path, training_ckpt, capsys):
    before = training_ckpt.read_bytes()
    assert main([str(training_ckpt), str(training_ckpt), "--to", "module"]) == 2
    err = capsys.readouterr().err
    assert "is the input file; pass --force" in err and err.count("\n") == 1
    assert training_ckpt.read_bytes() == before
    assert main([str(training_ckpt), str(training_ckpt), "--to", "module", "--force"]) == 0
    assert load_checkpoint(training_ckpt).source_prefix == "module."
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]  # no temp file left


def test_refuses_existing_output_without_force(tmp_path, training_ckpt, capsys):
    (tmp_path / "out.pt").write_bytes(b"keep me")
    assert main([str(training_ckpt), str(tmp_path / "out.pt")]) == 2
    assert "already exists; pass --force" in capsys.readouterr().err
    assert (tmp_path / "out.pt").read_bytes() == b"keep me"


@pytest.mark.parametrize("argv, code, message", [
    (["{d}/nope.pt", "{d}/o.pt"], 1, "weights file {d}/nope.pt not found"),
    (["{d}/junk.pt", "{d}/o.pt"], 1, "junk.pt is not a readable checkpoint (truncated or corrupt?)"),
    (["{d}/evil.pt", "{d}/o.pt"], 1, "evil.pt contains pickled Python objects; refusing to load it"),
    (["{d}/junk.pt"], 2, "give OUT"),
    (["--info", "{d}/junk.pt", "{d}/o.pt"], 2, "--info takes only IN"),
    (["{d}/junk.pt", "{d}/o.pt", "--to", "sideways"], 2, "invalid choice: 'sideways'"),
])
def test_errors_are_one_line_with_exit_codes(tmp_path, capsys, argv, code, message):
    (tmp_path / "junk.pt").write_bytes(b"\x80\x02garbage" * 20)
    torch.save({"state_dict": {"w": torch.ones(1)}, "cfg": Charset(CHARS)}, tmp_path / "evil.pt")
    assert main([a.format(d=tmp_path) for a in argv]) == code
    err = capsys.readouterr().err
    assert message.format(d=tmp_path) in err
    assert not (tmp_path / "o.pt").exists()
    if code == 1:
        assert err.count("\n") == 1 and err.startswith("crnn-convert-ckpt: error: ")


def test_script_wrapper_runs(tmp_path, training_ckpt):
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "convert_ckpt.py"), "--info", str(training_ckpt)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "layout: plain keys" in proc.stdout


def test_info_takes_a_shipped_name(tmp_path, monkeypatch, capsys):
    """``--info en`` describes weights/crnn_en.pt from any folder (a file named ``en`` there would win), with the
    geometry a fine-tuning run has to keep."""
    monkeypatch.chdir(tmp_path)
    assert main(["--info", "en"]) == 0
    out = capsys.readouterr().out
    assert "crnn_en.pt" in out and "reads: 48 px high, keep-ratio 24-600 px wide in steps of 4" in out
    torch.save({"x": torch.zeros(1)}, tmp_path / "en")
    assert main(["--info", "en"]) == 0
    assert "crnn_en.pt" not in capsys.readouterr().out
