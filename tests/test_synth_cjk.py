"""Synthetic text lines beyond ASCII: Chinese labels, per-glyph font coverage, clear errors, fixed-length lines."""
from __future__ import annotations

import os
import random
import shutil
import sys

import lmdb
import pytest

from crnn.charset import BUILTIN_CHARSETS
from crnn.cli.synth import main as synth_main
from crnn.config import Config
from crnn.data.fonts import FontPicker, find_fonts, glyph_coverage, uncovered
from crnn.data.lines import is_han
from crnn.data.synth import SynthOptions, make_sample, synth_options

CJK_FONT = "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"  # fonts-wqy-microhei (scripts/setup.sh installs it)
LATIN_FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"  # fonts-dejavu-core: no Han glyphs
ZH = BUILTIN_CHARSETS["zh_gb2312"]

pytestmark = pytest.mark.skipif(not (os.path.isfile(CJK_FONT) and os.path.isfile(LATIN_FONT)),
                                reason="CJK font missing: apt-get install fonts-wqy-microhei fonts-dejavu-core "
                                       "(scripts/setup.sh does)")


def _folder(tmp_path_factory: pytest.TempPathFactory, name: str, *paths: str) -> str:
    d = tmp_path_factory.mktemp(name)
    for p in paths:
        shutil.copy(p, d)
    return str(d)


