"""Guards the shipped model file: it loads with the product's loader and reads clean rendered words."""
from __future__ import annotations

import io
import subprocess
import sys

import pytest
from PIL import Image

from crnn.engine.checkpoint import load_checkpoint
from crnn.infer import Recognizer, default_weights
from tests.conftest import REPO, render_png, shared_dataset

WORDS = ["hello", "world", "street", "coffee", "market", "2024", "open", "london"]


def test_shipped_file_is_small_plain_weights_only():
    path = default_weights()
    assert path.parent == REPO / "weights"
    assert path.stat().st_size < 20 * 2**20
    ck = load_checkpoint(path)
    assert ck.kind == "weights" and ck.source_prefix == ""
    assert ck.config is not None and ck.charset is not None
    assert not any(k in ck.raw for k in ("optimizer", "scheduler", "rng"))


def test_shipped_model_reads_rendered_words():
    rec = Recognizer.from_checkpoint(default_weights(), device="cpu")
    images = [Image.open(io.BytesIO(render_png(w.upper() if i % 2 else w))).convert("RGB")
              for i, w in enumerate(WORDS)]
    preds = [text for text, _ in rec.predict_images(images)]
    assert preds == WORDS


def test_predict_cli_uses_shipped_model_by_default(tmp_path):
    img = tmp_path / "w.png"
    img.write_bytes(render_png("coffee"))
    res = subprocess.run([sys.executable, "-m", "crnn.cli.predict", str(img)], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert res.returncode == 0, res.stderr
    path, text, conf = res.stdout.strip().split("\t")
    assert path == str(img) and text == "coffee" and 0.0 < float(conf) <= 1.0


@pytest.mark.skipif(shared_dataset("iiit5k_train") is None, reason="needs the shared iiit5k_train crops")
def test_eval_cli_on_iiit5k_train_prints_summary():
    res = subprocess.run([sys.executable, "-m", "crnn.cli.evaluate", "--data",
                          str(shared_dataset("iiit5k_train")), "--protocol", "alnum-insensitive",
                          "--json"], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert res.returncode == 0, res.stderr
    import json

    summary = json.loads(res.stdout)
    assert summary["overall"]["samples"] == 2000
    assert summary["overall"]["word_acc"] > 0.5
