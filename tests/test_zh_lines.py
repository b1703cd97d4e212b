"""The Chinese line model's product side: weights by name, lines of any width, the zh benchmark's pieces.

The shipped file (weights/crnn_zh_lines.pt) is stood in for by a tiny zh_gb2312 keep-ratio model made here.
"""
from __future__ import annotations

import json
import random
import warnings
from pathlib import Path

import pytest
import torch
from PIL import Image, ImageDraw, ImageFont

import crnn
import crnn.infer as infer
from crnn.charset import Charset
from crnn.config import Config
from crnn.engine.checkpoint import model_checkpoint, save_checkpoint
from crnn.infer import INFER_MAX_WIDTH, InferenceError, Recognizer, SqueezeWarning, resolve_weights
from crnn.model import build_model

REPO = Path(__file__).resolve().parent.parent
NOTO_CJK = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
SMALL_MAX_WIDTH = 64  # the stand-in's training cap: 16 time steps, far fewer than a 40-character line needs


def zh_config() -> Config:
    """The shipped recipe's geometry (vgg_small, zh_gb2312, keep-ratio, height 32), hidden 16, max_width 64."""
    cfg = Config()
    cfg.model.variant, cfg.model.charset, cfg.model.hidden = "vgg_small", "zh_gb2312", 16
    cfg.data.height, cfg.data.keep_ratio, cfg.data.width, cfg.data.max_width = 32, True, 48, SMALL_MAX_WIDTH
    return cfg


@pytest.fixture(scope="module")
def zh_folder(tmp_path_factory) -> Path:
    """A weights folder holding a stand-in crnn_zh_lines.pt (fp16 weights-only, like the shipped files)."""
    folder = tmp_path_factory.mktemp("weights")
    cfg, cs = zh_config(), Charset.from_spec("zh_gb2312")
    torch.manual_seed(0)
    model = build_model(cfg.model.variant, cfg.model.in_channels, cs.num_classes, cfg.model.hidden).eval()
    model.half()
    save_checkpoint(model_checkpoint(model, cfg, cs), folder / infer.WEIGHTS_BY_NAME["zh"])
    return folder


@pytest.fixture
def shipped_zh(zh_folder, monkeypatch) -> Path:
    """Make ``zh`` name the stand-in (the package's weights/ folder is replaced by ``zh_folder``)."""
    monkeypatch.setattr(infer, "weights_folder", lambda: zh_folder)
    return zh_folder / infer.WEIGHTS_BY_NAME["zh"]


def line_image(n: int, height: int = 32) -> Image.Image:
    """A line of ``n`` square glyph cells (n x height wide): the shape of an n-character Chinese line."""
    img = Image.new("RGB", (n * height, height), "white")
    draw = ImageDraw.Draw(img)
    for i in range(n):
        draw.rectangle([i * height + 4, 4, (i + 1) * height - 4, height - 4], outline="black", width=2)
    return img


# ---------------------------------------------------------------------------------------------- weights by name
def test_names_resolve_to_the_weights_folder(shipped_zh, tmp_path):
    assert resolve_weights("zh") == shipped_zh
    assert resolve_weights(None) == infer.default_weights()
    with pytest.raises(InferenceError) as e:
        resolve_weights("zh", folder=tmp_path)  # a folder without the file
    msg = str(e.value)
    assert "\n" not in msg and str(tmp_path / "crnn_zh_lines.pt") in msg and "--weights PATH" in msg
    assert resolve_weights("runs/x/best.pt") == Path("runs/x/best.pt")  # not a name: a path, reported when loaded


def test_en_names_the_default_model():
    assert resolve_weights("en") == infer.weights_folder() / "crnn_en.pt" == infer.default_weights()
    assert resolve_weights("en_alnum36") == infer.weights_folder() / "crnn_vgg_small.pt"  # the former default


