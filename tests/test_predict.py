"""crnn-predict and the Recognizer library: input forms, output formats, checkpoint layouts, errors, exit codes."""
from __future__ import annotations

import io
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from PIL import Image, ImageDraw

import crnn.infer as infer
from crnn.charset import Charset
from crnn.cli.predict import main
from crnn.config import Config, dump_config
from crnn.engine.checkpoint import model_checkpoint, save_checkpoint
from crnn.infer import InferenceError, Recognizer, default_weights, width_batches
from crnn.model import build_model
from tests.conftest import REPO

HIDDEN = 16


def tiny_config(keep_ratio: bool = False) -> Config:
    """A small vgg_small config (hidden 16, width 48)."""
    cfg = Config()
    cfg.model.hidden, cfg.model.charset = HIDDEN, "alnum36"
    cfg.data.width, cfg.data.keep_ratio, cfg.data.max_width = 48, keep_ratio, 96
    return cfg


def tiny_model(cfg: Config, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return build_model(cfg.model.variant, cfg.model.in_channels, Charset.from_spec("alnum36").num_classes,
                       HIDDEN).eval()


def word_image(text: str, width: int = 60, height: int = 24, mode: str = "RGB") -> Image.Image:
    img = Image.new(mode, (width, height), "white")
    ImageDraw.Draw(img).text((2, 4), text, fill="black")
    return img


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory) -> dict[str, Path]:
    """The same weights in every layout: training, weights-only, bare plain, bare module.-prefixed; plus a config."""
    d = tmp_path_factory.mktemp("ckpts")
    cfg = tiny_config()
    model = tiny_model(cfg)
    cs = Charset.from_spec("alnum36")
    opt = torch.optim.Adam(model.parameters())
    save_checkpoint(model_checkpoint(model, cfg, cs, optimizer=opt.state_dict(), step=7), d / "training.pt")
    save_checkpoint(model_checkpoint(model, cfg, cs), d / "weights.pt")
    torch.save(model.state_dict(), d / "plain.pt")
    torch.save(nn.DataParallel(model).state_dict(), d / "module.pt")
    (d / "cfg.yaml").write_text(dump_config(cfg))
    kr = tiny_config(keep_ratio=True)
    save_checkpoint(model_checkpoint(tiny_model(kr, seed=1), kr, cs), d / "keep_ratio.pt")
    return {p.stem: p for p in d.iterdir()}


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    """A nested folder of word images (png + jpg) and one non-image file."""
    root = tmp_path_factory.mktemp("imgs")
    (root / "a" / "b").mkdir(parents=True)
    word_image("cat", 50).save(root / "2.png")
    word_image("dog", 70).save(root / "10.png")
    word_image("sun", 90).save(root / "a" / "1.jpg")
    word_image("hat", 40, mode="L").save(root / "a" / "b" / "3.png")
    (root / "a" / "notes.txt").write_text("not an image")
    return root


EXPECTED_ORDER = ["2.png", "10.png", "a/1.jpg", "a/b/3.png"]  # natural sort of the whole path


def run(argv: list[str], capsys, stdin: str | None = None, monkeypatch=None) -> tuple[int, str, str]:
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def json_lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def assert_same(got: list[tuple[str, float]], ref: list[tuple[str, float]], rel: float = 1e-5) -> None:
    assert [t for t, _ in got] == [t for t, _ in ref]
    assert [c for _, c in got] == pytest.approx([c for _, c in ref], rel=rel)


def reference(weights: Path, paths: list[Path]) -> list[tuple[str, float]]:
    rec = Recognizer.from_checkpoint(weights, device="cpu")
    return rec.predict_images([Image.open(p) for p in paths])


# ---------------------------------------------------------------------------------------------- layouts
@pytest.mark.parametrize("layout", ["training", "weights", "plain", "module"])
def test_every_checkpoint_layout_gives_the_same_predictions(layout, ckpts, images, capsys):
    extra = ["--config", str(ckpts["cfg"])] if layout in ("plain", "module") else []
    rc, out, err = run(["--weights", str(ckpts[layout]), "--format", "json", *extra, str(images)], capsys)
    assert rc == 0, err
    got = json_lines(out)
    files = [images / p for p in EXPECTED_ORDER]
    assert [g["path"] for g in got] == [str(f) for f in files]
    ref = reference(ckpts["weights"], files)
    assert_same([(g["text"], g["confidence"]) for g in got], ref)
    assert all(set(g) == {"path", "text", "confidence"} for g in got)


