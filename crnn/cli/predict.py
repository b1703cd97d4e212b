"""crnn-predict: recognise the text in word images with a trained CRNN."""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Iterable, Iterator
from typing import TextIO

PROG = "crnn-predict"
EPILOG = """examples:
  crnn-predict word.png                          (the shipped English model, en, in weights/)
  crnn-predict --weights zh line.png             (the shipped Chinese text-line model)
  crnn-predict --weights en_alnum36 word.png     (English words as lower-case 0-9a-z at 32x100)
  crnn-predict --weights runs/synth_cpu/best.pt crops/ --format json
  crnn-predict 'scans/**/*.jpg' --decoder beam --lexicon words.txt
  crnn-predict crops/ --words /usr/share/dict/american-english   (greedy with a word prior)
  find crops -name '*.png' | crnn-predict -

output, one line per image in input order:
  text:  PATH<TAB>PREDICTION<TAB>CONFIDENCE     (an unreadable image: PATH<TAB><TAB>, reason on stderr)
  json:  {"path": ..., "text": ..., "confidence": ...}   (+ "error" when the image could not be read)
A keep-ratio model (en, zh) reads a line at its own width (up to 4096 px after resizing to the model's height);
a wider line is squeezed to that, with a warning on stderr. A crop at least twice as tall as wide (vertical text?) is
read as it is with a warning, unless --vertical says otherwise:
  crnn-predict --weights zh --vertical stack sign.jpg   (characters stacked top to bottom, read top first)
  crnn-predict --vertical auto spines/                  (stacked, or turned sideways: the most confident way)
exit codes: 0 all predicted, 1 some images could not be read, 2 bad arguments / weights / inputs.
"""


class UsageError(ValueError):
    """Bad command line input (exit code 2)."""


def build_parser() -> argparse.ArgumentParser:
    """Argument parser of crnn-predict."""
    from crnn.data.vertical import VERTICAL_MODES
    from crnn.infer import AMP_HELP, AMP_MODES, shipped_names_help

    p = argparse.ArgumentParser(prog=PROG, description=__doc__, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="image files, folders (searched recursively), globs, or - to read paths from stdin")
    p.add_argument("--weights", help="checkpoint (any crnn layout) or a shipped model's name: "
                        f"{shipped_names_help()}. Default: en. A path that exists wins over a name")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default: auto)")
    p.add_argument("--batch-size", type=int, default=64, help="images per forward pass (default: 64)")
    p.add_argument("--decoder", choices=("greedy", "beam", "word"),
                   help="CTC decoder: greedy (default), beam, or word (greedy with a word prior, needs --words; "
                        "the default when --words is given)")
    p.add_argument("--beam-width", type=int, default=10, help="beam width for --decoder beam and word (default: 10)")
    p.add_argument("--lexicon", help="word list (one per line): answer the most likely word (needs --decoder beam)")
    p.add_argument("--words", metavar="FILE",
                   help="word list for --decoder word, one word per line (Debian: apt install wamerican, then "
                        "/usr/share/dict/american-english): a reading that is no listed word gives way to a listed "
                        "one among the beam's best if nearly as probable; other readings (names, numbers) stay. "
                        "Lines 'word count' (scripts/word_frequencies.py writes them) weigh every reading of "
                        "letters by its word's frequency instead")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    p.add_argument("--amp", choices=AMP_MODES, default="off", help=AMP_HELP)
    p.add_argument("--vertical", choices=VERTICAL_MODES, default="warn",
                   help="crops at least twice as tall as wide: warn (read as they are, with a warning; default), "
                        "stack (lay the stacked characters side by side, top first, then read), rotate (a quarter "
                        "turn each way: text running down or up), auto (all of those; the most confident reading "
                        "wins), off (read as they are)")
    p.add_argument("--threads", type=int, metavar="N", help="torch threads for the network (default: torch's own, one per core); on a machine busy with other work, e.g. beside a training run, 1 reads several times faster (benchmarks/README.md)")
    p.add_argument("--config", help="YAML config for a bare state dict that stores none (model + data geometry)")
    p.add_argument("--charset", help="charset for a bare state dict (alnum36, digits, printable94, printable95, a file, chars)")
    return p


def load_recognizer(args: argparse.Namespace):
    """The Recognizer for the parsed arguments (shipped model unless --weights)."""
    from crnn.engine.checkpoint import load_checkpoint
    from crnn.infer import Recognizer, fallback_spec, read_lexicon, read_word_list, resolve_weights

    weights = resolve_weights(args.weights)
    ckpt = load_checkpoint(weights)
    config, charset = fallback_spec(args.config, args.charset)
    if ckpt.config is not None and (args.config or args.charset):
        print(f"{PROG}: note: {weights} stores its own config and charset; --config/--charset are ignored",
              file=sys.stderr)
    lexicon = read_lexicon(args.lexicon) if args.lexicon else None
    words = read_word_list(args.words) if args.words is not None else None
    decoder = args.decoder or ("word" if words is not None else "greedy")
    return Recognizer.from_checkpoint(ckpt, args.device, args.amp, config=config, charset=charset,
                                      decoder=decoder, beam_width=args.beam_width, lexicon=lexicon,
                                      batch_size=args.batch_size, vertical=args.vertical, words=words)


def _progress(preds: Iterator, total: int) -> Iterator:
    """Progress on stderr while the predictions go to a file or pipe (a bar on a terminal, else periodic lines)."""
    from crnn.progress import is_terminal, track

    if total < 200 or is_terminal(sys.stdout):
        return preds
    return track(preds, total, desc=PROG, unit="img")


def write_predictions(preds: Iterable, fmt: str, out: TextIO, err: TextIO) -> int:
    """Print one line per prediction; return the number of files that failed."""
    failed = 0
    for p in preds:
        if fmt == "json":
            out.write(json.dumps(p.to_dict(), ensure_ascii=False) + "\n")
        elif p.error is None:
            out.write(f"{p.path}\t{p.text}\t{p.confidence:.4f}\n")
        else:
            out.write(f"{p.path}\t\t\n")
        if p.error is not None:
            failed += 1
            out.flush()
            err.write(f"{PROG}: error: {p.path}: {p.error}\n")
    return failed


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Print a warning as ``crnn-predict: warning: MESSAGE`` (no source location)."""
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Entry point of crnn-predict."""
    args = build_parser().parse_args(argv)
    from crnn.charset import CharsetError
    from crnn.config import ConfigError
    from crnn.engine.checkpoint import CheckpointError
    from crnn.infer import InferenceError, expand_inputs, set_threads

    try:
        if args.batch_size < 1 or args.beam_width < 1:
            raise UsageError("--batch-size and --beam-width must be at least 1")
        set_threads(args.threads)
        paths = expand_inputs(args.paths, sys.stdin)
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warning  # e.g. the default model is missing: which one reads instead
            recognizer = load_recognizer(args)
    except (UsageError, CheckpointError, InferenceError, ConfigError, CharsetError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warning  # a squeezed long line, a tall crop: one line on stderr
            preds = _progress(recognizer.predict_paths(paths), len(paths))
            failed = write_predictions(preds, args.format, sys.stdout, sys.stderr)
        sys.stdout.flush()
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. piped into head: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
