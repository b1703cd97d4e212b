"""crnn-convert-ckpt: rewrite a checkpoint with plain or ``module.`` keys, strip training state, halve, or describe it;
import checkpoints of other CRNN repositories and EasyOCR, and export to meijieru's or EasyOCR's layout.

    crnn-convert-ckpt IN OUT --to plain|module [--weights-only] [--half] [--force]
    crnn-convert-ckpt IN OUT --from meijieru|sierkinhane|clovaai|easyocr [--charset SPEC] [--width N] [--pad]
    crnn-convert-ckpt IN OUT --to meijieru
    crnn-convert-ckpt IN NAME.pth --to easyocr [--lang en,...]     (also writes NAME.yaml and NAME.py)
    crnn-convert-ckpt TUNED OUT --interpolate START --alpha A     ((1 - A) x START + A x TUNED, WiSE-FT)
    crnn-convert-ckpt TUNED OUT --soup TUNED2 [--interpolate START --alpha A [--cnn-alpha C]]   (average, then WiSE-FT)
    crnn-convert-ckpt --info IN
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from crnn.charset import CharsetError
from crnn.engine.checkpoint import CheckpointError
from crnn.engine.convert import TARGET_PREFIX, ConvertOptions, convert_file
from crnn.engine.convert import ConvertUsageError as UsageError
from crnn.engine.convert import (  # noqa: F401 (importable from here as before the work moved to the library)
    convert,
    export_easyocr,
    export_foreign,
    finetune_overrides,
    import_foreign,
    info_lines,
    interpolated,
)
from crnn.infer import InferenceError, resolve_weights
from crnn.foreign import DEFAULT_WIDTH, SOURCES, TARGETS, ForeignFormatError

PROG = "crnn-convert-ckpt"
EPILOG = """other repositories (docs/checkpoints.md, "Coming from another CRNN repository"):
  crnn-convert-ckpt netCRNN.pth crnn.pt --from meijieru             (charset alnum36 for 37 classes)
  crnn-convert-ckpt checkpoint.pth zh.pt --from sierkinhane --charset char_std_5990.txt
  crnn-convert-ckpt best_accuracy.pth clova.pt --from clovaai [--pad]   (None-VGG-BiLSTM-CTC only)
  crnn-convert-ckpt crnn.pt netCRNN.pth --to meijieru               (variant vgg; loads into CRNN(32, nc, nclass, 256))

EasyOCR (docs/checkpoints.md, "Coming from EasyOCR"; generation-2: english_g2.pth, latin_g2.pth, zh_sim_g2.pth, ...):
  crnn-convert-ckpt english_g2.pth en.pt --from easyocr             (alphabet from the file name: EasyOCR's config)
  crnn-convert-ckpt custom.pth c.pt --from easyocr --charset user_network/custom.yaml   (a custom model)
  crnn-convert-ckpt en.pt my_en.pth --to easyocr [--lang en]        (+ my_en.yaml, my_en.py: an EasyOCR custom model)
  --from easyocr stores EasyOCR's input path (height 64, ratio kept, OpenCV-style resize, last column repeated:
  data.pad=easyocr); generation-1 models (ResNet) and the CRAFT detector are refused, naming what they are.

