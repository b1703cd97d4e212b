"""Alphabets for CTC recognition: blank = index 0, characters from index 1."""
from __future__ import annotations

import os
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from crnn.alphabet_file import AlphabetFileError, looks_like_path, read_alphabet_file

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


def zh_traditional_rows() -> list[tuple[str, str, str]]:
    """``crnn/data/zh_trad.tsv`` (written from OpenCC's tables by scripts/traditional_forms.py): (form, its level-1
    GB 2312 Hanzi, "" for OpenCC's forms, else the standards of a Taiwan / Hong Kong form: "tw", "hk" or "tw hk")."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "zh_trad.tsv")
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip() and not line.startswith("#")]
    return [(form, hanzi, standards[0] if standards else "") for form, hanzi, *standards in rows]


def zh_traditional_forms() -> str:
    """The 1,481 traditional forms outside GB 2312 of the level-1 GB 2312 Hanzi: OpenCC's 1,458 (鴨 for 鸭, 說 for 说,
    爲 for 为) in the standard's order, then the 23 Taiwan and Hong Kong forms they lack (為, 裡, 眾, 説)."""
    return "".join(form for form, _, _ in zh_traditional_rows())


BUILTIN_CHARSETS: dict[str, str] = {
    "digits": string.digits,
    "alnum36": string.digits + string.ascii_lowercase,
    "printable94": string.digits + string.ascii_letters + string.punctuation,
    # printable ASCII with the space: case, punctuation and the spaces of short lines (the English model, issue 44)
    "printable95": string.digits + string.ascii_letters + string.punctuation + " ",
    "zh_gb2312": _zh_gb2312(),
    # zh_gb2312 with the traditional forms of its level-1 Hanzi after it (OpenCC's, then Taiwan's and Hong Kong's), so
    # zh_gb2312's rows keep their places
    # (signs in Hong Kong and Taiwan, issue 43; docs/chinese.md, "Traditional forms on signs")
    "zh_gb2312_trad": _zh_gb2312() + zh_traditional_forms(),
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
    def from_spec(cls, spec: str, lowercase: bool | None = None, unknown: str = "reject", encoding: str = "auto",
                  key: str = "") -> "Charset":
        """Build from a built-in name, an alphabet file (see :mod:`crnn.alphabet_file`) or a literal string.

        ``encoding`` applies to files (auto = BOM, UTF-8, then GB18030). ``key`` (e.g. ``model.charset``) prefixes
        every error message so it names the setting as well as the file.
        """
        try:
            return cls(chars_from_spec(spec, encoding), lowercase, unknown)
        except CharsetError as e:
            raise CharsetError(f"{key}: {e}" if key else str(e)) from None

    @classmethod
    def from_config(cls, model_cfg: Any) -> "Charset":
        """Build from a ``ModelConfig`` (charset, lowercase, unknown, charset_encoding); errors name the keys."""
        enc = getattr(model_cfg, "charset_encoding", "auto")
        return cls.from_spec(model_cfg.charset, model_cfg.lowercase, model_cfg.unknown, enc, key="model.charset")

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
        """Apply case folding and the unknown-character policy; ``None`` means the sample is rejected.

        A character outside the alphabet whose NFKC form is in it (full-width ``Ａ``/``，``/U+3000 for an alphabet
        with ``A``/``,``/space) is replaced by that form instead of being rejected or dropped.
        """
        if self.lowercase:
            label = label.lower()
        missing = [c for c in label if c not in self.index]
        if missing:  # full-width forms (U+3000, 'ＡＢ', '！') count as the alphabet's half-width ones
            label = "".join(c if c in self.index else self._fold(c) for c in label)
            missing = [c for c in label if c not in self.index]
        if not missing:
            return label
        if self.unknown == "reject":
            self.stats["rejected_unknown"] += 1
            return None
        self.stats["dropped_chars"] += len(missing)
        return "".join(c for c in label if c in self.index)

    def _fold(self, c: str) -> str:
        """``c``'s NFKC form when that is one character of the alphabet, else ``c``."""
        folded = unicodedata.normalize("NFKC", c)
        return folded if folded in self.index else c

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


def chars_from_spec(spec: str, encoding: str = "auto") -> str:
    """The characters a spec names: a built-in, an existing file, or (unless it looks like a path) the spec itself."""
    if spec in BUILTIN_CHARSETS:
        return BUILTIN_CHARSETS[spec]
    if os.path.isfile(spec) or looks_like_path(spec):
        return read_charset_file(spec, encoding)
    return spec


def read_charset_file(path: str, encoding: str = "auto") -> str:
    """The alphabet of a file (one character per line or one line; see :mod:`crnn.alphabet_file`)."""
    try:
        return read_alphabet_file(path, encoding).chars
    except AlphabetFileError as e:
        raise CharsetError(str(e)) from None
