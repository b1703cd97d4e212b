"""CTC decoding of batch-first posteriors ``[B, T, C]`` (blank = 0): greedy, prefix beam search, lexicon, word prior.

Every decoder takes logits or log-probabilities (``log_softmax`` is applied either way, in float32),
optional ``lengths [B]`` (valid time steps per sample; steps past them are ignored) and returns one
``(text, confidence)`` per sample. Confidences are probabilities in [0, 1]:

- every decoder: the probability of the returned *labelling* (the text), summed over all its alignments (exact CTC
  forward algorithm). Greedy decoding finds the text by its single best *path*, but a path's probability (the
  product of the per-step maxima) is not the text's: a character the model places at one step or the next with
  equal odds halves the path's probability and leaves the text's whole (on the development sets, the path's
  probability put a sixth to a third of correct readings under 0.5, and its calibration error was 1.7-4x the text's).
"""
from __future__ import annotations

import heapq
import math
import re
from collections.abc import Iterable, Mapping, Sequence

import torch
import torch.nn.functional as F

from crnn.charset import BLANK, Charset

DECODE_METHODS = ("greedy", "beam", "word")
NEG_INF = float("-inf")
_SCORE_CHUNK = 256  # candidate labellings per ctc_loss call
BEAM_PRUNE_NATS = 10.0  # beam search drops prefixes less than e^-10 as probable as the best one
WORD_MARGIN_NATS = 3.0  # the word prior takes a listed reading at most e^3 less probable than the beam's best
_NOT_ALNUM = re.compile(r"[^0-9a-z]")
_FIELDS = re.compile(r"\s*[,;]\s*|\s+")  # the fields of a frequency list's line: word, count


