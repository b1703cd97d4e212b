"""Text sources for synthetic word images: dictionary words, numbers, codes, punctuation.

The mix follows what real scene-text crops (IIIT5K, SVT) contain: about half UPPER-case words,
a quarter Title-case, the rest lower case, plus numbers, prices, codes like ``143KM`` and
words with punctuation (``FAX:``, ``DADDY'S``, ``TIE-UP``). The image shows the text as sampled;
the label is that text folded to the target alphabet (see :func:`text_label`).
"""
from __future__ import annotations

import functools
import math
import os
import random
import string
from typing import Protocol

from crnn.charset import Charset

WORDS_PATH = os.path.join(os.path.dirname(__file__), "words.txt")
RENDERABLE = frozenset(string.digits + string.ascii_letters + string.punctuation)
_VOWELS, _CONSONANTS = "aeiou", "bcdfghjklmnprstvwyz"
_UNITS = ("KM", "km", "ml", "kg", "g", "cm", "mm", "HR", "D", "th", "st", "V", "W", "m")


class TextOptions(Protocol):
    """The fields of SynthOptions that text sampling reads."""

    charset: str
    max_len: int
    words: str | None
    text: str  # auto | words | lines
    line_len: int  # lines: fixed length; 0 = 1..max_len
    split: str  # train | heldout | all: which part of the line corpus (and of the CJK fonts) to draw from
    signs: float  # words: share of texts drawn as signs, labels and codes write (see :func:`sign_text`)
    traditional: float  # lines: share written in traditional forms (crnn.data.traditional)


@functools.lru_cache(maxsize=4)
def load_word_entries(path: str | None = None) -> tuple[str, ...]:
    """Entries of a word list (one per line, most frequent first, spaces inside kept); built-in by default."""
    path = path or WORDS_PATH
    if not os.path.isfile(path):
        raise ValueError(f"word list {path} does not exist")
    with open(path, encoding="utf-8-sig") as f:
        entries = tuple(" ".join(ln.split()) for ln in f if ln.strip())
    if not entries:
        raise ValueError(f"word list {path} is empty")
    return entries


@functools.lru_cache(maxsize=4)
def load_words(path: str | None = None) -> tuple[str, ...]:
    """Single words of a word list (entries with spaces are left out); the built-in list by default."""
    words = tuple(w for w in load_word_entries(path) if " " not in w)
    if not words:
        raise ValueError(f"word list {path or WORDS_PATH} has no single words (use text lines for phrases)")
    return words


@functools.lru_cache(maxsize=16)
def label_rules(charset: str) -> tuple[frozenset[str], bool]:
    """(alphabet characters, fold-to-lower-case?) for a charset spec, as crnn.charset reads it."""
    cs = Charset.from_spec(charset)
    return frozenset(cs.chars), cs.lowercase


def text_mode(opts: TextOptions) -> str:
    """``words`` (scene-text words, the English default) or ``lines``; ``auto``: lines for alphabets beyond ASCII."""
    return opts.text if opts.text != "auto" else _auto_mode(opts.charset)


@functools.lru_cache(maxsize=16)
def _auto_mode(charset: str) -> str:
    """``lines`` when the alphabet has characters beyond printable ASCII, else ``words``."""
    chars, _ = label_rules(charset)
    return "lines" if chars - RENDERABLE - {" "} else "words"


def text_label(text: str, charset: str) -> str | None:
    """The label for rendered ``text``: case-folded, punctuation outside the alphabet dropped.

    None when a letter or digit cannot be represented (the text should be resampled) or
    nothing is left.
    """
    chars, lower = label_rules(charset)
    if lower:
        text = text.lower()
    out = []
    for c in text:
        if c in chars:
            out.append(c)
        elif c.isalnum():
            return None
    return "".join(out) or None


def _word(rng: random.Random, words: tuple[str, ...]) -> str:
    """A word: 60% log-rank weighted (common, short words often), 40% uniform over the list."""
    if rng.random() < 0.6:
        return words[int(math.exp(rng.random() * math.log(len(words)))) - 1]
    return words[rng.randrange(len(words))]