@pytest.mark.parametrize("layout", ["plain", "module"])
def test_bare_state_dict_without_config_asks_for_one(layout, ckpts, images, capsys):
    rc, out, err = run(["--weights", str(ckpts[layout]), str(images)], capsys)
    assert rc == 2 and out == ""
    assert "bare state dict" in err and "--config/--charset" in err and len(err.splitlines()) == 1


def test_charset_flag_for_bare_state_dict_and_note_for_full_checkpoint(ckpts, images, capsys):
    rc, out, err = run(["--weights", str(ckpts["module"]), "--config", str(ckpts["cfg"]), "--charset", "alnum36",
                        str(images / "2.png")], capsys)
    assert rc == 0 and err == ""
    rc, out, err = run(["--weights", str(ckpts["weights"]), "--charset", "digits", str(images / "2.png")], capsys)
    assert rc == 0 and "are ignored" in err
    assert out.split("\t")[1] == reference(ckpts["weights"], [images / "2.png"])[0][0]


# ---------------------------------------------------------------------------------------------- input forms
def test_single_file_text_format(ckpts, images, capsys):
    rc, out, err = run(["--weights", str(ckpts["weights"]), str(images / "a" / "1.jpg")], capsys)
    assert rc == 0 and err == ""
    path, text, conf = out.rstrip("\n").split("\t")
    assert path == str(images / "a" / "1.jpg")
    assert re.fullmatch(r"\d\.\d{4}", conf)
    ref_text, ref_conf = reference(ckpts["weights"], [images / "a" / "1.jpg"])[0]
    assert text == ref_text and float(conf) == pytest.approx(ref_conf, abs=5e-5)


def test_glob_and_stdin_keep_input_order(ckpts, images, capsys, monkeypatch):
    w = ["--weights", str(ckpts["weights"]), "--format", "json"]
    rc, out, _ = run([*w, str(images / "**" / "*.png")], capsys)
    assert rc == 0
    assert [g["path"] for g in json_lines(out)] == [str(images / p) for p in ("2.png", "10.png", "a/b/3.png")]
    listing = f"{images / 'a' / 'b' / '3.png'}\n\n{images / '2.png'}\n"
    rc, out, _ = run([*w, "-", str(images / "10.png")], capsys, stdin=listing, monkeypatch=monkeypatch)
    assert rc == 0
    assert [g["path"] for g in json_lines(out)] == [str(images / p) for p in ("a/b/3.png", "2.png", "10.png")]


def test_results_do_not_depend_on_batch_size_or_chunking(ckpts, images):
    files = [str(images / p) for p in EXPECTED_ORDER] * 3
    rec = Recognizer.from_checkpoint(ckpts["keep_ratio"], device="cpu", batch_size=64)
    big = [(p.text, p.confidence) for p in rec.predict_paths(files)]
    rec.batch_size = 1
    small = [(p.text, p.confidence) for p in rec.predict_paths(files, chunk=2, threads=1)]
    assert_same(big, small)
    assert_same(big[:4], big[4:8], rel=1e-6)


def test_keep_ratio_checkpoint_resizes_like_training(ckpts):
    rec = Recognizer.from_checkpoint(ckpts["keep_ratio"], device="cpu")
    assert rec.transform.keep_ratio and rec.config.data.max_width == 96
    assert rec.preprocess(word_image("x", 60, 24)).shape == (1, 32, 80)  # 60 * 32/24
    # wider than training's max_width: reading follows the image (up to infer.INFER_MAX_WIDTH), no squeezing
    assert rec.preprocess(word_image("x", 600, 24)).shape == (1, 32, 800)
    capped = Recognizer.from_checkpoint(ckpts["keep_ratio"], device="cpu", max_width=96)
    with pytest.warns(infer.SqueezeWarning, match="squeezed to 96 px"):
        assert capped.preprocess(word_image("x", 600, 24)).shape == (1, 32, 96)
    fixed = Recognizer.from_checkpoint(ckpts["weights"], device="cpu")
    assert fixed.preprocess(word_image("x", 600, 24)).shape == (1, 32, 48)


