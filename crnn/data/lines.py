"""Text lines for any alphabet: corpus words mixed with digits, Latin words, punctuation and spaces.

Used by the synthetic generator when the alphabet goes beyond printable ASCII (Chinese, Greek, ...)
or when text lines are asked for. The text source per script:

* Han characters in the alphabet: the word list with frequencies that ``jieba`` ships (``dict.txt``,
  about 349,000 words; ``pip install 'crnn[zh]'``), sampled by frequency;
* otherwise, or with ``words=FILE``: that word list (one entry per line, most frequent first; or
  ``word count [tag]`` lines, which are drawn by count);
* always: a share of characters drawn uniformly from the alphabet, so that rare characters appear;
* ``traditional``: a share of lines whose corpus words (and number units) are written in traditional forms
  (:mod:`crnn.data.traditional`: 发展 -> 發展, 头发 -> 頭髮), each line in OpenCC's, Taiwan's or Hong Kong's forms
  (为 -> 爲, 為, 為; 里面 -> 裏面, 裡面, 裏面), for alphabets that have them (``zh_gb2312_trad``).

Every character of a line is in the alphabet (letters are case-folded where the alphabet is).
"""
from __future__ import annotations

import bisect
import functools
import itertools
import os
import random
import string
import unicodedata
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from crnn.data import words as W
from crnn.data.traditional import STANDARDS, to_traditional

# Full-width punctuation after words, weighted roughly as in Chinese running text; pairs wrap a word.
CJK_PUNCT_WEIGHTS = {"，": 30, "。": 14, "、": 8, "：": 5, "；": 3, "？": 3, "！": 3, "…": 1, "—": 1, "·": 1}
CJK_PAIRS = ("“”", "“”", "“”", "《》", "《》", "（）", "（）", "【】", "「」", "‘’", "『』", "〈〉", "〔〕")
# Units and counters that follow numbers in Chinese text.
CJK_NUMBER_UNITS = "年月日号元个万亿次种米人名岁点分"
# Share of pieces per kind in a line (the rest are corpus words). Numbers 0.05 and Latin words 0.04 (from step 41,151
# of the shipped Chinese model; 0.04 and 0.02 before): about 10 % digits and 7.5 % Latin letters of a Chinese line's
# characters, where 9.5 % and 3.9 % left Latin read 5x worse than Hanzi in fonts never seen (scripts/zh_benchmark.py)
PUNCT_SHARE, NUMBER_SHARE, LATIN_SHARE, UNIFORM_SHARE = 0.09, 0.05, 0.04, 0.10
SPACE_SHARE = 0.03  # chance of a space between two pieces (where the alphabet has the space)
# ...except where Chinese print has none (Han corpora; from step 58,760 of the shipped Chinese model): next to
# full-width punctuation and between two full-width characters. Those spaces (5 % of its lines had one between two
# Hanzi) were gaps the model had to guess: at step 58,030, read 1.15x wide, it put 87 stray spaces into
# zh_benchmark's 10,000 spaceless lines (29 in the 4,000 of training fonts; 63 right after full-width punctuation),
# PP-OCRv4 2, PP-OCRv6 small 7
UNIFORM_LINE_SHARE = 0.05  # lines made only of uniformly drawn characters


HELDOUT_WORD_SHARE = 10  # 1 corpus word in 10 (by a stable hash of the word) is kept out of training lines


class TextSourceError(ValueError):
    """The alphabet needs a text source that is not available."""


def is_han(c: str) -> bool:
    """A CJK unified ideograph (basic block, extension A, compatibility ideographs)."""
    o = ord(c)
    return 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0xF900 <= o <= 0xFAFF or 0x20000 <= o <= 0x2FA1F


def jieba_dict_path() -> str:
    """Path of jieba's ``dict.txt`` (word, frequency, part of speech); TextSourceError when not installed."""
    try:
        import jieba  # noqa: F401  (only its data file is used)
    except ImportError:
        raise TextSourceError("Chinese text lines need a word list: pip install 'crnn[zh]' (jieba, which ships "
                              "a word-frequency list) or pass a word list (--words FILE)") from None
    path = os.path.join(os.path.dirname(jieba.__file__), "dict.txt")
    if not os.path.isfile(path):
        raise TextSourceError(f"jieba is installed but its word list {path} is missing; reinstall jieba")
    return path


@dataclass(frozen=True)
class Corpus:
    """Words to draw, with cumulative weights; ``joiner`` goes between words (``""`` for Chinese)."""

    words: tuple[str, ...]
    cum: tuple[float, ...]
    joiner: str

    def draw(self, rng: random.Random) -> str:
        """A word, by weight."""
        return self.words[bisect.bisect_right(self.cum, rng.random() * self.cum[-1])]


def _fold(text: str, lower: bool) -> str:
    return text.lower() if lower else text


