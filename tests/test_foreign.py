"""Checkpoints of meijieru/crnn.pytorch, Sierkinhane/CRNN_Chinese_Characters_Rec and clovaai None-VGG-BiLSTM-CTC:
made by peer networks built from their layer tables (tests/peers.py), trained a few steps, saved the way each
repository saves, converted with crnn-convert-ckpt --from and compared logit for logit; and the way back."""
from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn
from PIL import Image

from crnn.charset import Charset
from crnn.cli.convert_ckpt import main as convert_main
from crnn.cli.export import main as export_main
from crnn.cli.predict import main as predict_main
from crnn.config import Config
from crnn.engine.checkpoint import build_from_checkpoint, load_checkpoint, model_checkpoint, save_checkpoint
from crnn.foreign import ForeignFormatError, resolve_charset
from crnn.infer import Recognizer
from crnn.model import build_model
from tests.conftest import render_png
from tests.peers import ClovaModel, MeijieruCRNN, train_a_little

SHAPES = [(1, 64), (2, 40), (3, 24)]  # (batch, width): several of each, small (the paper network is ~1 GMAC/image)
ZH = "0123456789中文字符识别模型测试"  # a small Chinese alphabet for Sierkinhane-style models


def inputs(nc: int = 1) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    return [torch.rand(b, nc, 32, w, generator=gen) * 2 - 1 for b, w in SHAPES]


def convert(args: list[str]) -> tuple[int, str, str]:
    """crnn-convert-ckpt ARGS -> (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = convert_main(args)
    return rc, out.getvalue(), err.getvalue()


def load_ours(path: Path) -> tuple[nn.Module, Charset, Config]:
    return build_from_checkpoint(load_checkpoint(path))


def max_diff(ours: nn.Module, theirs, xs: list[torch.Tensor]) -> float:
    """Largest |ours - theirs| over the inputs; ``theirs`` returns batch-first [B, T, K] logits."""
    worst = 0.0
    with torch.no_grad():
        for x in xs:
            a, b = ours(x), theirs(x)  # (B, T, K) each
            assert a.shape == b.shape
            worst = max(worst, (a - b).abs().max().item())
    return worst


def greedy(logits: torch.Tensor, chars: str) -> str:
    """Best-path CTC decoding of one [T, K] sequence, written independently of crnn.decode."""
    ids = logits.argmax(-1).tolist()
    return "".join(chars[i - 1] for j, i in enumerate(ids) if i != 0 and (j == 0 or ids[j - 1] != i))


# ---------------------------------------------------------------------------------------------- peers, saved
@pytest.fixture(scope="module")
def meijieru_net() -> nn.Module:
    torch.manual_seed(0)
    return train_a_little(MeijieruCRNN(1, 37, 256), 1, 37, time_major=True)


@pytest.fixture(scope="module")
def sierkinhane_net() -> nn.Module:
    torch.manual_seed(1)
    return train_a_little(MeijieruCRNN(1, len(ZH) + 1, 256, log_softmax=True), 1, len(ZH) + 1, time_major=True)


@pytest.fixture(scope="module")
def clova_net() -> nn.Module:
    torch.manual_seed(2)
    return train_a_little(ClovaModel(1, 37), 1, 37, time_major=False)


@pytest.fixture(scope="module")
def meijieru_file(meijieru_net, tmp_path_factory) -> Path:
    """As meijieru's train.py saves: torch.save(crnn.state_dict()) of an nn.DataParallel model (module. keys)."""
    path = tmp_path_factory.mktemp("meijieru") / "netCRNN_4_500.pth"
    torch.save(nn.DataParallel(meijieru_net).state_dict(), path)
    return path


@pytest.fixture(scope="module")
def clova_file(clova_net, tmp_path_factory) -> Path:
    """As clovaai's train.py saves: torch.save(model.state_dict()) of an nn.DataParallel model."""
    path = tmp_path_factory.mktemp("clova") / "best_accuracy.pth"
    torch.save(nn.DataParallel(clova_net).state_dict(), path)
    return path


@pytest.fixture(scope="module")
def zh_alphabet(tmp_path_factory) -> Path:
    """Like Sierkinhane's char_std_5990.txt: GB18030, CRLF, first line 'blank' (class 0), one character a line."""
    path = tmp_path_factory.mktemp("alphabet") / "char_std_test.txt"
    path.write_bytes("\r\n".join(["blank", *ZH]).encode("gb18030") + b"\r\n")
    return path


