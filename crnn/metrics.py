"""Recognition metrics: word accuracy, character error rate and ICDAR-2019 normalised edit distance.

:class:`RecognitionMetrics` keeps plain counts so that ranks can sum them: move
``state_tensor()`` to the device, ``all_reduce`` it with SUM, then ``load_state_tensor()``.
"""
from __future__ import annotations

import heapq
import re
import string
import unicodedata
from collections.abc import Sequence

import torch

PROTOCOLS = ("exact", "alnum-insensitive", "unicode")
PROTOCOL_CHOICES = ("auto", *PROTOCOLS)  # auto: alnum-insensitive for the alnum36 charset, exact otherwise
REMOVED_SHARE_WARN = 0.10  # warn when a protocol deletes more than this share of the label characters
_ALNUM36 = string.digits + string.ascii_lowercase
_NOT_ALNUM = re.compile(r"[^0-9a-z]")
_SPACES = re.compile(r"\s+")
_STATE_FIELDS = ("samples", "correct", "edits", "label_chars", "ned_sum", "raw_label_chars")


def edit_distance(a: Sequence, b: Sequence) -> int:
    """Levenshtein distance (unit-cost insert / delete / substitute) between two sequences."""
    if a == b:
        return 0
    start = 0  # common prefix and suffix never change the distance
    while start < len(a) and start < len(b) and a[start] == b[start]:
        start += 1
    end_a, end_b = len(a), len(b)
    while end_a > start and end_b > start and a[end_a - 1] == b[end_b - 1]:
        end_a -= 1
        end_b -= 1
    a, b = a[start:end_a], b[start:end_b]
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return len(a)
    prev = list(range(len(b) + 1))  # distances from a[:i-1] to every prefix of b
    for i, ca in enumerate(a, 1):
        left = i
        cur = [i]
        for cb, diag, up in zip(b, prev, prev[1:]):  # unrolled min() of the three moves: ~1.7x faster
            sub = diag + (ca != cb)
            if up < left:
                left = up
            left += 1
            if sub < left:
                left = sub
            cur.append(left)
        prev = cur
    return prev[-1]


def normalize_text(text: str, protocol: str) -> str:
    """Map a string to the form compared under ``protocol``.

    exact: unchanged. alnum-insensitive: lower case, only 0-9a-z kept (the English benchmark convention; it deletes
    every other script). unicode: NFKC (full-width and half-width forms compare equal), whitespace runs collapsed to
    one space, leading/trailing whitespace stripped.
    """
    if protocol == "exact":
        return text
    if protocol == "alnum-insensitive":
        return _NOT_ALNUM.sub("", text.lower())
    if protocol == "unicode":
        return _SPACES.sub(" ", unicodedata.normalize("NFKC", text)).strip()
    raise ValueError(f"unknown metric protocol {protocol!r}; valid protocols: {', '.join(PROTOCOLS)}")


def resolve_protocol(protocol: str, chars: str) -> str:
    """``auto`` -> alnum-insensitive when the alphabet ``chars`` is alnum36, else exact; other names pass through."""
    if protocol != "auto":
        normalize_text("", protocol)  # validate
        return protocol
    return "alnum-insensitive" if chars == _ALNUM36 else "exact"


def describe_protocol(requested: str, resolved: str) -> str:
    """One log line saying which protocol is used and why."""
    if requested != "auto":
        return f"metric protocol: {resolved}"
    why = "the charset is alnum36" if resolved == "alnum-insensitive" else "the charset is not alnum36"
    return f"metric protocol: {resolved} (auto: {why})"


def protocol_warning(protocol: str, removed_share: float, where: str = "") -> str | None:
    """A loud message when ``protocol`` deleted more than 10 % of the label characters, else None."""
    if removed_share <= REMOVED_SHARE_WARN:
        return None
    at = f" on {where}" if where else ""
    return (f"WARNING: protocol {protocol!r} removed {removed_share:.1%} of the label characters{at} before "
            f"comparing; its accuracy and CER ignore them (use --protocol exact / unicode, train.protocol=exact)")


def cer_first(chars: str) -> bool:
    """Whether reports should lead with CER: every alphabet except alnum36 (whose convention is word accuracy)."""
    return chars != _ALNUM36


def format_rates(m: dict, lead_with_cer: bool) -> str:
    """``acc .. CER .. 1-NED ..`` (or CER first) for a log line; 1-NED is a similarity: 1.0 = perfect."""
    acc, cer, ned = f"acc {m['word_acc']:.4f}", f"CER {m['cer']:.4f}", f"1-NED {m['ned_similarity']:.4f}"
    return "  ".join((cer, acc, ned) if lead_with_cer else (acc, cer, ned))


def display_width(text: str) -> int:
    """Terminal columns of ``text``: East Asian wide/full-width characters take 2, combining marks 0."""
    width = 0
    for c in text:
        if unicodedata.combining(c):
            continue
        width += 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1
    return width


