"""Vertical text: a crop at least twice as tall as wide is read as it is with a warning (the default), read with its
stacked characters laid side by side (vertical="stack"), or read as it is in silence (off)."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

import crnn
from crnn.cli import predict as predict_cli
from crnn.data.vertical import cell_candidates, is_vertical, stack_cells
from crnn.infer import InferenceError, VerticalWarning

NOTO_CJK = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
needs_cjk = pytest.mark.skipif(not NOTO_CJK.is_file(), reason="needs fonts-noto-cjk (scripts/setup.sh)")


def column(text: str, step: float = 1.1, fill="black", bg="white", size: int = 40) -> Image.Image:
    """``text`` set top to bottom, one character every ``step`` ems, as vertical signs set it."""
    font = ImageFont.truetype(str(NOTO_CJK), size)
    im = Image.new("RGB", (size + 20, int(len(text) * size * step) + 30), bg)
    draw = ImageDraw.Draw(im)
    for i, ch in enumerate(text):
        draw.text((10, 10 + int(i * size * step)), ch, font=font, fill=fill)
    return im


def stacked_letters(text: str, shade: str = "") -> Image.Image:
    """Capital letters stacked top to bottom, each centred (a hotel or taxi sign): black on white, or (``shade``
    "across" / "along") white on a grey ground shaded from 40 to 160 across the column or along it (a lit pillar)."""
    font = ImageFont.truetype(str(DEJAVU), 36)
    h = len(text) * 44 + 20
    if shade:
        ramp = np.linspace(40, 160, 60 if shade == "across" else h)
        grey = np.broadcast_to(ramp[None, :] if shade == "across" else ramp[:, None], (h, 60))
        im = Image.fromarray(grey.astype(np.uint8)).convert("RGB")
    else:
        im = Image.new("RGB", (60, h), "white")
    draw = ImageDraw.Draw(im)
    for i, ch in enumerate(text):
        draw.text(((60 - draw.textlength(ch, font=font)) / 2, 10 + i * 44), ch, font=font,
                  fill="white" if shade else "black")
    return im


def test_a_crop_twice_as_tall_as_wide_is_vertical():
    assert is_vertical(40, 80) and is_vertical(10, 300) and not is_vertical(40, 79) and not is_vertical(300, 40)


def test_cells_keep_a_character_drawn_in_pieces_whole():
    """Three squares stacked, the middle one two bars with a gap (as 二 is drawn): three cells, the middle one whole,
    whichever way the gaps are read first."""
    ink = np.full((130, 40), 255, np.uint8)
    ink[5:35, 5:35] = 0
    ink[48:56, 5:35] = 0
    ink[70:78, 5:35] = 0  # the second piece of the middle square
    ink[92:122, 5:35] = 0
    cands = cell_candidates(Image.fromarray(ink))
    assert cands and cands[0] == [(5, 35), (48, 78), (92, 122)]
    line = stack_cells(Image.fromarray(ink), cands[0])
    assert line.height < line.width and line.mode == "RGB"


def test_one_character_or_none_is_no_column():
    blank = Image.new("RGB", (30, 200), "white")
    assert cell_candidates(blank) == []
    one = Image.new("RGB", (30, 200), "white")
    ImageDraw.Draw(one).rectangle((5, 80, 25, 100), fill="black")
    assert cell_candidates(one) == []


def test_a_tall_crop_is_read_as_it_is_with_a_warning_naming_it():
    rec = crnn.Recognizer("en")
    tall = Image.new("RGB", (40, 300), "white")
    with pytest.warns(VerticalWarning, match=r"image 0: 40x300 image is 7\.5x taller than wide: vertical text\?"):
        rec.read([tall])
    with warnings.catch_warnings():
        warnings.simplefilter("error", VerticalWarning)
        crnn.Recognizer("en", vertical="off").read(tall)
        rec.read(Image.new("RGB", (40, 79), "white"))  # not twice as tall: no warning
    with pytest.raises(InferenceError, match="vertical must be one of warn, stack, rotate, auto, off, got 'sideways'"):
        crnn.Recognizer("en", vertical="sideways")


@needs_cjk
def test_stacked_chinese_reads_top_first_where_as_it_is_it_reads_nothing_right():
    """Clean vertical lines of the shipped Chinese model: stacked, each reads exactly; as they are, none does. The
    cases: characters in pieces (三二一, 二三) whose gaps are wider than those between characters, white on red,
    characters set tight (0.95 em) and wide apart (1.8 em)."""
    cases = [("中文识别三二一", {}), ("北京烤鸭店", {"fill": "white", "bg": (150, 20, 20)}),
             ("二三四五六", {"step": 1.0}), ("天下第一面馆", {"step": 0.95}), ("花园酒店", {"step": 1.8})]
    images = [column(text, **kw) for text, kw in cases]
    # 一 alone in its cell is the em dash's stroke in Noto Sans CJK: which of the two a model reads there is its own
    # coin flip (the 32 px file read 一, the 48 px one reads —, both at a line confidence near 0.5), not stacking's;
    # every other character, and the number of characters, must be exact
    same = lambda texts: [s.replace("—", "一") for s in texts]
    stack = crnn.Recognizer("zh", vertical="stack")
    assert same(r.text for r in stack.read(images)) == [text for text, _ in cases]
    assert same(r.text for r in crnn.Recognizer("zh", vertical="auto").read(images)) == [text for text, _ in cases]
    assert same(stack.read(im).text for im in images) == [text for text, _ in cases]  # one by one: the same
    with pytest.warns(VerticalWarning):
        as_is = crnn.Recognizer("zh").read(images)
    assert not any(r.text == text for r, (text, _) in zip(as_is, cases))


def test_stacked_latin_letters_read_as_a_word_not_letter_spaced():
    """Each letter keeps its own width side by side, a tenth of the pitch apart (I and T a column's width apart read
    as 'T A X I', the English model's label for letter-spaced words; a third of the pitch, as before, as 'TAX I')."""
    words = ["HOTEL", "TAXI", "OPEN24", "EXIT"]
    read = crnn.Recognizer("en", vertical="stack").read([stacked_letters(w) for w in words])
    assert [r.text for r in read] == words
    assert min(r.confidence for r in read) > 0.9


@pytest.mark.parametrize("shade", ["across", "along"])
def test_stacked_letters_on_a_shaded_ground_are_cut_between_the_letters(shade):
    """One threshold over a ground shaded from dark to light takes half the ground for ink: no empty rows between
    the letters, the cuts fall through them and the line reads 'TAYAI', 'HOTEEL'. The cutting reads the crop less its
    surface instead, and the pieces keep their own ground around them (no flat boxes for the reader)."""
    words = ["TAXI", "HOTEL", "EXIT", "SALE"]
    images = [stacked_letters(w, shade) for w in words]
    assert [len(cell_candidates(im)[0]) for im in images] == [len(w) for w in words]
    assert [r.text for r in crnn.Recognizer("en", vertical="stack").read(images)] == words


def spine(text: str, turn: int) -> Image.Image:
    """A title set across, then turned a quarter (turn=-90: running down, as English spines; 90: running up)."""
    font = ImageFont.truetype(str(DEJAVU), 36)
    im = Image.new("RGB", (int(len(text) * 36 * 0.7) + 20, 52), "white")
    ImageDraw.Draw(im).text((10, 4), text, font=font, fill="black")
    return im.rotate(turn, expand=True)


def test_text_turned_sideways_reads_with_rotate_and_auto_keeps_the_most_confident_way():
    """Spines read turned; auto keeps the most confident of stacked and turned: the stacked TAXI (stacked 'TAXI' at
    0.98, turned 'Fax-' at 0.51 for the 48 px English file; with the wider spacing before, 0.44 against 0.51)."""
    images = [spine("Moby Dick", -90), spine("The Hobbit", 90), stacked_letters("TAXI")]
    assert [r.text for r in crnn.Recognizer("en", vertical="rotate").read(images[:2])] == ["Moby Dick", "The Hobbit"]
    auto = crnn.Recognizer("en", vertical="auto").read(images)
    assert [r.text for r in auto[:2]] == ["Moby Dick", "The Hobbit"]
    ways = [crnn.Recognizer("en", vertical=v).read(images[2]) for v in ("stack", "rotate")]
    assert ways[0].text == "TAXI" and auto[2].text == "TAXI"
    assert (auto[2].text, auto[2].confidence) == max(((w.text, w.confidence) for w in ways), key=lambda t: t[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VerticalWarning)
        as_is = crnn.Recognizer("en").read(images)
    assert not any(r.text in ("Moby Dick", "The Hobbit", "TAXI") for r in as_is)


@needs_cjk
def test_crnn_predict_vertical_stack_and_the_default_warning(tmp_path, capsys):
    path = tmp_path / "sign.png"
    column("北京烤鸭店").save(path)
    assert predict_cli.main(["--weights", "zh", "--vertical", "stack", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out.split("\t")[:2] == [str(path), "北京烤鸭店"] and err == ""
    assert predict_cli.main(["--weights", "zh", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err.startswith(f"crnn-predict: warning: {path}: 60x250 image is 4.2x taller than wide: vertical text?")
    assert "--vertical auto" in err and len(err.splitlines()) == 1


def test_the_vertical_yardstick_names_the_command_that_builds_a_missing_set(tmp_path):
    """scripts/zh_vertical.py reads issue 43's face sets set top to bottom; without them it says how to build them."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parent.parent / "scripts" / "zh_vertical.py"
    r = subprocess.run([sys.executable, str(script), "--sets", "dev_print", "--work", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == (f"zh_vertical: {tmp_path}/dev_print/gt.txt not found; build it: python "
                                f"scripts/zh_benchmark.py --build-only --sets dev_print --num 1200 --work {tmp_path}")


def test_the_latin_vertical_yardstick_says_how_to_fetch_the_held_out_faces(tmp_path):
    """scripts/en_vertical.py sets its words in the held-out Latin faces; a font cache without them: one line that
    names the cache and the command, exit 2, no table."""
    import os
    import subprocess
    import sys

    script = Path(__file__).resolve().parent.parent / "scripts" / "en_vertical.py"
    r = subprocess.run([sys.executable, str(script), "--num", "2"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "CRNN_FONT_CACHE": str(tmp_path)})
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == (f"en_vertical: none of the held-out Latin faces is in {tmp_path}/latin; fetch them: "
                                f"python scripts/latin_faces.py --fetch")


def test_a_read_of_many_crops_warns_once_about_the_tall_ones_with_a_count(tmp_path, capsys):
    """Many crops with a few tall ones among them: one warning with the count and the first names (the Python list
    read and crnn-predict alike); a single tall crop keeps its own warning."""
    wide, tall = Image.new("L", (100, 32), 255), Image.new("L", (20, 80), 255)
    crops = [tall if i in (1, 4, 6, 7) else wide for i in range(9)]
    reader = crnn.Recognizer("en", device="cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reader.read(crops)
    assert [str(w.message) for w in caught if w.category is VerticalWarning] == [
        "4 of 9 images are at least 2x taller than wide (vertical text?), e.g. image 1 (20x80), image 4 (20x80), "
        "image 6 (20x80), ...; they were read as they are, but crnn reads horizontal lines: read them with "
        "vertical='auto' (crnn-predict --vertical auto), or pass vertical='off' to read them as they are"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reader.read([wide, tall])
    assert [str(w.message) for w in caught] == ["image 1: 20x80 image is 4.0x taller than wide: vertical text? crnn "
                                                "reads horizontal lines; read it with vertical='auto' (crnn-predict "
                                                "--vertical auto: characters stacked top to bottom, or text turned "
                                                "sideways), or pass vertical='off' to read it as it is"]
    paths = []
    for i, im in enumerate(crops):
        paths.append(str(tmp_path / f"{i}.png"))
        im.save(paths[-1])
    assert predict_cli.main(["--device", "cpu", *paths]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 9
    assert err.startswith(f"crnn-predict: warning: 4 of 9 images are at least 2x taller than wide (vertical text?), "
                          f"e.g. {paths[1]} (20x80), {paths[4]} (20x80), {paths[6]} (20x80), ...;")
    assert len(err.splitlines()) == 1


def test_one_crop_per_call_inside_warn_once_gives_one_warning_with_the_count(tmp_path):
    """A yardstick reads one crop per call: inside reader.warn_once() its tall crops are counted and warned about once,
    at the end; engine.predict_images (the tools' batch read) warns once too."""
    wide, tall = Image.new("L", (100, 32), 255), Image.new("L", (20, 80), 255)
    paths = []
    for i, im in enumerate([wide, tall, wide, tall, tall]):
        paths.append(str(tmp_path / f"{i}.png"))
        im.save(paths[-1])
    reader = crnn.Recognizer("en", device="cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with reader.warn_once():
            texts = [reader.read(p).text for p in paths] + [r.text for r in reader.read([tall, wide])]
            assert [str(w.message) for w in caught] == []  # not yet: at the end of the block
    assert len(texts) == 7
    assert [str(w.message) for w in caught] == [
        f"4 of 7 images are at least 2x taller than wide (vertical text?), e.g. {paths[1]} (20x80), {paths[3]} (20x80), "
        f"{paths[4]} (20x80), ...; they were read as they are, but crnn reads horizontal lines: read them with "
        "vertical='auto' (crnn-predict --vertical auto), or pass vertical='off' to read them as they are"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reader._engine.predict_images([tall, wide, tall])
    assert [str(w.message).split(" (vertical text?)")[0] for w in caught] == [
        "2 of 3 images are at least 2x taller than wide"]