@pytest.fixture(scope="module")
def sierkinhane_file(sierkinhane_net, tmp_path_factory) -> Path:
    """As Sierkinhane's train.py saves: {'state_dict': model.state_dict(), 'epoch': ..., 'best_acc': ...}."""
    path = tmp_path_factory.mktemp("sierkinhane") / "checkpoint_9_acc_0.9.pth"
    torch.save({"state_dict": sierkinhane_net.state_dict(), "epoch": 10, "best_acc": 0.9}, path)
    return path


@pytest.fixture(scope="module")
def meijieru_converted(meijieru_file, tmp_path_factory) -> tuple[Path, str]:
    """crnn-convert-ckpt netCRNN.pth crnn.pt --from meijieru: (OUT, its stdout)."""
    out = tmp_path_factory.mktemp("converted") / "crnn.pt"
    rc, stdout, err = convert([str(meijieru_file), str(out), "--from", "meijieru"])
    assert rc == 0, err
    return out, stdout


@pytest.fixture(scope="module")
def clova_converted(clova_file, tmp_path_factory) -> tuple[Path, str]:
    """crnn-convert-ckpt best_accuracy.pth clova.pt --from clovaai: (OUT, its stdout)."""
    out = tmp_path_factory.mktemp("converted") / "clova.pt"
    rc, stdout, err = convert([str(clova_file), str(out), "--from", "clovaai"])
    assert rc == 0, err
    return out, stdout


@pytest.fixture(scope="module")
def sierkinhane_converted(sierkinhane_file, zh_alphabet, tmp_path_factory) -> Path:
    """crnn-convert-ckpt checkpoint.pth zh.pt --from sierkinhane --charset char_std_test.txt."""
    out = tmp_path_factory.mktemp("converted") / "zh.pt"
    rc, _, err = convert([str(sierkinhane_file), str(out), "--from", "sierkinhane", "--charset", str(zh_alphabet)])
    assert rc == 0, err
    return out


def time_major(net: nn.Module):
    return lambda x: net(x).transpose(0, 1)  # their [T, B, K] -> [B, T, K]


# ---------------------------------------------------------------------------------------------- meijieru
def test_meijieru_dataparallel_checkpoint_converts_exactly(meijieru_net, meijieru_file, meijieru_converted):
    out, stdout = meijieru_converted
    assert "folded the biases of conv2, conv4, conv6" in stdout and "leakyRelu" in stdout
    model, cs, cfg = load_ours(out)
    assert (cfg.model.variant, cfg.model.in_channels, cfg.model.hidden, cfg.model.charset) == ("vgg", 1, 256, "alnum36")
    assert (cfg.data.width, cfg.data.interpolation, cfg.data.mean, cfg.data.std) == (100, "bilinear", 0.5, 0.5)
    assert cs.chars == "0123456789abcdefghijklmnopqrstuvwxyz"
    assert max_diff(model, time_major(meijieru_net), inputs()) < 1e-5
    assert torch.load(out, weights_only=True)["converted_from"] == {"source": "meijieru", "file": meijieru_file.name}


def test_legacy_file_without_num_batches_tracked_loads(meijieru_net, tmp_path):
    """torch < 0.4.1: no num_batches_tracked; saved with the legacy (non-zip) serialisation."""
    old = tmp_path / "crnn_old.pth"
    state = {k: v for k, v in nn.DataParallel(meijieru_net).state_dict().items() if "num_batches" not in k}
    torch.save(state, old, _use_new_zipfile_serialization=False)
    rc, stdout, _ = convert([str(old), str(tmp_path / "o.pt"), "--from", "meijieru"])
    assert rc == 0 and "no num_batches_tracked (torch < 0.4.1): set to 0" in stdout
    model, _, _ = load_ours(tmp_path / "o.pt")
    assert max_diff(model, time_major(meijieru_net), inputs()) < 1e-5


