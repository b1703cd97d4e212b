"""scripts/plot_curve.py on the English curve: en_dev and the ICDAR 2015 block (issue 60) under both protocols, a
colour per set and dashes per protocol; a curve from before the block (no ic15_dev rows) is still drawn, the lines
it lacks left out with one note under --skip-missing, an error without it. Curves made in tmp_path."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from crnn.engine.curve import append_curve
from crnn.engine.state import TrainState
from tests.conftest import REPO

EN, IC15, P36 = "data/en_dev", "data/ic15_dev", "@alnum-insensitive"
NAMES = {EN: "en_dev, exact", EN + P36: "en_dev, 36-class", IC15: "ic15_dev, exact", IC15 + P36: "ic15_dev, 36-class"}


@pytest.fixture(scope="module")
def plot_curve():
    spec = importlib.util.spec_from_file_location("plot_curve", REPO / "scripts" / "plot_curve.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _curve(folder: Path, steps: int, ic15_from: int | None) -> Path:
    """A curve.tsv of ``steps`` validations on en_dev (both protocols), and on ic15_dev from step ``ic15_from``."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(1, steps + 1):
        sets = [EN] + ([IC15] if ic15_from is not None and i >= ic15_from else [])
        metrics = {}
        for s in sets:
            cer = (0.3 if s == IC15 else 0.08) / i
            metrics[s] = {"cer": cer, "word_acc": 0.5, "ned_similarity": 0.9}
            metrics[s + P36] = {"cer": cer * 0.6, "word_acc": 0.6, "ned_similarity": 0.95}
        append_curve(folder, TrainState(step=1000 * i, images_seen=64000 * i, cpu_seconds=900.0 * i), metrics,
                     "cpu", 2, "bf16")
    return folder / "curve.tsv"


def _specs(tsv: Path) -> list[str]:
    return [f"{tsv}@{s}={name}" for s, name in NAMES.items()]


def _pixels(path: Path, colour: tuple[int, int, int]) -> int:
    return int((np.asarray(Image.open(path).convert("RGB")) == colour).all(axis=-1).sum())


def test_with_ic15_rows_both_sets_in_both_protocols(plot_curve, tmp_path, capsys):
    tsv = _curve(tmp_path, 4, ic15_from=3)
    lines, left_out = plot_curve.plan(_specs(tsv), skip_missing=True)
    assert left_out == [] and [c.name for c in lines] == list(NAMES.values())
    assert [c.set for c in lines] == list(NAMES)
    assert [c.dashed for c in lines] == [False, True, False, True]  # the 36-class rows dashed
    assert lines[0].colour == lines[1].colour != lines[2].colour == lines[3].colour  # a colour per set
    assert [len(c.pts) for c in lines] == [4, 4, 2, 2]  # the block from the sitting that began scoring it
    assert lines[2].pts[0] == pytest.approx((2700 / 3600, 0.192, 0.1))
    assert plot_curve.title_of(lines) == "validation sets" and plot_curve.title_of(lines[:2]) == "en_dev"
    out = tmp_path / "curve.png"
    assert plot_curve.main([*_specs(tsv), "--skip-missing", "--out", str(out)]) == 0
    assert capsys.readouterr().err == ""
    assert Image.open(out).height == plot_curve.PANEL_H + 22 * 4 + 12  # a legend row per line
    assert _pixels(out, lines[2].colour) > 100  # ic15_dev drawn


def test_a_curve_without_ic15_rows_is_drawn_with_one_note(plot_curve, tmp_path, capsys):
    tsv = _curve(tmp_path, 3, ic15_from=None)
    lines, left_out = plot_curve.plan(_specs(tsv), skip_missing=True)
    assert [c.name for c in lines] == [NAMES[EN], NAMES[EN + P36]] and [c.dashed for c in lines] == [False, True]
    assert [(m.path, m.set) for m in left_out] == [(str(tsv), IC15), (str(tsv), IC15 + P36)]
    out = tmp_path / "curve.png"
    assert plot_curve.main([*_specs(tsv), "--skip-missing", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert err == (f"plot_curve: note: no rows yet for {IC15} in {tsv}; {IC15 + P36} in {tsv}: 2 line(s) left out\n")
    assert Image.open(out).height == plot_curve.PANEL_H + 22 * 2 + 12
    assert _pixels(out, plot_curve.COLOURS[1]) == 0  # nothing in ic15_dev's colour

    out.unlink()  # without --skip-missing a set the curve lacks is an error, and nothing is written
    assert plot_curve.main([*_specs(tsv), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"plot_curve: error: {tsv}: no rows for set '{IC15}'") and err.count("\n") == 1
    assert not out.exists()
    # no line left: an error even with --skip-missing
    assert plot_curve.main([f"{tsv}@{IC15}", f"{tsv}@{IC15 + P36}", "--skip-missing", "--out", str(out)]) == 1
    assert "no rows for set 'data/ic15_dev'" in capsys.readouterr().err and not out.exists()


def test_files_and_sets_keep_their_colours_apart(plot_curve, tmp_path):
    """Two runs on the same set are two colours; a file's protocol row shares its set's colour."""
    a, b = _curve(tmp_path / "a", 2, None), _curve(tmp_path / "b", 2, None)
    lines, _ = plot_curve.plan([f"{a}@{EN}", f"{b}@{EN}", f"{a}@{EN}{P36}", f"{b}@{EN}{P36}"])
    assert [c.colour for c in lines] == [plot_curve.COLOURS[0], plot_curve.COLOURS[1]] * 2
    assert [c.name for c in lines] == ["a", "b", "a", "b"] and [c.dashed for c in lines] == [False, False, True, True]


def test_dashes_leave_gaps_and_carry_across_corners(plot_curve):
    img = Image.new("RGB", (40, 3), "white")
    draw = plot_curve.ImageDraw.Draw(img)
    plot_curve.dashed(draw, [(0, 1), (5, 1), (39, 1)], (0, 0, 0), 1, (10, 6))
    ink = [img.getpixel((x, 1)) == (0, 0, 0) for x in range(40)]
    starts = [x for x in range(40) if ink[x] and (x == 0 or not ink[x - 1])]
    assert starts == [0, 16, 32]  # every 10 + 6 px, the corner at x = 5 not restarting the pattern
    assert not any(ink[12:15]) and not any(ink[28:31])  # gaps (Pillow draws a segment's end pixel too)
