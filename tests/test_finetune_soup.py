"""scripts/finetune_soup.sh: the fine-tune recipe run with several seeds side by side, averaged and interpolated with
the start (README "Fine-tune on your own crops"). Real runs of a tiny model, two processes at once."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from crnn.charset import Charset
from crnn.config import Config
from crnn.engine.checkpoint import load_checkpoint, model_checkpoint, save_checkpoint
from crnn.engine.interpolate import interpolate_checkpoints, soup_checkpoints
from crnn.model import build_model
from tests.conftest import make_lmdb, random_words

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "finetune_soup.sh"
BASE = Charset.from_spec("alnum36")


def _soup(args: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "CRNN_BIN": str(Path(sys.executable).parent), **(env or {})}
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)


def test_two_seeds_are_trained_averaged_and_interpolated_with_the_start(tmp_path, words_lmdb):
    torch.manual_seed(0)
    init = tmp_path / "base.pt"
    save_checkpoint(model_checkpoint(build_model("vgg_small", 1, BASE.num_classes, 16), Config(), BASE), init)
    codes = make_lmdb(tmp_path / "codes.lmdb", [w.upper() + "-" + w[:2] for w in random_words(24, seed=5)])
    val = make_lmdb(tmp_path / "val.lmdb", [w.upper() + "-7" for w in random_words(8, seed=6)])
    out = tmp_path / "soup"
    overrides = [f"model.charset={BASE.chars}ABCDEFGHIJKLMNOPQRSTUVWXYZ-", f"data.train={codes}", f"data.val={val}",
                 f"train.init_weights={init}", "model.hidden=16", f"data.rehearsal={words_lmdb}",
                 "data.rehearsal_num=0", "train.base_val=[]", "data.batch_size=8", "data.num_workers=0",
                 "train.steps=3", "train.warmup_steps=0", "train.amp=off", "train.tensorboard=false",
                 "train.freeze_cnn_steps=0", "train.interpolate_base=0.5"]
    r = _soup([str(out), *overrides], {"CNN_ALPHA": "0.25"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"the model to read is {out / 'soup.pt'}" in r.stdout
    runs = [load_checkpoint(out / f"seed{s}" / "last.pt") for s in (0, 1)]
    assert [c.step for c in runs] == [3, 3] and [c.config["train"]["seed"] for c in runs] == [0, 1]
    key = "rnn2.weight_ih_l0"
    assert not torch.equal(runs[0].model_state[key], runs[1].model_state[key])  # two seeds, two runs
    got = load_checkpoint(out / "soup.pt")
    model = build_model("vgg_small", 1, runs[0].num_classes, 16)
    want = interpolate_checkpoints(load_checkpoint(init), soup_checkpoints(runs), model, 0.5, cnn_alpha=0.25)
    assert set(got.model_state) == set(want) and all(torch.equal(got.model_state[k], want[k]) for k in want)
    assert got.raw["interpolated"] == {"start": str(init), "alpha": 0.5, "cnn_alpha": 0.25}
    assert got.raw["soup"] == [str(out / f"seed{s}" / "last.pt") for s in (0, 1)]
    # run again: both runs resume their finished last.pt instead of training afresh
    r = _soup([str(out), *overrides], {"CNN_ALPHA": "0.25"})
    assert r.returncode == 0 and "resumed from" in (out / "seed1.log").read_text()


def test_bad_invocations_are_one_line_errors(tmp_path):
    r = _soup([])
    assert r.returncode == 2 and "bash scripts/finetune_soup.sh OUT" in r.stderr
    r = _soup([str(tmp_path / "x")], {"SEEDS": "0"})
    assert r.returncode == 2 and "SEEDS needs two seeds or more, got '0'" in r.stderr
    r = _soup([str(tmp_path / "x"), "train.init_weights="])
    assert r.returncode == 1 and r.stderr.startswith("finetune_soup: ") and "set train.init_weights" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "x").exists()
    r = _soup([str(tmp_path / "x")], {"CONFIG": str(tmp_path / "no_recipe.yaml")})  # CONFIG names the recipe
    assert r.returncode == 1 and r.stderr.startswith("finetune_soup: ") and "no_recipe.yaml" in r.stderr, r.stderr
    r = _soup([str(tmp_path / "x"), "train.init_weights="], {"CONFIG": str(REPO / "configs/finetune_alnum36.yaml")})
    assert r.returncode == 1 and "set train.init_weights" in r.stderr and not (tmp_path / "x").exists()
    # runs that fail (their data is missing): the script names the log and writes no soup
    init = tmp_path / "base.pt"
    save_checkpoint(model_checkpoint(build_model("vgg_small", 1, BASE.num_classes, 16), Config(), BASE), init)
    r = _soup([str(tmp_path / "y"), f"train.init_weights={init}", "model.hidden=16",
               f"data.train={tmp_path / 'missing.lmdb'}", f"data.val={tmp_path / 'missing.lmdb'}",
               "data.rehearsal=", "train.base_val=[]", "train.distill_base=0"])
    assert r.returncode == 1 and f"seed 0 failed; see {tmp_path / 'y' / 'seed0.log'}" in r.stderr, r.stderr
    assert "missing.lmdb" in r.stderr and not (tmp_path / "y" / "soup.pt").exists()
