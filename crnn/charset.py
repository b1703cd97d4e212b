"""Alphabets for CTC recognition: blank = index 0, characters from index 1."""
from __future__ import annotations

import os
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import torch

BLANK = 0



def gb2312_hanzi() -> str:
    """The 6,763 Hanzi of GB 2312 (levels 1 and 2, rows 0xB0-0xF7), in code-point order of the standard."""
    chars = []
    for row in range(0xB0, 0xF8):
        for col in range(0xA1, 0xFF):
            try:
                chars.append(bytes((row, col)).decode("gb2312"))
            except UnicodeDecodeError:  # the last five cells of row 0xD7 are empty
                continue
    return "".join(chars)


# Common CJK and full-width punctuation seen in Chinese text lines (full-width ASCII forms fold to ASCII under NFKC).
CJK_PUNCTUATION = "，。、；：？！“”‘’（）《》〈〉【】「」『』〔〕—…·～￥％＋－×÷＝"


def _zh_gb2312() -> str:
    """``zh_gb2312``: printable ASCII (space included), CJK punctuation, then the GB 2312 Hanzi."""
    ascii_printable = "".join(chr(c) for c in range(0x20, 0x7F))
    return ascii_printable + CJK_PUNCTUATION + gb2312_hanzi()


BUILTIN_CHARSETS: dict[str, str] = {
    "digits": string.digits,
    "alnum36": string.digits + string.ascii_lowercase,
    "printable94": string.digits + string.ascii_letters + string.punctuation,
    "zh_gb2312": _zh_gb2312(),
}

UNKNOWN_POLICIES = ("reject", "drop")


class CharsetError(ValueError):
    """Raised for an invalid alphabet specification."""


class Charset:
    """An alphabet with a CTC blank at index 0.

    ``lowercase``: labels are lowercased before lookup (default: when the alphabet has no
    upper-case letters, e.g. ``alnum36``). ``unknown``: what to do with a character that is
    not in the alphabet — ``"reject"`` the sample or ``"drop"`` the character. Rejections and
    drops are counted in ``self.stats``; lookups never raise ``KeyError``.
    """

    def __init__(self, chars: str, lowercase: bool | None = None, unknown: str = "reject") -> None:
        if not chars:
            raise CharsetError("the alphabet is empty")
        dupes = [c for c, n in Counter(chars).items() if n > 1]
        if dupes:
            raise CharsetError(f"the alphabet repeats characters: {''.join(dupes)!r}")
        if unknown not in UNKNOWN_POLICIES:
            raise CharsetError(f"unknown-character policy must be one of {UNKNOWN_POLICIES}, got {unknown!r}")
        self.chars = chars
        self.lowercase = (chars == chars.lower()) if lowercase is None else bool(lowercase)
        self.unknown = unknown
        self.index = {c: i + 1 for i, c in enumerate(chars)}
        self.stats: Counter[str] = Counter()

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_spec(cls, spec: str, lowercase: bool | None = None, unknown: str = "reject") -> "Charset":
        """Build from a built-in name, a file path (one char per line, or one string) or a literal string."""
        if spec in BUILTIN_CHARSETS:
            return cls(BUILTIN_CHARSETS[spec], lowercase, unknown)
        if os.path.isfile(spec):
            return cls(read_charset_file(spec), lowercase, unknown)
        return cls(spec, lowercase, unknown)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form, stored inside checkpoints."""
        return {"chars": self.chars, "lowercase": self.lowercase, "unknown": self.unknown}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Charset":
        """Inverse of :meth:`to_dict`."""
        return cls(d["chars"], d.get("lowercase"), d.get("unknown", "reject"))

    # ------------------------------------------------------------------ properties
    @property
    def num_classes(self) -> int:
        """Number of model outputs: characters + blank."""
        return len(self.chars) + 1

    def __len__(self) -> int:
        return len(self.chars)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Charset) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"Charset({len(self.chars)} chars, lowercase={self.lowercase}, unknown={self.unknown!r})"

    # ------------------------------------------------------------------ labels
    def normalize(self, label: str) -> str | None:
        """Apply case folding and the unknown-character policy; ``None`` means the sample is rejected."""
        if self.lowercase:
            label = label.lower()
        missing = [c for c in label if c not in self.index]
        if not missing:
            return label
        if self.unknown == "reject":
            self.stats["rejected_unknown"] += 1
            return None
        self.stats["dropped_chars"] += len(missing)
        return "".join(c for c in label if c in self.index)

    def encode(self, labels: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Labels -> (concatenated targets ``[sum(L)]``, lengths ``[B]``), both int64.

        Labels are normalised first; a rejected label raises ``ValueError`` naming it (filter
        datasets with :meth:`normalize` before batching).
        """
        ids: list[int] = []
        lengths: list[int] = []
        for label in labels:
            norm = self.normalize(label)
            if norm is None:
                raise ValueError(f"label {label!r} has characters outside the alphabet (policy 'reject')")
            ids.extend(self.index[c] for c in norm)
            lengths.append(len(norm))
        return torch.tensor(ids, dtype=torch.long), torch.tensor(lengths, dtype=torch.long)

    def decode(self, ids: Iterable[int]) -> str:
        """Class ids -> text; blanks (0) and out-of-range ids are skipped. No CTC collapsing here."""
        n = len(self.chars)
        return "".join(self.chars[i - 1] for i in ids if 0 < i <= n)


def read_charset_file(path: str) -> str:
    """Read an alphabet file: one character per line, or the whole alphabet on one line."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    lines = [ln.rstrip("\r\n") for ln in text.splitlines()]
    lines = [ln for ln in lines if ln != ""]
    if len(lines) > 1 and all(len(ln) == 1 for ln in lines):
        return "".join(lines)
    if len(lines) == 1:
        return lines[0]
    raise CharsetError(f"{path}: expected one character per line or a single line with the alphabet")