def _cased(rng: random.Random, w: str) -> str:
    """Real-sign case mix: UPPER, Title, as-is (mostly lower), occasionally random."""
    r = rng.random()
    if r < 0.45:
        return w.upper()
    if r < 0.70:
        return w[:1].upper() + w[1:]
    if r < 0.97:
        return w
    return "".join(c.upper() if rng.random() < 0.5 else c for c in w)


def _punctuated(rng: random.Random, words: tuple[str, ...]) -> str:
    """A word with punctuation: ``FAX:``, ``"WE'VE``, ``TIE-UP``, ``Ltd.``, ``(Reverse``, ``www.a.com``."""
    w = _cased(rng, _word(rng, words))
    r = rng.random()
    if r < 0.45:
        return w + rng.choice([".", ",", "!", "?", ":", ";", "'", '"', ")", "!!", "...", "'s", "-", "*"])
    if r < 0.65:
        return rng.choice(['"', "(", "'", "#", "@", "&", "-", "*"]) + w
    if r < 0.85:
        return w + rng.choice(["-", "&", "/", ".", "'", "+", "_"]) + _cased(rng, _word(rng, words))
    if r < 0.95:
        return rng.choice(['"', "(", "'"]) + w + rng.choice(['"', ")", "'", ".", "!"])
    return "www." + _word(rng, words).lower() + rng.choice([".com", ".org", ".net", ".in", ".co.uk"])


def _digits(rng: random.Random, n: int) -> str:
    """``n`` random digits."""
    return "".join(rng.choice(string.digits) for _ in range(n))


def _number(rng: random.Random) -> str:
    """Numbers as signs show them: counts, years, prices, phone numbers, times, percentages."""
    r = rng.random()
    if r < 0.35:
        return _digits(rng, rng.choice([1, 1, 2, 2, 2, 3, 3, 4, 4, 5, 6, 7]))
    if r < 0.45:
        return str(rng.randint(1900, 2030))
    if r < 0.62:
        cur = rng.choice(["$", "$", "", "", "Rs.", "#"])
        return f"{cur}{rng.randint(0, 999)}.{_digits(rng, 2)}" if rng.random() < 0.7 else f"{cur}{rng.randint(1, 9999)}"
    if r < 0.75:
        return f"{_digits(rng, 3)}-{_digits(rng, 4)}" if rng.random() < 0.6 else f"({_digits(rng, 3)})"
    if r < 0.85:
        return f"{rng.randint(0, 23)}:{_digits(rng, 2)}"
    if r < 0.92:
        return f"{rng.randint(1, 100)}%"
    return f"{rng.randint(1, 31)}/{rng.randint(1, 12)}" + (f"/{_digits(rng, 2)}" if rng.random() < 0.4 else "")


def _code(rng: random.Random) -> str:
    """Mixed letters and digits: ``143KM``, ``A-52``, ``3D``, ``24HR``, ``KA01``, ``100ml``."""
    r = rng.random()
    letters = string.ascii_uppercase if rng.random() < 0.75 else string.ascii_lowercase
    if r < 0.3:
        return str(rng.randint(1, 999)) + rng.choice(_UNITS)
    if r < 0.55:
        head = "".join(rng.choice(letters) for _ in range(rng.randint(1, 3)))
        return head + rng.choice(["", "-"]) + _digits(rng, rng.randint(1, 4))
    if r < 0.75:
        return _digits(rng, rng.randint(1, 3)) + "".join(rng.choice(letters) for _ in range(rng.randint(1, 3)))
    return "".join(rng.choice(letters + string.digits) for _ in range(rng.randint(2, 8)))


