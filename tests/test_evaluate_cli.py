"""crnn-eval: summary table and JSON, pooled overall counts, worst errors, errors, and 2-process torchrun = 1 process."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image, ImageDraw

from crnn.charset import Charset
from crnn.cli.evaluate import main
from crnn.config import Config
from crnn.data.lmdb_io import write_lmdb
from crnn.engine.checkpoint import model_checkpoint, save_checkpoint
from crnn.infer import Recognizer
from crnn.model import build_model
from tests.conftest import shared_dataset

IIIT5K = shared_dataset("iiit5k_train")  # None when the optional real crops are absent
SUMMARY_KEYS = {"weights", "variant", "step", "num_classes", "protocol", "protocol_requested", "cer_first", "warnings",
                "decoder", "processes", "device", "amp", "datasets", "overall"}
ROW_KEYS = {"path", "samples", "word_acc", "cer", "ned_similarity", "ned", "seconds", "images_per_s",
            "removed_share"}


def png(text: str, width: int) -> bytes:
    img = Image.new("L", (width, 24), 255)
    ImageDraw.Draw(img).text((2, 4), text, fill=0)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> Path:
    """A tiny untrained vgg_small checkpoint (hidden 16, fixed width 48)."""
    cfg = Config()
    cfg.model.hidden, cfg.data.width = 16, 48
    cs = Charset.from_spec("alnum36")
    torch.manual_seed(0)
    model = build_model("vgg_small", 1, cs.num_classes, 16).eval()
    path = tmp_path_factory.mktemp("w") / "tiny.pt"
    save_checkpoint(model_checkpoint(model, cfg, cs, step=3), path)
    return path


@pytest.fixture(scope="module")
def images() -> list[bytes]:
    return [png(w, 30 + 9 * i) for i, w in enumerate("apple tree 42 river stone cloud moon x7 lamp road bird".split())]


def own_predictions(weights: Path, images: list[bytes]) -> list[str]:
    rec = Recognizer.from_checkpoint(weights, device="cpu")
    return [t for t, _ in rec.predict_images([Image.open(io.BytesIO(b)) for b in images])]


@pytest.fixture(scope="module")
def datasets(tmp_path_factory, weights, images) -> dict[str, Path]:
    """'right': labelled with the model's own predictions (all correct); 'wrong': prediction + 'q' (distance 1)."""
    d = tmp_path_factory.mktemp("lmdb")
    preds = own_predictions(weights, images)
    write_lmdb(zip(images, preds), d / "right.lmdb")
    write_lmdb(zip(images[:7], [p + "q" for p in preds[:7]]), d / "wrong.lmdb")
    return {"right": d / "right.lmdb", "wrong": d / "wrong.lmdb", "preds": preds}


