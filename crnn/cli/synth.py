"""crnn-synth: render synthetic scene-text words or text lines (any alphabet) into an LMDB (or a preview sheet)."""
from __future__ import annotations

import argparse
import os
import sys
import time

from crnn.charset import CharsetError
from crnn.data.fonts import SPLITS, NoFontsError, find_fonts
from crnn.data.synth import (SynthOptions, check_options, contact_sheet, generate_lmdb, iter_samples,
                              label_font_for)
from crnn.data.words import text_mode


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(
        prog="crnn-synth",
        description="Render synthetic word images (system fonts, built-in English word list) or, for alphabets "
                    "beyond ASCII such as zh_gb2312, text lines (Chinese: jieba's word-frequency list mixed with "
                    "digits, Latin words and punctuation) into a new LMDB in the standard layout. The same --seed "
                    "gives the same data for any --workers.")
    p.add_argument("--out", help="output LMDB folder (required unless --preview or --list-fonts)")
    p.add_argument("--num", type=int, default=1000, help="number of images (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="data set seed (default 0)")
    p.add_argument("--workers", type=int, default=0, help="processes (default 0 = all cores)")
    p.add_argument("--fonts", metavar="DIR", help="font folder to use instead of the system font folders")
    p.add_argument("--height", type=int, default=32, help="image height in pixels (default 32)")
    p.add_argument("--charset", default="printable94",
                   help="labels are folded to this alphabet: printable94, printable95 (with space), alnum36, digits, "
                        "zh_gb2312, a file or a "
                        "literal string (default printable94)")
    p.add_argument("--text", choices=("auto", "words", "lines"), default="auto",
                   help="words: scene-text words; lines: text lines of words, numbers and punctuation; auto "
                        "(default): lines when the alphabet goes beyond printable ASCII")
    p.add_argument("--line-len", type=int, default=0, metavar="N",
                   help="text lines of exactly N characters (e.g. 10 for 32x280 Chinese lines); "
                        "default: 1..--max-len")
    p.add_argument("--style", choices=("default", "street"), default="default",
                   help="street: street-view crops (strong perspective, curved baselines, 13-22 px text scaled up, "
                        "photo backgrounds from scikit-image's sample images; needs pip install scikit-image); "
                        "default: the generator the shipped models started from")
    p.add_argument("--split", choices=SPLITS, default="train",
                   help="text lines: train (default) leaves out the held-out CJK faces (crnn/data/cjk_faces.tsv, "
                        "every role but train) and the tenth of corpus words kept for validation; heldout, dev and "
                        "final draw only the faces of that role and those words, for lines in faces and words no "
                        "training set saw; all draws everything")
    p.add_argument("--mixed-fonts", type=float, default=0.0, metavar="SHARE",
                   help="text lines: share of lines in a CJK face whose ASCII runs (numbers, Latin words) are set in "
                        "a Western face, as documents mix them (e.g. 0.3; default 0: one face per line)")
    for flag, what in (("squeeze", "squeezed or stretched horizontally 0.5x-1.5x (condensed and wide faces)"),
                       ("weight", "drawn bolder or thinner (strokes dilated or eroded)"),
                       ("jitter", "whose glyphs each vary in size and baseline"),
                       ("photos", "set on a crop of a photograph (Debian's wallpaper packages)"),
                       ("elastic", "whose strokes are bent by a smooth random field (brush and hand drawn shapes)")):
        p.add_argument(f"--{flag}", type=float, default=0.0, metavar="SHARE",
                       help=f"share of lines (or words) {what} (e.g. 0.3; default 0: none)")
    p.add_argument("--signs", type=float, default=0.0, metavar="SHARE",
                   help="words: share of texts as signs, labels and codes write them: phrases with spaces (OPEN 24 "
                        "HOURS), camel case (iPhone, eBay), product codes (SKU-4471b), letter-spaced words (K N I G H T); "
                        "give --charset printable95 to "
                        "keep spaces in labels (default 0: none)")
    p.add_argument("--street", type=float, default=0.0, metavar="SHARE",
                   help="words, --style default: share of images in the street style (default 0: none)")
    p.add_argument("--traditional", type=float, default=0.0, metavar="SHARE",
                   help="text lines: share of lines whose corpus words are written in traditional forms (发展 -> 發展, "
                        "头发 -> 頭髮), each in OpenCC's, Taiwan's or Hong Kong's forms (爲 / 為); needs --charset "
                        "zh_gb2312_trad (default 0: none)")
    p.add_argument("--max-len", type=int, default=20, help="longest text (default 20)")
    p.add_argument("--words", metavar="FILE",
                   help="word list, one per line, most frequent first (default: built-in English list; "
                        "Chinese lines: jieba's word-frequency list)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--preview", metavar="PNG", help="write a contact sheet of the first --num (<= 300) images")
    p.add_argument("--list-fonts", action="store_true", help="print the usable fonts and exit")
    p.add_argument("--quiet", action="store_true", help="no progress (a bar on a terminal, a line every 30 s in a log)")
    args = p.parse_args(argv)
    if not (args.out or args.preview or args.list_fonts):
        p.error("give --out OUT.lmdb (or --preview PNG, or --list-fonts)")
    if args.num < 1:
        p.error("--num must be >= 1")
    if args.workers < 0:
        p.error("--workers must be >= 0")
    if args.line_len < 0:
        p.error("--line-len must be >= 1 (or 0 for varied lengths)")
    for flag in ("mixed_fonts", "squeeze", "weight", "jitter", "photos", "signs", "street", "elastic", "traditional"):
        if not 0 <= getattr(args, flag) <= 1:
            p.error(f"--{flag.replace('_', '-')} must be within 0..1 (a share of lines)")
    return args


def _preview(args: argparse.Namespace, opts: SynthOptions) -> str:
    """Write the contact sheet; return a one-line summary."""
    num = min(args.num, 300)
    fonts = find_fonts(args.fonts, opts.split)
    check_options(opts, fonts)
    samples = list(iter_samples(num, args.seed, fonts, opts, workers=args.workers or os.cpu_count() or 1))
    if text_mode(opts) == "lines":  # wider cells, labels in a font that draws them
        label_font = label_font_for("".join(label for _, label in samples), fonts, opts)
        sheet = contact_sheet(samples, cols=3, cell_w=340, label_font=label_font)
    else:
        sheet = contact_sheet(samples)
    sheet.save(args.preview)
    return f"wrote a sheet of {num} images to {args.preview}"


def main(argv: list[str] | None = None) -> int:
    """Entry point; 0 on success, 2 on errors (one line on stderr)."""
    args = parse_args(argv)
    try:
        opts = SynthOptions(height=args.height, charset=args.charset, max_len=max(args.max_len, args.line_len),
                            words=args.words, text=args.text, line_len=args.line_len, style=args.style,
                            split=args.split, mixed_fonts=args.mixed_fonts, squeeze=args.squeeze,
                            weight=args.weight, jitter=args.jitter, photos=args.photos, signs=args.signs,
                            street=args.street, elastic=args.elastic, traditional=args.traditional)
        if args.list_fonts:
            fonts = find_fonts(args.fonts, opts.split)
            print("\n".join(fonts))
            print(f"{len(fonts)} usable fonts", file=sys.stderr)
            return 0
        if args.preview:
            print(_preview(args, opts))
        if args.out:
            start = time.perf_counter()
            n = generate_lmdb(args.out, args.num, seed=args.seed, workers=args.workers, fonts_dir=args.fonts,
                              opts=opts, progress=not args.quiet, overwrite=args.overwrite)
            secs = time.perf_counter() - start
            workers = args.workers or os.cpu_count() or 1
            print(f"wrote {n} images to {args.out} in {secs:.1f}s ({n / secs:.0f} images/s, {workers} workers)")
    except KeyboardInterrupt:
        print("crnn-synth: interrupted; nothing written", file=sys.stderr)
        return 130
    except (NoFontsError, FileExistsError, CharsetError, ValueError, OSError) as e:
        print(f"crnn-synth: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
