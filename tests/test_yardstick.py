"""The yardstick harness (crnn/yardstick) and crnn-eval --against / a second --weights: interleaved timing, a reader
that raises, a fake peer that reads the labels, the missing-extra message, and the comparison in the JSON, the table
and the report. Tiny models and crops made in tmp_path; no peer needs to be installed."""
from __future__ import annotations

import importlib.util
import json
import shutil
import warnings

import pytest
import torch

from crnn.charset import Charset
from crnn.cli.evaluate import main as eval_main
from crnn.config import Config
from crnn.data.datasets import open_dataset
from crnn.engine.checkpoint import model_checkpoint, save_checkpoint
from crnn.model import build_model
from crnn.yardstick import readers as R
from crnn.yardstick import run as Y
from tests.conftest import word_folder

WORDS = ["apple", "tree", "moon", "river", "42", "sky"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """Two untrained tiny alnum36 models (different seeds) and a folder of six rendered words."""
    d = tmp_path_factory.mktemp("yard")
    cfg = Config()
    cfg.model.hidden, cfg.data.width = 16, 48
    cs = Charset.from_spec("alnum36")
    for seed in (0, 1):
        torch.manual_seed(seed)
        save_checkpoint(model_checkpoint(build_model("vgg_small", 1, cs.num_classes, 16).eval(), cfg, cs, step=1),
                        d / f"m{seed}.pt")
    return {"a": d / "m0.pt", "b": d / "m1.pt", "words": word_folder(d, WORDS)}


def truth_reader(folder, fail_on: str = "", name: str = "truth") -> R.Reader:
    """A fake peer that reads every crop of ``folder`` as its label (and raises on the crop labelled ``fail_on``)."""
    ds = open_dataset(str(folder), charset=None)
    by_pixels = {ds[i][0].tobytes(): ds[i][1] for i in range(len(ds))}

    def read(image) -> str:
        label = by_pixels[image.tobytes()]
        if label == fail_on:
            raise RuntimeError("cannot read this one")
        return label
    return R.Reader(name, read, "the labels")


def test_timing_alternates_the_order_and_counts_every_items_of_every_reader():
    calls = []
    readers = {n: (lambda items, n=n: calls.append((n, len(items)))) for n in ("ours", "peer", "other")}
    sample = Y.speed_sample({"a": [f"a{i}" for i in range(6)], "b": [f"b{i}" for i in range(4)]}, 5)
    assert sample == ["a0", "a2", "a4", "b0", "b2"]  # evenly from all sets
    rounds = Y.time_rounds(readers, sample, 3)
    assert [n for n, _ in calls] == ["ours", "peer", "other", "other", "peer", "ours", "ours", "peer", "other"]
    assert all(k == len(sample) for _, k in calls) and all(len(r) == 3 for r in rounds.values())
    assert Y.median_ratio([300.0, 200.0, 400.0], [150.0, 50.0, 100.0]) == 4.0  # ratios 2, 4, 4 (medians': 3)
    seen = []
    reader = R.Reader("one", lambda x: seen.append(x) or x)
    reader.timed()(sample)
    assert seen == sample  # one item per call, each once


def test_a_reader_that_raises_is_reported_with_its_crop_and_counts_wrong():
    def read(path: str) -> str:
        if path == "b.png":
            raise ValueError("bad\nimage")
        return path[0]

    col = Y.read_sets(R.Reader("flaky", read), {"s": ["a.png", "b.png", "c.png"]}, warmup=0)
    assert col.readings["s"] == ["a", "", "c"] and col.failures["s"] == [(1, "ValueError: bad image")]
    assert Y.failures(col, {"s": ["a.png", "b.png", "c.png"]}) == {"s": [{"item": "b.png",
                                                                         "error": "ValueError: bad image"}]}
    assert Y.score(col.readings["s"], ["a", "b", "c"], "exact")["word_acc"] == pytest.approx(2 / 3)


def test_a_fake_peer_that_returns_the_labels_scores_100_percent(setup):
    ds = open_dataset(str(setup["words"]), charset=None)
    images, labels = [ds[i][0] for i in range(len(ds))], [ds[i][1] for i in range(len(ds))]
    col = Y.read_sets(truth_reader(setup["words"]), {"w": images})
    m = Y.score(col.readings["w"], labels, "exact")
    assert (m["word_acc"], m["cer"], m["ned_similarity"], m["samples"]) == (1.0, 0.0, 1.0, len(WORDS))
    assert col.items == len(WORDS) and not col.failures["w"]


def test_tall_crops_are_warned_about_once_with_the_count_of_the_crops_read_not_the_warm_up(setup):
    """The warm-up reads the first crops again: its reads of tall crops are neither warned about nor counted."""
    from PIL import Image

    tall, wide = Image.new("L", (20, 80), 255), Image.new("L", (100, 32), 255)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        col = Y.read_sets(R.ours(str(setup["a"])), {"s": [tall, wide, tall]})
    assert col.items == 3
    assert [str(w.message).split(" (vertical text?)")[0] for w in caught] == [
        "2 of 3 images are at least 2x taller than wide"]


def test_a_missing_peer_names_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name.startswith(("rapidocr", "easyocr"))
                        else real(name, *a))
    for name, module in (("ppocr-v4", "rapidocr_onnxruntime"), ("ppocr-v6", "rapidocr"), ("easyocr", "easyocr")):
        with pytest.raises(R.PeerMissing) as e:
            R.peer(name)
        assert f"{module}" in str(e.value) and "pip install 'crnn[peers]'" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ValueError, match="unknown peer 'tesseract': choose from ppocr-v4, ppocr-v6, easyocr"):
        R.peer("tesseract")