def _pseudo_word(rng: random.Random) -> str:
    """A pronounceable non-dictionary string (names like ``KISHTWAR``) or random letters."""
    n = rng.randint(2, 10)
    if rng.random() < 0.7:
        w = "".join(rng.choice(_VOWELS if (i % 2 == 1) ^ (rng.random() < 0.2) else _CONSONANTS) for i in range(n))
    else:
        w = "".join(rng.choice(string.ascii_lowercase) for _ in range(n))
    return _cased(rng, w)


def _random_chars(rng: random.Random, opts: TextOptions) -> str:
    """Random characters from the alphabet (only those a font can draw)."""
    chars, _ = label_rules(opts.charset)
    pool = sorted(chars & RENDERABLE) or sorted(RENDERABLE)
    return "".join(rng.choice(pool) for _ in range(rng.randint(1, min(10, opts.max_len))))


def _candidate(rng: random.Random, opts: TextOptions) -> str:
    """One text from the source mix."""
    words = load_words(opts.words)
    r = rng.random()
    if r < 0.62:
        return _cased(rng, _word(rng, words))
    if r < 0.72:
        return _punctuated(rng, words)
    if r < 0.83:
        return _number(rng)
    if r < 0.90:
        return _code(rng)
    if r < 0.97:
        return _pseudo_word(rng)
    return _random_chars(rng, opts)


_BRANDS = ("iPhone", "iPad", "iPod", "eBay", "YouTube", "PayPal", "McDonald's", "WiFi", "Wi-Fi", "PlayStation",
           "JavaScript", "PowerPoint", "LinkedIn", "FedEx", "DeWalt", "GoPro", "KitKat", "HiFi", "eMail", "e-mail",
           "AutoZone", "WalMart", "MasterCard", "SmartPhone", "OnePlus", "TripAdvisor", "HomeDepot", "iMac",
           "MacBook", "DVDs", "CDs", "TVs", "PhD", "McLaren", "O'Neill", "D'Angelo", "MySpace", "ThinkPad", "NatWest",
           "BlackBerry")
_SIGN_PHRASES = ("OPEN 24 HOURS", "No Parking", "EXIT", "PUSH", "PULL", "Sale", "SALE 50% OFF", "Buy 1 Get 1 Free",
                 "Keep Out", "Made in USA", "Best Before", "Fire Exit", "Do Not Enter", "Free Wi-Fi", "Now Open",
                 "Est. 1982", "Car Park", "One Way", "STOP", "Mon-Fri", "9am - 5pm", "Tel:", "Fax:", "www.", "No. 7")


def _camel(rng: random.Random, words: tuple[str, ...]) -> str:
    """Brand and product writing: a known one (``iPhone``, ``McDonald's``) or two words run together (``SmartHome``,
    ``eCommerce``, ``McWord``)."""
    r = rng.random()
    if r < 0.3:
        return rng.choice(_BRANDS)
    a, b = _word(rng, words).lower(), _word(rng, words).lower()
    if r < 0.55:
        return rng.choice(["i", "e", "my", "Mc", "Mac", "O'", "x"]) + b[:1].upper() + b[1:]
    if r < 0.8:
        return a[:1].upper() + a[1:] + b[:1].upper() + b[1:]
    return a + b[:1].upper() + b[1:]  # camelCase


