"""Write a frequency list for the word prior (``--words FILE``): ``word<TAB>count`` lines, the count per billion words.

    pip install wordfreq                                   # not a dependency of crnn: only this script needs it
    python scripts/word_frequencies.py words_en.tsv        # English, every word of Latin letters wordfreq lists
    python scripts/word_frequencies.py words_de.tsv --lang de --top 200000

The counts come from wordfreq's ``large`` list for the language (Speer et al., data under CC BY-SA 4.0: a file you
write with it carries that licence; crnn ships none). Words are kept when they are letters a-z only once lower-cased
(no digits, apostrophes or accents: the word prior compares readings in the 36-class form); words of one form add up.
With counts the word decoder weighs every reading of letters by its word's frequency, instead of only turning
unlisted readings into listed ones (``crnn.decode.word_decode``; measured in docs/english.md, "A word prior at
reading time"). The file is written whole or not at all.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

_LETTERS = re.compile(r"[a-z]+")


def frequencies(lang: str, top: int) -> dict[str, int]:
    """{word: count per billion words} of wordfreq's ``large`` list, a-z words only, most frequent first."""
    import wordfreq

    counts: dict[str, int] = {}
    for word in wordfreq.top_n_list(lang, top, wordlist="large"):
        key = word.lower()
        if _LETTERS.fullmatch(key):
            count = max(1, round(wordfreq.word_frequency(word, lang, wordlist="large") * 1e9))
            counts[key] = counts.get(key, 0) + count
    return counts


def write(counts: dict[str, int], out: Path) -> None:
    """``word<TAB>count`` lines, most frequent first, written to a temporary file and moved into place."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for word, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
                f.write(f"{word}\t{count}\n")
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="the file to write (word<TAB>count per line)")
    p.add_argument("--lang", default="en", help="a language wordfreq knows (default: en)")
    p.add_argument("--top", type=int, default=500_000,
                   help="read this many of wordfreq's most frequent words before keeping a-z ones (default: 500000)")
    a = p.parse_args(argv)
    if a.top < 1:
        p.error(f"--top must be at least 1, got {a.top}")
    try:
        import wordfreq  # noqa: F401
    except ImportError:
        print("word_frequencies: needs wordfreq, which crnn does not depend on: pip install wordfreq", file=sys.stderr)
        return 1
    try:
        counts = frequencies(a.lang, a.top)
    except (LookupError, ValueError) as e:
        print(f"word_frequencies: wordfreq has no large list for {a.lang!r} ({e}); try en, de, fr, es", file=sys.stderr)
        return 1
    if not counts:
        print(f"word_frequencies: wordfreq lists no a-z words for {a.lang!r}; nothing written", file=sys.stderr)
        return 1
    write(counts, a.out)
    print(f"word_frequencies: {len(counts)} words with counts -> {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