def test_width_batches_groups_equal_widths_and_caps_batch_size():
    assert width_batches([50, 40, 50, 40, 50], 2) == [[1, 3], [0, 2], [4]]
    assert width_batches([], 4) == []


def test_split_by_width_cuts_a_padded_batch_into_equal_width_batches():
    from crnn.report.collect import IndexedBatch

    images = torch.arange(3 * 4 * 12, dtype=torch.float32).reshape(3, 1, 4, 12)  # widths 8, 12, 8 padded to 12
    batch = IndexedBatch(images, torch.tensor([1, 2, 3, 4, 5, 6]), torch.tensor([1, 3, 2]), ["a", "bcd", "ef"],
                         torch.tensor([8, 12, 8]), num_skipped=2, indices=[10, 11, 12], sizes=[(8, 4), (12, 4), (8, 4)])
    first, second = infer.split_by_width(batch)
    assert type(first) is IndexedBatch and first.labels == ["a", "ef"] and second.labels == ["bcd"]
    assert torch.equal(first.images, images[[0, 2], ..., :8]) and torch.equal(second.images, images[[1]])
    assert first.targets.tolist() == [1, 5, 6] and first.target_lengths.tolist() == [1, 2]
    assert second.targets.tolist() == [2, 3, 4] and first.widths.tolist() == [8, 8]
    assert first.indices == [10, 12] and second.sizes == [(12, 4)]
    assert (first.num_skipped, second.num_skipped) == (2, 0)  # counted once
    same = replace(batch, widths=torch.tensor([12, 12, 12]))
    kept = infer.split_by_width(same)
    assert len(kept) == 1 and kept[0] is same  # nothing to cut: the batch itself


def test_evaluate_reads_every_image_at_its_own_width_as_crnn_eval_does():
    """Training-time validation and the fine-tune's base sets go through evaluate(): a padded keep-ratio batch must
    be read as crnn-eval and crnn-predict read it (each image at its own width), or the curve and the log disagree
    with crnn-eval on the same weights."""
    from crnn.data.collate import Batch
    from crnn.engine.evaluate import evaluate

    cfg = tiny_config(keep_ratio=True)
    model, seen = tiny_model(cfg, seed=3), []
    model.register_forward_pre_hook(lambda m, args: seen.append(args[0].shape[-1]))
    cs = Charset.from_spec("alnum36")
    torch.manual_seed(0)
    images = torch.rand(4, 1, 32, 96)
    widths = [40, 96, 40, 64]
    for i, w in enumerate(widths):
        images[i, ..., w:] = 0.0  # right padding
    batch = Batch(images, torch.tensor([11, 12, 13, 14]), torch.tensor([1, 1, 1, 1]), ["a", "b", "c", "d"],
                  torch.tensor(widths))
    padded = evaluate(model, [batch], cs, torch.device("cpu"), protocol="exact", max_examples=4)
    assert sorted(seen) == [40, 64, 96]  # one forward per width, none at the padded 96 for the narrow ones
    seen.clear()
    alone = [evaluate(model, [Batch(images[i:i + 1, ..., :w], torch.tensor([11 + i]), torch.tensor([1]),
                                    [batch.labels[i]], torch.tensor([w]))], cs, torch.device("cpu"),
                      protocol="exact", max_examples=1) for i, w in enumerate(widths)]
    by_label = dict(padded.examples)
    assert [by_label[r.examples[0][0]] for r in alone] == [r.examples[0][1] for r in alone]
    assert padded.metrics["cer"] == pytest.approx(sum(r.metrics["cer"] for r in alone) / 4)


