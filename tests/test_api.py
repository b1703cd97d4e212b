"""The public Python API (crnn.Recognizer / load_config / train / evaluate): same results and messages as the CLIs."""
from __future__ import annotations

import contextlib
import inspect
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import crnn
from crnn.cli.evaluate import build_parser as eval_parser
from crnn.cli.evaluate import main as eval_main
from crnn.cli.predict import main as predict_main
from crnn.cli.train import main as train_main
from crnn.config import ConfigError
from crnn.engine.checkpoint import CheckpointError
from crnn.infer import ImageReadError, InferenceError
from tests.conftest import REPO

SAMPLES = sorted((REPO / "weights" / "samples").glob("*.png"))
TINY = ["data.batch_size=8", "data.num_workers=0", "train.amp=off", "train.log_every=1", "train.warmup_steps=0",
        "train.tensorboard=false", "train.show_predictions=0"]


@pytest.fixture(scope="module")
def reader() -> crnn.Recognizer:
    """The shipped model, as Recognizer() loads it."""
    return crnn.Recognizer(device="cpu")


@pytest.fixture(scope="module")
def predicted() -> dict[str, tuple[str, float]]:
    """crnn-predict's answers for the sample images: path -> (text, confidence)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert predict_main(["--device", "cpu", "--format", "json", *map(str, SAMPLES)]) == 0
    rows = [json.loads(line) for line in buf.getvalue().splitlines()]
    return {r["path"]: (r["text"], r["confidence"]) for r in rows}


def _cli_error(main, argv: list[str], capsys) -> str:
    """The message a CLI prints after 'prog: error: '."""
    assert main(argv) != 0
    err = capsys.readouterr().err.strip().splitlines()[-1]
    return err.split(": error: ", 1)[1]


# ----------------------------------------------------------------------------- import and surface
def test_import_crnn_does_not_import_torch():
    code = ("import sys, crnn; assert 'torch' not in sys.modules, 'import crnn'; "
            "crnn.load_config; assert 'torch' not in sys.modules, 'load_config'; "
            "crnn.Recognizer; crnn.train; crnn.evaluate; print(sorted(crnn.__all__))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(sorted(["Recognizer", "Reading", "TrainSummary", "load_config", "train",
                                             "evaluate", "serve"]))


def test_import_crnn_makes_room_for_onednn_kernels_unless_told_otherwise():
    """A keep-ratio model builds a kernel per layer and width: import crnn raises oneDNN's cache from 1,024 to 16,384
    (benchmarks/kernel_cache.md), and leaves a value the environment gives."""
    code = "import os, crnn; print(os.environ['ONEDNN_PRIMITIVE_CACHE_CAPACITY'])"
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_PRIMITIVE_CACHE_CAPACITY"}
    for given, want in ((None, "16384"), ("2048", "2048")):
        extra = {} if given is None else {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": given}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                             env={**env, **extra, "PYTHONPATH": str(REPO)})
        assert out.returncode == 0 and out.stdout.strip() == want, out.stderr


def test_public_names_are_exactly_all_and_documented():
    public = {n for n in dir(crnn) if not n.startswith("_") and not inspect.ismodule(getattr(crnn, n))}
    assert public == set(crnn.__all__)
    with pytest.raises(AttributeError, match="no attribute 'fit'"):
        crnn.fit  # noqa: B018
    for name in crnn.__all__:
        obj = getattr(crnn, name)
        assert obj.__doc__ and obj.__module__ == "crnn.api", name
        if inspect.isfunction(obj):
            assert obj.__annotations__.get("return"), name
    for meth in ("__init__", "from_checkpoint", "read"):
        assert getattr(crnn.Recognizer, meth).__doc__, meth


def test_evaluate_defaults_are_crnn_eval_defaults():
    cli = vars(eval_parser().parse_args(["--data", "x"]))
    params = inspect.signature(crnn.evaluate).parameters
    for name, p in params.items():
        if name != "data":
            assert p.default == cli[name], name


# ----------------------------------------------------------------------------- read
def test_every_input_kind_reads_like_crnn_predict(reader, predicted):
    texts = {str(p): predicted[str(p)][0] for p in SAMPLES}
    assert all(texts.values()), "the shipped model reads every sample"
    rgb = [np.asarray(Image.open(p).convert("RGB")) for p in SAMPLES]
    kinds = {
        "str paths": [str(p) for p in SAMPLES],
        "Path objects": list(SAMPLES),
        "PIL images": [Image.open(p) for p in SAMPLES],
        "RGB arrays": rgb,
        "gray arrays": [np.asarray(Image.open(p).convert("L")) for p in SAMPLES],
        "H x W x 1 arrays": [np.asarray(Image.open(p).convert("L"))[:, :, None] for p in SAMPLES],
        "RGBA arrays": [np.asarray(Image.open(p).convert("RGBA")) for p in SAMPLES],
    }
    for kind, inputs in kinds.items():
        got = reader.read(inputs)
        assert isinstance(got, list) and all(isinstance(r, crnn.Reading) for r in got), kind
        assert [r.text for r in got] == list(texts.values()), kind
        for r, p in zip(got, SAMPLES):
            assert r.confidence == pytest.approx(predicted[str(p)][1], abs=1e-4), kind
    bgr = [np.ascontiguousarray(a[:, :, ::-1]) for a in rgb]
    assert [r.text for r in reader.read(bgr, channels="BGR")] == list(texts.values())
    assert [r.text for r in reader.read(tuple(rgb))] == list(texts.values())
    one = reader.read(str(SAMPLES[2]))  # a single input gives a single Reading
    text, conf = one
    assert isinstance(one, crnn.Reading) and text == texts[str(SAMPLES[2])]
    assert reader.read([]) == []


def _two_tone(sample: Path) -> np.ndarray:
    """The sample re-coloured: blue text on orange, chosen so that the red/blue-swapped image has one grey level."""
    g = np.asarray(Image.open(sample).convert("L")).astype(np.float32)[:, :, None] / 255
    bg, fg = np.array([255, 200, 0], np.float32), np.array([0, 120, 255], np.float32)
    return (g * bg + (1 - g) * fg).round().astype(np.uint8)  # (H, W, 3) RGB


def test_bgr_array_needs_channels_bgr(reader, tmp_path):
    rgb = _two_tone(REPO / "weights/samples/synth_5.png")
    Image.fromarray(rgb).save(tmp_path / "two_tone.png")
    bgr = np.ascontiguousarray(rgb[:, :, ::-1])
    right = reader.read(bgr, channels="BGR")
    # documented: channels="BGR" equals reading the RGB array and the file itself
    assert right == reader.read(rgb) == reader.read(tmp_path / "two_tone.png")
    assert right.text == "packaged"
    # documented: read as RGB, red and blue swap weights in L = 0.299 R + 0.587 G + 0.114 B; here the text vanishes
    wrong_gray = np.asarray(Image.fromarray(bgr).convert("L"))
    assert int(wrong_gray.max()) - int(wrong_gray.min()) <= 1
    assert reader.read(bgr).text != "packaged"
    assert reader.read(rgb, channels="BGR").text != "packaged"
    gray = np.asarray(Image.open(SAMPLES[0]).convert("L"))  # a 2-D array has no channel order
    assert reader.read(gray, channels="BGR") == reader.read(gray)


def test_read_errors_name_the_input_like_crnn_predict(reader, tmp_path, capsys):
    missing = str(tmp_path / "missing.png")
    assert predict_main(["--device", "cpu", missing]) == 1
    cli = capsys.readouterr().err.strip().split(": error: ", 1)[1]
    with pytest.raises(ImageReadError) as e:
        reader.read([str(SAMPLES[0]), missing])
    assert str(e.value) == cli == f"{missing}: no such file"
    with pytest.raises(InferenceError, match=r"^image 1: a numpy image must be uint8 \(0-255\), got float32"):
        reader.read([SAMPLES[0], np.zeros((32, 100), np.float32)])
    with pytest.raises(InferenceError, match=r"^image: a numpy image must be H x W .* got shape \(2, 32, 100, 3\)"):
        reader.read(np.zeros((2, 32, 100, 3), np.uint8))
    with pytest.raises(TypeError, match="^image 0: expected a file path, a PIL image or a numpy array, got int"):
        reader.read([3])
    with pytest.raises(InferenceError, match="^channels must be RGB or BGR"):
        reader.read(SAMPLES[0], channels="bgr")


def test_a_list_read_with_return_exceptions_keeps_the_good_readings_and_gives_each_failure_in_its_place(
        reader, predicted, tmp_path):
    empty, missing = tmp_path / "empty.png", str(tmp_path / "missing.png")
    empty.write_bytes(b"")
    items = [str(SAMPLES[0]), str(empty), missing, np.zeros((32, 100), np.float32), 3, str(SAMPLES[1])]
    got = reader.read(items, return_exceptions=True)
    assert len(got) == len(items)
    for i in (0, 5):
        assert isinstance(got[i], crnn.Reading) and got[i].text == predicted[items[i]][0]
    assert [(type(e), str(e)) for e in got[1:5]] == [
        (ImageReadError, f"{empty}: empty (0 bytes)"), (ImageReadError, f"{missing}: no such file"),
        (InferenceError, "image 3: a numpy image must be uint8 (0-255), got float32; convert it, e.g. "
                         "(x * 255).round().astype(np.uint8) for floats in [0, 1]"),
        (TypeError, "image 4: expected a file path, a PIL image or a numpy array, got int")]
    with pytest.raises(ImageReadError, match=f"^{re.escape(str(empty))}: empty"):  # the default: the first failure
        reader.read(items)
    assert reader.read([str(SAMPLES[0])], return_exceptions=True) == [reader.read(str(SAMPLES[0]))]


def test_construction_errors_are_the_cli_messages(tmp_path, capsys):
    missing = tmp_path / "nope.pt"
    cli = _cli_error(predict_main, ["--weights", str(missing), str(SAMPLES[0])], capsys)
    with pytest.raises(CheckpointError) as e:
        crnn.Recognizer.from_checkpoint(missing)
    assert str(e.value) == cli
    cli = _cli_error(predict_main, ["--device", "tpu", str(SAMPLES[0])], capsys)
    with pytest.raises(InferenceError) as e:
        crnn.Recognizer(device="tpu")
    assert str(e.value) == cli
    words = tmp_path / "words.txt"
    words.write_text("packaged\n")
    cli = _cli_error(predict_main, ["--lexicon", str(words), "--decoder", "greedy", str(SAMPLES[0])], capsys)
    with pytest.raises(InferenceError) as e:
        crnn.Recognizer(lexicon=words, decoder="greedy")
    assert str(e.value) == cli


def test_lexicon_from_file_or_list_picks_the_beam_decoder(tmp_path):
    words = tmp_path / "words.txt"
    words.write_text("packaged\npackage\n")
    img = SAMPLES[5]
    from_file = crnn.Recognizer(lexicon=words, device="cpu").read(img)
    from_list = crnn.Recognizer(lexicon=["packaged", "package"], device="cpu").read(img)
    assert from_file == from_list and from_file.text == "packaged"
    assert repr(crnn.Recognizer(lexicon=["x"], device="cpu")).endswith("decoder='beam')")


def test_words_from_file_or_list_pick_the_word_decoder_and_leave_confident_readings(tmp_path):
    """A word prior, unlike a lexicon, does not close the vocabulary: "packaged" (read at 0.998) is no listed word,
    and the listed "package" is far less probable, so the reading stands; words compare in lower case."""
    words = tmp_path / "words.txt"
    words.write_text("package\nIMMEDIATELY\n")
    img = SAMPLES[5]
    greedy = crnn.Recognizer(device="cpu").read(img)
    from_file = crnn.Recognizer(words=words, device="cpu").read(img)
    assert from_file == crnn.Recognizer(words=["package", "immediately"], device="cpu").read(img) == greedy
    assert greedy.text == "packaged"
    assert crnn.Recognizer(lexicon=["package", "packages"], device="cpu").read(img).text != "packaged"
    assert repr(crnn.Recognizer(words=["x"], device="cpu")).endswith("decoder='word')")


def test_words_with_counts_from_file_or_mapping_read_alike(tmp_path, capsys):
    """A frequency list (``word count`` lines) and the same counts as a mapping give the same readings; a line
    without its count is refused in one line, by the reader and by crnn-predict alike."""
    counts = {"package": 5e8, "packaged": 2, "immediately": 40}
    words = tmp_path / "counts.tsv"
    words.write_text("".join(f"{w}\t{c:g}\n" for w, c in counts.items()))
    imgs = SAMPLES[:6]
    from_file = crnn.Recognizer(words=words, device="cpu").read(imgs)
    assert from_file == crnn.Recognizer(words=counts, device="cpu").read(imgs)
    assert crnn.Recognizer(words=words, device="cpu")._engine.words.log10_counts is not None
    (tmp_path / "mixed.tsv").write_text("package 10\npackaged\n")
    cli = _cli_error(predict_main, ["--words", str(tmp_path / "mixed.tsv"), str(SAMPLES[0])], capsys)
    with pytest.raises(InferenceError) as e:
        crnn.Recognizer(words=tmp_path / "mixed.tsv")
    assert str(e.value) == cli and cli.startswith(f"{tmp_path / 'mixed.tsv'} line 2: 'packaged' is not 'word count'")
    with pytest.raises(InferenceError, match="count of 'package' must be a positive number"):
        crnn.Recognizer(words={"package": -1})


def test_word_prior_errors_are_the_cli_messages(tmp_path, capsys):
    missing = tmp_path / "nope.txt"
    cli = _cli_error(predict_main, ["--words", str(missing), str(SAMPLES[0])], capsys)
    with pytest.raises(InferenceError) as e:
        crnn.Recognizer(words=missing)
    assert str(e.value) == cli and cli.startswith(f"cannot read the word list {missing}: ") and "wamerican" in cli
    cli = _cli_error(predict_main, ["--decoder", "word", str(SAMPLES[0])], capsys)
    with pytest.raises(InferenceError) as e:
        crnn.Recognizer(decoder="word")
    assert str(e.value) == cli == "the word decoder needs a word list: add --words FILE"
    (tmp_path / "w.txt").write_text("cat\n")
    cli = _cli_error(predict_main, ["--decoder", "beam", "--words", str(tmp_path / "w.txt"), str(SAMPLES[0])], capsys)
    with pytest.raises(InferenceError) as e:
        crnn.Recognizer(decoder="beam", words=["cat"])
    assert str(e.value) == cli and "add --decoder word, not beam" in cli
    (tmp_path / "dashes.txt").write_text("---\n\n")
    assert "holds no words" in _cli_error(predict_main, ["--words", str(tmp_path / "dashes.txt"), str(SAMPLES[0])],
                                          capsys)
    with pytest.raises(InferenceError, match="holds no words"):
        crnn.Recognizer(words=["--", ""])


# ----------------------------------------------------------------------------- config, train, evaluate
def test_load_config_errors_are_crnn_train_messages(tmp_path, capsys):
    cli = _cli_error(train_main, ["--config", str(REPO / "configs/smoke.yaml"), "train.nope=1"], capsys)
    with pytest.raises(ConfigError) as e:
        crnn.load_config(REPO / "configs/smoke.yaml", ["train.nope=1"])
    assert str(e.value) == cli
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: [1,\n  2\nmodel: {")
    cli = _cli_error(train_main, ["--config", str(bad)], capsys)
    with pytest.raises(ConfigError) as e:
        crnn.load_config(bad)
    assert str(e.value) == cli and "\n" not in cli
    with pytest.raises(ConfigError, match="must be a list"):
        crnn.load_config(None, "train.steps=3")
    cfg = crnn.load_config(REPO / "configs/smoke.yaml", ["train.steps=3"])
    assert cfg.train.steps == 3 and cfg.data.batch_size == 16


def test_train_smoke_writes_last_pt_and_returns_the_summary(tmp_path, words_lmdb, val_lmdb, capsys):
    out = tmp_path / "run"
    cfg = crnn.load_config(REPO / "configs/smoke.yaml",
                           [f"data.train=[{{path: {words_lmdb}}}]", f"data.val=[{val_lmdb}]",
                            f"train.output_dir={out}", *TINY])
    run = crnn.train(cfg, ["train.steps=3"])  # overrides apply to a copy
    assert cfg.train.steps == 20
    assert isinstance(run, crnn.TrainSummary)
    assert run.output_dir == out and run.last == out / "last.pt" and run.best == out / "best.pt"
    assert run.last.is_file() and run.best.is_file()
    assert (run.step, run.steps, run.ended, run.images_seen) == (3, 3, "done", 24)
    assert set(run.metrics) == {str(val_lmdb)}
    m = run.metrics[str(val_lmdb)]
    assert set(m) == {"samples", "word_acc", "cer", "ned_similarity", "ned"} and m["samples"] == 16
    assert m["ned"] == m["ned_similarity"]  # the deprecated key, kept for one release
    assert run.best_word_acc == m["word_acc"]  # the trainer's final validation of the same weights
    report = crnn.evaluate(val_lmdb, weights=run.last, protocol=cfg.train.protocol, device="cpu", workers=0)
    assert {k: report["datasets"][0][k] for k in m} == m
    rec = crnn.Recognizer.from_checkpoint(run.last, device="cpu")
    got = rec.read(SAMPLES[0])
    capsys.readouterr()
    assert predict_main(["--weights", str(run.last), "--device", "cpu", "--format", "json", str(SAMPLES[0])]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert rec.weights == run.last and (got.text, got.confidence) == (cli["text"], cli["confidence"])


def test_evaluate_returns_crnn_eval_json(words_lmdb, val_lmdb, capsys):
    assert eval_main(["--data", str(words_lmdb), "--data", str(val_lmdb), "--device", "cpu", "--workers", "0",
                      "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    got = crnn.evaluate([words_lmdb, val_lmdb], device="cpu", workers=0)
    drop = ("seconds", "images_per_s")
    strip = lambda row: {k: v for k, v in row.items() if k not in drop}  # noqa: E731
    assert [strip(r) for r in got["datasets"]] == [strip(r) for r in cli["datasets"]]
    assert strip(got["overall"]) == strip(cli["overall"])
    assert {k: got[k] for k in got if k not in ("datasets", "overall")} == \
        {k: cli[k] for k in cli if k not in ("datasets", "overall")}
    cli_msg = _cli_error(eval_main, ["--data", str(val_lmdb), "--batch-size", "0"], capsys)
    with pytest.raises(ValueError) as e:
        crnn.evaluate(val_lmdb, batch_size=0)
    assert str(e.value) == cli_msg
    with pytest.raises(SystemExit):  # argparse's own exit
        eval_main(["--data", str(val_lmdb), "--protocol", "nope"])
    cli_msg = capsys.readouterr().err.strip().splitlines()[-1].split(": error: ", 1)[1]
    with pytest.raises(ValueError) as e:
        crnn.evaluate(val_lmdb, protocol="nope")
    assert str(e.value) == cli_msg and cli_msg.startswith("argument --protocol: invalid choice: 'nope'")


# ----------------------------------------------------------------------------- the documentation's examples
def _docs_python_blocks() -> list[str]:
    """The ```python blocks of the reading page's Python section (docs/reading.md, "From Python")."""
    text = (REPO / "docs" / "reading.md").read_text(encoding="utf-8")
    section = text.split("\n## From Python\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_readme_python_example_is_the_docs_first_one():
    readme = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(encoding="utf-8"), flags=re.S)
    assert readme == _docs_python_blocks()[:1]  # run below, with the page's other examples


def test_docs_python_example_runs_as_written(tmp_path):
    blocks = _docs_python_blocks()
    assert len(blocks) == 3 and blocks[0].count("\n") == 3  # the three-line example comes first
    for name in ("configs", "weights"):
        (tmp_path / name).symlink_to(REPO / name)
    script = tmp_path / "docs_example.py"
    script.write_text("\n".join(blocks))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    # the page's own comments are the expected output (digits up to its "...": they change with the shipped weights)
    shown = re.findall(r"#\s+(Reading\(text='\w+', confidence=[0-9.]+?)\.\.\.", "\n".join(blocks))
    assert len(shown) == 2 and shown[0].startswith("Reading(text='IMMEDIATELY'")  # the default reads capitals
    assert lines[0].startswith(shown[0])
    assert lines[1] == "['packaged', 'IMMEDIATELY']"
    assert lines[2].startswith(shown[1]) and shown[1].startswith("Reading(text='packaged'")
    assert lines[3] == "packaged"  # the word prior: no listed word near it in the beam, so greedy's reading stands
    assert lines[4].startswith("runs/smoke_py/last.pt runs/smoke_py/best.pt {'data/smoke/val.lmdb': {")
    assert (tmp_path / "runs/smoke_py/last.pt").is_file()


def test_train_turns_a_signal_stop_into_keyboard_interrupt(tmp_path, monkeypatch):
    import crnn.engine.trainer as trainer

    ended = {"step": 7, "best_metric": -1.0, "output_dir": str(tmp_path), "ended": "signal", "interrupted": True,
             "signal": 2, "images_seen": 56}
    monkeypatch.setattr(trainer, "fit", lambda cfg: ended)
    with pytest.raises(KeyboardInterrupt, match=f"at step 7; {tmp_path / 'last.pt'} saved"):
        crnn.train(crnn.load_config(None, [f"train.output_dir={tmp_path}"]))
    monkeypatch.setattr(trainer, "fit", lambda cfg: dict(ended, ended="stop_after", interrupted=False, signal=None))
    run = crnn.train(crnn.load_config(None, [f"train.output_dir={tmp_path}", "data.val=[]"]))
    assert (run.ended, run.step, run.last, run.best, run.best_word_acc, run.metrics) == \
        ("stop_after", 7, None, None, None, {})


def test_train_restores_the_root_logger(tmp_path, words_lmdb):
    import logging

    root = logging.getLogger()
    mine = logging.NullHandler()
    root.addHandler(mine)
    level = root.level
    try:
        crnn.train(REPO / "configs/smoke.yaml",
                   [f"data.train=[{{path: {words_lmdb}}}]", "data.val=[]", f"train.output_dir={tmp_path}", *TINY,
                    "train.steps=1"])
        assert mine in root.handlers and root.level == level
    finally:
        root.removeHandler(mine)
