"""train.extra_protocols: each validation scores the same readings under more protocols (no second forward pass),
logs them and writes curve rows ``SET@PROTOCOL`` whose figures are crnn-eval's under that protocol - in one process
and under DDP (the counts all-reduced with the rest); the default writes no extra row, the curve's columns are
unchanged, and plot_curve picks such a row."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from crnn.charset import Charset
from crnn.cli.evaluate import main as eval_main
from crnn.cli.train import main as train_main
from crnn.config import ConfigError, load_config
from crnn.data.loader import build_eval_loader
from crnn.engine.checkpoint import build_from_checkpoint, load_checkpoint
from crnn.engine.curve import COLUMNS, read_curve
from crnn.engine.evaluate import evaluate
from tests.conftest import REPO, word_folder

SHIPPED = REPO / "weights" / "crnn_vgg_small.pt"  # alnum36: reads these words, never their capitals
WORDS = ["Hello", "world", "OPEN", "Cafe", "road", "EXIT", "Blue", "green", "Sale", "street", "Park", "home"]
needs_shipped = pytest.mark.skipif(not SHIPPED.is_file(), reason="needs the shipped English model in weights/")


@pytest.fixture(scope="module")
def mixed_case(tmp_path_factory) -> Path:
    """A folder of rendered words, some capitalised (exact and alnum-insensitive accuracy differ)."""
    folder = tmp_path_factory.mktemp("mixed")
    return word_folder(folder, WORDS)


def _run(tmp_path: Path, words_lmdb: Path, val: Path, *extra: str) -> list[str]:
    """A tiny run from the shipped weights (lr so small that they read as before), validating at step 2."""
    return [f"data.train=[{{path: {words_lmdb}}}]", f"data.val=[{val}]", f"train.output_dir={tmp_path / 'run'}",
            "model.variant=vgg_small", "model.charset=alnum36", "model.unknown=drop", "data.width=100",
            "data.batch_size=8", "data.num_workers=0", "train.amp=off", "train.tensorboard=false",
            "train.show_predictions=0", "train.warmup_steps=0", "train.lr=1e-8", "train.steps=2", "train.val_every=2",
            "train.save_every=0", f"train.init_weights={SHIPPED}", "train.protocol=exact", *extra]


def _crnn_eval(weights: Path, data: Path, protocol: str, capsys) -> dict:
    capsys.readouterr()
    assert eval_main(["--weights", str(weights), "--data", str(data), "--protocol", protocol, "--json",
                      "--workers", "0"]) == 0
    return json.loads(capsys.readouterr().out)["datasets"][0]


def test_the_key_defaults_to_none_and_takes_only_protocols():
    assert load_config(None).train.extra_protocols == []
    cfg = load_config(None, ["train.extra_protocols=[alnum-insensitive, unicode]"])
    assert cfg.train.extra_protocols == ["alnum-insensitive", "unicode"]
    with pytest.raises(ConfigError, match="train.extra_protocols: 'auto' is not one of exact, alnum-insensitive"):
        load_config(None, ["train.extra_protocols=[auto]"])
    with pytest.raises(ConfigError, match="train.extra_protocols: expected a list"):
        load_config(None, ["train.extra_protocols=exact"])


@needs_shipped
def test_evaluate_scores_the_same_readings_under_each_extra_protocol(mixed_case):
    model, charset, cfg = build_from_checkpoint(load_checkpoint(SHIPPED))
    loader = build_eval_loader(str(mixed_case), height=32, width=100, keep_ratio=False, max_width=400, channels=1,
                               batch_size=5, num_workers=0)
    cpu = torch.device("cpu")
    both = evaluate(model, loader, charset, cpu, protocol="exact", max_examples=0,
                    extra_protocols=["alnum-insensitive", "exact", "unicode", "alnum-insensitive"])
    assert list(both.extra) == ["alnum-insensitive", "unicode"]  # the main protocol and repeats are left out
    for protocol in ("exact", "alnum-insensitive", "unicode"):
        alone = evaluate(model, loader, charset, cpu, protocol=protocol, max_examples=0).metrics
        assert (both.metrics if protocol == "exact" else both.extra[protocol]) == alone, protocol
    assert both.extra["alnum-insensitive"]["word_acc"] > both.metrics["word_acc"]  # capitals: right only when folded
    assert evaluate(model, loader, charset, cpu, protocol="exact", max_examples=0).extra == {}


@needs_shipped
def test_curve_rows_under_both_protocols_equal_crnn_eval(tmp_path, words_lmdb, mixed_case, capsys):
    assert train_main(_run(tmp_path, words_lmdb, mixed_case, "train.extra_protocols=[alnum-insensitive]")) == 0
    log = capsys.readouterr().err
    assert "validation also scores its readings under alnum-insensitive" in log
    assert f"val {mixed_case} @ 2 under alnum-insensitive: acc " in log
    rows = read_curve(tmp_path / "run" / "curve.tsv")
    assert list(rows[0]) == list(COLUMNS)
    assert [(r["step"], r["set"]) for r in rows] == [("2", str(mixed_case)), ("2", f"{mixed_case}@alnum-insensitive")]
    assert rows[0]["cpu_seconds"] == rows[1]["cpu_seconds"] and rows[0]["lines_seen"] == rows[1]["lines_seen"]
    for row, protocol in zip(rows, ("exact", "alnum-insensitive")):
        ev = _crnn_eval(tmp_path / "run" / "last.pt", mixed_case, protocol, capsys)
        assert row["word_acc"] == f"{ev['word_acc']:.5f}" and row["cer"] == f"{ev['cer']:.5f}", protocol
    assert float(rows[1]["word_acc"]) > float(rows[0]["word_acc"]) > 0


@needs_shipped
def test_by_default_no_extra_rows(tmp_path, words_lmdb, mixed_case):
    assert train_main(_run(tmp_path, words_lmdb, mixed_case)) == 0
    assert [r["set"] for r in read_curve(tmp_path / "run" / "curve.tsv")] == [str(mixed_case)]


def test_the_committed_chinese_curve_still_parses():
    curve = REPO / "weights" / "crnn_zh_lines_curve.tsv"
    if not curve.is_file():
        pytest.skip("no Chinese curve in this checkout")
    rows = read_curve(curve)
    assert rows and list(rows[0]) == list(COLUMNS) and not any("@" in r["set"] for r in rows)


@needs_shipped
@pytest.mark.slow
def test_ddp_extra_rows_count_every_rank(tmp_path, words_lmdb, mixed_case, capsys):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1", "--nproc_per_node=2",
           "-m", "crnn.cli.train", *_run(tmp_path, words_lmdb, mixed_case, "train.extra_protocols=[alnum-insensitive]")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = read_curve(tmp_path / "run" / "curve.tsv")
    assert [r["set"] for r in rows] == [str(mixed_case), f"{mixed_case}@alnum-insensitive"]
    for row, protocol in zip(rows, ("exact", "alnum-insensitive")):  # a rank's half alone would read otherwise
        ev = _crnn_eval(tmp_path / "run" / "last.pt", mixed_case, protocol, capsys)
        assert row["word_acc"] == f"{ev['word_acc']:.5f}" and row["cer"] == f"{ev['cer']:.5f}", protocol


def test_plot_curve_picks_a_set_holding_an_at(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("plot_curve", REPO / "scripts" / "plot_curve.py")
    plot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot)
    curve = tmp_path / "curve.tsv"
    curve.write_text("x\n")
    assert plot.split_spec(f"{curve}@data/en_dev@alnum-insensitive=36-class") == (
        str(curve), "data/en_dev@alnum-insensitive", "36-class")
    assert plot.split_spec(f"{curve}@heldout") == (str(curve), "heldout", "")
    assert plot.split_spec(f"{curve}") == (str(curve), None, "")
    assert plot.split_spec("gone.tsv@heldout=x") == ("gone.tsv", "heldout", "x")