def test_evaluate_pools_loader_batches_so_a_width_is_read_in_one_forward():
    """A keep-ratio set read 64 at a time came out in forwards of 2-3 crops (17 img/s for the English default on a
    busy 2-core machine): batches are pooled before they are cut, same readings, one forward per width, none larger
    than the largest loader batch, and the report's per-image fields follow their images."""
    from crnn.data.collate import read_at_own_width
    from crnn.engine.evaluate import evaluate
    from crnn.report.collect import IndexedBatch

    cfg = tiny_config(keep_ratio=True)
    model, seen = tiny_model(cfg, seed=5), []
    model.register_forward_pre_hook(lambda m, args: seen.append(tuple(args[0].shape)))
    cs = Charset.from_spec("alnum36")
    torch.manual_seed(1)
    widths = [[40, 64, 40], [64, 40, 96], [40, 40, 40]]  # three loader batches; width 40 in all of them
    batches, k = [], 0
    for ws in widths:
        images = torch.zeros(len(ws), 1, 32, max(ws))
        for i, w in enumerate(ws):
            images[i, ..., :w] = torch.rand(1, 32, w)
        labels = [chr(ord("a") + k + i) for i in range(len(ws))]
        batches.append(IndexedBatch(images, torch.arange(11, 11 + len(ws)), torch.ones(len(ws), dtype=torch.long),
                                    labels, torch.tensor(ws), num_skipped=1, indices=list(range(k, k + len(ws))),
                                    sizes=[(w, 32) for w in ws]))
        k += len(ws)
    one_by_one = [evaluate(model, [b], cs, torch.device("cpu"), protocol="exact", max_examples=9) for b in batches]
    seen.clear()
    pooled = evaluate(model, batches, cs, torch.device("cpu"), protocol="exact", max_examples=9)
    # width 40: 6 crops from three batches in two forwards of 3 (the cap: the largest loader batch)
    assert sorted(seen) == [(1, 1, 32, 96), (2, 1, 32, 64), (3, 1, 32, 40), (3, 1, 32, 40)]
    assert dict(pooled.examples) == {lab: pred for r in one_by_one for lab, pred in r.examples}
    assert pooled.skipped == 3
    parts = list(read_at_own_width(batches))
    assert sorted(i for p in parts for i in p.indices) == list(range(9))
    for p in parts:  # every image, label, target and size with its own
        for j, i in enumerate(p.indices):
            b, r = divmod(i, 3)
            w = widths[b][r]
            assert p.labels[j] == batches[b].labels[r] and p.sizes[j] == (w, 32) and p.images.shape[-1] == w
            assert torch.equal(p.images[j], batches[b].images[r, ..., :w])
            assert int(p.targets[j]) == int(batches[b].targets[r])
    assert [len(p.labels) for p in read_at_own_width(batches, pool=0)] == [2, 1, 1, 1, 1, 3]  # each batch alone


def test_cpu_recognizer_runs_channels_last_with_the_same_readings(ckpts, images):
    """oneDNN's NHWC convolutions are faster on a CPU; the text is that of the plain layout."""
    rec = Recognizer.from_checkpoint(ckpts["keep_ratio"], device="cpu")
    conv = [m for m in rec.model.modules() if isinstance(m, nn.Conv2d)][1]  # (the first takes 1 channel: any layout)
    assert conv.weight.is_contiguous(memory_format=torch.channels_last) and not conv.weight.is_contiguous()
    files = [str(images / p) for p in EXPECTED_ORDER]
    fast = [(p.text, p.confidence) for p in rec.predict_paths(files)]
    rec.model.to(memory_format=torch.contiguous_format)
    plain = [(p.text, p.confidence) for p in rec.predict_paths(files)]
    assert [t for t, _ in fast] == [t for t, _ in plain]
    assert_same(fast, plain, rel=1e-4)


# ---------------------------------------------------------------------------------------------- errors
def test_unreadable_files_are_reported_and_others_predicted(ckpts, images, tmp_path, capsys):
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    missing = tmp_path / "missing.jpg"
    argv = ["--weights", str(ckpts["weights"]), str(missing), str(images / "2.png"), str(bad),
            str(images / "a" / "notes.txt")]
    rc, out, err = run(argv, capsys)
    assert rc == 1
    lines = out.splitlines()
    assert lines[0] == f"{missing}\t\t" and lines[2] == f"{bad}\t\t" and lines[3].endswith("notes.txt\t\t")
    assert lines[1].startswith(f"{images / '2.png'}\t") and len(lines[1].split("\t")) == 3
    assert err.splitlines()[0] == f"crnn-predict: error: {missing}: no such file"
    assert len(err.splitlines()) == 3 and "Traceback" not in err
    rc, out, err = run(["--format", "json", *argv], capsys)
    got = json_lines(out)
    assert rc == 1 and got[0] == {"path": str(missing), "text": None, "confidence": None, "error": "no such file"}
    assert "error" not in got[1] and "not an image" in got[3]["error"]