def test_crnn_eval_against_a_peer_and_a_second_model(setup, tmp_path, monkeypatch, capsys):
    """The fake peer (one crop raising) and a second checkpoint are columns beside the model: in the JSON, the table
    and the report; the second model read one crop per call scores what crnn-eval gives it on its own."""
    monkeypatch.setitem(R.PEERS, "ppocr-v4", lambda threads: truth_reader(setup["words"], "moon", R.PPOCR4))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name.startswith("easyocr")
                        else real(name, *a))
    base = ["--data", str(setup["words"]), "--workers", "0", "--protocol", "exact"]
    assert eval_main(["--weights", str(setup["b"]), *base, "--json"]) == 0
    alone = json.loads(capsys.readouterr().out)["datasets"][0]
    out = tmp_path / "rep"
    argv = ["--weights", str(setup["a"]), "--weights", str(setup["b"]), "--against", "ppocr-v4", "--against",
            "easyocr", *base, "--report", str(out)]
    assert eval_main([*argv, "--json"]) == 0
    doc, err = capsys.readouterr()
    got = {a["name"]: a for a in json.loads(doc)["against"]}
    assert list(got) == [str(setup["b"]), R.PPOCR4, "easyocr"]
    assert "easyocr_en_models" in got["easyocr"]["skipped"] or "easyocr" in got["easyocr"]["skipped"]
    assert f"crnn-eval: skipped easyocr: {R.EASYOCR}: easyocr" in err and "[peers]" in err
    second = got[str(setup["b"])]["datasets"][0]
    assert (second["word_acc"], second["cer"], second["samples"]) == (alone["word_acc"], alone["cer"], len(WORDS))
    peer = got[R.PPOCR4]["datasets"][0]
    assert peer["word_acc"] == pytest.approx(5 / 6) and peer["failed"] == [
        {"index": WORDS.index("moon"), "error": "RuntimeError: cannot read this one"}]
    html = (out / "index.html").read_text(encoding="utf-8")
    assert "<h3>Compared with other readers</h3>" in html and f"<th>{R.PPOCR4}</th>" in html
    assert html.count("<figure class='err cmp'>") >= 1  # the peer reads right what the untrained models do not
    first = html.index("<figure class='err cmp'>")
    assert "class='ok'" in html[first:first + 3000] and "class='bad'" in html[first:first + 3000]
    assert eval_main(argv) == 0  # the table: one line per system under each dataset
    table = capsys.readouterr().out
    assert f"beside {setup['a']} on the same images (protocol exact):" in table
    assert f"{R.PPOCR4} could not read image #{WORDS.index('moon')}" in table and "easyocr: not run:" in table


def test_two_copies_of_one_model_agree_on_every_crop(setup, tmp_path, capsys):
    """A second --weights that is the same network: read one per call it gives crnn-eval's batched readings."""
    twin = tmp_path / "twin.pt"
    shutil.copy(setup["a"], twin)
    assert eval_main(["--weights", str(setup["a"]), "--weights", str(twin), "--data", str(setup["words"]),
                      "--workers", "0", "--report", str(tmp_path / "r"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    a, b = doc["datasets"][0], doc["against"][0]["datasets"][0]
    assert (a["word_acc"], a["cer"], a["ned_similarity"]) == (b["word_acc"], b["cer"], b["ned_similarity"])
    assert "The readings differ on 0 crops" in (tmp_path / "r" / "index.html").read_text(encoding="utf-8")
