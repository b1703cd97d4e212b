"""Photographs to set synthetic lines on: the wallpapers Debian's desktop packages install.

Annotated real photographs of Chinese lines are scarce in what the project can reach, so the generator stands in
for them: a share of lines (``SynthOptions.photos``) is drawn over a crop of a photograph - leaves, water, stone,
sky, wood - whose tones are squeezed around the line's background colour. The photographs come from the wallpaper
packages (``plasma-workspace-wallpapers``, ``mate-backgrounds``, ``gnome-backgrounds``; section ``photos`` of
crnn/data/font_packages.txt, which scripts/setup.sh installs): one image per wallpaper (the packages hold each at
several resolutions), at most 768 px a side, loaded once per process.
"""
from __future__ import annotations

import functools
import os
from collections.abc import Sequence

import numpy as np
from PIL import Image

from crnn.data.fonts import font_packages

WALLPAPER_DIRS: tuple[str, ...] = ("/usr/share/wallpapers", "/usr/share/backgrounds")
PHOTO_EXTS = (".jpg", ".jpeg", ".png", ".webp")
MAX_SIDE = 768
WALLPAPER_PACKAGES: tuple[str, ...] = tuple(font_packages("photos"))


class NoPhotosError(FileNotFoundError):
    """No wallpaper photographs are installed."""


def wallpaper_files(dirs: Sequence[str] = WALLPAPER_DIRS) -> list[str]:
    """One image file per wallpaper under ``dirs``, sorted: in a folder of one wallpaper's resolutions (KDE's
    ``NAME/contents/images/WxH.jpg``) the one nearest 1920 px wide, elsewhere every image of the folder."""
    out = []
    for d in dirs:
        for root, _, files in os.walk(d, followlinks=True):
            images = sorted(f for f in files if f.lower().endswith(PHOTO_EXTS))
            if not images or os.path.basename(root) == "contents":  # contents/screenshot.*: a thumbnail
                continue
            if os.path.basename(root) == "images" and all(_width(f) for f in images):
                images = [min(images, key=lambda f: abs(_width(f) - 1920))]
            out += [os.path.join(root, f) for f in images]
    return sorted(out)


def _width(name: str) -> int:
    """The width in a ``WxH.ext`` file name, 0 for any other name."""
    stem = os.path.splitext(name)[0]
    w, x, h = stem.partition("x")
    return int(w) if x and w.isdigit() and h.isdigit() else 0


@functools.lru_cache(maxsize=1)
def wallpapers(dirs: tuple[str, ...] = WALLPAPER_DIRS) -> tuple[np.ndarray, ...]:
    """The wallpapers as RGB uint8 arrays, at most MAX_SIDE px a side; NoPhotosError (with the install command)
    when there are none."""
    out = []
    for path in wallpaper_files(dirs):
        try:
            with Image.open(path) as im:
                im.draft("RGB", (MAX_SIDE, MAX_SIDE))  # JPEG: decode at a reduced size
                im = im.convert("RGB")
                im.thumbnail((MAX_SIDE, MAX_SIDE))
                out.append(np.asarray(im))
        except (OSError, ValueError):  # an image PIL cannot read (a format without its plugin): left out
            continue
    if not out:
        raise NoPhotosError(f"no wallpaper photographs in {', '.join(dirs)}: apt-get install "
                            f"{' '.join(WALLPAPER_PACKAGES)} (scripts/setup.sh installs them), or set photos to 0")
    return tuple(out)
