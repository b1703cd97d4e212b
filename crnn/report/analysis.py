"""What an evaluation report shows, as plain data: alignments, confusions, accuracy per bin, per-character errors.

Pure Python (no torch): every function takes :class:`Sample` records (one per evaluated image) and the metric
protocol, and compares the strings the way :class:`crnn.metrics.RecognitionMetrics` does (after ``normalize_text``).
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from crnn.metrics import edit_distance, normalize_text

EQ, SUB, DEL, INS = "=", "sub", "del", "ins"  # alignment operations; del = a truth character the reading missed
FREQ_EDGES = (1, 2, 5, 10, 50, 100, 500, 1000, 5000)  # character frequency buckets: [1, 2), [2, 5), ... [5000, inf)


@dataclass(frozen=True)
class Sample:
    """One evaluated image: where it is in its dataset, raw truth and reading, confidence, original size."""

    index: int
    label: str
    pred: str
    confidence: float
    width: int = 0
    height: int = 0


@dataclass
class Row:
    """A sample as compared under a protocol: normalised strings, edit distance, character alignment."""

    sample: Sample
    truth: str
    guess: str
    distance: int
    ops: list[tuple[str, str, str]] = field(default_factory=list)  # (op, truth char, predicted char)

    @property
    def correct(self) -> bool:
        """Whether the normalised reading equals the normalised truth."""
        return self.distance == 0

    @property
    def ned(self) -> float:
        """Normalised edit distance (0 = right, 1 = nothing in common)."""
        return self.distance / max(len(self.truth), len(self.guess), 1)


@dataclass(frozen=True)
class Confusion:
    """One kind of character error, in how many crops it happened and the crops that show it, clearest first."""

    kind: str  # sub / del / ins
    truth: str  # "" for an insertion
    pred: str  # "" for a deletion
    count: int  # crops with this error (a crop that makes it twice counts once)
    example: int  # Sample.index of the clearest image with this error: fewest other errors, then first
    occurrences: int = 0  # times it happened over all crops
    examples: tuple[int, ...] = ()  # every crop with it, clearest first (example is the first)


@dataclass(frozen=True)
class Bin:
    """A group of samples: its label, size, correct readings, and (calibration) mean confidence."""

    label: str
    n: int
    correct: int
    mean_confidence: float = 0.0

    @property
    def accuracy(self) -> float:
        """correct / n (0.0 for an empty bin)."""
        return self.correct / self.n if self.n else 0.0


@dataclass(frozen=True)
class CharStat:
    """How one truth character fared: occurrences in the (normalised) labels and how many were read right."""

    char: str
    occurrences: int
    right: int


def align(truth: str, guess: str) -> list[tuple[str, str, str]]:
    """A minimal edit script from ``truth`` to ``guess`` as (op, truth char, predicted char); ties favour sub."""
    n, m = len(truth), len(guess)
    d = [[0] * (m + 1) for _ in range(n + 1)]  # d[i][j]: distance of truth[:i] to guess[:j]
    for i in range(n + 1):
        d[i][0] = i
    for j in range(m + 1):
        d[0][j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i][j] = min(d[i - 1][j - 1] + (truth[i - 1] != guess[j - 1]), d[i - 1][j] + 1, d[i][j - 1] + 1)
    ops: list[tuple[str, str, str]] = []
    i, j = n, m
    while i or j:
        if i and j and d[i][j] == d[i - 1][j - 1] + (truth[i - 1] != guess[j - 1]):
            ops.append((EQ if truth[i - 1] == guess[j - 1] else SUB, truth[i - 1], guess[j - 1]))
            i, j = i - 1, j - 1
        elif i and d[i][j] == d[i - 1][j] + 1:
            ops.append((DEL, truth[i - 1], ""))
            i -= 1
        else:
            ops.append((INS, "", guess[j - 1]))
            j -= 1
    return ops[::-1]


def compare(samples: Sequence[Sample], protocol: str) -> list[Row]:
    """Every sample compared under ``protocol``; wrong ones carry their alignment."""
    rows = []
    for s in samples:
        t, g = normalize_text(s.label, protocol), normalize_text(s.pred, protocol)
        dist = edit_distance(t, g)
        rows.append(Row(s, t, g, dist, align(t, g) if dist else []))
    return rows


def worst_first(rows: Sequence[Row]) -> list[Row]:
    """The wrong rows, worst first: highest normalised edit distance, then most confident, then dataset order."""
    wrong = [r for r in rows if not r.correct]
    return sorted(wrong, key=lambda r: (-r.ned, -r.distance, -r.sample.confidence, r.sample.index))


def confusions(rows: Sequence[Row]) -> list[Confusion]:
    """Every substitution, deletion and insertion over all rows, in the most crops first (ties: occurrences, kind,
    characters). A crop counts once per kind of error however often it makes it, so one badly misread crop cannot
    outweigh errors seen across many; each comes with its crops, the one with the fewest errors first (then the
    first in dataset order)."""
    crops: dict[tuple[str, str, str], list[Row]] = {}
    times: Counter[tuple[str, str, str]] = Counter()
    for r in rows:
        ops = [op for op in r.ops if op[0] != EQ]
        times.update(ops)
        for op in dict.fromkeys(ops):
            crops.setdefault(op, []).append(r)
    order = sorted(crops, key=lambda k: (-len(crops[k]), -times[k], k))
    out = []
    for k in order:
        shown = tuple(r.sample.index for r in sorted(crops[k], key=lambda r: r.distance))  # stable: dataset order
        out.append(Confusion(k[0], k[1], k[2], len(crops[k]), shown[0], times[k], shown))
    return out


def top_confusions(conf: Sequence[Confusion], n: int, per_crop: int = 2) -> list[tuple[Confusion, int]]:
    """The ``n`` confusions to show, each with the crop to show it on: a crop is shown on at most ``per_crop`` cards
    (the next clearest crop of a confusion takes its place), and a confusion whose only crops are used up that way
    is left out - one crop read as something else entirely would otherwise fill the cards with its own errors."""
    used: Counter[int] = Counter()
    picked = []
    for c in conf:
        crop = next((i for i in c.examples or (c.example,) if used[i] < per_crop), None)
        if crop is None:
            continue
        used[crop] += 1
        picked.append((c, crop))
        if len(picked) == n:
            break
    return picked


def by_label_length(rows: Sequence[Row], max_bins: int = 20) -> list[Bin]:
    """Accuracy per normalised label length; lengths grouped into ranges when there are more than ``max_bins``."""
    if not rows:
        return []
    longest = max(len(r.truth) for r in rows)
    step = max(1, math.ceil((longest + 1) / max_bins))
    groups: dict[int, list[Row]] = {}
    for r in rows:
        groups.setdefault(len(r.truth) // step, []).append(r)
    bins = []
    for g in sorted(groups):
        lo, hi = g * step, g * step + step - 1
        bins.append(_bin(str(lo) if step == 1 else f"{lo}-{hi}", groups[g]))
    return bins


def by_quantile(rows: Sequence[Row], value: Callable[[Row], float], n_bins: int = 8,
                fmt: str = "{:.0f}") -> list[Bin]:
    """Accuracy in ``n_bins`` groups of about equal size ordered by ``value`` (labels give each group's range)."""
    ordered = sorted(rows, key=value)
    if not ordered:
        return []
    n_bins = min(n_bins, len(ordered))
    bins, start = [], 0
    for b in range(n_bins):
        end = round((b + 1) * len(ordered) / n_bins)
        while end < len(ordered) and end > start and value(ordered[end]) == value(ordered[end - 1]):
            end += 1  # equal values stay in one bin
        if end <= start:
            continue
        group = ordered[start:end]
        lo, hi = fmt.format(value(group[0])), fmt.format(value(group[-1]))
        bins.append(_bin(lo if lo == hi else f"{lo}-{hi}", group))
        start = end
    return bins


def calibration(rows: Sequence[Row], n_bins: int = 10) -> list[Bin]:
    """Accuracy and mean confidence per confidence bin [0, 0.1), ... [0.9, 1.0] (empty bins included)."""
    groups: list[list[Row]] = [[] for _ in range(n_bins)]
    for r in rows:
        groups[min(int(r.sample.confidence * n_bins), n_bins - 1)].append(r)
    bins = []
    for b, g in enumerate(groups):
        mean = sum(r.sample.confidence for r in g) / len(g) if g else 0.0
        bins.append(Bin(f"{b / n_bins:.1f}", len(g), sum(r.correct for r in g), mean))
    return bins


def expected_calibration_error(bins: Sequence[Bin]) -> float:
    """ECE: the sample-weighted mean of |accuracy - mean confidence| over the bins."""
    total = sum(b.n for b in bins)
    return sum(b.n * abs(b.accuracy - b.mean_confidence) for b in bins) / total if total else 0.0


def char_stats(rows: Sequence[Row]) -> list[CharStat]:
    """Per truth character: occurrences in the normalised labels and how many were read right, most frequent first."""
    occ: Counter[str] = Counter()
    wrong: Counter[str] = Counter()
    for r in rows:
        occ.update(r.truth)
        for op, t, _ in r.ops:
            if op in (SUB, DEL):
                wrong[t] += 1
    return [CharStat(c, occ[c], occ[c] - wrong[c]) for c in sorted(occ, key=lambda c: (-occ[c], c))]


def cer_by_frequency(stats: Sequence[CharStat], edges: Sequence[int] = FREQ_EDGES) -> list[Bin]:
    """Character error rate (substituted or deleted / occurrences) of the characters grouped by their frequency.

    ``Bin.n`` counts occurrences, ``Bin.correct`` those read right; the label is the frequency range. Insertions
    have no truth character and are left out.
    """
    bins = []
    for lo, hi in zip(edges, (*edges[1:], None)):
        group = [s for s in stats if s.occurrences >= lo and (hi is None or s.occurrences < hi)]
        if not group:
            continue
        label = f"{lo}+" if hi is None else (str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}")
        bins.append(Bin(label, sum(s.occurrences for s in group),
                        sum(s.right for s in group)))
    return bins


def never_right(stats: Sequence[CharStat]) -> list[CharStat]:
    """The characters that occur in the labels but were never read right, most frequent first."""
    return [s for s in stats if s.right == 0]


def _bin(label: str, rows: Sequence[Row]) -> Bin:
    return Bin(label, len(rows), sum(r.correct for r in rows))
