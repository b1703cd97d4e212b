"""Checkpoint library: key cleaning, unwrapping (DP / DDP / compile), safe loading, strict checked loading, saving."""
from __future__ import annotations

import builtins
import os
import pickle
import random

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

import crnn.engine.checkpoint as ckmod
from crnn.charset import Charset
from crnn.config import Config
from crnn.engine.checkpoint import (
    CheckpointError,
    add_prefix,
    build_from_checkpoint,
    clean_state_dict,
    detect_prefix,
    load_checkpoint,
    load_model_weights,
    model_checkpoint,
    save_checkpoint,
    unwrap_model,
    weights_only_checkpoint,
)
from crnn.model import build_model

HIDDEN = 32
CHARS = "0123456789"  # 10 chars -> 11 classes


def make_model(seed: int = 0, classes: int = 11, variant: str = "vgg_small") -> nn.Module:
    torch.manual_seed(seed)
    return build_model(variant, 1, classes, HIDDEN).eval()


def make_cfg() -> Config:
    cfg = Config()
    cfg.model.variant, cfg.model.hidden, cfg.model.charset = "vgg_small", HIDDEN, CHARS
    return cfg


def assert_same_state(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype, k
        assert torch.equal(a[k], b[k]), k


def images() -> torch.Tensor:
    torch.manual_seed(123)
    return torch.rand(2, 1, 32, 48)  # [B, C, H, W]


@pytest.fixture
def gloo(tmp_path):
    """A one-process gloo group, so DistributedDataParallel can wrap a CPU model."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


class WritesMarker:
    """Unpickling this object creates a file: proof that arbitrary code ran."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (builtins.open, (self.marker, "w"))


# ---------------------------------------------------------------------------------------------- keys
PREFIXES = ["", "module.", "_orig_mod.", "module._orig_mod.", "_orig_mod.module.", "module.module."]


@pytest.mark.parametrize("prefix", PREFIXES)
def test_clean_state_dict_strips_whole_leading_prefixes(prefix):
    plain = {"cnn.0.weight": torch.ones(2), "head.bias": torch.zeros(3)}
    sd = add_prefix(plain, prefix)
    assert detect_prefix(sd) == prefix
    cleaned = clean_state_dict(sd)
    assert list(cleaned) == list(plain)
    assert all(cleaned[k] is plain[k] for k in plain)  # same tensors, no copies


def test_clean_state_dict_leaves_inner_and_lookalike_names():
    t = torch.ones(1)
    sd = {"cnn.module.x": t, "rnn._orig_mod.y": t, "modules.z": t, "module_x.w": t, "module.": t}
    assert list(clean_state_dict(sd)) == ["cnn.module.x", "rnn._orig_mod.y", "modules.z", "module_x.w", ""]


def test_detect_prefix_mixed_or_empty_is_plain():
    assert detect_prefix({"module.a": torch.ones(1), "b": torch.ones(1)}) == ""
    assert detect_prefix({}) == ""


def test_clean_state_dict_refuses_colliding_keys():
    with pytest.raises(CheckpointError, match="module.a"):
        clean_state_dict({"a": torch.ones(1), "module.a": torch.zeros(1)})


# ---------------------------------------------------------------------------------------------- unwrap
def test_unwrap_dataparallel_and_compile_nested():
    model = make_model()
    assert unwrap_model(model) is model
    assert unwrap_model(nn.DataParallel(model)) is model
    compiled = torch.compile(model)  # an OptimizedModule; nothing compiles until it is called
    assert compiled is not model and unwrap_model(compiled) is model
    assert unwrap_model(nn.DataParallel(torch.compile(nn.DataParallel(model)))) is model


def test_unwrap_ddp(gloo):
    model = make_model()
    ddp = DistributedDataParallel(model)
    assert unwrap_model(ddp) is model
    assert unwrap_model(torch.compile(ddp)) is model


# ---------------------------------------------------------------------------------------------- wrapped files
def _load_into_fresh_bare(path) -> nn.Module:
    ckpt = load_checkpoint(path)
    fresh = make_model(seed=1)
    load_model_weights(fresh, ckpt.model_state)
    return fresh


def test_dataparallel_state_dict_loads_into_bare_model(tmp_path):
    model = make_model()
    torch.save(nn.DataParallel(model).state_dict(), tmp_path / "dp.pt")
    ckpt = load_checkpoint(tmp_path / "dp.pt")
    assert ckpt.source_prefix == "module." and ckpt.kind == "state_dict" and ckpt.config is None
    assert list(ckpt.model_state) == list(model.state_dict())
    assert_same_state(_load_into_fresh_bare(tmp_path / "dp.pt").state_dict(), model.state_dict())


def test_ddp_state_dict_loads_into_bare_model(tmp_path, gloo):
    model = make_model()
    torch.save(DistributedDataParallel(model).state_dict(), tmp_path / "ddp.pt")
    assert load_checkpoint(tmp_path / "ddp.pt").source_prefix == "module."
    assert_same_state(_load_into_fresh_bare(tmp_path / "ddp.pt").state_dict(), model.state_dict())


def test_compiled_state_dict_and_other_containers(tmp_path):
    model = make_model()
    torch.save(torch.compile(model).state_dict(), tmp_path / "c.pt")
    torch.save({"state_dict": nn.DataParallel(model).state_dict(), "epoch": 3}, tmp_path / "sd.pt")
    torch.save({"model": model.state_dict(), "optimizer": {}}, tmp_path / "m.pt")
    for name, prefix, container in [("c.pt", "_orig_mod.", "bare"), ("sd.pt", "module.", "state_dict"),
                                    ("m.pt", "", "model")]:
        ckpt = load_checkpoint(tmp_path / name)
        assert (ckpt.source_prefix, ckpt.container) == (prefix, container)
        assert_same_state(_load_into_fresh_bare(tmp_path / name).state_dict(), model.state_dict())


def test_plain_checkpoint_loads_into_dp_and_ddp_wrapped_models(tmp_path, gloo):
    model = make_model()
    save_checkpoint(model_checkpoint(model, make_cfg(), Charset(CHARS)), tmp_path / "w.pt")
    state = load_checkpoint(tmp_path / "w.pt").model_state
    for wrap in (nn.DataParallel, DistributedDataParallel, torch.compile):
        target = wrap(make_model(seed=1))
        load_model_weights(target, state)
        assert_same_state(unwrap_model(target).state_dict(), model.state_dict())


# ---------------------------------------------------------------------------------------------- full checkpoints
def _training_checkpoint(model: nn.Module) -> dict:
    """What the trainer saves: model + config + charset + real optimizer/scheduler/rng state after one step."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    unwrap_model(model).train()
    model(images()).sum().backward()
    opt.step()
    sched.step()
    unwrap_model(model).eval()
    rng = {"torch": torch.get_rng_state(), "cuda": [], "python": random.getstate()}
    return model_checkpoint(model, make_cfg(), Charset(CHARS), step=1, epoch=0, best_metric=0.25,
                            optimizer=opt.state_dict(), scheduler=sched.state_dict(), scaler=None, rng=rng,
                            metrics={"word_acc": 0.25})


def test_model_checkpoint_from_wrapped_model_round_trips(tmp_path):
    model = make_model()
    obj = _training_checkpoint(nn.DataParallel(model))
    assert obj["kind"] == "training" and obj["variant"] == "vgg_small" and obj["num_classes"] == 11
    assert list(obj["model"]) == list(model.state_dict())  # plain keys although the model was wrapped
    save_checkpoint(obj, tmp_path / "run" / "last.pt")  # creates the folder
    assert os.listdir(tmp_path / "run") == ["last.pt"]  # no temp file left behind
    raw = torch.load(tmp_path / "run" / "last.pt", map_location="cpu", weights_only=True)
    assert set(raw) >= {"optimizer", "scheduler", "rng", "config", "charset"}
    ckpt = load_checkpoint(tmp_path / "run" / "last.pt")
    assert (ckpt.kind, ckpt.step, ckpt.variant, ckpt.num_classes) == ("training", 1, "vgg_small", 11)
    rebuilt, charset, cfg = build_from_checkpoint(ckpt)
    assert charset == Charset(CHARS) and cfg.model.hidden == HIDDEN and not rebuilt.training
    assert torch.equal(rebuilt(images()), model(images()))


def test_save_checkpoint_rejects_non_plain_data_naming_the_key(tmp_path):
    bad = [({"metrics": {"acc": np.float64(0.5)}}, "metrics.acc"), ({"rng": [1, object()]}, r"rng\[1\]"),
           ({"model": nn.Linear(2, 2)}, "model")]
    for obj, where in bad:
        with pytest.raises(CheckpointError, match=where):
            save_checkpoint(obj, tmp_path / "x.pt")
    assert os.listdir(tmp_path) == []


def test_save_checkpoint_is_atomic_when_writing_fails(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    save_checkpoint({"step": 1}, path)
    before = path.read_bytes()

    def disk_full(obj, f):
        f.write(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(CheckpointError, match=f"cannot write checkpoint {path}: No space left"):
        save_checkpoint({"step": 2}, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["last.pt"]


def test_save_checkpoint_unwritable_destination(tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(CheckpointError, match="cannot write checkpoint .*afile/last.pt"):
        save_checkpoint({"step": 1}, tmp_path / "afile" / "last.pt")

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(ckmod, "open", denied, raising=False)  # root ignores chmod, so simulate it
    with pytest.raises(CheckpointError, match=r"cannot write checkpoint .*ro/last.pt: the folder is not writable"):
        save_checkpoint({"step": 1}, tmp_path / "ro" / "last.pt")


# ---------------------------------------------------------------------------------------------- unsafe / broken files
@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
@pytest.mark.parametrize("writer", ["torch", "pickle"])
def test_malicious_pickle_is_refused_without_running_it(tmp_path, writer):
    marker = tmp_path / "PWNED"
    control = tmp_path / "control"
    pickle.loads(pickle.dumps(WritesMarker(str(control))))
    assert control.exists()  # the payload is live: an unsafe load would run it
    obj = {"state_dict": {"w": torch.ones(1)}, "extra": WritesMarker(str(marker))}
    path = tmp_path / "evil.pt"
    if writer == "torch":
        torch.save(obj, path)
    else:
        path.write_bytes(pickle.dumps(obj))
    with pytest.raises(CheckpointError, match="contains pickled Python objects; refusing to load it with "
                                              "weights_only=True.*re-save it as a plain state dict") as e:
        load_checkpoint(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)
    assert not marker.exists()


def test_truncated_empty_garbage_missing_and_folder(tmp_path):
    save_checkpoint(model_checkpoint(make_model(), make_cfg(), Charset(CHARS)), tmp_path / "ok.pt")
    data = (tmp_path / "ok.pt").read_bytes()
    (tmp_path / "half.pt").write_bytes(data[: len(data) // 2])
    (tmp_path / "empty.pt").write_bytes(b"")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint at all" * 10)
    for name in ("half.pt", "empty.pt", "junk.pt"):
        with pytest.raises(CheckpointError, match=f"{name} is not a readable checkpoint \\(truncated or corrupt\\?\\)"):
            load_checkpoint(tmp_path / name)
    with pytest.raises(CheckpointError, match="weights file .*nope.pt not found"):
        load_checkpoint(tmp_path / "nope.pt")
    with pytest.raises(CheckpointError, match="is a directory"):
        load_checkpoint(tmp_path)


def test_file_without_a_state_dict(tmp_path):
    torch.save({"epoch": 3, "name": "x"}, tmp_path / "meta.pt")
    torch.save([torch.ones(1)], tmp_path / "list.pt")
    with pytest.raises(CheckpointError, match="does not contain a model state dict \\(found: epoch, name\\)"):
        load_checkpoint(tmp_path / "meta.pt")
    with pytest.raises(CheckpointError, match="does not contain a model state dict"):
        load_checkpoint(tmp_path / "list.pt")


# ---------------------------------------------------------------------------------------------- mismatches
def _assert_untouched(model: nn.Module, before: dict) -> None:
    assert_same_state(model.state_dict(), before)


def test_other_charset_size_is_named_before_copying():
    state = make_model(seed=0).state_dict()
    target = make_model(seed=1, classes=95)
    before = {k: v.clone() for k, v in target.state_dict().items()}
    with pytest.raises(CheckpointError) as e:
        load_model_weights(nn.DataParallel(target), state)
    msg = str(e.value)
    assert f"head.weight: checkpoint [11, {2 * HIDDEN}] vs model [95, {2 * HIDDEN}]" in msg
    assert "charset differs: 10 vs 94 chars" in msg and "head.bias: checkpoint [11] vs model [95]" in msg
    _assert_untouched(target, before)


@pytest.mark.parametrize("variant", ["vgg", "resnet18"])
def test_other_variant_is_caught_before_copying(variant):
    state = make_model(seed=0).state_dict()
    target = build_model(variant, 1, 11)
    before = {k: v.clone() for k, v in target.state_dict().items()}
    expected = f"different variant, hidden size, in_channels or batch_norm than this {variant}"
    with pytest.raises(CheckpointError, match=expected):
        load_model_weights(target, state)
    _assert_untouched(target, before)


def test_vgg_vs_vgg_small_names_shapes_and_resnet_names_keys():
    state = make_model().state_dict()
    with pytest.raises(CheckpointError, match=r"cnn.0.weight: checkpoint \[32, 1, 3, 3\] vs model \[64, 1, 3, 3\]"):
        load_model_weights(build_model("vgg", 1, 11, HIDDEN), state)
    with pytest.raises(CheckpointError, match=r"missing keys \(\d+\): cnn.1.weight.*unexpected keys \(\d+\)"):
        load_model_weights(build_model("resnet18", 1, 11, HIDDEN), state)


def test_missing_and_unexpected_keys_are_listed():
    state = dict(make_model().state_dict())
    state.pop("head.bias")
    state["extra.weight"] = torch.ones(1)
    with pytest.raises(CheckpointError, match=r"missing keys \(1\): head.bias.*unexpected keys \(1\): extra.weight"):
        load_model_weights(make_model(), state)


def test_charset_size_argument_checks_the_head():
    with pytest.raises(CheckpointError, match="checkpoint has 11 classes \\(10 chars\\) but the charset has 36 chars"):
        load_model_weights(make_model(), make_model().state_dict(), charset_size=36)
    load_model_weights(make_model(seed=1), make_model().state_dict(), charset_size=10)


# ---------------------------------------------------------------------------------------------- rebuild / ship
def test_bare_state_dict_needs_config_and_charset(tmp_path):
    model = make_model()
    torch.save(model.state_dict(), tmp_path / "bare.pt")
    ckpt = load_checkpoint(tmp_path / "bare.pt")
    with pytest.raises(CheckpointError, match="bare.pt is a bare state dict .*pass --config/--charset"):
        build_from_checkpoint(ckpt)
    rebuilt, charset, _ = build_from_checkpoint(ckpt, config=make_cfg(), charset=Charset(CHARS))
    assert torch.equal(rebuilt(images()), model(images()))
    with pytest.raises(CheckpointError, match="charset differs: 10 vs 36 chars"):
        build_from_checkpoint(ckpt, config=make_cfg(), charset=Charset.from_spec("alnum36"))


def test_rebuild_uses_stored_batch_norm_and_ignores_retired_config_keys(tmp_path):
    cfg = make_cfg()
    cfg.model.batch_norm = False
    torch.manual_seed(0)
    model = build_model("vgg_small", 1, 11, HIDDEN, batch_norm=False).eval()
    obj = model_checkpoint(model, cfg, Charset(CHARS))
    obj["config"]["data"]["retired_option"] = 1  # written by an older/newer crnn
    save_checkpoint(obj, tmp_path / "nobn.pt")
    rebuilt, _, cfg2 = build_from_checkpoint(load_checkpoint(tmp_path / "nobn.pt"))
    assert cfg2.model.batch_norm is False and not any(isinstance(m, nn.BatchNorm2d) for m in rebuilt.modules())
    assert torch.equal(rebuilt(images()), model(images()))
    with pytest.raises(CheckpointError, match=r"missing keys \(\d+\): cnn.7.weight.*batch_norm"):
        load_model_weights(make_model(), model.state_dict())


def test_weights_only_half_loads_into_float32_model(tmp_path):
    model = make_model()
    raw = _training_checkpoint(model)
    shipped = weights_only_checkpoint(raw, half=True)
    assert "optimizer" in raw and raw["kind"] == "training"  # the input is not modified
    assert not set(shipped) & {"optimizer", "scheduler", "scaler", "rng"} and shipped["kind"] == "weights"
    assert shipped["model"]["head.weight"].dtype == torch.float16
    assert shipped["model"]["cnn.7.num_batches_tracked"].dtype == torch.int64
    save_checkpoint(shipped, tmp_path / "w16.pt")
    rebuilt, _, _ = build_from_checkpoint(load_checkpoint(tmp_path / "w16.pt"))
    assert all(p.dtype == torch.float32 for p in rebuilt.parameters())
    rounded = make_model(seed=1)
    rounded.load_state_dict({k: v.half().float() if v.is_floating_point() else v
                             for k, v in model.state_dict().items()})
    assert torch.equal(rebuilt(images()), rounded(images()))
    assert not torch.equal(rebuilt(images()), model(images()))  # fp16 really rounded something