def test_a_path_that_exists_wins_over_a_name(shipped_zh, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("zh").write_bytes(b"")
    assert resolve_weights("zh") == Path("zh")


def test_crnn_predict_eval_and_export_take_the_name(shipped_zh, tmp_path, capsys):
    from crnn.cli.evaluate import main as eval_main
    from crnn.cli.export import main as export_main
    from crnn.cli.predict import main as predict_main

    line_image(6).save(tmp_path / "line.png")
    (tmp_path / "gt.txt").write_text("line.png\t中文行测试\n", encoding="utf-8")
    assert predict_main(["--weights", "zh", "--format", "json", str(tmp_path / "line.png")]) == 0
    assert json.loads(capsys.readouterr().out)["path"] == str(tmp_path / "line.png")
    assert eval_main(["--weights", "zh", "--data", str(tmp_path), "--json", "--protocol", "unicode"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["weights"] == str(shipped_zh) and summary["num_classes"] == 6895
    assert export_main(["--weights", "zh", "--format", "torchscript", "--out", str(tmp_path / "zh.ts")]) == 0
    assert "wrote" in capsys.readouterr().out


def test_a_missing_named_model_is_one_line_everywhere(tmp_path, monkeypatch, capsys):
    from crnn.cli.evaluate import main as eval_main
    from crnn.cli.export import main as export_main
    from crnn.cli.predict import main as predict_main

    monkeypatch.setattr(infer, "weights_folder", lambda: tmp_path)
    line_image(3).save(tmp_path / "line.png")
    for main, argv in [(predict_main, [str(tmp_path / "line.png")]), (eval_main, ["--data", str(tmp_path)]),
                       (export_main, ["--format", "onnx", "--out", str(tmp_path / "x.onnx")])]:
        assert main(["--weights", "zh", *argv]) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and "crnn_zh_lines.pt, which is not there" in err, err
        assert "git pull" in err and "scripts/zh_sitting.sh start" in err
    with pytest.raises(InferenceError, match="crnn_zh_lines.pt"):
        crnn.Recognizer("zh")


def test_python_api_reads_with_the_name(shipped_zh):
    reader = crnn.Recognizer("zh", device="cpu")
    assert reader.weights == shipped_zh
    assert isinstance(reader.read(line_image(5)).text, str)
    assert Recognizer.from_checkpoint("zh", device="cpu").charset.num_classes == 6895


# ---------------------------------------------------------------------------------------------- lines of any width
def test_a_40_character_line_keeps_enough_time_steps(shipped_zh):
    rec = Recognizer.from_checkpoint("zh", device="cpu")
    assert rec.config.data.keep_ratio and rec.config.data.max_width == SMALL_MAX_WIDTH
    img = line_image(40)  # 1280 x 32: 20 times the training cap
    with warnings.catch_warnings():
        warnings.simplefilter("error", SqueezeWarning)
        x = rec.preprocess(img)  # (C, H, W)
    assert x.shape[-2:] == (32, 1280)
    with torch.inference_mode():
        logits = rec.model(x[None].to(rec.device, next(rec.model.parameters()).dtype))  # (1, T, K)
    assert logits.shape[1] == rec.model.output_length(1280) >= 2 * 40 - 1  # room for 40 characters and blanks
    # the old behaviour, the training cap, would have left 16 steps: fewer than the characters
    assert rec.model.output_length(SMALL_MAX_WIDTH) < 40
    # the same line at another size keeps its ratio
    assert rec.preprocess(img.resize((640, 16))).shape[-1] == 1280


def test_a_line_beyond_the_cap_is_squeezed_with_one_warning(shipped_zh):
    ckpt = infer.load_checkpoint(shipped_zh)
    rec = Recognizer.from_checkpoint(ckpt, device="cpu", max_width=256)
    with pytest.warns(SqueezeWarning, match=r"1280x32 line is 1280 px wide .* squeezed to 256 px") as rec_w:
        x = rec.preprocess(line_image(40), "long.png")
    assert x.shape[-1] == 256 and len(rec_w) == 1 and str(rec_w[0].message).startswith("long.png: ")
    assert Recognizer.from_checkpoint(ckpt, device="cpu").transform.max_width == INFER_MAX_WIDTH


def test_crnn_predict_prints_a_squeezed_line_as_one_warning_line(shipped_zh, tmp_path, capsys):
    from crnn.cli.predict import main as predict_main

    Image.new("L", (2600, 16), 255).save(tmp_path / "wide.png")  # 5200 px at height 32: beyond the cap
    line_image(4).save(tmp_path / "short.png")
    assert predict_main(["--weights", "zh", str(tmp_path / "wide.png"), str(tmp_path / "short.png")]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 2
    assert err.splitlines() == [f"crnn-predict: warning: {tmp_path / 'wide.png'}: 2600x16 line is 5200 px wide at "
                                f"height 32, squeezed to {INFER_MAX_WIDTH} px ({INFER_MAX_WIDTH // 4} time steps for "
                                f"~1300); cut it into shorter lines"]


def test_fixed_width_models_ignore_the_inference_cap(tmp_path):
    cfg = zh_config()
    cfg.data.keep_ratio, cfg.model.charset = False, "digits"
    cs = Charset.from_spec("digits")
    model = build_model(cfg.model.variant, 1, cs.num_classes, 16)
    rec = Recognizer(model, cs, cfg, "cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error", SqueezeWarning)
        assert rec.preprocess(line_image(40)).shape[-1] == cfg.data.width


def test_export_verifies_a_long_line_and_stores_the_inference_cap(shipped_zh, tmp_path):
    from crnn.engine.checkpoint import build_from_checkpoint, load_checkpoint
    from crnn.export import export_model

    model, cs, cfg = build_from_checkpoint(load_checkpoint(shipped_zh), "cpu")
    report = export_model(model, cs, cfg, tmp_path / "zh.ts", "torchscript")
    assert (1, 1, 32, 4 * SMALL_MAX_WIDTH) in report.shapes  # dynamic width checked beyond the training cap
    extra = {"crnn.json": ""}
    torch.jit.load(str(tmp_path / "zh.ts"), _extra_files=extra)
    meta = json.loads(extra["crnn.json"])
    assert meta["keep_ratio"] and meta["max_width"] == INFER_MAX_WIDTH and meta["train_max_width"] == SMALL_MAX_WIDTH


# ---------------------------------------------------------------------------------------------- the benchmark
@pytest.fixture(scope="module")
def bench(zh_bench):
    return zh_bench


def test_benchmark_text_is_held_out_lines_of_4_to_12_characters(bench):
    pytest.importorskip("jieba")
    from crnn.data.lines import word_split

    chars = set(Charset.from_spec("zh_gb2312").chars)
    corpus = bench.text_source()[0]
    assert all(word_split(w) == "heldout" for w in corpus.words[:2000])
    for n in (4, 7, 12):
        rng_a, rng_b = random.Random(n), random.Random(n)
        text = bench.bench_text(rng_a, n)
        assert len(text) == n and set(text) <= chars and text == bench.bench_text(rng_b, n)
    assert {bench.line_len(random.Random(i)) for i in range(200)} == set(range(4, 13))
    opts = bench.line_options()
    assert opts.split == "heldout" and opts.clutter is False and opts.charset == "zh_gb2312"


def test_benchmark_errors_by_class_add_up_to_the_edit_distance(bench):
    from crnn.metrics import edit_distance, normalize_text

    assert bench.class_errors("会1975年去", "会1995年去") == {"Hanzi": [0, 3], "Latin": [0, 0], "digits": [1, 4],
                                                          "other": [0, 0]}
    assert bench.class_errors("ab中文", "中文") == {"Hanzi": [0, 2], "Latin": [2, 0], "digits": [0, 0], "other": [0, 0]}
    assert bench.class_errors("", "中a1，") == {c: [1, 1] for c in bench.CLASSES}  # NFKC: the comma is "other"
    rng = random.Random(5)
    alphabet = "中文字a1,Bx9 "
    for _ in range(300):
        t = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9)))
        p = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9)))
        got = bench.class_errors(p, t)
        nt, np_ = normalize_text(t, "unicode"), normalize_text(p, "unicode")
        assert sum(e for e, _ in got.values()) == edit_distance(nt, np_), (p, t)
        assert sum(n for _, n in got.values()) == len(nt)
    by = bench.errors_by_class(["会1975年去", "ab"], ["会1995年去", "ab"])
    assert by["digits"] == {"errors": 1, "chars": 4, "cer": 0.25} and by["Latin"]["errors"] == 0


