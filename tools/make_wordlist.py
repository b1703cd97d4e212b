#!/usr/bin/env python
"""Build crnn/data/words.txt: the built-in English word list for the synthetic text generator.

Needs the optional ``wordfreq`` package (``pip install -e .[words]``) and, optionally, a Debian
word list (``apt-get install wamerican``). Output: one word per line, most frequent first —
the top of wordfreq's English list (ASCII letters, optionally one apostrophe, e.g. ``don't``),
then the remaining wamerican words. Proper nouns keep the capital letter wamerican gives them.

    python tools/make_wordlist.py                      # writes crnn/data/words.txt
    python tools/make_wordlist.py --top 80000 --out /tmp/words.txt
"""
from __future__ import annotations

import argparse
import os
import re
import sys

WORD_RE = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")
DEFAULT_OUT = os.path.join(os.path.dirname(__file__), "..", "crnn", "data", "words.txt")


def read_dict(path: str) -> list[str]:
    """Words of a system dictionary: ASCII letters only, no possessives."""
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        return [w for w in (ln.strip() for ln in f) if re.fullmatch(r"[A-Za-z]+", w)]


def build(top: int, dict_path: str, max_len: int) -> list[str]:
    """Frequency-ranked wordfreq words, then the rest of the dictionary, deduplicated."""
    from wordfreq import top_n_list

    dict_words = read_dict(dict_path)
    lower_in_dict = {w for w in dict_words if w.islower()}
    capital = {w.lower(): w for w in dict_words if w[0].isupper() and w.lower() not in lower_in_dict}
    out: list[str] = []
    seen: set[str] = set()
    for w in top_n_list("en", top * 2):
        if len(out) >= top:
            break
        if WORD_RE.fullmatch(w) and len(w) <= max_len and w not in seen:
            seen.add(w)
            out.append(capital.get(w, w))
    for w in dict_words:
        if w.lower() not in seen and len(w) <= max_len:
            seen.add(w.lower())
            out.append(w)
    return out


def main(argv: list[str] | None = None) -> int:
    """Write the word list; print how many words and bytes."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--top", type=int, default=80000, help="words taken from wordfreq (default 80000)")
    p.add_argument("--dict", default="/usr/share/dict/words", help="extra dictionary (default wamerican)")
    p.add_argument("--max-len", type=int, default=20)
    p.add_argument("--out", default=DEFAULT_OUT)
    args = p.parse_args(argv)
    try:
        words = build(args.top, args.dict, args.max_len)
    except ImportError:
        print("error: wordfreq is not installed; pip install wordfreq (or .[words])", file=sys.stderr)
        return 1
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="ascii", newline="\n") as f:
        f.write("\n".join(words) + "\n")
    os.replace(tmp, args.out)
    print(f"wrote {len(words)} words, {os.path.getsize(args.out)} bytes to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