@pytest.fixture(scope="module")
def zh_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A CJK font and a Latin font (which must never be used for Chinese text)."""
    return _folder(tmp_path_factory, "zh_fonts", CJK_FONT, LATIN_FONT)


@pytest.fixture(scope="module")
def latin_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _folder(tmp_path_factory, "latin_fonts", LATIN_FONT)


def _labels(path: str) -> list[str]:
    env = lmdb.open(path, readonly=True, lock=False)
    with env.begin() as txn:
        n = int(txn.get(b"num-samples"))
        labels = [txn.get(b"label-%09d" % i).decode("utf-8") for i in range(1, n + 1)]
    env.close()
    return labels


def test_cli_zh_gb2312_writes_chinese_lines(tmp_path, zh_dir: str, capsys: pytest.CaptureFixture) -> None:
    out = str(tmp_path / "zh.lmdb")
    args = ["--charset", "zh_gb2312", "--num", "40", "--out", out, "--fonts", zh_dir, "--workers", "1", "--quiet"]
    assert synth_main(args) == 0, capsys.readouterr().err
    labels = _labels(out)
    assert len(labels) == 40 and all(labels) and all(set(lab) <= set(ZH) for lab in labels)
    assert sum(any(map(is_han, lab)) for lab in labels) >= 0.9 * len(labels)
    assert all(len(lab) <= 20 and lab == lab.strip() and "  " not in lab for lab in labels)


def test_font_lacking_glyphs_is_never_used_for_them(zh_dir: str) -> None:
    latin, cjk = os.path.join(zh_dir, os.path.basename(LATIN_FONT)), os.path.join(zh_dir, os.path.basename(CJK_FONT))
    alphabet = "中文字体，。"
    assert not set(alphabet) & glyph_coverage(latin, alphabet)
    assert set(alphabet) <= glyph_coverage(cjk, alphabet)
    picker = FontPicker([latin, cjk], alphabet)
    assert {picker.pick("中文 abc，", random.Random(i)).path for i in range(20)} == {cjk}
    with pytest.raises(ValueError, match="no font can draw"):
        FontPicker([latin], alphabet).pick("中文", random.Random(0))
    assert uncovered("ab中文", [latin]) == ["中", "文"] and uncovered("ab中文", [latin, cjk]) == []


def test_english_words_ignore_cjk_fonts(zh_dir: str) -> None:
    latin = os.path.join(zh_dir, os.path.basename(LATIN_FONT))
    opts = SynthOptions(charset="alnum36")
    assert [make_sample(i, 3, find_fonts(zh_dir), opts) for i in range(8)] == \
        [make_sample(i, 3, [latin], opts) for i in range(8)]


def test_uncoverable_charset_is_a_one_line_error_and_writes_nothing(tmp_path, latin_dir: str,
                                                                    capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "x.lmdb"
    code = synth_main(["--charset", "abc中文字", "--num", "5", "--out", str(out), "--fonts", latin_dir,
                       "--workers", "1", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert err.count("\n") == 1 and "3 of 6 characters" in err and "'中', '文', '字'" in err
    assert "fonts-wqy-microhei" in err and "--fonts" in err


def test_fixed_length_lines(zh_dir: str, tmp_path, capsys: pytest.CaptureFixture) -> None:
    fonts = find_fonts(zh_dir)
    opts = SynthOptions(charset="zh_gb2312", line_len=10, max_len=10)
    assert all(len(make_sample(i, 0, fonts, opts)[1]) == 10 for i in range(12))
    out = str(tmp_path / "ten.lmdb")
    assert synth_main(["--charset", "zh_gb2312", "--line-len", "10", "--num", "6", "--out", out,
                       "--fonts", zh_dir, "--workers", "1", "--quiet"]) == 0
    assert [len(lab) for lab in _labels(out)] == [10] * 6
    with pytest.raises(ValueError, match="line_len needs text lines"):
        SynthOptions(charset="alnum36", line_len=10)


def test_lowercase_alphabet_lines_are_folded(zh_dir: str) -> None:
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz" + "的一是不了人在有我他这中大来上国个到说们为子和你地出道也时年"
    opts = SynthOptions(charset=alphabet, max_len=8)
    labels = [make_sample(i, 1, find_fonts(zh_dir), opts)[1] for i in range(15)]
    assert all(lab and set(lab) <= set(alphabet) and len(lab) <= 8 for lab in labels)


def test_training_generates_lines_for_the_model_alphabet() -> None:
    cfg = Config()
    assert synth_options(cfg) == SynthOptions(text="words")  # English defaults unchanged
    cfg.model.charset, cfg.data.height, cfg.data.max_label_length = "zh_gb2312", 32, 12
    opts = synth_options(cfg)
    assert (opts.charset, opts.text, opts.height, opts.max_len, opts.line_len) == ("zh_gb2312", "lines", 32, 12, 0)
    cfg.data.synth_line_len = 10  # fixed-length lines, as crnn-synth --line-len makes them
    assert synth_options(cfg).line_len == 10
    assert synth_options(cfg).mixed_fonts == 0.0
    cfg.data.synth_mixed_fonts = 0.3  # numbers and Latin words of a share of lines in a Western face
    assert synth_options(cfg).mixed_fonts == 0.3


def test_synth_cli_mixed_fonts(zh_dir: str, tmp_path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "mixed.lmdb"
    with pytest.raises(SystemExit) as e:
        synth_main(["--charset", "zh_gb2312", "--mixed-fonts", "2", "--num", "6", "--out", str(out)])
    assert e.value.code == 2 and "--mixed-fonts must be within 0..1" in capsys.readouterr().err and not out.exists()
    assert synth_main(["--charset", "zh_gb2312", "--mixed-fonts", "1", "--num", "6", "--out", str(out),
                       "--fonts", zh_dir, "--workers", "1", "--quiet"]) == 0
    assert len(_labels(str(out))) == 6


def test_chinese_without_a_word_list_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    from crnn.data import lines

    monkeypatch.setitem(sys.modules, "jieba", None)  # as if jieba were not installed
    lines.load_corpus.cache_clear()
    try:
        with pytest.raises(lines.TextSourceError, match=r"pip install 'crnn\[zh\]'.*--words FILE"):
            lines.load_corpus("zh_gb2312", None)
    finally:
        lines.load_corpus.cache_clear()


def test_frequency_word_lists_are_drawn_by_count(tmp_path) -> None:
    from crnn.data.lines import load_corpus

    words = tmp_path / "freq.txt"
    words.write_text("中国\t900\n人民 100 n\n文字\t0\n", encoding="utf-8")
    corpus = load_corpus("中国人民文字", str(words))
    assert corpus.words == ("中国", "人民") and corpus.cum == (900.0, 1000.0) and corpus.joiner == ""
    draws = [corpus.draw(random.Random(i)) for i in range(200)]
    assert 150 < draws.count("中国") < 200


def test_lines_are_the_same_for_any_worker_count(zh_dir: str) -> None:
    from crnn.data.synth import iter_samples

    fonts, opts = find_fonts(zh_dir), SynthOptions(charset="zh_gb2312", max_len=8)
    assert list(iter_samples(6, 4, fonts, opts, workers=1)) == list(iter_samples(6, 4, fonts, opts, workers=2))


def test_words_mode_with_a_chinese_alphabet_is_refused(tmp_path, zh_dir: str, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "w.lmdb"
    assert synth_main(["--charset", "zh_gb2312", "--text", "words", "--num", "4", "--out", str(out),
                       "--fonts", zh_dir, "--workers", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert not out.exists() and err.count("\n") == 1
    assert "6799 of 6894 characters would never appear" in err and "--text lines" in err


def test_heldout_split_keeps_fonts_and_words_apart(tmp_path) -> None:
    """Training lines never use a held-out CJK face nor a held-out corpus word; --split heldout uses only those."""
    from crnn.data.lines import load_corpus, word_split

    d = tmp_path / "fonts"
    d.mkdir()
    shutil.copy(CJK_FONT, d)
    shutil.copy(LATIN_FONT, d)
    shutil.copy(CJK_FONT, d / "gkai00mp.ttf")  # a file named like a held-out face (fonts-arphic-gkai00mp)
    # the copy has the same family/style as the original, so each split must still find its own file
    names = lambda split: sorted(os.path.basename(p) for p in find_fonts(str(d), split))  # noqa: E731
    assert names("train") == ["DejaVuSans.ttf", "wqy-microhei.ttc"]
    assert names("heldout") == ["DejaVuSans.ttf", "gkai00mp.ttf"]
    with pytest.raises(ValueError, match="split must be one of"):
        find_fonts(str(d), "test")
    train, held = load_corpus(ZH, None, "train"), load_corpus(ZH, None, "heldout")
    assert train is not None and held is not None
    assert not set(train.words) & set(held.words)
    assert 0.05 < len(held.words) / (len(train.words) + len(held.words)) < 0.15
    assert {word_split(w) for w in held.words[:500]} == {"heldout"}
    opts = SynthOptions(charset=ZH, max_len=10, split="heldout")
    fonts = find_fonts(str(d), opts.split)
    for i in range(6):
        _, label = make_sample(i, 4, fonts, opts)
        assert label


def test_font_package_sections_survive_their_own_comments() -> None:
    """Comments inside a section (notes on why a package is there) do not start a section of their own."""
    from crnn.data.fonts import font_packages

    cjk = font_packages("cjk")
    assert {"fonts-noto-cjk", "fonts-hanazono", "fonts-cns11643-kai", "fonts-babelstone-han"} <= set(cjk)
    held = font_packages("cjk-heldout")
    assert held == ["fonts-arphic-gbsn00lp", "fonts-arphic-gkai00mp", "fonts-droid-fallback", "fonts-lxgw-wenkai"]
    assert not set(cjk) & set(held)
    assert len(font_packages()) == sum(len(font_packages(s)) for s in ("base", "extra", "cjk", "cjk-heldout",
                                                                       "photos"))


def test_only_four_files_of_y_oz_font_join_the_pools() -> None:
    """fonts-yozvox-yozfont-standard-kana holds 26 variants of one hand: regular and bold, upright and italic, draw."""
    from crnn.data.fonts import _excluded

    for name in ("YOzRS_.ttf", "YOzBS_.ttf", "YOzRS_i.ttf", "YOzBS_i.ttf"):
        assert not _excluded(f"/f/{name}", "YOzS", "Regular"), name
    for name in ("YOzRSF.ttf", "YOzRS_90.ttf", "YOzBSP90.ttf", "YOzRSXM90.ttf", "YOzRS_90i.ttf"):
        assert _excluded(f"/f/{name}", "YOzS", "Regular"), name


def test_rare_han_supplement_files_join_no_font_pool(tmp_path) -> None:
    """TW-Kai's Ext-B / Plus files draw ASCII but no common Hanzi: they must not become Latin faces."""
    from crnn.data.fonts import NoFontsError

    for name in ("TW-Kai-Ext-B-98_1.ttf", "TW-Sung-Plus-98_1.ttf", "TW-Kai-98_1.ttf"):
        d = tmp_path / name.replace(".", "_")
        d.mkdir()
        shutil.copy(LATIN_FONT, d / name)  # DejaVu's glyphs under the supplement's file name
        if name == "TW-Kai-98_1.ttf":  # the main face's name is not excluded (its own file is a CJK face)
            assert [os.path.basename(p) for p in find_fonts(str(d), "train")] == [name]
            continue
        for split in ("train", "heldout", "all"):
            with pytest.raises(NoFontsError):
                find_fonts(str(d), split)


def test_an_icon_face_is_refused_by_name_but_a_gothic_one_is_not():
    """'icon' refuses icon faces; it once also matched inside 'GothicOne', so a listed training face never drew."""
    from crnn.data.fonts import _excluded

    for name in ("MaterialIcons-Regular.ttf", "ionicons.ttf", "Iconic.otf", "fontawesome-webfont.ttf"):
        assert _excluded(f"/f/{name}", "", "Regular"), name
    assert not _excluded("/f/DelaGothicOne-merged.ttf", "Dela Gothic One", "Regular")