def ljust_display(text: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` display columns (``str.ljust`` counts characters, not columns)."""
    return text + " " * max(0, width - display_width(text))


class RecognitionMetrics:
    """Accumulates word accuracy, CER and 1-NED over batches of (prediction, label) strings.

    Both strings are normalised with :func:`normalize_text` under ``protocol`` before comparing.
    ``compute()`` returns ``{"samples", "word_acc", "cer", "ned_similarity"}``:

    - ``word_acc`` = correct / samples;
    - ``cer`` = total edit distance / total label characters (after normalisation; a divisor of
      0 is taken as 1, so all-empty labels give the raw edit count);
    - ``ned_similarity`` = the ICDAR-2019 "1-N.E.D." score: 1 - mean over samples of
      ``edit_distance / max(len(pred), len(label))``, an empty-vs-empty pair counting 0 distance.
      Higher is better, 1.0 is perfect.

    With no samples every rate is 0.0. ``keep_errors=N`` keeps the N wrong samples with the
    highest edit distance (earliest first on ties) as ``(label, pred, distance)`` with the raw
    strings; they are local to this object and are not part of the state tensor.
    """

    def __init__(self, protocol: str = "exact", keep_errors: int = 0) -> None:
        normalize_text("", protocol)  # validate early
        self.protocol = protocol
        self.keep_errors = int(keep_errors)
        self.reset()

    def reset(self) -> None:
        """Forget all samples."""
        self.samples = 0
        self.correct = 0
        self.edits = 0
        self.label_chars = 0
        self.ned_sum = 0.0
        self.raw_label_chars = 0
        self._errors: list[tuple[int, int, str, str]] = []  # min-heap of (distance, -order, label, pred)
        self._n_errors = 0  # order stamp for ties: earlier errors win

    def update(self, preds: Sequence[str], labels: Sequence[str]) -> None:
        """Add one batch of predictions and their ground-truth labels."""
        if len(preds) != len(labels):
            raise ValueError(f"got {len(preds)} predictions for {len(labels)} labels; pass one prediction per label")
        for pred, label in zip(preds, labels):
            p, g = normalize_text(pred, self.protocol), normalize_text(label, self.protocol)
            dist = edit_distance(p, g)
            self.samples += 1
            self.correct += dist == 0
            self.edits += dist
            self.label_chars += len(g)
            self.raw_label_chars += len(label)
            if dist:
                self.ned_sum += dist / max(len(p), len(g))
                self._keep_error(dist, label, pred)

    def _keep_error(self, dist: int, label: str, pred: str) -> None:
        """Push one error onto the bounded worst-errors heap."""
        if self.keep_errors <= 0:
            return
        self._n_errors += 1
        item = (dist, -self._n_errors, label, pred)
        if len(self._errors) < self.keep_errors:
            heapq.heappush(self._errors, item)
        elif item > self._errors[0]:
            heapq.heapreplace(self._errors, item)

    def errors(self) -> list[tuple[str, str, int]]:
        """The kept worst errors as (label, pred, distance), highest distance first."""
        return [(label, pred, d) for d, _, label, pred in sorted(self._errors, reverse=True)]

    def compute(self) -> dict[str, float]:
        """Current metrics: samples, word_acc, cer, ned_similarity (= 1 - mean normalised edit distance)."""
        n = self.samples
        return {
            "samples": n,
            "word_acc": self.correct / n if n else 0.0,
            "cer": self.edits / max(self.label_chars, 1) if n else 0.0,
            "ned_similarity": 1.0 - self.ned_sum / n if n else 0.0,
        }

    def removed_share(self) -> float:
        """Share of the raw label characters that the protocol's normalisation deleted (0.0 without labels)."""
        if not self.raw_label_chars:
            return 0.0
        return max(0.0, 1.0 - self.label_chars / self.raw_label_chars)

    def state_tensor(self) -> torch.Tensor:
        """Counts as a float64 ``[6]`` tensor (``_STATE_FIELDS``) for all_reduce SUM."""
        return torch.tensor([self.samples, self.correct, self.edits, self.label_chars, self.ned_sum,
                             self.raw_label_chars], dtype=torch.float64)

    def load_state_tensor(self, t: torch.Tensor) -> None:
        """Replace the counts with those in ``t`` (e.g. after summing across ranks); kept errors are untouched."""
        if t.dim() != 1 or t.numel() != len(_STATE_FIELDS):
            raise ValueError(f"expected a 1-D state tensor of {len(_STATE_FIELDS)} values {_STATE_FIELDS}, "
                             f"got shape {tuple(t.shape)}")
        vals = t.detach().to("cpu", torch.float64).tolist()
        self.samples, self.correct, self.edits, self.label_chars = (round(v) for v in vals[:4])
        self.ned_sum = vals[4]
        self.raw_label_chars = round(vals[5])

    @classmethod
    def from_state_tensor(cls, t: torch.Tensor, protocol: str = "exact") -> "RecognitionMetrics":
        """A new accumulator holding the counts in ``t``."""
        m = cls(protocol)
        m.load_state_tensor(t)
        return m

    def merge(self, other: "RecognitionMetrics") -> None:
        """Add another local accumulator's counts (and kept errors) into this one."""
        if other.protocol != self.protocol:
            raise ValueError(f"cannot merge metrics with protocol {other.protocol!r} into {self.protocol!r}")
        self.load_state_tensor(self.state_tensor() + other.state_tensor())
        for dist, _, label, pred in sorted(other._errors, key=lambda e: -e[1]):  # other's arrival order
            self._keep_error(dist, label, pred)
