"""Photographs behind synthetic lines (crnn/data/backgrounds.py, SynthOptions.photos)."""
from __future__ import annotations

import glob

import numpy as np
import pytest
from PIL import Image

from crnn.data import backgrounds as B
from crnn.data import synth as S
from crnn.data.synth import SynthOptions, make_sample


def _image(path, w, h, colour):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (w, h), colour).save(path)


def test_one_file_per_wallpaper_and_every_image_of_a_plain_folder(tmp_path):
    kde = tmp_path / "wallpapers" / "Autumn" / "contents"
    for w, h in ((1280, 800), (1920, 1080), (2560, 1600)):
        _image(kde / "images" / f"{w}x{h}.jpg", 8, 8, "red")
    _image(kde / "screenshot.jpg", 8, 8, "red")
    _image(tmp_path / "backgrounds" / "nature" / "Dune.jpg", 8, 8, "blue")
    _image(tmp_path / "backgrounds" / "nature" / "Wood.png", 8, 8, "green")
    (tmp_path / "backgrounds" / "nature" / "notes.txt").write_text("x")
    found = B.wallpaper_files((str(tmp_path / "wallpapers"), str(tmp_path / "backgrounds")))
    assert [p[len(str(tmp_path)) + 1:] for p in found] == [
        "backgrounds/nature/Dune.jpg", "backgrounds/nature/Wood.png", "wallpapers/Autumn/contents/images/1920x1080.jpg"]


def test_wallpapers_are_shrunk_and_a_missing_set_names_the_packages(tmp_path):
    _image(tmp_path / "a" / "big.jpg", 2000, 1000, "white")
    B.wallpapers.cache_clear()
    try:
        (img,) = B.wallpapers((str(tmp_path / "a"),))
        assert img.dtype == np.uint8 and img.shape[2] == 3 and max(img.shape[:2]) <= B.MAX_SIDE
        with pytest.raises(B.NoPhotosError, match="apt-get install plasma-workspace-wallpapers mate-backgrounds"):
            B.wallpapers((str(tmp_path / "none"),))
    finally:
        B.wallpapers.cache_clear()


def _fonts():
    found = sorted(glob.glob("/usr/share/fonts/**/DejaVuSans.ttf", recursive=True))
    if not found:
        pytest.skip("needs fonts-dejavu-core (scripts/setup.sh installs it)")
    return found


def test_photos_off_draw_the_old_words_and_on_put_a_photograph_behind_each(monkeypatch):
    fonts = _fonts()
    stripes = np.zeros((64, 64, 3), np.uint8)
    stripes[::4] = 255  # a "photograph" of stripes: its rows show in the background
    monkeypatch.setattr(S, "wallpapers", lambda: (stripes,))
    used = []
    real = S._photo_background
    monkeypatch.setattr(S, "_photo_background", lambda *a, **k: used.append(k or a[5:]) or real(*a, **k))
    old, off, on = SynthOptions(), SynthOptions(photos=0.0), SynthOptions(photos=1.0)
    samples = [(make_sample(i, 2, fonts, old), make_sample(i, 2, fonts, off)) for i in range(6)]
    assert all(a == b for a, b in samples) and not used
    with_photos = [make_sample(i, 2, fonts, on) for i in range(6)]
    assert len(used) == 6 and all(np.array_equal(u[0][0], stripes) for u in used)
    assert [w[1] for w in with_photos] == [a[1] for a, _ in samples]  # labels never change


def test_photos_without_wallpapers_fail_before_any_sample(monkeypatch):
    def none():
        raise B.NoPhotosError("no wallpaper photographs in /x: apt-get install plasma-workspace-wallpapers")

    monkeypatch.setattr(S, "wallpapers", none)
    with pytest.raises(S.MissingPhotosError, match="apt-get install plasma-workspace-wallpapers"):
        S.check_options(SynthOptions(photos=0.5), _fonts())
    with pytest.raises(ValueError, match="photos must be within 0..1"):
        SynthOptions(photos=2.0)