def test_to_meijieru_round_trip_is_exact(tmp_path):
    torch.manual_seed(5)
    ours = build_model("vgg", 1, 37, 256)
    ours.train()
    with torch.no_grad():
        ours(torch.rand(4, 1, 32, 100) * 2 - 1)  # BN running statistics away from their init
    ours.eval()
    cfg = Config()
    cfg.model.variant = "vgg"
    src = tmp_path / "ours.pt"
    save_checkpoint(model_checkpoint(ours, cfg, Charset.from_spec("alnum36")), src)
    theirs_path = tmp_path / "netCRNN.pth"
    rc, stdout, _ = convert([str(src), str(theirs_path), "--to", "meijieru"])
    assert rc == 0 and "CRNN(32, 1, 37, 256)" in stdout
    state = torch.load(theirs_path, weights_only=True)
    assert not any(k.startswith("module.") for k in state)
    for i in (2, 4, 6):
        assert torch.equal(state[f"cnn.conv{i}.bias"], torch.zeros(512 if i > 2 else 256))
    theirs = MeijieruCRNN(1, 37, 256).eval()
    theirs.load_state_dict(state, strict=True)
    assert max_diff(ours, time_major(theirs), inputs()) < 1e-6
    back = tmp_path / "back.pt"
    assert convert([str(theirs_path), str(back), "--from", "meijieru"])[0] == 0
    again = load_checkpoint(back).model_state
    assert list(again) == list(ours.state_dict())
    assert all(torch.equal(again[k], v) for k, v in ours.state_dict().items())


def test_to_meijieru_refuses_other_variants(tmp_path):
    cfg = Config()
    model = build_model("vgg_small", 1, 37)
    save_checkpoint(model_checkpoint(model, cfg, Charset.from_spec("alnum36")), tmp_path / "small.pt")
    rc, _, err = convert([str(tmp_path / "small.pt"), str(tmp_path / "x.pth"), "--to", "meijieru"])
    assert rc == 1 and "only variant vgg with batch norm is meijieru's network; this model is variant vgg_small" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "x.pth").exists()


# ---------------------------------------------------------------------------------------------- Sierkinhane
def test_sierkinhane_state_dict_container_converts_exactly(sierkinhane_net, sierkinhane_file, sierkinhane_converted,
                                                          tmp_path):
    out = tmp_path / "zh.pt"
    rc, _, err = convert([str(sierkinhane_file), str(out), "--from", "sierkinhane"])
    assert rc == 1 and f"has {len(ZH) + 1} classes ({len(ZH)} characters + blank); pass --charset" in err
    rc, _, err = convert([str(sierkinhane_file), str(out), "--from", "sierkinhane", "--charset", "alnum36"])
    assert rc == 1 and "--charset alnum36 has 36 characters but the model has" in err
    assert not out.exists()
    model, cs, cfg = load_ours(sierkinhane_converted)
    assert cs.chars == ZH
    assert (cfg.data.width, cfg.data.interpolation, cfg.data.mean, cfg.data.std) == (160, "bicubic", 0.588, 0.193)
    # theirs ends in log_softmax: the same distribution, so compare log-probabilities
    assert max_diff(lambda x: model(x).log_softmax(-1), time_major(sierkinhane_net), inputs()) < 1e-5


def test_charset_defaults_and_size_checks(tmp_path):
    assert resolve_charset(None, 37, "meijieru").chars == "0123456789abcdefghijklmnopqrstuvwxyz"
    utf8 = tmp_path / "chars.txt"
    utf8.write_text("\n".join(ZH) + "\n", encoding="utf-8")
    assert resolve_charset(str(utf8), len(ZH) + 1, "sierkinhane").chars == ZH
    with pytest.raises(ForeignFormatError, match="pass --charset with its 95-character alphabet"):
        resolve_charset(None, 96, "clovaai")


def test_sierkinhane_preprocessing_is_applied_by_predict(sierkinhane_net, sierkinhane_converted, tmp_path, capsys):
    out = sierkinhane_converted
    img_path = tmp_path / "word.png"
    img_path.write_bytes(render_png("中文 2024"))
    img = Image.open(img_path).convert("L")
    pixels = np.asarray(img.resize((160, 32), Image.BICUBIC), dtype=np.float32)
    theirs_in = torch.from_numpy((pixels / 255.0 - 0.588) / 0.193)[None, None]  # (1, 1, 32, 160)
    rec = Recognizer.from_checkpoint(out, "cpu")
    assert (rec.preprocess(img)[None] - theirs_in).abs().max().item() < 1e-5
    with torch.no_grad():
        expected = greedy(sierkinhane_net(theirs_in)[:, 0], ZH)
    assert predict_main(["--weights", str(out), str(img_path), "--device", "cpu"]) == 0
    assert capsys.readouterr().out.split("\t")[1] == expected


