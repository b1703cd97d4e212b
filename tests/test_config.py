from pathlib import Path

import pytest

from crnn.config import Config, ConfigError, config_from_dict, config_to_dict, load_config

# Every recipe the repository ships must load (a new one is covered without being listed here).
REPO_CONFIGS = sorted(str(p.relative_to(Path(__file__).resolve().parent.parent))
                      for p in (Path(__file__).resolve().parent.parent / "configs").glob("*.yaml"))


def test_repo_configs_found():
    assert {"configs/smoke.yaml", "configs/zh_lines.yaml"} <= set(REPO_CONFIGS)


@pytest.mark.parametrize("name", REPO_CONFIGS)
def test_repo_configs_load(name):
    from tests.conftest import REPO

    cfg = load_config(REPO / name)
    assert isinstance(cfg, Config)


def test_overrides_parse_types():
    cfg = load_config(None, ["train.lr=3e-4", "data.batch_size=64", "train.amp=bf16", "model.charset=0123",
                             "data.train=[{path: a, ratio: 0.5}, {path: b, ratio: 0.5}]", "train.device_ids=[0,1]",
                             "data.keep_ratio=true"])
    assert cfg.train.lr == pytest.approx(3e-4) and isinstance(cfg.train.lr, float)
    assert cfg.data.batch_size == 64
    assert cfg.model.charset == "0123"
    assert cfg.data.train[1] == {"path": "b", "ratio": 0.5}
    assert cfg.train.device_ids == [0, 1]
    assert cfg.data.keep_ratio is True


@pytest.mark.parametrize("override,msg", [
    ("train.lrr=1", "unknown config key train.lrr"),
    ("optim.lr=1", "unknown config key 'optim.lr'"),
    ("data.batch_size=abc", "data.batch_size: expected an integer"),
    ("data.batch_size=1.5", "data.batch_size: expected an integer"),
    ("data.keep_ratio=maybe", "data.keep_ratio: expected true/false"),
    ("train.amp=fp8", "train.amp: 'fp8' is not one of"),
    ("train.ddp_comm=int8", "train.ddp_comm: 'int8' is not one of auto, fp32, bf16, fp16"),
    ("train.ddp_bucket_mb=0", "train.ddp_bucket_mb: must be positive"),
    ("train.lr", "must look like section.key=value"),
    ("data.batch_size=0", "data.batch_size: must be positive"),
])
def test_bad_overrides_name_the_key(override, msg):
    with pytest.raises(ConfigError, match=msg.replace("[", r"\[").replace("(", r"\(")):
        load_config(None, [override])


def test_unknown_key_in_yaml_names_file_and_key(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("train:\n  stpes: 10\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: unknown config key train.stpes"):
        load_config(p)
    p.write_text("trian:\n  steps: 10\n")
    with pytest.raises(ConfigError, match="unknown config section 'trian'"):
        load_config(p)


def test_missing_file():
    with pytest.raises(ConfigError, match="not found"):
        load_config("nope.yaml")


def test_dict_roundtrip_is_plain_data():
    cfg = load_config(None, ["train.steps=7"])
    d = config_to_dict(cfg)
    assert config_from_dict(d) == cfg
    assert d["train"]["steps"] == 7


def test_print_config_cli(capsys):
    from crnn.cli.train import main

    assert main(["--print-config", "train.steps=3"]) == 0
    assert "steps: 3" in capsys.readouterr().out
    assert main(["train.nope=3"]) == 2
    assert "unknown config key train.nope" in capsys.readouterr().err


def test_bare_yaml_off_reads_as_the_off_choice(tmp_path):
    """YAML 1.1 turns `amp: off` into false; for a choice that has "off" that means "off", elsewhere it is an error."""
    p = tmp_path / "c.yaml"
    p.write_text("train:\n  amp: off\n")
    assert load_config(p).train.amp == "off"
    p.write_text("train:\n  optimizer: off\n")
    with pytest.raises(ConfigError, match="train.optimizer: expected a string, got False"):
        load_config(p)


def test_amp_and_ddp_comm_defaults_are_auto():
    t = Config().train
    assert (t.amp, t.ddp_comm, t.ddp_bucket_mb) == ("auto", "auto", 25.0)


@pytest.mark.parametrize("family, base, h48", [("zh", "shipped_zh_h32", "shipped_zh"),
                                                ("en", "shipped_en_h32", "shipped_en")])
def test_the_h48_recipes_are_the_32px_ones_at_48px_from_their_committed_starts(family, base, h48):
    """The 48 px recipes (issues 57 and 60, step 4: configs/shipped_zh.yaml and configs/shipped_en.yaml since each
    shipped) differ from the 32 px recipe they grew from only where the 48 px lever and their own run do, height and
    widths 1.5x; each starting file is committed and reads as its run trains."""
    from crnn.engine.checkpoint import load_checkpoint, stored_config
    from tests.conftest import REPO

    shipped, cand = (config_to_dict(load_config(REPO / "configs" / f"{n}.yaml")) for n in (base, h48))
    changed = {(sec, k) for sec in shipped for k in shipped[sec] if shipped[sec][k] != cand[sec][k]}
    run = {"zh": {"val_every"}, "en": {"warmup_steps"}}[family]
    # a 48 px English word has 1.5x the time steps per letter already: read at 1.1x, not the 32 px file's 1.2x
    read = {"zh": set(), "en": {"read_width_scale"}}[family]
    assert changed == {("data", k) for k in {"height", "width", "max_width", "min_width"} | read} | {
        ("train", k) for k in {"output_dir", "init_weights", "lr", "steps"} | run}
    if read:
        assert (shipped["data"]["read_width_scale"], cand["data"]["read_width_scale"]) == (1.2, 1.1)
    for key in ("height", "width", "max_width", "min_width"):
        assert cand["data"][key] == 1.5 * shipped["data"][key], key
    start = load_checkpoint(REPO / cand["train"]["init_weights"])
    stored = config_to_dict(stored_config(start))
    assert start.variant == cand["model"]["variant"] and stored["model"]["charset"] == cand["model"]["charset"]
    for key in ("height", "width", "max_width", "min_width", "width_step", "read_width_scale", "keep_ratio"):
        assert stored["data"][key] == cand["data"][key], key
