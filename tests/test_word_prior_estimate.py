"""tools/word_prior_estimate.py: the naive word pick, the word list's errors, and a read of a tiny set."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

SCRIPT = Path(__file__).resolve().parent.parent / "tools" / "word_prior_estimate.py"
spec = importlib.util.spec_from_file_location("word_prior_estimate", SCRIPT)
wpe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(wpe)  # type: ignore[union-attr]

WORDS = {"cafe", "open", "hotel"}


def test_pick_keeps_a_listed_greedy_reading() -> None:
    assert wpe.word_pick("Open", [("0pen", -0.1), ("Open", -0.5)], WORDS, 3.0) == "open"


def test_pick_takes_the_most_probable_listed_reading_within_the_margin() -> None:
    nbest = [("H0TEL", -0.2), ("HOTEI", -0.9), ("HOTEL", -1.5), ("CAFE", -1.6)]
    assert wpe.word_pick("H0TEL", nbest, WORDS, 3.0) == "hotel"


def test_pick_keeps_greedy_when_no_listed_reading_is_close_enough() -> None:
    nbest = [("H0TEL", -0.2), ("HOTEL", -3.5)]
    assert wpe.word_pick("H0TEL", nbest, WORDS, 3.0) == "h0tel"
    assert wpe.word_pick("H0TEL", nbest, WORDS, 4.0) == "hotel"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_missing_word_list_is_one_line_error(tmp_path: Path) -> None:
    r = _run("--data", str(tmp_path), "--words", str(tmp_path / "nope.txt"))
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "nope.txt" in lines[0] and "--words" in lines[0]


def test_counts_on_a_tiny_set(tmp_path: Path) -> None:
    for i, word in enumerate(["OPEN", "HOTEL"]):
        img = Image.new("L", (120, 40), 255)
        ImageDraw.Draw(img).text((8, 12), word, fill=0)
        img.save(tmp_path / f"{i}.png")
    (tmp_path / "gt.txt").write_text("0.png\tOPEN\n1.png\tHOTEL\n", encoding="utf-8")
    words = tmp_path / "words.txt"
    words.write_text("open\nhotel\n", encoding="utf-8")
    r = _run("--data", str(tmp_path), "--words", str(words), "--json")
    assert r.returncode == 0, r.stderr
    c = json.loads(r.stdout)[str(tmp_path)]
    assert c["crops"] == 2
    assert 0 <= c["label_in_nbest"] <= c["greedy_wrong"] <= 2
    assert c["label_listed"] == c["greedy_wrong"]  # both labels are listed words
    assert c["net_points"] == pytest.approx(100 * (c["mended"] - c["broken"]) / 2)
