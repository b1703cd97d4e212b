"""What a word-list prior could gain at reading time: of the words greedy decoding reads wrong, how many sit in the
CTC beam's n-best, and how many a naive pick would mend - the measurement that decided to build one. The decoder is
``--words FILE`` (decoder ``word``: crnn.decode.word_decode) in crnn-predict, crnn-eval, crnn-serve and crnn.Recognizer.

    python tools/word_prior_estimate.py --data data/en_dev --data data/ic15_dev      # the shipped en, Debian's list
    python tools/word_prior_estimate.py --weights W --data D --words my_words.txt --margin 3 --json

Each crop is read as ``crnn-eval`` reads it (the model's own geometry, float32, greedy); its logits also give the
beam's n-best (``--beam-width``, prefix beam search). The naive pick: where the greedy reading (36-class: lower case,
0-9a-z) is not in the word list, the most probable n-best reading that is, if it is at most ``--margin`` nats behind
the beam's best; otherwise the greedy reading. Per set: crops, greedy errors, errors whose label is in the n-best,
errors whose label is a listed word, crops the pick mends and crops it breaks (right by greedy, wrong after), and the
net change in points. The word list (default ``/usr/share/dict/american-english``, Debian's ``wamerican``, which
``scripts/setup.sh`` installs) is read one word per line, letters only, lower-cased.
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from crnn.data.datasets import DatasetError, open_dataset  # noqa: E402
from crnn.decode import decode, prefix_beam_search  # noqa: E402
from crnn.infer import Recognizer  # noqa: E402
from crnn.metrics import normalize_text  # noqa: E402

DEFAULT_WORDS = "/usr/share/dict/american-english"


def norm(text: str) -> str:
    return normalize_text(text, "alnum-insensitive")


def load_words(path: str) -> set[str]:
    """Lower-cased words of letters only, one per line; a one-line error for a missing or empty file."""
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as e:
        raise SystemExit(f"word_prior_estimate: cannot read the word list {path}: {e.strerror}; give --words FILE "
                         "(one word per line; Debian: apt install wamerican)") from None
    words = {w.strip().lower() for w in lines if w.strip().isalpha()}
    if not words:
        raise SystemExit(f"word_prior_estimate: {path} lists no words (one word of letters per line)")
    return words


def word_pick(greedy: str, nbest: list[tuple[str, float]], words: set[str], margin: float) -> str:
    """The naive pick (36-class): ``greedy`` when it is a listed word or no n-best reading within ``margin`` nats of
    the best is; else the most probable listed n-best reading."""
    g = norm(greedy)
    if g in words or not nbest:
        return g
    best = nbest[0][1]
    for text, score in nbest:
        if score < best - margin:
            break
        if norm(text) in words:
            return norm(text)
    return g


def estimate(rec: Recognizer, path: str, words: set[str], beam_width: int, margin: float) -> dict:
    ds = open_dataset(path)
    counts = dict(crops=0, greedy_wrong=0, label_in_nbest=0, label_listed=0, mended=0, broken=0)
    for i in range(len(ds)):
        img, label = ds[i]
        if img is None:
            raise DatasetError(f"{path}: sample {i + 1} cannot be decoded; fix or remove it")
        t = rec.preprocess(img, f"{path} sample {i + 1}")
        with torch.inference_mode():
            logits = rec.model(t.unsqueeze(0).to(memory_format=torch.channels_last)).float()  # [1, T, C]
        greedy = decode(logits, rec.charset)[0][0]  # as crnn-eval reads it, from the same forward pass
        logits = logits[0]
        nbest = [(rec.charset.decode(ids), s) for ids, s in prefix_beam_search(logits, beam_width=beam_width)]
        want, pick = norm(label), word_pick(greedy, nbest, words, margin)
        counts["crops"] += 1
        if norm(greedy) != want:
            counts["greedy_wrong"] += 1
            counts["label_in_nbest"] += any(norm(x) == want for x, _ in nbest)
            counts["label_listed"] += want in words
            counts["mended"] += pick == want
        elif pick != want:
            counts["broken"] += 1
    n = max(counts["crops"], 1)
    counts["net_points"] = round(100 * (counts["mended"] - counts["broken"]) / n, 2)
    counts["greedy_acc"] = round(100 * (counts["crops"] - counts["greedy_wrong"]) / n, 2)
    return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--weights", default="en", help="checkpoint or shipped name (default: en)")
    p.add_argument("--data", action="append", required=True, help="a set crnn-eval reads (repeat for several)")
    p.add_argument("--words", default=DEFAULT_WORDS, help=f"word list, one per line (default: {DEFAULT_WORDS})")
    p.add_argument("--beam-width", type=int, default=10)
    p.add_argument("--margin", type=float, default=3.0, help="nats behind the beam's best a listed word may be")
    p.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    a = p.parse_args(argv)
    words = load_words(a.words)
    rec = Recognizer.from_checkpoint(a.weights, device="cpu", amp="off", vertical="off")
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # squeeze notes per crop; the counts are what this reports
        for path in a.data:
            try:
                out[path] = estimate(rec, path, words, a.beam_width, a.margin)
            except DatasetError as e:
                print(f"word_prior_estimate: {e}", file=sys.stderr)
                return 1
    if a.json:
        print(json.dumps(out))
    else:
        for path, c in out.items():
            print(f"{path}: {c['crops']} crops, greedy {c['greedy_acc']} % (36-class), {c['greedy_wrong']} wrong; "
                  f"label in the beam-{a.beam_width} n-best {c['label_in_nbest']}, a listed word "
                  f"{c['label_listed']}; the pick mends {c['mended']}, breaks {c['broken']}: "
                  f"{c['net_points']:+.2f} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
