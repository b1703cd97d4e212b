"""crnn-convert-ckpt: rewrite a checkpoint with plain or ``module.`` keys, strip training state, halve, or describe it.

    crnn-convert-ckpt IN OUT --to plain|module [--weights-only] [--half] [--force]
    crnn-convert-ckpt --info IN
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from crnn.engine.checkpoint import (
    TRAINING_STATE_KEYS,
    Checkpoint,
    CheckpointError,
    add_prefix,
    describe_prefix,
    load_checkpoint,
    save_checkpoint,
    weights_only_checkpoint,
)

PROG = "crnn-convert-ckpt"
TARGET_PREFIX = {"plain": "", "module": "module."}
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
        "training state (--weights-only), store fp16 weights (--half), or describe a file (--info).",
    )
    p.add_argument("input", metavar="IN", help="checkpoint to read (crnn .pt, bare state dict, {'state_dict': ...})")
    p.add_argument("output", metavar="OUT", nargs="?", help="file to write (atomically)")
    p.add_argument("--to", choices=sorted(TARGET_PREFIX), default="plain",
                   help="key layout to write: plain (default; what crnn saves) or module (DataParallel/DDP style)")
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
    lines = [
        f"file: {ckpt.path} ({_size(Path(ckpt.path))})",
        f"kind: {ckpt.kind} ({CONTAINER_NAMES.get(ckpt.container, ckpt.container)}{version})",
        f"layout: {describe_prefix(ckpt.source_prefix)}",
        f"weights: {_param_summary(ckpt.model_state)}",
        *_model_lines(ckpt),
    ]
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


def _run(args: argparse.Namespace) -> None:
    """Load, then either describe or convert and save (raises UsageError / CheckpointError)."""
    if args.info:
        if args.output:
            raise UsageError("--info takes only IN (drop OUT)")
        print("\n".join(info_lines(load_checkpoint(args.input))))
        return
    if not args.output:
        raise UsageError("give OUT (or use --info IN to describe the file)")
    src, dst = Path(args.input), Path(args.output)
    _check_output(src, dst, args.force)
    ckpt = load_checkpoint(src)
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
    except CheckpointError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
