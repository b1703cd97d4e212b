"""crnn-create-lmdb: image folder + gt.txt -> LMDB, reporting every bad line."""
from __future__ import annotations

import argparse
import os
import sys

from crnn.data.builder import BuildAborted, build_lmdb
from crnn.data.datasets import DatasetError
from crnn.data.label_files import GT_FORMATS, label_format

EPILOG = """label file layouts (--gt-format):
  tab      relative/path<TAB>label                      (default; crnn's gt.txt)
  space    relative/path label                          (the label may contain spaces, the path may not)
  indices  20455828_2605100732.jpg 263 82 29 56 ...     (each number a 0-based line of --alphabet FILE, whose
           line 0 is its 'blank' placeholder: the Sierkinhane/CRNN_Chinese_Characters_Rec layout)
  mmocr    mmocr 1.x textrecog JSON: {"data_list": [{"img_path": "...", "instances": [{"text": "..."}]}, ...]},
           or mmocr 0.x JSON lines: {"filename": "...", "text": "..."} per line
  doctr    doctr's labels.json: {"img_name.jpg": "label", ...} (RecognitionDataset)
  (JSON layouts: a bad entry is reported as FILE: entry N: reason; paths are relative to --images)
examples:
  crnn-create-lmdb --images imgs/ --gt train.txt --gt-format space --out data/train.lmdb
  crnn-create-lmdb --images images/ --gt data_train.txt --gt-format indices --alphabet char_std_5990.txt \\
      --out data/train.lmdb
  crnn-create-lmdb --images data/svt --gt data/svt/textrecog_train.json --gt-format mmocr --out data/svt.lmdb
  crnn-create-lmdb --images train/images --gt train/labels.json --gt-format doctr --out data/train.lmdb
"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(
        prog="crnn-create-lmdb", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Validate word or line crops listed in gt.txt ('relative/path<TAB>label' per line, or another "
                    "layout: --gt-format) and write the good ones to an LMDB. Bad lines are printed as "
                    "gt.txt:LINE: reason; exit status 1 if any.")
    p.add_argument("--images", required=True, help="folder that the gt.txt image paths are relative to")
    p.add_argument("--gt", help="ground-truth file (default: IMAGES/gt.txt)")
    p.add_argument("--gt-format", choices=GT_FORMATS, default="tab",
                   help="label file layout: tab (default), space, indices (needs --alphabet), mmocr or doctr (JSON)")
    p.add_argument("--alphabet", help="alphabet file the indices of --gt-format indices refer to (0-based lines)")
    p.add_argument("--alphabet-encoding", default="auto",
                   help="encoding of --alphabet (default: auto = BOM, UTF-8, then GB18030)")
    p.add_argument("--encoding", default="utf-8", help="encoding of the label file (default: utf-8; e.g. gbk)")
    p.add_argument("--out", help="output LMDB folder (required unless --check)")
    p.add_argument("--check", action="store_true", help="only validate; write nothing")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--strict", action="store_true", help="write nothing if any line is bad")
    p.add_argument("--quiet", action="store_true", help="no progress (a bar on a terminal, a line every 30 s in a log)")
    args = p.parse_args(argv)
    if not args.check and not args.out:
        p.error("--out is required unless --check is given")
    args.gt = args.gt or os.path.join(args.images, "gt.txt")
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns 0 when every line was good, 1 when some were bad, 2 on errors."""
    args = parse_args(argv)
    try:
        fmt = label_format(args.gt_format, args.encoding, args.alphabet, args.alphabet_encoding)
        report = build_lmdb(args.images, args.gt, None if args.check else args.out, overwrite=args.overwrite,
                            strict=args.strict, progress=not args.quiet, fmt=fmt)
    except BuildAborted as e:
        _print_bad(e.report.bad_lines())
        print(f"crnn-create-lmdb: {e}", file=sys.stderr)
        return 1
    except (DatasetError, FileExistsError, OSError) as e:
        print(f"crnn-create-lmdb: error: {e}", file=sys.stderr)
        return 2
    _print_bad(report.bad_lines())
    where = "" if args.check else f" -> {args.out}"
    print(f"{report.summary()}{where}")
    return 1 if report.bad else 0


def _print_bad(lines: list[str]) -> None:
    """Print each bad line on stderr."""
    for line in lines:
        print(line, file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