meijieru's CRNN has a leakyRelu option that cannot be seen in the weights: crnn always uses ReLU, so convert only
models trained without it (the default). --from reads the file with weights_only, strips module. prefixes and
{'state_dict': ...} containers, folds biases, infers in_channels, hidden size and classes from the shapes and
stores variant, geometry, preprocessing and charset, so crnn-predict/eval/export need no further flags.
"""


def build_parser() -> argparse.ArgumentParser:
    """Argument parser for the converter."""
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Convert a CRNN checkpoint between plain keys and DataParallel/DDP 'module.' keys, drop the "
        "training state (--weights-only), store fp16 weights (--half), describe a file (--info), import another "
        "repository's or EasyOCR's checkpoint (--from) or write meijieru's or EasyOCR's layout (--to meijieru, "
        "--to easyocr).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("input", metavar="IN", help="checkpoint to read (crnn .pt, bare state dict, {'state_dict': ...}), "
                                               "or a shipped model's name (en, en_alnum36, zh) where no such file is")
    p.add_argument("output", metavar="OUT", nargs="?", help="file to write (atomically)")
    p.add_argument("--to", choices=[*sorted(TARGET_PREFIX), *TARGETS], default="plain",
                   help="key layout to write: plain (default; what crnn saves), module (DataParallel/DDP style), "
                   "meijieru (a bare state dict for meijieru/crnn.pytorch's CRNN; variant vgg only) or easyocr "
                   "(OUT=NAME.pth plus NAME.yaml and NAME.py: an EasyOCR custom recogniser; variant vgg_easyocr)")
    p.add_argument("--from", dest="source", choices=list(SOURCES),
                   help="IN was saved by meijieru/crnn.pytorch, Sierkinhane/CRNN_Chinese_Characters_Rec, clovaai/"
                   "deep-text-recognition-benchmark (None-VGG-BiLSTM-CTC) or is an EasyOCR generation-2 recogniser "
                   "(english_g2.pth, ...); write a crnn checkpoint. meijieru's leakyRelu option cannot be seen in the "
                   "weights (crnn uses ReLU)")
    p.add_argument("--charset", help="with --from: the model's alphabet (name, file or characters; default alnum36 "
                   "when the model has 37 classes, otherwise required). --from easyocr: also a shipped model's name "
                   "(english_g2, latin_g2, ...) or a custom model's .yaml; default: NAME.yaml beside IN, else the "
                   "shipped model IN is named after")
    p.add_argument("--width", type=int, help="with --from: input width the model was trained with; for easyocr the "
                   "widest crop read as is (data.max_width; wider ones are squeezed) (default: "
                   + ", ".join(f"{k} {v}" for k, v in DEFAULT_WIDTH.items()) + ")")
    p.add_argument("--lang", help="with --to easyocr: the .yaml's lang_list, comma-separated (default: the languages "
                   "of the EasyOCR model it was converted from, else en)")
    p.add_argument("--pad", action="store_true", help="with --from clovaai: it was trained with --PAD (keep the "
                   "ratio, right-pad to --width by repeating the last column)")
    p.add_argument("--weights-only", action="store_true", help="drop optimizer/scheduler/scaler/rng (for shipping)")
    p.add_argument("--half", action="store_true", help="store floating weights as fp16 (implies --weights-only)")
    p.add_argument("--pack", action="store_true", help="a sitting pack of a training checkpoint (last.pt): fp16 "
                   "weights plus the run's counters (step, lines seen, CPU-seconds), a few MB to commit; "
                   "train.resume=OUT continues the run on any machine (its optimizer starts afresh)")
    p.add_argument("--interpolate", metavar="START", help="IN is a model fine-tuned from START: write (1 - A) x "
                   "START + A x IN for every weight and BatchNorm statistic (WiSE-FT; output rows matched by "
                   "character, rows of characters START lacks are IN's); what train.interpolate_base writes at the end "
                   "of a fine-tune, here for another A without training again (docs/finetune.md)")
    p.add_argument("--alpha", type=float, help="with --interpolate: the share A of IN, within 0..1")
    p.add_argument("--cnn-alpha", type=float, metavar="C", help="with --interpolate: the share of IN for the "
                   "convolutional layers (cnn.*) alone, within 0..1 (default: --alpha)")
    p.add_argument("--soup", metavar="OTHER", action="append", default=[], help="average IN with OTHER, tensor by "
                   "tensor (repeat for more; a uniform model soup): fine-tunes of the same start and alphabet, e.g. "
                   "the same recipe with another train.seed; with --interpolate the average is what is interpolated")
    p.add_argument("--force", action="store_true", help="overwrite OUT if it exists (even when OUT is IN)")
    p.add_argument("--read-width-scale", type=float, metavar="S",
                   help="store data.read_width_scale S in OUT's config: a keep-ratio model is read with its widths "
                        "x S (more time steps per character; 1 = as trained); with a plain conversion or --pack")
    p.add_argument("--info", action="store_true", help="describe IN (layout, size, variant, charset, step) and exit")
    return p


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns 0 on success, 2 for usage errors, 1 when a file cannot be read or written."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse already printed the message
        return int(e.code or 0)
    try:
        if not Path(args.input).exists():  # a shipped model by name (a near miss such as eng: one line naming them)
            args.input = str(resolve_weights(args.input))
        convert_file(ConvertOptions(**vars(args)), say=print)
    except InferenceError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    except UsageError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except (CheckpointError, ForeignFormatError, CharsetError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
