"""crnn-convert-ckpt: rewrite a checkpoint with plain or ``module.`` keys, strip training state, halve, or describe it;
import checkpoints of other CRNN repositories and export to meijieru's layout.

    crnn-convert-ckpt IN OUT --to plain|module [--weights-only] [--half] [--force]
    crnn-convert-ckpt IN OUT --from meijieru|sierkinhane|clovaai [--charset SPEC] [--width N] [--pad]
    crnn-convert-ckpt IN OUT --to meijieru
    crnn-convert-ckpt --info IN
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from crnn.charset import CharsetError
from crnn.engine.checkpoint import (
    TRAINING_STATE_KEYS,
    Checkpoint,
    CheckpointError,
    add_prefix,
    check_not_foreign,
    describe_prefix,
    load_checkpoint,
    load_model_weights,
    model_checkpoint,
    save_checkpoint,
    weights_only_checkpoint,
)
from crnn.foreign import (
    DEFAULT_WIDTH,
    SOURCES,
    TARGETS,
    ForeignFormatError,
    detect,
    export_state,
    foreign_hint,
    import_state,
    imported_config,
    resolve_charset,
)
from crnn.foreign.meijieru import meijieru_constructor
from crnn.model import build_model

PROG = "crnn-convert-ckpt"
TARGET_PREFIX = {"plain": "", "module": "module."}
EPILOG = """other repositories (see README "Coming from another CRNN repository"):
  crnn-convert-ckpt netCRNN.pth crnn.pt --from meijieru             (charset alnum36 for 37 classes)
  crnn-convert-ckpt checkpoint.pth zh.pt --from sierkinhane --charset char_std_5990.txt
  crnn-convert-ckpt best_accuracy.pth clova.pt --from clovaai [--pad]   (None-VGG-BiLSTM-CTC only)
  crnn-convert-ckpt crnn.pt netCRNN.pth --to meijieru               (variant vgg; loads into CRNN(32, nc, nclass, 256))

