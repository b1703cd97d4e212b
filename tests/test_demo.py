"""scripts/demo.sh's python steps (scripts/demo_heldout.py) and its recipe, configs/demo.yaml."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import torch
from PIL import Image

from tests.conftest import REPO, make_lmdb


def _run_heldout(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "demo_heldout.py"), *args], input=stdin,
                          capture_output=True, text=True, cwd=REPO, timeout=120)


def test_demo_report_prints_the_demo_line(tmp_path):
    # the keys crnn-eval --json writes (tests/test_evaluate_cli.py checks that set)
    summary = {"weights": "w.pt", "variant": "vgg_small", "step": 10, "num_classes": 11, "protocol": "exact",
               "protocol_requested": "exact", "cer_first": True, "warnings": [],
               "decoder": "greedy", "processes": 1, "device": "cpu", "amp": "off",
               "datasets": [{"path": "h.lmdb", "samples": 200, "word_acc": 0.915, "cer": 0.02,
                             "ned_similarity": 0.98, "ned": 0.98, "seconds": 1.0, "images_per_s": 200.0,
                             "undecodable_images": 0, "removed_share": 0.0,
                             "worst": [{"label": "123", "pred": "12", "distance": 1}]}],
               "overall": {"path": "overall", "samples": 200, "word_acc": 0.915, "cer": 0.02,
                           "ned_similarity": 0.98, "ned": 0.98, "seconds": 1.0, "images_per_s": 200.0}}
    (tmp_path / "e.json").write_text(json.dumps(summary), encoding="utf-8")
    res = _run_heldout("report", str(tmp_path / "e.json"))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[-1] == "demo: the model trained here reads 183 of 200 held-out images (91.5%)"
    assert any(line.startswith("h.lmdb") for line in lines) and "'123'" in res.stdout
    res = _run_heldout("report", str(tmp_path / "e.json"), "--before")
    assert res.stdout == "before training, the starting point reads 183 of 200 held-out images (91.5%)\n"
    res = _run_heldout("report", str(tmp_path / "missing.json"))
    assert res.returncode == 2 and res.stderr.startswith("demo_heldout: error:") and "Traceback" not in res.stderr


def test_demo_export_and_compare(tmp_path):
    lmdb = make_lmdb(tmp_path / "h.lmdb", ["123", "4567", "89"])
    out = tmp_path / "png"
    res = _run_heldout("export", str(lmdb), str(out), "--num", "2")
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in out.iterdir()) == ["heldout_0.png", "heldout_1.png", "truth.tsv"]
    assert Image.open(out / "heldout_1.png").height == 32
    preds = [{"path": str(out / "heldout_0.png"), "text": "123", "confidence": 0.9},
             {"path": str(out / "heldout_1.png"), "text": "457", "confidence": 0.5}]
    res = _run_heldout("compare", str(out), stdin="\n".join(json.dumps(p) for p in preds) + "\n")
    assert res.returncode == 0, res.stderr
    rows = [line.split() for line in res.stdout.splitlines()[1:]]
    assert rows == [["heldout_0.png", "123", "123", "0.90", "ok"], ["heldout_1.png", "4567", "457", "0.50", "WRONG"]]


def test_demo_trains_on_what_demo_sh_renders_and_never_on_the_held_out_set():
    from crnn.config import load_config

    cfg = load_config(str(REPO / "configs" / "demo.yaml"), [])
    made = re.findall(r"^synth (\w+) (\d+) ", (REPO / "scripts" / "demo.sh").read_text(encoding="utf-8"), re.M)
    assert sorted(name for name, _ in made) == ["heldout", "train", "val"]
    assert len({seed for _, seed in made}) == 3  # three different seeds: three disjoint sets of images
    assert [d["path"] for d in cfg.data.train] == ["data/demo/train.lmdb"]
    assert cfg.data.val == ["data/demo/val.lmdb"]
    assert cfg.model.charset == "digits" and cfg.train.protocol == "exact"


def test_init_keeps_every_layer_but_the_output_layer(tmp_path):
    """A model for another alphabet: the shipped weights where the shapes fit, a fresh head that reads nothing yet."""
    from crnn.engine.checkpoint import load_checkpoint

    out = tmp_path / "init.pt"
    res = _run_heldout("init", str(REPO / "weights" / "crnn_vgg_small.pt"), "--charset", "digits", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().endswith("fresh for 11 classes: head.bias, head.weight")
    new, old = load_checkpoint(out), load_checkpoint(REPO / "weights" / "crnn_vgg_small.pt")
    assert new.charset["chars"] == "0123456789" and new.config["model"]["charset"] == "digits"
    assert set(new.model_state) == set(old.model_state)
    for k, v in new.model_state.items():
        if k.startswith("head."):
            assert v.shape[0] == 11
            assert not torch.allclose(v, old.model_state[k][:11].float())  # not the shipped model's first rows
        else:
            assert torch.equal(v, old.model_state[k].float()), k


def test_the_demo_ends_saying_how_to_reach_the_commands(tmp_path):
    """Its last lines, run as they are, tell the user to activate .venv and name a command that reads a shipped
    sample (the README's first command after the set-up)."""
    text = (REPO / "scripts" / "demo.sh").read_text(encoding="utf-8")
    tail = text[text.index('echo "demo finished'):]
    res = subprocess.run(["bash", "-c", "START=0; SECONDS=5\n" + tail], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    last = res.stdout.splitlines()[-1]
    assert "'source .venv/bin/activate'" in last and "'crnn-predict weights/samples/synth_2.png'" in last
    assert (REPO / "weights" / "samples" / "synth_2.png").is_file()
