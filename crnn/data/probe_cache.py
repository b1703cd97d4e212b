"""What probing a font file found, kept on disk so that start-up does not render every glyph of every font again.

:func:`crnn.data.fonts.font_info` renders the 94 printable ASCII characters of each font (about 5 ms a file; with
the Latin web faces, some 1,600 files and 7 s at every start of a process that calls ``find_fonts``), and
:func:`crnn.data.fonts.glyph_coverage` each font's characters of a bigger alphabet (half a minute for the Chinese
one, in every loader worker). A :class:`ProbeCache` keeps each file's results in ``probe-cache.json`` of the font cache
(:func:`crnn.data.faces.font_cache_dir`), keyed by the file's path, size and modification time: a file that changed
is probed again, one that vanished is dropped at the next save. The file is versioned with the probe and Pillow's
version (FreeType renders the glyphs), so a change of either starts afresh.
"""
from __future__ import annotations

import functools
import json
import os
from typing import Any

import PIL

PROBE_VERSION = 1  # bump when what fonts.font_info probes, or how, changes
FILE_NAME = "probe-cache.json"


class ProbeCache:
    """Probe results by font path, valid while the file keeps its size and modification time."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.version = f"{PROBE_VERSION}/pillow-{PIL.__version__}"
        self.entries: dict[str, dict[str, Any]] = {}
        self.dirty = False
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            if data.get("version") == self.version:
                self.entries = data["fonts"]
        except (OSError, ValueError, KeyError, AttributeError):
            pass  # absent or unreadable: everything is probed afresh

    def get(self, font: str) -> dict[str, Any] | None:
        """The stored result for ``font`` when the file is as it was then, else None."""
        entry = self.entries.get(font)
        if entry is None:
            return None
        try:
            st = os.stat(font)
        except OSError:
            return None
        return entry["value"] if (entry["size"], entry["mtime_ns"]) == (st.st_size, st.st_mtime_ns) else None

    def put(self, font: str, value: dict[str, Any]) -> None:
        """Keep ``value`` for the file as it is now."""
        try:
            st = os.stat(font)
        except OSError:
            return
        self.entries[font] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "value": value}
        self.dirty = True

    def save(self) -> None:
        """Write the file (atomically) when something was added, leaving out fonts that are gone; a cache folder
        that cannot be written is no error (the next start probes again)."""
        if not self.dirty:
            return
        fonts = {k: v for k, v in self.entries.items() if os.path.exists(k)}
        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({"version": self.version, "fonts": fonts}, f, separators=(",", ":"))
            os.replace(tmp, self.path)
            self.dirty = False
        except OSError:
            try:
                os.remove(tmp)
            except OSError:
                pass


@functools.lru_cache(maxsize=4)
def probe_cache(folder: str) -> ProbeCache:
    """The probe cache of a font cache folder (one per process and folder)."""
    return ProbeCache(os.path.join(folder, FILE_NAME))