# ---------------------------------------------------------------------------------------------- clovaai
def test_clovaai_checkpoint_converts_exactly(clova_net, clova_converted):
    out, stdout = clova_converted
    assert "fused SequenceModeling.1.linear and Prediction" in stdout
    model, _, cfg = load_ours(out)
    assert (cfg.model.variant, cfg.data.interpolation, cfg.data.keep_ratio) == ("vgg_clova", "bicubic", False)
    assert model.output_length(100) == 24 == model(torch.zeros(1, 1, 32, 100)).shape[1]
    assert max_diff(model, clova_net, inputs()) < 1e-5


def test_clovaai_pad_keeps_the_ratio_and_repeats_the_last_column(clova_net, clova_file, tmp_path):
    out = tmp_path / "clova_pad.pt"
    assert convert([str(clova_file), str(out), "--from", "clovaai", "--pad"])[0] == 0
    rec = Recognizer.from_checkpoint(out, "cpu")
    assert (rec.config.data.keep_ratio, rec.config.data.pad, rec.config.data.width) == (True, "edge", 100)
    img = Image.open(__import__("io").BytesIO(render_png("ab1"))).convert("L")  # narrower than 100 at height 32
    w = math.ceil(32 * img.width / img.height)
    assert w < 100
    small = np.asarray(img.resize((w, 32), Image.BICUBIC), dtype=np.float32) / 255.0
    padded = np.concatenate([small, np.repeat(small[:, -1:], 100 - w, axis=1)], axis=1)  # right, last column
    theirs_in = torch.from_numpy((padded - 0.5) / 0.5)[None, None]  # (1, 1, 32, 100)
    x = rec.preprocess(img)
    assert x.shape == (1, 32, 100) and (x[None] - theirs_in).abs().max().item() < 1e-5
    assert max_diff(rec.model, clova_net, [theirs_in]) < 1e-5


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:FutureWarning")
def test_export_of_a_converted_checkpoint_matches_the_peer(clova_net, clova_converted, tmp_path):
    conv = clova_converted[0]
    ts = tmp_path / "clova.ts"
    assert export_main(["--weights", str(conv), "--format", "torchscript", "--out", str(ts), "--width", "32"]) == 0
    extra = {"crnn.json": ""}
    loaded = torch.jit.load(str(ts), map_location="cpu", _extra_files=extra)
    meta = json.loads(extra["crnn.json"])
    assert (meta["variant"], meta["interpolation"], meta["normalize"]) == ("vgg_clova", "bicubic", "pixel / 127.5 - 1")
    assert max_diff(loaded, clova_net, inputs()) < 1e-5


def test_onnx_export_of_a_converted_meijieru_checkpoint_matches_the_peer(meijieru_net, meijieru_converted, tmp_path):
    import onnxruntime as ort

    conv = meijieru_converted[0]
    onnx_path = tmp_path / "m.onnx"
    assert export_main(["--weights", str(conv), "--format", "onnx", "--out", str(onnx_path), "--width", "32"]) == 0
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    run = lambda x: torch.from_numpy(sess.run(None, {"images": x.numpy()})[0])  # noqa: E731
    assert max_diff(run, time_major(meijieru_net), inputs()) < 1e-5


# ---------------------------------------------------------------------------------------------- recognition, refusals
def test_unconverted_foreign_files_name_the_convert_command(meijieru_file, clova_file, sierkinhane_file, tmp_path,
                                                            capsys):
    img = tmp_path / "w.png"
    img.write_bytes(render_png("ab"))
    for path, source in [(meijieru_file, "meijieru"), (clova_file, "clovaai")]:
        for extra in ([], ["--charset", "alnum36"]):
            assert predict_main(["--weights", str(path), str(img), *extra]) == 2
            err = capsys.readouterr().err
            assert err.strip().endswith(f"checkpoint: crnn-convert-ckpt {path} OUT --from {source}"), err
            assert len(err.splitlines()) == 1
    assert predict_main(["--weights", str(sierkinhane_file), str(img)]) == 2
    err = capsys.readouterr().err
    assert (f"looks like a Sierkinhane/CRNN_Chinese_Characters_Rec checkpoint: crnn-convert-ckpt {sierkinhane_file} "
            f"OUT --from sierkinhane --charset ALPHABET") in err
    assert export_main(["--weights", str(clova_file), "--format", "onnx", "--out", str(tmp_path / "x.onnx")]) == 2
    assert "looks like a clovaai/deep-text-recognition-benchmark checkpoint" in capsys.readouterr().err
    rc, stdout, _ = convert(["--info", str(meijieru_file)])
    assert rc == 0 and "source: " in stdout and "--from meijieru" in stdout


