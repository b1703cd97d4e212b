"""Where fetched web fonts live, and the error fetching them raises: shared by the CJK face manifest
(:mod:`crnn.data.faces`) and the Latin one (:mod:`crnn.data.latin_faces`), so neither imports the other's module."""
from __future__ import annotations

import os


class FaceError(RuntimeError):
    """A web font that cannot be fetched or merged (no npm, no network, a package without the slices named)."""


def font_cache_dir() -> str:
    """Where merged web fonts live: ``$CRNN_FONT_CACHE``, else ``~/.cache/crnn/fonts``."""
    return os.path.expanduser(os.environ.get("CRNN_FONT_CACHE") or "~/.cache/crnn/fonts")
