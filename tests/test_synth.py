"""Synthetic text generator: determinism, labels, image shape, LMDB output, errors, CLI."""
from __future__ import annotations

import io
import os
import random
import shutil
import string

import lmdb
import pytest
from PIL import Image

from crnn.cli.synth import main as synth_main
from crnn.data.fonts import FontPicker, NoFontsError, find_fonts, font_info
from crnn.data.synth import (SynthDataset, SynthOptions, generate_lmdb, iter_samples, make_sample, render_word,
                             sample_text, text_label)
from crnn.data.words import load_words

DEJAVU = ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSerif-Bold.ttf")


@pytest.fixture(scope="module")
def fonts_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A folder with two DejaVu fonts, so tests do not scan every system font."""
    have = [p for p in DEJAVU if os.path.isfile(p)]
    if not have:
        pytest.skip("DejaVu fonts not installed (apt-get install fonts-dejavu-core)")
    d = tmp_path_factory.mktemp("fonts")
    for p in have:
        shutil.copy(p, d)
    return str(d)


@pytest.fixture(scope="module")
def fonts(fonts_dir: str) -> list[str]:
    return find_fonts(fonts_dir)


def _decode(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data))


def test_render_word_is_rgb_at_requested_height(fonts: list[str]) -> None:
    for height in (32, 48):
        img = render_word("Hello", random.Random(1), fonts, SynthOptions(height=height))
        assert img.mode == "RGB" and img.height == height and img.width >= 1


def test_make_sample_is_deterministic_per_seed_and_index(fonts: list[str]) -> None:
    opts = SynthOptions()
    first = [make_sample(i, 7, fonts, opts) for i in range(6)]
    again = [make_sample(i, 7, fonts, opts) for i in range(6)]
    other = [make_sample(i, 8, fonts, opts) for i in range(6)]
    assert first == again
    assert first != other
    assert len({data for data, _ in first}) == 6


def test_same_data_with_one_or_two_workers(fonts: list[str]) -> None:
    opts = SynthOptions()
    one = list(iter_samples(10, 3, fonts, opts, workers=1))
    two = list(iter_samples(10, 3, fonts, opts, workers=2))
    assert one == two


@pytest.mark.parametrize("charset", ["alnum36", "digits", "printable94", "xyz019-"])
def test_labels_only_use_the_charset(fonts: list[str], charset: str) -> None:
    opts = SynthOptions(charset=charset, max_len=12)
    allowed = set({"alnum36": string.digits + string.ascii_lowercase, "digits": string.digits,
                   "printable94": string.digits + string.ascii_letters + string.punctuation}.get(charset, charset))
    for data, label in iter_samples(20, 0, fonts, opts):
        assert label and set(label) <= allowed and len(label) <= 12
        assert _decode(data).height == 32


def test_text_label_folds_case_and_drops_punctuation_outside_the_alphabet() -> None:
    assert text_label("FAX:", "alnum36") == "fax"
    assert text_label("FAX:", "printable94") == "FAX:"
    assert text_label("$12.99", "digits") == "1299"
    assert text_label("ABC1", "digits") is None  # letters cannot be represented: resample
    assert text_label("!!", "alnum36") is None  # nothing left


def test_sample_text_mixes_cases_and_numbers() -> None:
    rng, opts = random.Random(0), SynthOptions()
    texts = [sample_text(rng, opts) for _ in range(400)]
    assert all(1 <= len(t) <= opts.max_len for t in texts)
    upper = sum(t.isupper() and t.isalpha() for t in texts)
    lower = sum(t.islower() and t.isalpha() for t in texts)
    digits = sum(any(c.isdigit() for c in t) for t in texts)
    punct = sum(any(c in string.punctuation for c in t) for t in texts)
    assert min(upper, lower, digits, punct) >= 20, (upper, lower, digits, punct)


def test_builtin_word_list_is_ascii_words() -> None:
    words = load_words()
    assert len(words) > 50000
    assert words[0] == "the"
    assert all(w.isascii() and " " not in w for w in words[:1000])


def test_text_no_font_can_draw_is_refused_not_drawn_as_tofu(fonts: list[str]) -> None:
    assert "\u00e9" not in font_info(fonts[0]).chars  # only probed ASCII counts as drawable
    with pytest.raises(ValueError, match="no font can draw"):
        FontPicker(fonts).pick("caf\u00e9", random.Random(0))
    with pytest.raises(ValueError, match="no font can draw"):
        render_word("caf\u00e9", random.Random(0), fonts, SynthOptions())


def test_find_fonts_errors_name_the_folder_and_the_fix(tmp_path) -> None:
    with pytest.raises(NoFontsError, match="--fonts") as e:
        find_fonts(str(tmp_path))
    assert str(tmp_path) in str(e.value)
    (tmp_path / "junk.ttf").write_bytes(b"not a font")
    with pytest.raises(NoFontsError):
        find_fonts(str(tmp_path))
    with pytest.raises(NoFontsError, match="does not exist"):
        find_fonts(str(tmp_path / "missing"))


def test_generate_lmdb_writes_the_standard_layout(tmp_path, fonts_dir: str, fonts: list[str]) -> None:
    out = str(tmp_path / "synth.lmdb")
    opts = SynthOptions(height=32, charset="alnum36")
    assert generate_lmdb(out, 12, seed=5, workers=2, fonts_dir=fonts_dir, opts=opts, progress=False) == 12
    expected = list(iter_samples(12, 5, fonts, opts))
    env = lmdb.open(out, readonly=True, lock=False)
    with env.begin() as txn:
        assert txn.get(b"num-samples") == b"12"
        for i, (data, label) in enumerate(expected, start=1):
            assert txn.get(b"image-%09d" % i) == data
            assert txn.get(b"label-%09d" % i).decode("utf-8") == label
            assert _decode(txn.get(b"image-%09d" % i)).height == 32
        assert txn.get(b"image-%09d" % 13) is None
    env.close()
    with pytest.raises(FileExistsError, match="--overwrite"):
        generate_lmdb(out, 3, fonts_dir=fonts_dir, progress=False)
    assert generate_lmdb(out, 3, fonts_dir=fonts_dir, progress=False, overwrite=True, workers=1) == 3


def test_synth_dataset_matches_make_sample(fonts: list[str]) -> None:
    ds = SynthDataset(5, seed=2, fonts=fonts, transform=lambda im: im.size)
    assert len(ds) == 5
    size, label = ds[3]
    data, expected_label = make_sample(3, 2, fonts, ds.opts)
    assert label == expected_label and size == _decode(data).size
    with pytest.raises(IndexError):
        ds[5]


def test_cli_writes_lmdb_and_reports_errors(tmp_path, fonts_dir: str, capsys: pytest.CaptureFixture) -> None:
    out = str(tmp_path / "cli.lmdb")
    args = ["--out", out, "--num", "6", "--fonts", fonts_dir, "--workers", "1", "--quiet"]
    assert synth_main(args) == 0
    assert "images/s" in capsys.readouterr().out
    assert synth_main(args) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert synth_main(args + ["--overwrite", "--height", "40"]) == 0
    env = lmdb.open(out, readonly=True, lock=False)
    with env.begin() as txn:
        assert _decode(txn.get(b"image-000000001")).height == 40
    env.close()
    empty = tmp_path / "nofonts"
    empty.mkdir()
    assert synth_main(["--out", str(tmp_path / "x.lmdb"), "--num", "2", "--fonts", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "no usable" in err and str(empty) in err and "apt-get install" in err
    assert not os.path.exists(tmp_path / "x.lmdb")


def test_cli_preview_writes_a_png(tmp_path, fonts_dir: str) -> None:
    png = tmp_path / "sheet.png"
    assert synth_main(["--preview", str(png), "--num", "7", "--fonts", fonts_dir, "--workers", "1"]) == 0
    assert Image.open(png).format == "PNG"


def test_cli_usage_errors_exit_2(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as e:
        synth_main(["--num", "5"])
    assert e.value.code == 2
    assert "--out" in capsys.readouterr().err


BEBAS = "/usr/share/fonts/opentype/bebas-neue/BebasNeue-Regular.otf"
BALKER = "/usr/share/fonts/truetype/dustin/Balker.ttf"


@pytest.mark.skipif(not os.path.isfile(BEBAS), reason="fonts-bebas-neue not installed")
def test_all_caps_face_does_not_count_as_drawing_lower_case() -> None:
    info = font_info(BEBAS)
    assert info is not None and info.caps_only
    assert set(string.ascii_uppercase) <= info.chars and not set(string.ascii_lowercase) & info.chars
    with pytest.raises(ValueError, match="no font can draw"):
        FontPicker([BEBAS]).pick("hello", random.Random(0))
    assert FontPicker([BEBAS]).pick("HELLO", random.Random(0)).path == BEBAS


@pytest.mark.skipif(not os.path.isfile(BALKER), reason="fonts-dustin not installed")
def test_placeholder_boxes_count_as_missing_glyphs() -> None:
    info = font_info(BALKER)  # draws every digit as the same empty box
    assert info is not None and set(string.ascii_letters) <= info.chars
    assert not set(string.digits) & info.chars


@pytest.mark.parametrize("path", ["/usr/share/fonts/opentype/urw-base35/D050000L.otf",
                                  "/usr/share/fonts/opentype/urw-base35/StandardSymbolsPS.otf"])
def test_symbol_and_dingbat_fonts_are_excluded(path: str) -> None:
    if not os.path.isfile(path):
        pytest.skip("fonts-urw-base35 not installed")
    assert font_info(path) is None