def _clova_state(clova_net: nn.Module) -> dict:
    return dict(clova_net.state_dict())


@pytest.mark.parametrize("change, message", [
    (lambda s: s.update({"Transformation.LocalizationNetwork.conv.0.weight": torch.zeros(64, 1, 3, 3)}),
     "TPS rectification stage (Transformation.*)"),
    (lambda s: s.update({"Prediction.attention_cell.rnn.weight_ih": torch.zeros(4, 4)}), "attention"),
    (lambda s: s.update({"FeatureExtraction.ConvNet.layer1.0.conv1.weight": torch.zeros(4, 4, 3, 3)}), "ResNet"),
])
def test_clovaai_models_crnn_cannot_represent_are_refused(clova_net, tmp_path, capsys, change, message):
    state = _clova_state(clova_net)
    change(state)
    path = tmp_path / "other.pth"
    torch.save(state, path)
    rc, _, err = convert([str(path), str(tmp_path / "o.pt"), "--from", "clovaai"])
    assert rc == 1 and message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o.pt").exists()


def test_non_paper_widths_and_wrong_source_are_refused(tmp_path):
    torch.manual_seed(0)
    narrow = ClovaModel(1, 37, hidden=32, out=256).eval()  # clovaai --output_channel 256
    torch.save(narrow.state_dict(), tmp_path / "narrow.pth")
    rc, _, err = convert([str(tmp_path / "narrow.pth"), str(tmp_path / "o.pt"), "--from", "clovaai"])
    assert rc == 1
    assert "FeatureExtraction.ConvNet.0.weight has shape [32, 1, 3, 3] where crnn needs [64, 1, 3, 3]" in err
    assert "--output_channel 512" in err
    rc, _, err = convert([str(tmp_path / "narrow.pth"), str(tmp_path / "o.pt"), "--from", "meijieru"])
    assert rc == 2 and "looks like a JaidedAI/EasyOCR checkpoint, not meijieru" in err  # 256 wide: EasyOCR g2


def test_meijieru_with_other_widths_is_refused(meijieru_net, tmp_path):
    state = dict(meijieru_net.state_dict())
    state["cnn.conv1.weight"] = torch.zeros(96, 64, 3, 3)  # someone's edited nm list
    torch.save(state, tmp_path / "wide.pth")
    rc, _, err = convert([str(tmp_path / "wide.pth"), str(tmp_path / "o.pt"), "--from", "meijieru"])
    assert rc == 1 and len(err.splitlines()) == 1
    assert "cnn.conv1.weight has shape [96, 64, 3, 3] where crnn needs [128, 64, 3, 3]: meijieru's channel" in err


def test_hand_renamed_meijieru_weights_point_to_the_converter(meijieru_net):
    """A user's own key rename leaves conv biases that crnn's BN layers do not have: the error says what they are."""
    from crnn.engine.checkpoint import CheckpointError, load_model_weights
    from crnn.foreign.meijieru import key_prefixes

    ours = build_model("vgg", 1, 37, 256)
    renamed = {}
    for key, value in meijieru_net.state_dict().items():
        for theirs, mine in key_prefixes(ours.cnn):
            if key.startswith(theirs):
                renamed[mine + key[len(theirs):]] = value
    with pytest.raises(CheckpointError, match=r"unexpected keys \(3\): cnn.6.bias; cnn.12.bias; cnn.18.bias\. these "
                       r"are conv biases before BatchNorm.*--from meijieru"):
        load_model_weights(ours, renamed)