def _prepare(logits: torch.Tensor, charset: Charset,
             lengths: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate inputs; return float32 log-probs ``[B, T, C]`` and int64 lengths ``[B]`` on the same device."""
    if logits.dim() != 3 or logits.shape[-1] != charset.num_classes:
        raise ValueError(f"expected logits [B, T, {charset.num_classes}] for {charset!r}, "
                         f"got shape {tuple(logits.shape)}")
    B, T, _ = logits.shape
    log_probs = logits.float().log_softmax(-1)  # [B, T, C]
    if lengths is None:
        return log_probs, torch.full((B,), T, dtype=torch.long, device=logits.device)
    lengths = torch.as_tensor(lengths, device=logits.device).long().reshape(-1)  # [B]
    if lengths.numel() != B or bool(((lengths < 0) | (lengths > T)).any()):
        raise ValueError(f"lengths must hold {B} values in [0, {T}], got {lengths.tolist()}")
    return log_probs, lengths


def greedy_decode(logits: torch.Tensor, charset: Charset,
                  lengths: torch.Tensor | None = None) -> list[tuple[str, float]]:
    """Best-path decoding: argmax per step, merge repeats, drop blanks; confidence = the text's probability."""
    log_probs, lengths = _prepare(logits, charset, lengths)
    B, T, _ = log_probs.shape
    best, ids = log_probs.max(-1)  # [B, T]
    valid = torch.arange(T, device=ids.device)[None, :] < lengths[:, None]  # [B, T]
    path = best.masked_fill(~valid, 0.0).sum(1)  # [B] log P of the best path
    prev = torch.full_like(ids, BLANK)  # [B, T] previous step's id (blank before the first step)
    prev[:, 1:] = ids[:, :-1]
    keep = valid & (ids != BLANK) & (ids != prev)  # [B, T]
    ids, keep = ids.cpu(), keep.cpu()
    labels = [ids[b][keep[b]] for b in range(B)]
    text = labelling_log_probability(log_probs, labels, lengths)  # [B] >= path but for float32 rounding
    conf = torch.maximum(text, path).clamp(max=0.0).cpu().double().exp()  # [B]
    return [(charset.decode(labels[b].tolist()), float(conf[b])) for b in range(B)]


def labelling_log_probability(log_probs: torch.Tensor, labels: Sequence[torch.Tensor],
                              lengths: torch.Tensor) -> torch.Tensor:
    """log P(labels[b] | x_b) over all alignments, from normalised log-probs ``[B, T, C]`` -> ``[B]`` on their device.

    One ``F.ctc_loss`` call (the forward algorithm, in the log-probs' precision; its cost grows with the texts'
    lengths, not the alphabet's). A labelling too long for its sample scores -inf (a greedy reading always fits); a
    sample of no steps has the empty labelling, log P = 0."""
    B, T, _ = log_probs.shape
    if B == 0 or T == 0:
        return log_probs.new_zeros(B)
    targets = torch.cat([lab.long() for lab in labels]).to(log_probs.device)  # [sum L]
    target_lengths = torch.tensor([len(lab) for lab in labels], dtype=torch.long, device=log_probs.device)  # [B]
    return -F.ctc_loss(log_probs.transpose(0, 1), targets, lengths, target_lengths, blank=BLANK, reduction="none",
                       zero_infinity=False)  # [B]


def sequence_log_likelihood(log_probs: torch.Tensor, labellings: Sequence[Sequence[int]]) -> torch.Tensor:
    """Exact CTC log P(labelling | x) of each labelling under one sample's logits or log-probs ``[T, C]`` -> ``[N]``.

    Uses the forward algorithm of ``F.ctc_loss`` in float64 (result float64), batched over labellings; an
    impossible labelling (too long for T) scores ``-inf``.
    """
    lp = log_probs.detach().to("cpu", torch.float64).log_softmax(-1)  # [T, C]
    return _ctc_log_likelihood(lp, labellings)


def _ctc_log_likelihood(lp: torch.Tensor, labellings: Sequence[Sequence[int]]) -> torch.Tensor:
    """:func:`sequence_log_likelihood` on normalised float64 log-probs ``[T, C]`` (C may be a column subset)."""
    T, C = lp.shape
    if T == 0:
        return torch.tensor([0.0 if len(lab) == 0 else NEG_INF for lab in labellings], dtype=torch.float64)
    scores = []
    for start in range(0, len(labellings), _SCORE_CHUNK):
        group = [torch.tensor(lab, dtype=torch.long) for lab in labellings[start:start + _SCORE_CHUNK]]
        scores.append(labelling_log_probability(lp.expand(len(group), T, C), group,  # the sample N times: [N, T, C]
                                                torch.full((len(group),), T, dtype=torch.long)))  # [N]
    return torch.cat(scores) if scores else torch.zeros(0, dtype=torch.float64)


def _logaddexp(a: float, b: float) -> float:
    """log(exp(a) + exp(b)) for Python floats, -inf safe."""
    if a < b:
        a, b = b, a
    if b == NEG_INF:
        return a
    return a + math.log1p(math.exp(b - a))


def _beam_steps(rows: list[list[float]], chars: list[list[int]], width: int) -> list[tuple[tuple[int, ...], float]]:
    """The prefix beam search loop over per-step log-probs ``rows[t][c]``, extending only with ``chars[t]``."""
    beam: dict[tuple[int, ...], tuple[float, float]] = {(): (0.0, NEG_INF)}  # prefix -> (log p_blank, log p_nonblank)
    for row, step_chars in zip(rows, chars):
        nxt: dict[tuple[int, ...], list[float]] = {}
        for prefix, (p_b, p_nb) in beam.items():
            p_tot = _logaddexp(p_b, p_nb)
            same = nxt.setdefault(prefix, [NEG_INF, NEG_INF])
            same[0] = _logaddexp(same[0], p_tot + row[BLANK])
            last = prefix[-1] if prefix else None
            if last is not None:  # repeated last char without a blank collapses into the same prefix
                same[1] = _logaddexp(same[1], p_nb + row[last])
            for c in step_chars:
                ext = nxt.setdefault(prefix + (c,), [NEG_INF, NEG_INF])
                # a repeat of the last char only starts a new symbol after a blank
                ext[1] = _logaddexp(ext[1], (p_b if c == last else p_tot) + row[c])
        scored = [(_logaddexp(p_b, p_nb), prefix, p_b, p_nb) for prefix, (p_b, p_nb) in nxt.items()]
        best = heapq.nlargest(width, scored)
        cut = best[0][0] - BEAM_PRUNE_NATS  # prefixes this far behind the leader are dropped
        beam = {prefix: (p_b, p_nb) for total, prefix, p_b, p_nb in best if total >= cut}
    return [(prefix, _logaddexp(p_b, p_nb)) for prefix, (p_b, p_nb) in beam.items()]


def step_candidates(log_probs: torch.Tensor, top_k: int, prune_threshold: float) -> tuple[torch.Tensor, list]:
    """Best class per step (argmax) and, per step, the non-blank classes a prefix may be extended with: the
    ``top_k`` most likely (0 = all) whose probability is >= ``prune_threshold``.

    ``log_probs [..., T, C]`` -> (``[..., T]`` ids, nested lists ``[...][T][<=k]``). One top-k pass over the
    classes serves both, which keeps beam search cost nearly independent of the alphabet size.
    """
    C = log_probs.shape[-1]
    k = C - 1 if top_k <= 0 else min(top_k, C - 1)
    top_lp, top_ids = log_probs.topk(k + 1, dim=-1)  # [..., T, k+1] sorted; at most one of them is the blank
    best = top_ids[..., 0]  # [..., T]
    tied = top_lp[..., 0] == top_lp[..., 1] if k > 0 else torch.zeros_like(best, dtype=torch.bool)
    if bool(tied.any()):  # argmax's rule on ties (first index), which topk does not promise
        best = torch.where(tied, log_probs.argmax(-1), best)
    log_threshold = math.log(prune_threshold) if prune_threshold > 0 else NEG_INF
    keep = (top_ids != BLANK) & (top_lp >= log_threshold)
    top_ids = torch.where(keep, top_ids, torch.full_like(top_ids, -1))  # [..., T, k+1]

    def strip(x: list) -> list:
        return [strip(v) for v in x] if x and isinstance(x[0], list) else [c for c in x if c >= 0][:k]
    return best, strip(top_ids.tolist())


def _compact(log_probs: torch.Tensor, chars: list[list[int]],
             extra: Iterable[int] = ()) -> tuple[list[int], torch.Tensor, list[list[int]]]:
    """Keep only the columns a search can touch: (class ids of the columns, ``[T, S]`` log-probs, remapped chars).

    Column 0 stays the blank. Prefixes only ever hold candidate characters, so nothing else is read.
    """
    cols = sorted({BLANK, *extra, *(c for step in chars for c in step)})
    pos = {c: i for i, c in enumerate(cols)}
    sub = log_probs[:, cols]  # [T, S]
    return cols, sub, [[pos[c] for c in step] for step in chars]


def prefix_beam_search(log_probs: torch.Tensor, beam_width: int = 10, prune_threshold: float = 1e-3,
                       top_k: int | None = None) -> list[tuple[tuple[int, ...], float]]:
    """N-best labellings (class ids) of one sample's logits or log-probs ``[T, C]``, best first, with log-probabilities.

    Each prefix tracks log P(ending in blank) and log P(ending in its last char); equal prefixes
    reached by different alignments are merged, so a score sums the alignments kept in the beam
    (exact when nothing is pruned). Each step extends prefixes only with the ``top_k`` (default:
    ``beam_width``; 0 = all) most likely non-blank chars whose probability is >= ``prune_threshold``,
    then keeps the ``beam_width`` best prefixes, minus those more than ``BEAM_PRUNE_NATS`` behind the best.
    """
    if beam_width < 1:
        raise ValueError(f"beam_width must be >= 1, got {beam_width}")
    log_probs = log_probs.detach().float().cpu().log_softmax(-1)  # [T, C]
    _, chars = step_candidates(log_probs, beam_width if top_k is None else top_k, prune_threshold)
    cols, sub, sub_chars = _compact(log_probs, chars)
    nbest = _beam_steps(sub.tolist(), sub_chars, beam_width)
    return [(tuple(cols[i] for i in prefix), score) for prefix, score in nbest]


def _collapse(ids: list[int]) -> tuple[int, ...]:
    """CTC collapse of one path: merge repeats, then drop blanks."""
    out = []
    prev = BLANK
    for i in ids:
        if i != prev and i != BLANK:
            out.append(i)
        prev = i
    return tuple(out)


class Lexicon:
    """A word list prepared once for lexicon decoding with one charset.

    Words are case-folded like ``charset.normalize`` does; words with characters outside the
    alphabet are skipped whatever its unknown policy (the model cannot spell them), as are empty
    words and duplicates. Edit distances to all words are computed at once in torch.
    """

    def __init__(self, words: Iterable[str], charset: Charset) -> None:
        self.charset = charset
        encoded: dict[str, list[int]] = {}
        for word in words:
            norm = word.lower() if charset.lowercase else word
            if norm and norm not in encoded and all(c in charset.index for c in norm):
                encoded[norm] = [charset.index[c] for c in norm]
        self.words = list(encoded)
        self.ids = list(encoded.values())
        self.lengths = torch.tensor([len(ids) for ids in self.ids], dtype=torch.long)  # [N]
        width = int(self.lengths.max()) if self.ids else 0
        self.padded = torch.full((len(self.ids), width), -1, dtype=torch.int32)  # [N, L] class ids, -1 = padding
        filled = torch.arange(width)[None, :] < self.lengths[:, None]  # [N, L] row-major, like the flat ids
        self.padded[filled] = torch.tensor([i for ids in self.ids for i in ids], dtype=torch.int32)

    def __len__(self) -> int:
        return len(self.words)

    def distances(self, text: str) -> torch.Tensor:
        """Levenshtein distance from ``text`` to every word -> int64 ``[N]`` (one DP row per char of text)."""
        N, L = self.padded.shape
        cols = torch.arange(L + 1, dtype=torch.int32)  # [L+1]
        row = cols.expand(N, L + 1)  # [N, L+1] distance from text[:0] to word[:j]
        for i, ch in enumerate(text, 1):
            mismatch = self.padded != self.charset.index.get(ch, -2)  # [N, L]
            best = torch.minimum(row[:, :-1] + mismatch, row[:, 1:] + 1)  # [N, L] substitute / delete
            best = torch.cat([torch.full((N, 1), i, dtype=torch.int32), best], 1)  # [N, L+1]
            row = torch.cummin(best - cols, dim=1).values + cols  # insertions: min(best[j], row[j-1] + 1)
        return row.gather(1, self.lengths[:, None]).squeeze(1).long()  # [N]

    def nearest(self, text: str, k: int) -> list[int]:
        """Indices (in lexicon order) of the ``k`` words nearest ``text`` in edit distance; ties keep lexicon order."""
        N = len(self.words)
        if k >= N:
            return list(range(N))
        key = self.distances(text) * N + torch.arange(N)  # [N] distance first, then lexicon position
        return sorted(torch.topk(key, max(k, 0), largest=False).indices.tolist())

    def best(self, log_probs: torch.Tensor, hint: str, max_candidates: int = 0) -> tuple[str, float] | None:
        """Most likely word and its log-probability under one sample's ``[T, C]`` (None if no word is possible).

        With ``max_candidates > 0`` only that many words nearest ``hint`` are scored.
        """
        if not self.words:
            return None
        picks = self.nearest(hint, max_candidates) if max_candidates > 0 else list(range(len(self.words)))
        scores = sequence_log_likelihood(log_probs, [self.ids[i] for i in picks])  # [N]
        top = int(scores.argmax())
        if scores[top] == NEG_INF:
            return None
        return self.words[picks[top]], float(scores[top])


def beam_decode(logits: torch.Tensor, charset: Charset, lengths: torch.Tensor | None = None,
                beam_width: int = 10, lexicon: Sequence[str] | Lexicon | None = None,
                prune_threshold: float = 1e-3, max_lexicon_candidates: int = 1000,
                top_k: int | None = None) -> list[tuple[str, float]]:
    """CTC prefix beam search; confidence = exact probability of the returned labelling.

    Per time step only the ``top_k`` (default ``beam_width``; 0 = all) most likely characters of probability
    >= ``prune_threshold`` extend the beam, and only their columns are read, so a 5,000-class alphabet costs
    about what a 37-class one does.

    Runs :func:`prefix_beam_search` per sample; the final beam plus the greedy labelling are rescored
    with the exact forward algorithm and the most probable wins, so the result is never less
    probable than greedy's. With ``lexicon`` (a word list, or a :class:`Lexicon` built once and
    reused across batches) the answer is the lexicon word of highest CTC likelihood instead;
    lexicons longer than ``max_lexicon_candidates`` (0 = no limit) are first cut to the words
    nearest the beam result in edit distance. If no lexicon word is possible the beam result is
    returned.
    """
    if beam_width < 1:
        raise ValueError(f"beam_width must be >= 1, got {beam_width}")
    log_probs, lengths = _prepare(logits, charset, lengths)
    log_probs, lengths = log_probs.cpu(), lengths.tolist()  # [B, T, C]
    best, chars = step_candidates(log_probs, beam_width if top_k is None else top_k, prune_threshold)  # [B][T][<=k]
    greedy_ids = best.tolist()  # [B][T]
    if lexicon is not None and not isinstance(lexicon, Lexicon):
        lexicon = Lexicon(lexicon, charset)
    if lexicon is not None and (lexicon.charset.chars, lexicon.charset.lowercase) != (charset.chars, charset.lowercase):
        raise ValueError(f"the lexicon was built for {lexicon.charset!r}, not {charset!r}; rebuild it")
    results = []
    for b, n in enumerate(lengths):
        lp = log_probs[b, :n]  # [T_b, C]
        greedy = _collapse(greedy_ids[b][:n])
        cols, sub, sub_chars = _compact(lp, chars[b][:n], greedy)  # [T_b, S]: blank + every reachable char
        pos = {c: i for i, c in enumerate(cols)}
        nbest = _beam_steps(sub.tolist(), sub_chars, beam_width)
        cands = list(dict.fromkeys([ids for ids, _ in nbest] + [tuple(pos[c] for c in greedy)]))
        scores = _ctc_log_likelihood(sub.double(), cands)  # [N]
        best = int(scores.argmax())
        text, score = charset.decode([cols[i] for i in cands[best]]), float(scores[best])
        if lexicon is not None:
            text, score = lexicon.best(lp, text, max_lexicon_candidates) or (text, score)
        results.append((text, math.exp(score)))
    return results


class WordList:
    """The words of a word prior (:func:`word_decode`), in the 36-class form readings are compared in: lower case,
    only 0-9 and a-z kept (``Word's`` and ``words`` are one entry; entries with nothing left are dropped).

    Unlike a :class:`Lexicon` it does not close the vocabulary: a reading that is not listed stays what it is unless
    a listed reading is nearly as probable. ``words`` given as a mapping ``{word: count}`` (or a file of ``word
    count`` lines, :meth:`from_lines`) also gives each entry its frequency: counts of words with one form add up, and
    :func:`word_decode` then weighs readings by them (:meth:`weight`)."""

    def __init__(self, words: Iterable[str] | Mapping[str, float], source: str = "") -> None:
        self.source = source
        self.log10_counts: dict[str, float] | None = None
        if isinstance(words, Mapping):
            counts: dict[str, float] = {}
            for word, count in words.items():
                k = self.key(word)
                try:
                    c = float(count)
                except (TypeError, ValueError):
                    c = math.nan
                if not c > 0 or math.isinf(c):
                    raise ValueError(f"the count of {word!r} must be a positive number, got {count!r}")
                if k:
                    counts[k] = counts.get(k, 0.0) + c
            self.entries = frozenset(counts)
            self.log10_counts = {k: math.log10(c) for k, c in counts.items()}
            logs = self.log10_counts.values()
            self.floor, self.top = (min(logs), max(logs)) if counts else (0.0, 0.0)
        else:
            self.entries = frozenset(k for k in map(self.key, words) if k)

    @classmethod
    def from_lines(cls, lines: Iterable[str], source: str = "") -> "WordList":
        """A word list file's lines: one word per line, or, when the first line is ``word count`` (two fields split by
        blanks, a tab, a comma or a semicolon, the second a number), a frequency list whose every line must be so. A
        first line of two words followed by ``word count`` lines is a header (``word,count``) and skipped. Raises
        ValueError naming the first line that breaks the form."""
        lines = [(n, line.strip()) for n, line in enumerate(lines, 1)]
        lines = [(n, line) for n, line in lines if line]
        if len(lines) > 1 and _count_field(lines[0][1]) is None and len(_FIELDS.split(lines[0][1])) == 2 \
                and _count_field(lines[1][1]) is not None:
            lines = lines[1:]  # a header such as "word<TAB>count"
        where = f"{source} " if source else ""
        if not lines or _count_field(lines[0][1]) is None:
            if 2 * sum(_count_field(line) is not None for _, line in lines) > len(lines):  # "the 100" -> "the100"
                raise ValueError(f"{where}line {lines[0][0]}: {lines[0][1][:40]!r} is no 'word count' line, but most "
                                 "lines are: remove it (a comment?) for a frequency list")
            return cls((line for _, line in lines), source)
        counts: dict[str, float] = {}
        for n, line in lines:
            count = _count_field(line)
            if count is None or not count > 0:
                raise ValueError(f"{where}line {n}: {line[:40]!r} is not 'word count' with a positive count, as "
                                 f"line {lines[0][0]} of this frequency list is; give every line a count, or none")
            word = _FIELDS.split(line)[0]
            counts[word] = counts.get(word, 0.0) + count
        return cls(counts, source)

    @staticmethod
    def key(text: str) -> str:
        """``text`` in the form entries are kept in: lower case, only 0-9a-z."""
        return _NOT_ALNUM.sub("", text.lower())

    def weight(self, text: str) -> float:
        """log10 of the count of ``text``'s entry; a reading that is not listed weighs as the rarest listed word
        (frequency lists only)."""
        if self.log10_counts is None:
            raise ValueError("this word list has no counts")
        return self.log10_counts.get(self.key(text), self.floor)

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and self.key(text) in self.entries

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        kind = "words with counts" if self.log10_counts is not None else "words"
        return f"WordList({len(self)} {kind}{f' from {self.source}' if self.source else ''})"


def _count_field(line: str) -> float | None:
    """The count of a ``word count`` line (two fields split by blanks, a tab, a comma or a semicolon, the second a
    finite number), else None."""
    fields = _FIELDS.split(line.strip())
    if len(fields) != 2:
        return None
    try:
        count = float(fields[1])
    except ValueError:
        return None
    return None if math.isinf(count) or math.isnan(count) else count


def word_decode(logits: torch.Tensor, charset: Charset, lengths: torch.Tensor | None = None, *,
                words: WordList | Iterable[str] | Mapping[str, float] | None = None, beam_width: int = 10,
                margin: float = WORD_MARGIN_NATS, prune_threshold: float = 1e-3) -> list[tuple[str, float]]:
    """Greedy decoding with a word prior. Confidence = exact probability of the returned labelling, as for every
    decoder. Readings compare in :class:`WordList`'s 36-class form; the returned text keeps its case and punctuation
    as the beam read them. Greedy readings that hold a digit (numbers, codes) or no letter at all are never touched.

    A plain list: a reading that is not a listed word gives way to the most probable of the beam's ``beam_width``
    best readings that is one, if that is at most ``margin`` nats behind the best; otherwise greedy's reading stands.
    Listed readings are kept, and only the others cost a beam search.

    A list with counts (:class:`WordList` from a mapping or a ``word count`` file): each of the beam's readings of
    letters, greedy's among them, scores its log-probability plus log10 of its word's count (a reading that is not
    listed counts as the rarest listed word: one nat per factor of ten in frequency), and the best score is read.
    ``margin`` is not used: the counts weigh each reading instead. The beam is skipped where no other reading can
    win (greedy's probability p with log(1 - p) + log10 of the list's largest count <= log p + greedy's weight).

    Names and rare words absent from the list can be turned into a listed neighbour: the measured gain and cost are
    in docs/english.md ("A word prior at reading time").
    """
    if words is None:
        raise ValueError("the word decoder needs a word list (words=...)")
    if beam_width < 1:
        raise ValueError(f"beam_width must be >= 1, got {beam_width}")
    if not isinstance(words, WordList):
        words = WordList(words)
    readings = greedy_decode(logits, charset, lengths)
    weighed = words.log10_counts is not None
    todo = []
    for b, (text, p) in enumerate(readings):
        if not WordList.key(text).isalpha():
            continue
        if not weighed:
            if text not in words:
                todo.append(b)
        elif p < 1.0 and math.log1p(-p) + words.top > math.log(max(p, 1e-300)) + words.weight(text):
            todo.append(b)
    if not todo:
        return readings
    log_probs, lengths = _prepare(logits, charset, lengths)
    log_probs = log_probs.cpu()  # [B, T, C]
    for b in todo:
        lp = log_probs[b, :int(lengths[b])]  # [T_b, C]
        nbest = prefix_beam_search(lp, beam_width=beam_width, prune_threshold=prune_threshold)
        if weighed:
            pick = _weighed_pick(readings[b], nbest, charset, words)
        else:
            pick = _listed_pick(nbest, charset, words, margin)
        if pick is not None:
            exact = float(_ctc_log_likelihood(lp.double(), [pick])[0])
            readings[b] = (charset.decode(list(pick)), math.exp(min(exact, 0.0)))
    return readings


def _listed_pick(nbest: list[tuple[tuple[int, ...], float]], charset: Charset, words: WordList,
                 margin: float) -> tuple[int, ...] | None:
    """The most probable listed n-best reading at most ``margin`` nats behind the best, or None."""
    for ids, score in nbest:
        if score < nbest[0][1] - margin:
            return None
        if charset.decode(list(ids)) in words:  # never greedy's own reading, which is not listed
            return ids
    return None


def _weighed_pick(greedy: tuple[str, float], nbest: list[tuple[tuple[int, ...], float]], charset: Charset,
                  words: WordList) -> tuple[int, ...] | None:
    """The n-best reading of letters with the best log-probability + weight if it beats greedy's reading (scored by
    its own n-best entry, else its exact probability), or None."""
    text, p = greedy
    key = WordList.key(text)
    keyed = [(ids, score, WordList.key(charset.decode(list(ids)))) for ids, score in nbest]
    own = next((score for _, score, k in keyed if k == key), math.log(max(p, 1e-300)))
    best_score, best = own + words.weight(key), None
    for ids, score, k in keyed:
        if k != key and k.isalpha() and score + words.weight(k) > best_score:
            best_score, best = score + words.weight(k), ids
    return best


def decoder_options(method: str, beam_width: int = 10, lexicon: Sequence[str] | Lexicon | None = None,
                    words: WordList | Iterable[str] | None = None) -> dict:
    """The keyword options :func:`decode` takes for ``method``: none for greedy; the beam width and the lexicon for
    beam; the beam width and the word list for word."""
    if method == "beam":
        return {"beam_width": beam_width, "lexicon": lexicon}
    if method == "word":
        return {"beam_width": beam_width, "words": words}
    return {}


def decode(logits: torch.Tensor, charset: Charset, method: str = "greedy",
           lengths: torch.Tensor | None = None, **kw) -> list[tuple[str, float]]:
    """Dispatch to :func:`greedy_decode`, :func:`beam_decode` or :func:`word_decode` (``kw`` go to the decoder)."""
    if method == "greedy":
        if kw:
            raise TypeError(f"greedy decoding takes no options, got {sorted(kw)}")
        return greedy_decode(logits, charset, lengths)
    if method == "beam":
        return beam_decode(logits, charset, lengths, **kw)
    if method == "word":
        return word_decode(logits, charset, lengths, **kw)
    raise ValueError(f"unknown decode method {method!r}; valid methods: {', '.join(DECODE_METHODS)}")