def _counted(entries: Sequence[str]) -> list[tuple[str, float]] | None:
    """``word count [tag]`` entries (jieba's dict.txt layout, frequency lists) as (word, count); None if not so."""
    split = [e.split(" ") for e in entries]
    ok = [p for p in split if 2 <= len(p) <= 3 and p[1].isdigit()]
    if len(ok) < 0.9 * len(split):
        return None
    return [(p[0], float(p[1])) for p in ok if float(p[1]) > 0]


def word_split(word: str) -> str:
    """``heldout`` for the fixed tenth of corpus words kept out of training lines, else ``train``."""
    return "heldout" if zlib.crc32(word.encode("utf-8")) % HELDOUT_WORD_SHARE == 0 else "train"


@functools.lru_cache(maxsize=8)
def load_corpus(charset: str, words: str | None, split: str = "all") -> Corpus | None:
    """The corpus for ``charset``: jieba's words for Han alphabets, else the word list; None = uniform only.

    Only words whose every character is in the alphabet are kept; ``split`` (train | heldout | all) keeps the
    words of that part (:func:`word_split`), so validation lines can be made of words training never drew.
    """
    corpus = _load_corpus(charset, words)
    if corpus is None or split == "all":
        return corpus
    weights = [b - a for a, b in zip((0.0,) + corpus.cum[:-1], corpus.cum)]
    kept = [(w, c) for w, c in zip(corpus.words, weights) if word_split(w) == split]
    return Corpus(tuple(w for w, _ in kept), tuple(itertools.accumulate(c for _, c in kept)), corpus.joiner)


def _load_corpus(charset: str, words: str | None) -> Corpus | None:
    """:func:`load_corpus` before the split."""
    chars, lower = W.label_rules(charset)
    if words is not None:
        entries = W.load_word_entries(words)
        counted = _counted(entries)
        pairs = counted if counted is not None else [(w, 1.0 / (r + 1)) for r, w in enumerate(entries)]  # Zipf
        pairs = [(_fold(w, lower), c) for w, c in pairs]
        pairs = [(w, c) for w, c in pairs if set(w) <= chars]
        if not pairs:
            raise TextSourceError(f"word list {words}: no entry is written in the characters of {charset!r}")
        joiner = "" if any(is_han(c) for w, _ in pairs[:100] for c in w) else " "
        return Corpus(tuple(w for w, _ in pairs), tuple(itertools.accumulate(c for _, c in pairs)), joiner)
    if any(is_han(c) for c in chars):
        kept, weights = [], []
        with open(jieba_dict_path(), encoding="utf-8") as f:
            for ln in f:
                parts = ln.split()
                if len(parts) >= 2 and parts[1].isdigit() and set(parts[0]) <= chars and any(map(is_han, parts[0])):
                    kept.append(parts[0])
                    weights.append(float(parts[1]))
        if not kept:
            raise TextSourceError(f"jieba's word list has no words in the characters of {charset!r}")
        return Corpus(tuple(kept), tuple(itertools.accumulate(weights)), "")
    if set(string.ascii_lowercase) <= {c.lower() for c in chars}:
        kept = [w for w in W.load_words(None) if set(_fold(w, lower)) <= chars]
        weights = [1.0 / (r + 1) for r in range(len(kept))]
        return Corpus(tuple(kept), tuple(itertools.accumulate(weights)), " ")
    return None


@functools.lru_cache(maxsize=4)
def _pools(charset: str) -> tuple[str, str, tuple[str, ...], tuple[float, ...], tuple[str, ...]]:
    """(uniform pool, number units, punctuation, its cumulative weights, bracket pairs) within the alphabet."""
    chars, _ = W.label_rules(charset)
    uniform = "".join(sorted(chars - {" "}))
    units = "".join(c for c in CJK_NUMBER_UNITS if c in chars)
    punct = [p for p in CJK_PUNCT_WEIGHTS if p in chars] or [p for p in ",.:;?!" if p in chars]
    weights = [CJK_PUNCT_WEIGHTS.get(p, 1) for p in punct]
    pairs = tuple(p for p in CJK_PAIRS if set(p) <= chars) or tuple(p for p in ('""', "()") if set(p) <= chars)
    return uniform, units, tuple(punct), tuple(itertools.accumulate(weights)), pairs


def _uniform(rng: random.Random, pool: str, n: int) -> str:
    return "".join(rng.choice(pool) for _ in range(n))


def _number(rng: random.Random, charset: str, units: str) -> str:
    """A number as running text writes it: counts, years, prices, times, often with a unit (``2019年``)."""
    chars, _ = W.label_rules(charset)
    num = W._number(rng) if rng.random() < 0.6 else str(rng.randint(0, 10 ** rng.randint(1, 4)))
    num = "".join(c for c in num if c in chars)
    if num and units and rng.random() < 0.5:
        num += rng.choice(units)
    return num


def _latin(rng: random.Random, charset: str) -> str:
    """A Latin word from the built-in list, cased as the alphabet allows (``Python``, ``CPU``, ``app``)."""
    chars, lower = W.label_rules(charset)
    w = _fold(W._cased(rng, W._word(rng, W.load_words(None))), lower)
    return w if set(w) <= chars else w.lower() if set(w.lower()) <= chars else ""