meijieru's CRNN has a leakyRelu option that cannot be seen in the weights: crnn always uses ReLU, so convert only
models trained without it (the default). --from reads the file with weights_only, strips module. prefixes and
{'state_dict': ...} containers, folds biases, infers in_channels, hidden size and classes from the shapes and
stores variant, geometry, preprocessing and charset, so crnn-predict/eval/export need no further flags.
"""
BUFFER_SUFFIXES = ("running_mean", "running_var", "num_batches_tracked")
CONTAINER_NAMES = {
    "crnn": "crnn checkpoint",
    "bare": "bare state dict",
    "state_dict": "state dict under 'state_dict'",
    "model": "state dict under 'model'",
    "model_state_dict": "state dict under 'model_state_dict'",
    "net": "state dict under 'net'",
}


class UsageError(ValueError):
    """Bad arguments (exit code 2)."""


def build_parser() -> argparse.ArgumentParser:
    """Argument parser for the converter."""
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Convert a CRNN checkpoint between plain keys and DataParallel/DDP 'module.' keys, drop the "
        "training state (--weights-only), store fp16 weights (--half), describe a file (--info), import another "
        "repository's checkpoint (--from) or write meijieru's layout (--to meijieru).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("input", metavar="IN", help="checkpoint to read (crnn .pt, bare state dict, {'state_dict': ...})")
    p.add_argument("output", metavar="OUT", nargs="?", help="file to write (atomically)")
    p.add_argument("--to", choices=[*sorted(TARGET_PREFIX), *TARGETS], default="plain",
                   help="key layout to write: plain (default; what crnn saves), module (DataParallel/DDP style) or "
                   "meijieru (a bare state dict for meijieru/crnn.pytorch's CRNN; variant vgg only)")
    p.add_argument("--from", dest="source", choices=list(SOURCES),
                   help="IN was saved by meijieru/crnn.pytorch, Sierkinhane/CRNN_Chinese_Characters_Rec or clovaai/"
                   "deep-text-recognition-benchmark (None-VGG-BiLSTM-CTC); write a crnn checkpoint. meijieru's "
                   "leakyRelu option cannot be seen in the weights (crnn uses ReLU)")
    p.add_argument("--charset", help="with --from: the model's alphabet (name, file or characters; default alnum36 "
                   "when the model has 37 classes, otherwise required)")
    p.add_argument("--width", type=int, help="with --from: input width the model was trained with (default: "
                   + ", ".join(f"{k} {v}" for k, v in DEFAULT_WIDTH.items()) + ")")
    p.add_argument("--pad", action="store_true", help="with --from clovaai: it was trained with --PAD (keep the "
                   "ratio, right-pad to --width by repeating the last column)")
    p.add_argument("--weights-only", action="store_true", help="drop optimizer/scheduler/scaler/rng (for shipping)")
    p.add_argument("--half", action="store_true", help="store floating weights as fp16 (implies --weights-only)")
    p.add_argument("--force", action="store_true", help="overwrite OUT if it exists (even when OUT is IN)")
    p.add_argument("--info", action="store_true", help="describe IN (layout, size, variant, charset, step) and exit")
    return p


# ---------------------------------------------------------------------------------------------- --info
def _size(path: Path) -> str:
    n = path.stat().st_size
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"


def _param_summary(state: dict) -> str:
    """'N tensors (float32), P parameters' (BatchNorm running statistics are not counted as parameters)."""
    dtypes = Counter(str(t.dtype).replace("torch.", "") for t in state.values() if t.is_floating_point())
    params = sum(t.numel() for k, t in state.items() if t.is_floating_point() and not k.endswith(BUFFER_SUFFIXES))
    kinds = ", ".join(f"{d}" if len(dtypes) == 1 else f"{d} x{n}" for d, n in dtypes.most_common())
    return f"{len(state)} tensors ({kinds}), {params:,} parameters"


def _model_lines(ckpt: Checkpoint) -> list[str]:
    """Variant and alphabet lines (inferred from the head where the file stores no metadata)."""
    model_cfg = (ckpt.config or {}).get("model") or {}
    head = ckpt.model_state.get("head.weight")
    classes = ckpt.num_classes or (int(head.shape[0]) if head is not None else None)
    variant = ckpt.variant or "unknown (not stored)"
    if model_cfg:
        hidden = model_cfg.get("hidden") or "default"
        no_bn = ", no batch norm" if model_cfg.get("batch_norm") is False else ""
        variant += f" (in_channels {model_cfg.get('in_channels')}, hidden {hidden}{no_bn})"
    lines = [f"variant: {variant}"]
    if ckpt.charset:
        chars = ckpt.charset.get("chars", "")
        lines.append(f"charset: {len(chars)} chars + blank = {classes} classes: {chars!r} "
                     f"(lowercase: {ckpt.charset.get('lowercase')}, unknown: {ckpt.charset.get('unknown')})")
    else:
        lines.append(f"charset: not stored (head has {classes} classes = {classes - 1} chars + blank)"
                     if classes else "charset: not stored")
    return lines


def info_lines(ckpt: Checkpoint) -> list[str]:
    """Human-readable description of a loaded checkpoint, one fact per line."""
    raw = ckpt.raw
    version = f", format version {raw.get('version')}" if ckpt.container == "crnn" else ""
    hint = foreign_hint(ckpt.model_state, ckpt.container, ckpt.path) if ckpt.container != "crnn" else ""
    lines = [
        f"file: {ckpt.path} ({_size(Path(ckpt.path))})",
        f"kind: {ckpt.kind} ({CONTAINER_NAMES.get(ckpt.container, ckpt.container)}{version})",
        f"layout: {describe_prefix(ckpt.source_prefix)}",
        f"weights: {_param_summary(ckpt.model_state)}",
        *([f"source: {hint}"] if hint else _model_lines(ckpt)),
    ]
    origin = raw.get("converted_from") if ckpt.container == "crnn" else None
    if isinstance(origin, dict):
        source = SOURCES.get(origin.get("source"), origin.get("source"))
        lines.append(f"converted from: {source} ({origin.get('file')})")
    progress = [f"{k}: {raw[k]}" for k in ("step", "epoch", "best_metric") if k in raw]
    lines.append(", ".join(progress) if progress else "step: not stored")
    state = [k for k in TRAINING_STATE_KEYS if raw.get(k) is not None]
    lines.append(f"training state: {', '.join(state)}" if state else "training state: none (weights only)")
    return lines


# ---------------------------------------------------------------------------------------------- conversion
def convert(ckpt: Checkpoint, to: str, weights_only: bool = False, half: bool = False) -> dict:
    """The object to write: the same container with the model state re-keyed, optionally stripped/halved."""
    state = add_prefix(ckpt.model_state, TARGET_PREFIX[to])
    if ckpt.container == "bare":
        obj = state
    else:
        obj = dict(ckpt.raw)
        obj["model" if ckpt.container == "crnn" else ckpt.container] = state
    if weights_only or half:
        obj = weights_only_checkpoint(obj, half=half)
    return obj


def _check_output(src: Path, dst: Path, force: bool) -> None:
    """Refuse to overwrite IN or an existing OUT unless --force."""
    if force or not dst.exists():
        return
    if dst.resolve() == src.resolve() or (src.exists() and dst.samefile(src)):
        raise UsageError(f"OUT {dst} is the input file; pass --force to overwrite it in place")
    raise UsageError(f"OUT {dst} already exists; pass --force to overwrite it")


def import_foreign(ckpt: Checkpoint, args: argparse.Namespace) -> dict:
    """A crnn weights checkpoint from another repository's file (model loaded strictly to verify the mapping)."""
    if ckpt.container == "crnn":
        raise UsageError(f"{ckpt.path} is already a crnn checkpoint; --from is for other repositories' files")
    det = detect(ckpt.model_state, ckpt.container)
    family = {"sierkinhane": "meijieru"}  # the same network: either name reads either file
    if det is not None and family.get(det.source, det.source) != family.get(args.source, args.source):
        raise UsageError(f"{ckpt.path} looks like a {det.name} checkpoint, not {SOURCES[args.source]}: "
                         f"use --from {det.source}")
    imported = import_state(args.source, ckpt.model_state, width=args.width, pad=args.pad)
    charset = resolve_charset(args.charset, imported.num_classes, args.source)
    cfg = imported_config(imported, charset)
    model = build_model(imported.variant, imported.in_channels, imported.num_classes, imported.hidden)
    load_model_weights(model, imported.state, strict=True, charset_size=len(charset))
    d = cfg.data
    size = f"ratio kept, edge-padded to {d.width}" if d.keep_ratio else f"{d.width} wide"
    norm = "[-1, 1]" if (d.mean, d.std) == (0.5, 0.5) else f"(pixel / 255 - {d.mean}) / {d.std}"
    print(f"{ckpt.path}: {SOURCES[args.source]} CRNN, in_channels {imported.in_channels}, hidden {imported.hidden}, "
          f"{imported.num_classes} classes -> crnn variant {imported.variant}")
    print(f"charset: {cfg.model.charset if len(cfg.model.charset) < 40 else f'{len(charset)} characters'}; "
          f"input: {d.height} x {size}, {d.interpolation}, {norm}")
    for note in imported.notes:
        print(note)
    if args.source != "clovaai":
        print("note: meijieru's leakyRelu option cannot be seen in the weights; crnn uses ReLU (their default)")
    print(f"to fine-tune: crnn-train ... train.init_weights=OUT {' '.join(finetune_overrides(cfg))}")
    return model_checkpoint(model, cfg, charset, converted_from={"source": args.source, "file": Path(ckpt.path).name})