def run_json(argv: list[str], capsys) -> dict:
    rc = main([*argv, "--json", "--workers", "0"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)


def test_json_summary_pools_counts_over_datasets(weights, datasets, capsys):
    s = run_json(["--weights", str(weights), "--data", str(datasets["right"]), "--data", str(datasets["wrong"]),
                  "--protocol", "exact", "--worst", "3", "--batch-size", "4"], capsys)
    assert set(s) == SUMMARY_KEYS and s["processes"] == 1 and s["step"] == 3 and s["num_classes"] == 37
    right, wrong = s["datasets"]
    assert set(right) == ROW_KEYS | {"undecodable_images", "worst"}
    assert (right["samples"], right["word_acc"], right["cer"], right["worst"]) == (11, 1.0, 0.0, [])
    assert (wrong["samples"], wrong["word_acc"]) == (7, 0.0)
    assert [e["distance"] for e in wrong["worst"]] == [1, 1, 1]
    assert [(e["label"], e["pred"]) for e in wrong["worst"]] == [(p + "q", p) for p in datasets["preds"][:3]]
    overall = s["overall"]
    assert overall["samples"] == 18
    assert overall["word_acc"] == pytest.approx(11 / 18)  # pooled, not the mean of 1.0 and 0.0
    label_chars = sum(len(p) for p in datasets["preds"]) + sum(len(p) + 1 for p in datasets["preds"][:7])
    assert overall["cer"] == pytest.approx(7 / label_chars)
    assert "sum of correct / sum of samples" in overall["pooling"]


def test_text_report_on_real_crops(weights, tmp_path, capsys):
    """iiit5k_train (first 40 lines, images linked in place): the table, the pooled row and the worst errors."""
    if IIIT5K is None:
        pytest.skip("the shared iiit5k_train crops are not available")
    (tmp_path / "IMG").symlink_to(IIIT5K / "IMG")
    lines = (IIIT5K / "gt.txt").read_text(encoding="utf-8").splitlines()[:40]
    (tmp_path / "gt.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    rc = main(["--weights", str(weights), "--data", str(tmp_path), "--worst", "2", "--workers", "0"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "protocol alnum-insensitive, decoder greedy, 1 process(es) on cpu" in out
    header = next(line for line in out.splitlines() if line.startswith("dataset"))
    assert header.split() == ["dataset", "samples", "word_acc", "CER", "1-NED", "img/s"]
    row = next(line for line in out.splitlines() if line.startswith(str(tmp_path)))
    pooled = next(line for line in out.splitlines() if line.startswith("overall (pooled"))
    assert row.split()[1] == "40" and pooled.split()[-5] == "40"
    assert f"worst 2 errors in {tmp_path}" in out


def test_word_prior_is_named_in_the_summary_and_the_table(weights, datasets, tmp_path, capsys):
    """--words: the word decoder (greedy where the reading is a listed word: all are here), its list named in the
    JSON and in the table, so that its figures are not taken for lexicon-free ones."""
    listed = [p for p in datasets["preds"] if p.isalpha()]
    words = tmp_path / "words.txt"
    words.write_text("\n".join(listed + ["zebra"]) + "\n")
    s = run_json(["--weights", str(weights), "--data", str(datasets["right"]), "--words", str(words)], capsys)
    assert s["decoder"] == "word"
    assert s["words"] == {"path": str(words), "entries": len(set(listed)) + 1, "counts": False}
    assert s["datasets"][0]["word_acc"] == 1.0
    assert main(["--weights", str(weights), "--data", str(datasets["right"]), "--words", str(words),
                 "--workers", "0"]) == 0
    out = capsys.readouterr().out
    assert "decoder word, 1 process(es)" in out
    assert f"(decoder word: a word prior, {len(set(listed)) + 1} words of {words}; not lexicon-free figures)" in out
    greedy = run_json(["--weights", str(weights), "--data", str(datasets["right"])], capsys)
    assert "words" not in greedy and greedy["decoder"] == "greedy"
    counted = tmp_path / "counts.tsv"
    counted.write_text("".join(f"{w}\t{i + 1}\n" for i, w in enumerate(dict.fromkeys(listed + ["zebra"]))))
    s = run_json(["--weights", str(weights), "--data", str(datasets["right"]), "--words", str(counted)], capsys)
    assert s["words"] == {"path": str(counted), "entries": len(set(listed)) + 1, "counts": True}
    assert main(["--weights", str(weights), "--data", str(datasets["right"]), "--words", str(counted),
                 "--workers", "0"]) == 0
    assert f"a word prior, {len(set(listed)) + 1} words with counts of {counted};" in capsys.readouterr().out


def test_undecodable_images_are_counted_and_reported(weights, images, tmp_path, capsys):
    path = tmp_path / "mixed.lmdb"
    write_lmdb([(images[0], "a"), (b"not an image", "b"), (images[1], "c")], path)
    s = run_json(["--weights", str(weights), "--data", str(path)], capsys)
    assert (s["datasets"][0]["samples"], s["datasets"][0]["undecodable_images"]) == (2, 1)
    assert main(["--weights", str(weights), "--data", str(path), "--workers", "0"]) == 0
    assert f"{path}: 1 undecodable image(s) were skipped" in capsys.readouterr().out


def test_bad_inputs_exit_2_with_one_line(weights, tmp_path, capsys):
    torch.save({"x": 1}, tmp_path / "foreign.pt")
    cases = {
        "no such file or directory": ["--weights", str(weights), "--data", str(tmp_path / "nope")],
        "no LMDB (data.mdb) or gt.txt": ["--weights", str(weights), "--data", str(tmp_path)],
        "not found": ["--weights", str(tmp_path / "nope.pt"), "--data", str(tmp_path)],
        "does not contain a model state dict": ["--weights", str(tmp_path / "foreign.pt"), "--data", str(tmp_path)],
        "--threads must be at least 1, got 0": ["--weights", str(weights), "--threads", "0", "--data", str(tmp_path)],
        "nope2.pt": ["--weights", str(weights), "--weights", str(tmp_path / "nope2.pt"), "--data", str(tmp_path)],
        f"cannot read the word list {tmp_path / 'nope.txt'}": ["--weights", str(weights), "--words",
                                                                str(tmp_path / "nope.txt"), "--data", str(tmp_path)],
        "--decoder word needs --words FILE": ["--weights", str(weights), "--decoder", "word", "--data", str(tmp_path)],
        "--words is read by --decoder word only, not --decoder beam": [
            "--weights", str(weights), "--decoder", "beam", "--words", "x.txt", "--data", str(tmp_path)],
    }
    for expected, argv in cases.items():
        rc = main(argv)
        out, err = capsys.readouterr()
        assert rc == 2 and out == "", expected
        assert err.startswith("crnn-eval: error: ") and expected in err and len(err.splitlines()) == 1, err


def test_against_takes_only_the_peers_it_knows(weights, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["--weights", str(weights), "--against", "tesseract", "--data", str(tmp_path)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "argument --against: invalid choice: 'tesseract'" in err and all(
        p in err for p in ("ppocr-v4", "ppocr-v6", "easyocr"))


@pytest.mark.slow
def test_two_process_torchrun_gives_the_same_counts(weights, images, tmp_path, capsys):
    """11 samples over 2 gloo ranks (uneven shards 5 + 6): the same pooled metrics and worst errors as 1 process."""
    path = tmp_path / "mix.lmdb"
    labels = ["apple", "tree", "42", "river", "stone", "cloud", "moon", "x7", "lamp", "road", "bird"]
    write_lmdb(zip(images, labels), path)
    argv = ["--weights", str(weights), "--data", str(path), "--batch-size", "2", "--worst", "4", "--device", "cpu"]
    one = run_json(argv, capsys)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           "-m", "crnn.cli.evaluate", *argv, "--json", "--workers", "0"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    two = json.loads(proc.stdout.strip().splitlines()[-1])  # only rank 0 prints
    assert len(proc.stdout.strip().splitlines()) == 1
    assert two["processes"] == 2 and one["processes"] == 1
    for key in ("samples", "word_acc", "cer", "ned_similarity"):
        assert two["overall"][key] == pytest.approx(one["overall"][key], abs=1e-12), key
    assert two["datasets"][0]["worst"] == one["datasets"][0]["worst"]


@pytest.fixture(scope="module")
def blank_zh(tmp_path_factory, images):
    """An all-blank model over a GB18030 alphabet file with a 'blank' first line, and a Chinese-labelled LMDB."""
    d = tmp_path_factory.mktemp("zh")
    alphabet = d / "char_std.txt"
    alphabet.write_bytes("blank\n中\n文\n识\n别\n模\n型\n1\n2\n3\n".encode("gb18030"))
    cfg = Config()
    cfg.model.hidden, cfg.data.width, cfg.model.charset = 16, 48, str(alphabet)
    cs = Charset.from_config(cfg.model)
    model = build_model("vgg_small", 1, cs.num_classes, 16).eval()
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.zero_()
        model.head.bias[0] = 10.0  # blank wins at every time step: the model outputs nothing
    save_checkpoint(model_checkpoint(model, cfg, cs, step=1), d / "blank.pt")
    write_lmdb(zip(images[:4], ["中文识别", "模型", "识别123", "文"]), d / "zh.lmdb")
    return d / "blank.pt", d / "zh.lmdb"


def test_chinese_labels_get_honest_scores_by_default(blank_zh, capsys):
    weights, data = blank_zh
    s = run_json(["--weights", str(weights), "--data", str(data)], capsys)
    assert (s["protocol"], s["protocol_requested"], s["cer_first"], s["warnings"]) == ("exact", "auto", True, [])
    assert (s["overall"]["word_acc"], s["overall"]["cer"], s["overall"]["removed_share"]) == (0.0, 1.0, 0.0)
    assert main(["--weights", str(weights), "--data", str(data), "--workers", "0"]) == 0
    out = capsys.readouterr().out
    assert "metric protocol: exact (auto: the charset is not alnum36)" in out
    header = next(line for line in out.splitlines() if line.startswith("dataset"))
    assert header.split() == ["dataset", "samples", "CER", "word_acc", "1-NED", "img/s"]


def test_a_protocol_that_deletes_chinese_warns_loudly(blank_zh, capsys):
    weights, data = blank_zh
    rc = main(["--weights", str(weights), "--data", str(data), "--protocol", "alnum-insensitive", "--json",
               "--workers", "0"])
    out, err = capsys.readouterr()
    assert rc == 0
    s = json.loads(out)
    assert s["datasets"][0]["removed_share"] == pytest.approx(9 / 12)  # only "123" survives
    assert len(s["warnings"]) == 1 and "removed 75.0% of the label characters" in s["warnings"][0]
    assert "crnn-eval: WARNING: protocol 'alnum-insensitive' removed 75.0%" in err
