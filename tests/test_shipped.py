"""Guards the shipped model files: the default (en) and the former default (en_alnum36) load with the product's
loader and read clean rendered words - the default as printed (case and punctuation), the former one folded to
lower-case 0-9a-z."""
from __future__ import annotations

import io
import subprocess
import sys

import pytest
from PIL import Image

from crnn.engine.checkpoint import load_checkpoint
from crnn.infer import WEIGHTS_BY_NAME, Recognizer, default_weights, resolve_weights
from tests.conftest import REPO, render_png, shared_dataset

WORDS = ["hello", "world", "street", "coffee", "market", "2024", "open", "london"]
# as users write them: what the default must read as printed and the former default can only fold
CASED = [w.upper() if i % 2 else w for i, w in enumerate(WORDS)] + ["iPhone", "$4.99", "London", "USB-C"]


def _read(weights, words: list[str]) -> list[str]:
    rec = Recognizer.from_checkpoint(weights, device="cpu")
    return [text for text, _ in rec.predict_images([Image.open(io.BytesIO(render_png(w))).convert("RGB")
                                                    for w in words])]


@pytest.mark.parametrize("name", ["en", "en_alnum36"])
def test_shipped_file_is_small_plain_weights_only(name):
    path = resolve_weights(name)
    assert path.parent == REPO / "weights" and path.name == WEIGHTS_BY_NAME[name]
    assert path.stat().st_size < 20 * 2**20
    ck = load_checkpoint(path)
    assert ck.kind == "weights" and ck.source_prefix == ""
    assert ck.config is not None and ck.charset is not None
    assert not any(k in ck.raw for k in ("optimizer", "scheduler", "rng"))


def test_the_default_is_the_cased_english_model():
    assert default_weights() == resolve_weights("en") == REPO / "weights" / "crnn_en.pt"
    cfg = load_checkpoint(default_weights()).config  # the stored config, as a dict
    assert cfg["model"]["charset"] == "printable95" and cfg["data"]["keep_ratio"]
    assert resolve_weights("en_alnum36") == REPO / "weights" / "crnn_vgg_small.pt"
    cfg = load_checkpoint(resolve_weights("en_alnum36")).config
    assert cfg["model"]["charset"] == "alnum36" and not cfg["data"]["keep_ratio"]


def test_shipped_models_read_rendered_words():
    assert _read(default_weights(), CASED) == CASED  # case and punctuation as printed
    folded = ["".join(c for c in w.lower() if c.isalnum()) for w in CASED]
    assert _read("en_alnum36", CASED) == folded  # "iPhone" -> "iphone", "$4.99" -> "499"


def test_predict_cli_uses_shipped_model_by_default(tmp_path):
    img = tmp_path / "w.png"
    img.write_bytes(render_png("Coffee"))
    res = subprocess.run([sys.executable, "-m", "crnn.cli.predict", str(img)], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert res.returncode == 0, res.stderr
    path, text, conf = res.stdout.strip().split("\t")
    assert path == str(img) and text == "Coffee" and 0.0 < float(conf) <= 1.0


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