def finetune_overrides(cfg) -> list[str]:
    """The ``section.key=value`` settings (model shape, preprocessing) where a converted model differs from ours."""
    from crnn.charset import BUILTIN_CHARSETS
    from crnn.config import Config

    default, out = Config(), []
    for section, keys in (("model", ("variant", "in_channels", "hidden", "charset")),
                          ("data", ("width", "keep_ratio", "max_width", "interpolation", "mean", "std", "pad"))):
        for key in keys:
            value = getattr(getattr(cfg, section), key)
            if value != getattr(getattr(default, section), key):
                shown = value if key != "charset" or value in BUILTIN_CHARSETS else "ALPHABET"
                out.append(f"{section}.{key}={str(shown).lower() if isinstance(shown, bool) else shown}")
    return out


def export_foreign(ckpt: Checkpoint, target: str) -> dict:
    """Our weights in ``target``'s layout (a bare plain-key state dict)."""
    check_not_foreign(ckpt)
    model_cfg = (ckpt.config or {}).get("model") or {}
    variant = ckpt.variant or model_cfg.get("variant") or "vgg"
    state = export_state(target, ckpt.model_state, variant, model_cfg.get("batch_norm", True) is not False)
    print(f"writing {SOURCES[target]}'s layout: load it with {meijieru_constructor(state)} and "
          "model.load_state_dict(torch.load(OUT))")
    if ckpt.charset:
        print(f"alphabet (class 1 on, blank 0): {ckpt.charset.get('chars', '')!r}")
    return state


def _validate_options(args: argparse.Namespace) -> None:
    """Refuse option combinations that do not mean anything."""
    if args.source and args.to != "plain":
        raise UsageError("--from writes a crnn checkpoint; drop --to")
    if not args.source and (args.charset or args.width or args.pad):
        raise UsageError("--charset, --width and --pad describe a foreign file: use them with --from")
    if args.width is not None and args.width < 8:
        raise UsageError(f"--width must be at least 8 pixels, got {args.width}")


def _run(args: argparse.Namespace) -> None:
    """Load, then either describe or convert and save (raises UsageError / CheckpointError)."""
    if args.info:
        if args.output:
            raise UsageError("--info takes only IN (drop OUT)")
        print("\n".join(info_lines(load_checkpoint(args.input))))
        return
    if not args.output:
        raise UsageError("give OUT (or use --info IN to describe the file)")
    _validate_options(args)
    src, dst = Path(args.input), Path(args.output)
    _check_output(src, dst, args.force)
    ckpt = load_checkpoint(src)
    if args.source or args.to in TARGETS:
        obj = import_foreign(ckpt, args) if args.source else export_foreign(ckpt, args.to)
        save_checkpoint(weights_only_checkpoint(obj, half=args.half) if args.half else obj, dst)
        print(f"wrote {dst} ({_size(dst)})")
        return
    print(f"{src} has {describe_prefix(ckpt.source_prefix)}, writing {describe_prefix(TARGET_PREFIX[args.to])}")
    if args.half and not args.weights_only:
        print("--half implies --weights-only: dropping the training state")
    dropped = [k for k in TRAINING_STATE_KEYS if k in ckpt.raw] if (args.weights_only or args.half) else []
    if dropped:
        print(f"dropping {', '.join(dropped)}")
    save_checkpoint(convert(ckpt, args.to, args.weights_only, args.half), dst)
    print(f"wrote {dst} ({_size(dst)})")


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns 0 on success, 2 for usage errors, 1 when a file cannot be read or written."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse already printed the message
        return int(e.code or 0)
    try:
        _run(args)
    except UsageError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except (CheckpointError, ForeignFormatError, CharsetError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