def test_fatal_errors_exit_2_with_one_line(ckpts, images, tmp_path, capsys):
    foreign = tmp_path / "foreign.pt"
    torch.save({"epoch": 3, "lr": 0.1}, foreign)
    (tmp_path / "empty").mkdir()
    (tmp_path / "w.txt").write_text("cat\n")
    cases = {
        "weights file": ["--weights", str(tmp_path / "nope.pt"), str(images)],
        "does not contain a model state dict": ["--weights", str(foreign), str(images)],
        "no images": ["--weights", str(ckpts["weights"]), str(tmp_path / "empty")],
        "no files match": ["--weights", str(ckpts["weights"]), str(tmp_path / "*.png")],
        "needs the beam decoder": ["--weights", str(ckpts["weights"]), "--lexicon", str(tmp_path / "w.txt"), str(images)],
        "--threads must be at least 1, got 0": ["--weights", str(ckpts["weights"]), "--threads", "0", str(images)],
    }
    for expected, argv in cases.items():
        rc, out, err = run(argv, capsys)
        assert rc == 2 and out == "", expected
        assert expected in err and len(err.splitlines()) == 1 and err.startswith("crnn-predict: error: "), err


def test_threads_flag_sets_torch_threads_and_reads_the_same(ckpts, images, capsys):
    """--threads N: torch's intra-op threads for the reading (1 is what a busy machine wants), same answers."""
    before = torch.get_num_threads()
    try:
        rc, ref, _ = run(["--weights", str(ckpts["weights"]), "--format", "json", str(images)], capsys)
        torch.set_num_threads(2)
        rc1, out, _ = run(["--weights", str(ckpts["weights"]), "--threads", "1", "--format", "json", str(images)],
                          capsys)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert rc == rc1 == 0
    assert [(d["path"], d["text"]) for d in json_lines(out)] == [(d["path"], d["text"]) for d in json_lines(ref)]


def test_default_weights_prefers_the_shipped_name(tmp_path, recwarn):
    with pytest.raises(InferenceError, match="--weights"):
        default_weights(tmp_path)
    (tmp_path / "b.pt").write_bytes(b"")
    (tmp_path / "a.pt").write_bytes(b"")
    with pytest.warns(infer.FallbackWeightsWarning, match=r"crnn_en.pt is not there; reading with a.pt"):
        assert default_weights(tmp_path).name == "a.pt"
    (tmp_path / "crnn_vgg_small.pt").write_bytes(b"")  # the former default, en_alnum36: the English fallback
    with pytest.warns(infer.FallbackWeightsWarning, match=r"'en'.*not there; reading with 'en_alnum36'"):
        assert default_weights(tmp_path).name == "crnn_vgg_small.pt"
    with pytest.warns(infer.FallbackWeightsWarning, match="lower-case 0-9a-z"):
        assert infer.resolve_weights("en", tmp_path).name == "crnn_vgg_small.pt"
    recwarn.clear()
    (tmp_path / "crnn_en.pt").write_bytes(b"")
    assert default_weights(tmp_path).name == infer.resolve_weights("en", tmp_path).name == "crnn_en.pt"
    assert infer.resolve_weights("en_alnum36", tmp_path).name == "crnn_vgg_small.pt"
    assert not recwarn.list


def test_a_missing_default_reads_with_the_former_one_and_says_so(ckpts, images, tmp_path, capsys, monkeypatch):
    import shutil

    shutil.copy(ckpts["weights"], tmp_path / "crnn_vgg_small.pt")  # a checkout without crnn_en.pt
    monkeypatch.setattr(infer, "weights_folder", lambda: tmp_path)
    rc, out, err = run([str(images / "2.png")], capsys)
    assert rc == 0 and out.startswith(str(images / "2.png"))
    assert err.startswith("crnn-predict: warning: shipped model 'en'") and len(err.splitlines()) == 1, err
    assert "crnn_en.pt, which is not there; reading with 'en_alnum36' (crnn_vgg_small.pt" in err
    assert "git pull" in err


def test_no_weights_flag_uses_the_default(ckpts, images, capsys, monkeypatch):
    monkeypatch.setattr(infer, "default_weights", lambda: ckpts["weights"])
    rc, out, _ = run([str(images / "2.png")], capsys)
    assert rc == 0 and out.startswith(str(images / "2.png"))
    monkeypatch.setattr(infer, "default_weights", lambda: default_weights(images))  # no .pt there
    rc, out, err = run([str(images / "2.png")], capsys)
    assert rc == 2 and "pass --weights" in err