def test_converted_checkpoint_evaluates_with_its_preprocessing_and_trains(clova_file, clova_converted, words_lmdb,
                                                                         tmp_path, capsys, monkeypatch):
    import crnn.data.loader as loader_mod
    from crnn.cli.evaluate import main as eval_main
    from crnn.cli.train import main as train_main

    conv = clova_converted[0]
    seen = {}
    real = loader_mod.build_eval_loader

    def spy(path, **kw):
        seen.update(kw)
        return real(path, **kw)

    monkeypatch.setattr(loader_mod, "build_eval_loader", spy)
    assert eval_main(["--weights", str(conv), "--data", str(words_lmdb), "--device", "cpu", "--json"]) == 0
    assert (seen["interpolation"], seen["mean"], seen["std"], seen["width"]) == ("bicubic", 0.5, 0.5, 100)
    assert json.loads(capsys.readouterr().out)["variant"] == "vgg_clova"
    run = tmp_path / "run"
    common = [f"data.train=[{{path: {words_lmdb}}}]", "data.val=[]", f"train.output_dir={run}", "data.batch_size=4",
              "data.num_workers=0", "data.width=64", "data.interpolation=bicubic", "train.amp=off",
              "train.tensorboard=false", "train.show_predictions=0", "train.steps=1", "model.variant=vgg_clova"]
    assert train_main([*common, f"train.init_weights={clova_file}"]) == 1  # unconverted: says how to convert
    assert f"crnn-convert-ckpt {clova_file} OUT --from clovaai" in capsys.readouterr().err
    assert train_main([*common, f"train.init_weights={conv}"]) == 0  # converted: trains
    ck = torch.load(run / "last.pt", weights_only=True)
    assert ck["variant"] == "vgg_clova" and ck["config"]["data"]["interpolation"] == "bicubic"


def test_preprocessing_options_of_the_transform_and_train_loader(words_lmdb):
    from crnn.data.loader import build_train_loader
    from crnn.data.transforms import ResizeNormalize

    img = Image.open(__import__("io").BytesIO(render_png("hello"))).convert("L")
    default = ResizeNormalize(height=32, width=100)(img)
    pixels = np.asarray(img.resize((100, 32), Image.BILINEAR), dtype=np.float32)
    assert torch.equal(default[0], torch.from_numpy(pixels * np.float32(1 / 127.5) - np.float32(1)))  # as always
    zh = ResizeNormalize(height=32, width=100, interpolation="bicubic", mean=0.588, std=0.193)(img)
    cubic = np.asarray(img.resize((100, 32), Image.BICUBIC), dtype=np.float32)
    assert np.abs(zh[0].numpy() - (cubic / 255 - 0.588) / 0.193).max() < 1e-5
    loader = build_train_loader([{"path": str(words_lmdb)}], Charset.from_spec("alnum36"), height=32, width=150,
                                keep_ratio=True, max_width=150, channels=1, batch_size=8, num_workers=0,
                                max_label_length=None, augment=False, seed=0, pad="edge", interpolation="bicubic")
    batch = next(iter(loader))
    assert batch.images.shape[-1] == 150 and set(batch.widths.tolist()) == {150}  # edge-padded, no batch padding


def test_detection_from_key_names_and_container():
    from crnn.foreign import detect

    meijieru = {"cnn.conv0.weight": torch.zeros(64, 1, 3, 3), "rnn.1.embedding.weight": torch.zeros(37, 512)}
    assert detect(meijieru, "bare").source == "meijieru"
    assert detect(meijieru, "state_dict").source == "meijieru"  # 0-9a-z: meijieru's preprocessing, not Sierkinhane's
    zh = {**meijieru, "rnn.1.embedding.weight": torch.zeros(5991, 512)}
    assert detect(zh, "bare").source == detect(zh, "state_dict").source == "sierkinhane"
    small_zh = {**meijieru, "rnn.1.embedding.weight": torch.zeros(21, 512)}
    assert (detect(small_zh, "bare").source, detect(small_zh, "state_dict").source) == ("meijieru", "sierkinhane")
    assert detect({"Prediction.weight": torch.zeros(37, 256)}).source == "clovaai"
    ours = build_model("vgg_small", 1, 37).state_dict()
    assert detect(ours) is None and detect({"module.cnn.conv0.weight": torch.zeros(1)}) is None