def _piece(rng: random.Random, charset: str, corpus: Corpus | None, first: bool,
           uniform_share: float = UNIFORM_SHARE, convert: Callable[[str], str] | None = None) -> tuple[str, bool]:
    """One piece of a line and whether it wants spaces around it (Latin words in Chinese text often do);
    ``convert`` rewrites corpus words and numbers (their units) without drawing from ``rng``."""
    uniform, units, punct, pcum, pairs = _pools(charset)
    r = rng.random()
    if corpus is None or r < uniform_share:
        return _uniform(rng, uniform, rng.randint(1, 3) if corpus is not None else rng.randint(1, 8)), False
    r -= uniform_share
    if r < PUNCT_SHARE and not first and punct:
        return punct[bisect.bisect_right(pcum, rng.random() * pcum[-1])], False
    r -= PUNCT_SHARE
    if r < NUMBER_SHARE:
        num = _number(rng, charset, units if corpus.joiner == "" else "")
        return convert(num) if convert else num, corpus.joiner == " "
    r -= NUMBER_SHARE
    if r < LATIN_SHARE and corpus.joiner == "":
        return _latin(rng, charset), rng.random() < 0.5
    word = corpus.draw(rng)
    if convert:
        word = convert(word)
    if pairs and rng.random() < 0.015:
        pair = rng.choice(pairs)
        word = pair[0] + word + pair[1]
    return word, corpus.joiner == " "


def _wide(c: str) -> bool:
    return unicodedata.east_asian_width(c) in ("W", "F")


def no_space_between(a: str, b: str) -> bool:
    """Chinese print sets no space next to full-width punctuation (``，``, ``。``) or between two full-width characters;
    around Latin words and numbers it may (``使用 Python 编程``)."""
    return (_wide(a) and _wide(b)) or (_wide(a) and not is_han(a)) or (_wide(b) and not is_han(b))


def line_length(rng: random.Random, max_len: int, fixed: int = 0) -> int:
    """The length of the next line: ``fixed``, or 2..max_len uniformly (1 now and then)."""
    if fixed:
        return fixed
    return 1 if max_len == 1 or rng.random() < 0.03 else rng.randint(2, max_len)


def compose_line(rng: random.Random, charset: str, n: int, corpus: Corpus | None,
                 uniform_share: float = UNIFORM_SHARE, convert: Callable[[str], str] | None = None) -> str:
    """A line of exactly ``n`` characters (no space at either end, no double spaces), or "" when it fails.

    ``uniform_share``: the share of pieces drawn uniformly from the alphabet (1-3 characters each), which is what
    makes rare characters appear; the corpus words (by frequency) give up that share. Lines of a Han corpus put no
    space where Chinese print has none (:func:`no_space_between`). ``convert``: what corpus words and numbers become
    (:func:`crnn.data.traditional.to_traditional`), the same draws either way."""
    space = " " in W.label_rules(charset)[0]
    han = corpus is not None and corpus.joiner == ""
    uniform_only = corpus is None or rng.random() < UNIFORM_LINE_SHARE
    out: list[str] = []
    size = 0
    while size < n + 2:
        piece, spaced = _piece(rng, charset, None if uniform_only else corpus, not out, uniform_share, convert)
        if not piece:
            continue
        if (out and space and (spaced or rng.random() < SPACE_SHARE) and out[-1] != " "
                and not (han and no_space_between(out[-1][-1], piece[0]))):
            out.append(" ")
            size += 1
        out.append(piece)
        size += len(piece)
    text = "".join(out).lstrip(" ")[:n]
    return text if len(text) == n and not text.endswith(" ") else ""


def sample_line(rng: random.Random, opts: W.TextOptions) -> str:
    """A text line for ``opts.charset``: ``opts.line_len`` characters, or 1..``opts.max_len``; a share
    ``opts.traditional`` of lines in traditional forms, each in one of the three standards with equal odds (no draw
    when it is 0: the old lines of a seed)."""
    # every held-out face split draws the held-out words too
    corpus = load_corpus(opts.charset, opts.words, "heldout" if opts.split in ("dev", "final") else opts.split)
    share = getattr(opts, "traditional", 0.0)
    convert = None
    if share and rng.random() < share:
        convert = functools.partial(to_traditional, alphabet=W.label_rules(opts.charset)[0],
                                    standard=rng.choice(STANDARDS))
    for _ in range(100):
        text = compose_line(rng, opts.charset, line_length(rng, opts.max_len, opts.line_len), corpus,
                            getattr(opts, "uniform_share", UNIFORM_SHARE), convert)
        if text:
            return text
    raise TextSourceError(f"cannot compose text lines for charset {opts.charset!r}")


def describe(chars: Sequence[str], limit: int = 12) -> str:
    """``'a', 'b', ... (+N more)`` for error messages."""
    shown = ", ".join(repr(c) for c in chars[:limit])
    return shown + (f" (+{len(chars) - limit} more)" if len(chars) > limit else "")