def test_benchmark_by_font_needs_readings_and_names_the_faces(bench, tmp_path, capsys):
    assert bench.main(["--by-font", "--work", str(tmp_path)]) == 2
    assert "no " + str(tmp_path / "readings.tsv") + ": run the benchmark" in capsys.readouterr().err
    assert [bench.font_group(p) for p in ("/f/LXGWWenKaiMono-Bold.ttf", "x/gkai00mp.ttf", "gbsn00lp.ttf",
                                          "/u/DejaVuSans.ttf")] == [
        "LXGW WenKai (+ Mono)", "AR PL KaitiM GB", "AR PL SungtiL GB", "Latin faces (Latin-only lines)"]


def test_unseen_font_sets_draw_held_out_faces_clean_and_with_print_damage(bench, monkeypatch):
    """Issue 31's yardstick: held-out CJK faces only; clean = pure black on white PNG, print = JPEG with damage."""
    pytest.importorskip("jieba")
    import io

    from crnn.data import fonts as F

    fonts = tuple(bench.set_fonts("unseen_clean"))
    if not any(F.is_heldout_font(p) for p in fonts):
        pytest.skip("needs the held-out CJK fonts (scripts/setup.sh)")
    assert fonts == tuple(bench.set_fonts("unseen_print")) == tuple(bench.set_fonts("heldout"))
    picked = []
    pick = F.FontPicker.pick
    monkeypatch.setattr(F.FontPicker, "pick", lambda self, text, rng: picked.append(pick(self, text, rng)) or picked[-1])
    for i in range(4):
        data, ext, label = bench.sample("unseen_clean", i, fonts)
        img = Image.open(io.BytesIO(data))
        assert ext == "png" and img.mode == "L" and img.getextrema() == (0, 255) and 4 <= len(label) <= 12
        assert bench.sample("unseen_clean", i, fonts) == (data, ext, label)  # the same in every run
        data, ext, _ = bench.sample("unseen_print", i, fonts)
        assert ext == "jpg" and Image.open(io.BytesIO(data)).format == "JPEG"
    han = [info for info in picked if info.cjk]
    assert han and all(F.is_heldout_font(info.path) for info in han)
    assert set(bench.SETS) >= {"heldout", "unseen_clean", "unseen_print"}
    assert len(set(bench.SEEDS.values())) == len(bench.SEEDS) == len(bench.ALL_SETS)