# ---------------------------------------------------------------------------------------------- decoders / amp
def test_lexicon_answers_are_lexicon_words(ckpts, images, tmp_path, capsys):
    lex = tmp_path / "words.txt"
    lex.write_text("cat\ndog\n\nsun\n")
    rc, out, err = run(["--weights", str(ckpts["weights"]), "--decoder", "beam", "--beam-width", "4",
                        "--lexicon", str(lex), "--format", "json", str(images)], capsys)
    assert rc == 0, err
    got = json_lines(out)
    assert [Path(g["path"]).relative_to(images).as_posix() for g in got] == EXPECTED_ORDER
    assert all(g["text"] in {"cat", "dog", "sun"} and g["confidence"] > 0 for g in got), got


def test_bf16_option_reads_as_fp32_on_cpu(tmp_path, capsys):
    """--amp bf16 with the shipped model on rendered words: the texts of fp32, confidences within bf16's rounding
    (here <= 0.012 apart), and not bit-identical (bf16 really ran; the tiny test model reads nothing to compare)."""
    from tests.conftest import DEJAVU, render_png

    if not Path(DEJAVU).is_file():
        pytest.skip("DejaVu fonts not installed (apt-get install fonts-dejavu-core): the words would be unreadable")
    for word in ["cat", "tensor", "predict", "2024", "Hello"]:
        (tmp_path / f"{word}.png").write_bytes(render_png(word))
    got = {}
    for amp in ("off", "bf16"):
        rc, out, err = run(["--device", "cpu", "--format", "json", "--amp", amp, str(tmp_path)], capsys)
        assert rc == 0, err
        got[amp] = [(g["text"], g["confidence"]) for g in json_lines(out)]
    assert [t for t, _ in got["off"]] == ["2024", "Hello", "cat", "predict", "tensor"]  # the default reads case
    assert [t for t, _ in got["bf16"]] == [t for t, _ in got["off"]]
    assert [c for _, c in got["bf16"]] == pytest.approx([c for _, c in got["off"]], abs=0.03)
    assert [c for _, c in got["bf16"]] != [c for _, c in got["off"]]


def test_benchmark_quick_mode_runs_and_writes_json(ckpts, images, tmp_path, capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_predict", infer.__file__.replace(
        "crnn/infer.py", "benchmarks/bench_predict.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    (tmp_path / "gt.txt").write_text(f"{images / '2.png'}\tcat\n{images / '10.png'}\tdog\n")
    out = tmp_path / "bench.json"
    assert bench.main(["--weights", str(ckpts["weights"]), "--data", str(tmp_path), "--no-tesseract", "--no-easyocr",
                       "--batch-size", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["images"] == 2 and result["results"][0]["failed"] == 0
    assert set(result["results"][0]) == {"name", "weights", "images", "seconds", "images_per_s", "word_acc", "failed"}
    assert result["easyocr"] is None


def test_an_empty_file_is_empty_here_as_in_the_server(ckpts, tmp_path, capsys):
    from crnn.serving.errors import RequestError
    from crnn.serving.images import Limits, open_image

    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    rc, out, err = run(["--weights", str(ckpts["weights"]), str(empty)], capsys)
    assert rc == 1 and out == f"{empty}\t\t\n"
    assert err == f"crnn-predict: error: {empty}: empty (0 bytes)\n"
    with pytest.raises(RequestError) as e:
        open_image(b"", "image 0 (empty.png)", Limits())
    assert e.value.message == "image 0 (empty.png): empty (0 bytes); send the image file's bytes"


@pytest.mark.parametrize("name,hint", [("eng", " (did you mean 'en'?)"), ("chinese", "")])
def test_a_name_that_is_no_shipped_model_lists_the_names(name, hint, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no file of that name here
    rc, out, err = run(["--weights", name, str(REPO / "weights" / "samples" / "synth_2.png")], capsys)
    assert rc == 2 and out == ""
    assert err == (f"crnn-predict: error: weights '{name}': no such file, and not a shipped model's name (en, "
                   f"en_alnum36, zh){hint}; pass one of those names or the path to a checkpoint (.pt)\n")
