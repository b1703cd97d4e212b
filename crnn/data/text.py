"""What the synthetic generator writes: scene-text words (``words.py``) or text lines (``lines.py``).

The one place that chooses between the two, so that neither module needs the other's sampler.
"""
from __future__ import annotations

import random

from crnn.data.lines import sample_line
from crnn.data.words import TextOptions, sample_word, text_mode

__all__ = ["sample_text"]


def sample_text(rng: random.Random, opts: TextOptions) -> str:
    """A text to render whose label is non-empty and at most ``opts.max_len`` long (a word or a line)."""
    return sample_line(rng, opts) if text_mode(opts) == "lines" else sample_word(rng, opts)