def test_clean_renderer_uses_the_sc_face(bench):
    if not NOTO_CJK.is_file():
        pytest.skip("needs fonts-noto-cjk")
    font = bench.noto_sc(20)
    assert isinstance(font, ImageFont.FreeTypeFont) and font.getname() == ("Noto Sans CJK SC", "Regular")


def test_long_set_lines_are_24_to_40_characters(bench):
    pytest.importorskip("jieba")
    if not NOTO_CJK.is_file():
        pytest.skip("needs fonts-noto-cjk")
    lengths = [len(bench.sample("long", i, ())[2]) for i in range(3)]
    assert all(24 <= n <= 40 for n in lengths)


def test_chinese_page_and_model_card_hold_the_zh_sections_and_table_marker():
    section = (REPO / "docs" / "chinese.md").read_text(encoding="utf-8")
    assert "## Reading Chinese lines" in section and "## Train a Chinese line model" in section
    assert "crnn-predict --weights runs/zh_lines/best.pt weights/samples/zh_line.png" in section
    card = (REPO / "weights" / "README.md").read_text(encoding="utf-8")  # the benchmark table lives here, once
    assert "## Chinese text lines" in card and "<!-- zh-table -->" in card
    # the docs say whether a Chinese model ships, and they say what the weights folder holds
    shipped = (REPO / "weights" / "crnn_zh_lines.pt").is_file()
    assert ("**No Chinese model ships in this release.**" in section) is not shipped
    assert ("**Not shipped in this release.**" in card) is not shipped
    assert Image.open(REPO / "weights" / "samples" / "zh_line.png").height >= 32


def test_the_docs_state_the_committed_chinese_model_as_it_is():
    """The Chinese page and the model card quote the committed file's own counters and its curve's last CER."""
    pack = REPO / "weights" / "crnn_zh_lines.pt"
    if not pack.is_file():
        pytest.skip("no Chinese model in this checkout")
    from crnn.engine.curve import read_curve

    state = torch.load(pack, map_location="cpu", weights_only=True)["state"]
    rows = read_curve(REPO / "weights" / "crnn_zh_lines_curve.tsv")
    rows = [r for r in rows if r["set"] == rows[0]["set"]]  # the first validation set: held-out fonts, damaged
    assert rows and int(rows[-1]["step"]) <= state["step"]
    counters = (f"**{state['step']:,} steps, {state['images_seen'] / 1e6:.2f} M lines seen, "
                f"{state['cpu_seconds'] / 3600:.1f} CPU-hours**")
    cer = f"CER {100 * float(rows[-1]['cer']):.1f} %"
    for doc in (REPO / "docs" / "chinese.md", REPO / "weights" / "README.md"):
        text = doc.read_text(encoding="utf-8")
        assert counters in text and cer in text and "@@" not in text, doc


def test_photographed_lines_count_only_with_a_named_source_and_licence(bench, tmp_path):
    """zh_benchmark --real DIR: a folder of real lines is a set of its own, and only with SOURCE.txt naming both."""
    folder = tmp_path / "shop_signs"
    folder.mkdir()
    with pytest.raises(ValueError, match="no gt.txt"):
        bench.real_set(folder)
    (folder / "gt.txt").write_text("a.jpg\t鸭血粉丝\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"named source and licence: write .*SOURCE.txt .*\(missing: source, licence\)"):
        bench.real_set(folder)
    (folder / "SOURCE.txt").write_text("source: photographed by the maintainers, 2026\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"\(missing: licence\)"):
        bench.real_set(folder)
    (folder / "SOURCE.txt").write_text("Source: photographed by the maintainers, 2026\nLicense: CC BY 4.0\n",
                                       encoding="utf-8")
    assert bench.real_set(folder) == (
        "real:shop_signs", "photographed: shop_signs (photographed by the maintainers, 2026; CC BY 4.0)")
