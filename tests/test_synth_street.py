"""Street-style synthetic words (crnn-synth --style street): determinism, geometry, photo backgrounds, errors."""
from __future__ import annotations

import importlib.util
import os
import random

import numpy as np
import pytest

from crnn.cli.synth import main as synth_main
from crnn.config import ConfigError, load_config
from crnn.data import synth
from crnn.data.synth import PHOTO_FILES, SynthOptions, iter_samples, make_sample

STREET = SynthOptions(style="street")


@pytest.fixture(scope="module")
def fonts(dejavu_fonts: list[str]) -> list[str]:
    return dejavu_fonts


def test_street_is_deterministic_worker_independent_and_differs_from_default(fonts: list[str]) -> None:
    first = [make_sample(i, 5, fonts, STREET) for i in range(8)]
    assert first == [make_sample(i, 5, fonts, STREET) for i in range(8)]
    assert first == list(iter_samples(8, 5, fonts, STREET, workers=2))
    default = [make_sample(i, 5, fonts, SynthOptions()) for i in range(8)]
    assert [label for _, label in first] == [label for _, label in default]  # same words, drawn differently
    assert sum(a != b for (a, _), (b, _) in zip(first, default)) >= 7


def _end_heights(street: bool, seed: int) -> tuple[int, int]:
    """Ink heights of the leftmost and rightmost columns of a warped solid block (a word seen from the side or not)."""
    stack = np.full((40, 240, 3), 255, np.uint8)
    out = synth._warp(stack, random.Random(seed), 40, street)
    cols = np.nonzero((out[..., 0] > 128).any(axis=0))[0]
    ink = out[..., 0] > 128
    left, right = ink[:, cols[0] + 3].sum(), ink[:, cols[-1] - 3].sum()
    return int(left), int(right)


def test_street_perspective_makes_one_end_of_the_word_shorter() -> None:
    def share(street: bool) -> float:
        ratios = [min(a, b) / max(a, b, 1) for a, b in (_end_heights(street, s) for s in range(200))]
        return float(np.mean([r < 0.7 for r in ratios]))

    # half the street words get a keystone (far end 45-90 % as tall); the default style tilts words only a little
    street, default = share(True), share(False)
    assert street > 0.25 and street > 2.5 * default, (street, default)


def test_street_curves_more_often_and_deeper() -> None:
    stack = np.zeros((40, 200, 3), np.uint8)
    stack[15:25] = 255
    def depth(street: bool) -> float:
        return float(np.mean([synth._curve(stack, random.Random(s), 40, street).shape[0] - 40 for s in range(100)]))
    assert depth(True) > 1.8 * depth(False)


def test_photo_background_keeps_the_text_contrast() -> None:
    bg = np.array([200.0, 180.0, 40.0], np.float32)
    for seed in range(30):
        out = synth._photo_background(32, 90, bg, 60.0, random.Random(seed))
        assert out.shape == (32, 90, 3)
        assert np.abs(out - bg).max() <= 0.75 * 60.0 + 1e-3  # the photo never eats into the text/background gap
        assert out.std() > 0.5  # and it is not flat


@pytest.mark.skipif(importlib.util.find_spec("skimage") is None, reason="scikit-image not installed")
def test_every_listed_photo_ships_with_scikit_image_and_none_is_a_text_image() -> None:
    assert {"text.png", "page.png", "logo.png"}.isdisjoint(PHOTO_FILES)
    synth._photos.cache_clear()
    assert len(synth._photos()) == len(PHOTO_FILES)


def test_street_without_scikit_image_is_a_one_line_error_and_writes_nothing(
        tmp_path, fonts: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "skimage" else real(name, *a))
    synth._photos.cache_clear()
    try:
        with pytest.raises(synth.MissingPhotosError, match="pip install scikit-image"):
            for i in range(40):  # about a third of street samples draw a photo background
                make_sample(i, 1, fonts, STREET)
        with pytest.raises(synth.MissingPhotosError, match="pip install scikit-image"):
            synth.check_options(STREET, fonts)  # before any worker starts
        out = tmp_path / "s.lmdb"
        code = synth_main(["--style", "street", "--num", "30", "--out", str(out), "--fonts", os.path.dirname(fonts[0]),
                           "--workers", "2", "--quiet"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and "pip install scikit-image" in err
        assert not out.exists()
    finally:
        monkeypatch.undo()
        synth._photos.cache_clear()


def test_bad_style_is_refused() -> None:
    with pytest.raises(ValueError, match="style must be one of default, street"):
        SynthOptions(style="streets")
    with pytest.raises(SystemExit) as e:
        synth_main(["--style", "streets", "--preview", "x.png"])
    assert e.value.code == 2


def test_train_entries_override_the_synth_seed_and_style(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from crnn.data.feed import prepare

    calls = []
    def fake_generate(path, num, seed, opts, **kw):
        calls.append((path, num, seed, opts.style))

    monkeypatch.setattr(synth, "generate_lmdb", fake_generate)
    a, b, v = (str(tmp_path / n) for n in ("a.lmdb", "b.lmdb", "v.lmdb"))
    cfg = load_config(None, [f"data.train=[{{path: {a}}}, {{path: {b}, synth_seed: 9, synth_style: street}}]",
                             f"data.val=[{v}]", "data.synth_num=100", "data.synth_val_num=10", "data.synth_seed=4"])
    prepare(cfg, progress=False)
    assert calls == [(a, 100, 4, "default"), (b, 100, 9, "street"), (v, 10, 4 + 10_000_019, "default")]


@pytest.mark.parametrize("entry, message", [
    ("{path: x, synth_style: streets}", "synth_style 'streets' is not one of default, street"),
    ("{path: x, synth_seed: two}", "synth_seed must be an integer"),
    ("{path: x, seed: 2}", "each entry needs 'path'"),
])
def test_bad_train_entries_name_the_key(entry: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, [f"data.train=[{entry}]"])
    with pytest.raises(ConfigError, match="data.synth_style"):
        load_config(None, ["data.synth_style=photo"])