def _code_mixed(rng: random.Random) -> str:
    """Product codes, models and references as labels print them: ``SKU-4471b``, ``A7-33B``, ``Model X200``,
    ``#12-B``, ``v2.1``, ``1/2"``, ``4x4``, ``No.15``, ``ISBN 0-19``."""
    r = rng.random()
    up, lo = string.ascii_uppercase, string.ascii_lowercase
    if r < 0.25:
        head = rng.choice(["SKU", "REF", "Ref", "No.", "Art.", "Lot", "ID", "#", "Item"]) + rng.choice(["", " ", "-", ":"])
        return (head + _digits(rng, rng.randint(2, 6)) + (rng.choice(up + lo) if rng.random() < 0.3 else ""))
    if r < 0.45:
        return "".join(rng.choice(up) for _ in range(rng.randint(1, 3))) + _digits(rng, rng.randint(1, 3)) + \
            rng.choice(["-", "/", ""]) + _digits(rng, rng.randint(1, 3)) + rng.choice(["", "", rng.choice(up + lo)])
    if r < 0.6:
        return rng.choice(["v", "V", "Ver.", "Rev."]) + f"{rng.randint(0, 12)}.{rng.randint(0, 9)}"
    if r < 0.75:
        unit = rng.choice(["", "cm", "mm", '"'])
        return f"{rng.randint(1, 20)}{rng.choice(['x', 'X', '*'])}{rng.randint(1, 20)}{unit}"
    if r < 0.9:
        return f"{rng.randint(1, 3)}/{rng.choice([2, 4, 8, 16])}" + rng.choice(['"', "in", " oz", " lb", ""])
    kind = rng.choice(["Model ", "Type ", "Size ", "Gate ", "Room ", "Bus "])
    return kind + rng.choice(up) + _digits(rng, rng.randint(1, 3))


def _phrase(rng: random.Random, words: tuple[str, ...]) -> str:
    """A short line of a sign or label: two or three words, a word and a number or price, a sign's stock phrase."""
    r = rng.random()
    if r < 0.2:
        return rng.choice(_SIGN_PHRASES)
    if r < 0.6:
        case = rng.random()
        parts = [_word(rng, words) for _ in range(rng.choice([2, 2, 2, 3]))]
        if case < 0.4:
            return " ".join(parts).upper()
        if case < 0.75:
            return " ".join(p[:1].upper() + p[1:] for p in parts)
        return " ".join(parts)
    if r < 0.85:
        return _cased(rng, _word(rng, words)) + " " + _number(rng)
    return _number(rng) + " " + _cased(rng, _word(rng, words))


def _letter_spaced(rng: random.Random, words: tuple[str, ...]) -> str:
    """A word set letter by letter (``K N I G H T``, ``M A R K E T``): titles and shop fronts track capitals that
    wide, and the real crops label them so (iiit5k and svt write the gaps as spaces), so the text holds the spaces."""
    for _ in range(20):
        w = _word(rng, words)
        if 2 <= len(w) <= 8 and w.isalpha():
            break
    return " ".join(w.upper() if rng.random() < 0.85 else w[:1].upper() + w[1:])


def sign_text(rng: random.Random, words: tuple[str, ...]) -> str:
    """What signs, labels and codes write beyond single dictionary words (``SynthOptions.signs``): phrases with spaces
    (``OPEN 24 HOURS``, ``Tea 2.50``), brand and camel case (``iPhone``, ``eBay``), product codes (``SKU-4471b``),
    words set letter by letter (``K N I G H T``)."""
    r = rng.random()
    if r < 0.4:
        return _phrase(rng, words)
    if r < 0.68:
        return _camel(rng, words)
    if r < 0.9:
        return _code_mixed(rng)
    return _letter_spaced(rng, words)


def sample_word(rng: random.Random, opts: TextOptions) -> str:
    """A scene-text word whose label (:func:`text_label`) is non-empty and at most ``max_len`` long.

    ``opts.signs`` > 0: that share of texts is drawn by :func:`sign_text` (phrases with spaces, camel case, codes);
    0 draws exactly what it drew before the option existed."""
    signs = getattr(opts, "signs", 0.0)
    for attempt in range(100):
        # Unusual alphabets: after a while, fall back to strings of the alphabet's own characters.
        if attempt < 30 and signs and rng.random() < signs:
            text = sign_text(rng, load_words(opts.words))
            if set(text) <= RENDERABLE | {" "} and len(text) <= opts.max_len and text_label(text, opts.charset):
                return text
            continue
        text = _candidate(rng, opts) if attempt < 30 else _random_chars(rng, opts)
        label = text_label(text, opts.charset)
        if label is not None and len(text) <= opts.max_len and set(text) <= RENDERABLE:
            return text
    raise ValueError(f"cannot sample text for charset {opts.charset!r}: no source produces its characters")
