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
import os
import sys
from collections import Counter
from pathlib import Path

from crnn.charset import Charset, CharsetError
from crnn.config import READ_WIDTH_SCALE_RANGE, read_width_scale_problem
from crnn.engine.checkpoint import (
    TRAINING_STATE_KEYS,
    Checkpoint,
    CheckpointError,
    add_prefix,
    build_from_checkpoint,
    check_not_foreign,
    describe_prefix,
    load_checkpoint,
    load_model_weights,
    model_checkpoint,
    save_checkpoint,
    sitting_pack,
    weights_only_checkpoint,
)
from crnn.foreign import (
    DEFAULT_WIDTH,
    SOURCES,
    TARGETS,
    ForeignFormatError,
    Imported,
    detect,
    export_state,
    foreign_hint,
    import_state,
    imported_config,
    resolve_charset,
)
from crnn.foreign import easyocr
from crnn.foreign.meijieru import meijieru_constructor
from crnn.model import build_model

PROG = "crnn-convert-ckpt"
TARGET_PREFIX = {"plain": "", "module": "module."}
EPILOG = """other repositories (see README "Coming from another CRNN repository"):
  crnn-convert-ckpt netCRNN.pth crnn.pt --from meijieru             (charset alnum36 for 37 classes)
  crnn-convert-ckpt checkpoint.pth zh.pt --from sierkinhane --charset char_std_5990.txt
  crnn-convert-ckpt best_accuracy.pth clova.pt --from clovaai [--pad]   (None-VGG-BiLSTM-CTC only)
  crnn-convert-ckpt crnn.pt netCRNN.pth --to meijieru               (variant vgg; loads into CRNN(32, nc, nclass, 256))

EasyOCR (README "Coming from EasyOCR"; generation-2 recognisers: english_g2.pth, latin_g2.pth, zh_sim_g2.pth, ...):
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
        "repository's or EasyOCR's checkpoint (--from) or write meijieru's or EasyOCR's layout (--to meijieru, "
        "--to easyocr).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("input", metavar="IN", help="checkpoint to read (crnn .pt, bare state dict, {'state_dict': ...})")
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
                   "of a fine-tune, here for another A without training again (README Fine-tune on your own crops)")
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


def interpolated(tuned: Checkpoint, start: Checkpoint, alpha: float, half: bool = False,
                 cnn_alpha: float | None = None) -> dict:
    """A weights-only crnn checkpoint of ``tuned`` whose model is ``(1 - alpha) * start + alpha * tuned`` (``cnn_alpha``
    for the cnn.* tensors where given)."""
    from crnn.engine.interpolate import check_alpha, interpolate_checkpoints

    check_alpha(alpha, "--alpha")
    if cnn_alpha is not None:
        check_alpha(cnn_alpha, "--cnn-alpha")
    check_not_foreign(start)
    _require_run_checkpoint(tuned, "--interpolate")
    model = build_from_checkpoint(tuned)[0]
    obj = weights_only_checkpoint(dict(tuned.raw), half=False)
    obj["model"] = interpolate_checkpoints(start, tuned, model, alpha, cnn_alpha)
    obj["interpolated"] = {"start": str(start.path), "alpha": alpha}
    if cnn_alpha is not None:
        obj["interpolated"]["cnn_alpha"] = cnn_alpha
    return weights_only_checkpoint(obj, half=True) if half else obj


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
    if det is not None and det.source == "easyocr" and det.problem:
        raise ForeignFormatError(f"{ckpt.path}: {det.problem}")
    family = {"sierkinhane": "meijieru", "easyocr": "clovaai"}  # the same network: either name reads either file
    if det is not None and family.get(det.source, det.source) != family.get(args.source, args.source):
        raise UsageError(f"{ckpt.path} looks like a {det.name} checkpoint, not {SOURCES[args.source]}: "
                         f"use --from {det.source}")
    extra: dict = {}
    if args.source == "easyocr":
        imported, found = _import_easyocr(ckpt, args)
        charset = found.charset
        extra = {"easyocr_model": found.model, "lang_list": found.lang_list, "charset_from": found.origin}
    else:
        imported = import_state(args.source, ckpt.model_state, width=args.width, pad=args.pad)
        charset = resolve_charset(args.charset, imported.num_classes, args.source)
    cfg = imported_config(imported, charset)
    model = build_model(imported.variant, imported.in_channels, imported.num_classes, imported.hidden)
    load_model_weights(model, imported.state, strict=True, charset_size=len(charset))
    d = cfg.data
    size = f"ratio kept, edge-padded to {d.width}" if d.keep_ratio else f"{d.width} wide"
    if d.pad == "easyocr":
        size = f"ratio kept, EasyOCR's resize and padding (data.pad easyocr, up to {d.max_width} wide)"
    norm = "[-1, 1]" if (d.mean, d.std) == (0.5, 0.5) else f"(pixel / 255 - {d.mean}) / {d.std}"
    print(f"{ckpt.path}: {SOURCES[args.source]} CRNN, in_channels {imported.in_channels}, hidden {imported.hidden}, "
          f"{imported.num_classes} classes -> crnn variant {imported.variant}")
    print(f"charset: {cfg.model.charset if len(cfg.model.charset) < 40 else f'{len(charset)} characters'}"
          f"{' from ' + extra['charset_from'] if extra else ''}; input: {d.height} x {size}, {d.interpolation}, {norm}")
    for note in imported.notes:
        print(note)
    if args.source in ("meijieru", "sierkinhane"):
        print("note: meijieru's leakyRelu option cannot be seen in the weights; crnn uses ReLU (their default)")
    if args.source == "easyocr":
        print("note: EasyOCR's recognize() re-reads crops below contrast_ths (0.1) with raised contrast; crnn reads "
              "each crop once (its first pass)")
    print(f"to fine-tune: crnn-train ... train.init_weights=OUT {' '.join(finetune_overrides(cfg))}")
    if args.source == "easyocr":
        print("  (ALPHABET: an alphabet file, e.g. python -c \"import torch; print(torch.load('OUT', weights_only=True)"
              "['charset']['chars'])\" > chars.txt; data.max_width=400 trains faster)")
    origin = {"source": args.source, "file": Path(ckpt.path).name, **{k: v for k, v in extra.items() if v}}
    # e.g. {"source": "easyocr", "file": "english_g2.pth", "easyocr_model": "english_g2", "lang_list": ["en"], ...}
    return model_checkpoint(model, cfg, charset, converted_from=origin)


def _import_easyocr(ckpt: Checkpoint, args: argparse.Namespace) -> tuple[Imported, easyocr.EasyOcrCharset]:
    """An EasyOCR generation-2 file as crnn weights, with its alphabet (and a custom model's imgH)."""
    try:
        imported = import_state("easyocr", ckpt.model_state, width=args.width)
        found = easyocr.find_charset(args.charset, imported.num_classes, ckpt.path)
    except ForeignFormatError as e:
        msg = str(e)
        raise ForeignFormatError(msg if msg.startswith(str(ckpt.path)) else f"{ckpt.path}: {msg}") from None
    imported.data.update(height=found.height, width=4 * found.height)
    return imported, found


def finetune_overrides(cfg) -> list[str]:
    """The ``section.key=value`` settings (model shape, preprocessing) where a converted model differs from ours."""
    from crnn.charset import BUILTIN_CHARSETS
    from crnn.config import Config

    default, out = Config(), []
    for section, keys in (("model", ("variant", "in_channels", "hidden", "charset")),
                          ("data", ("height", "width", "keep_ratio", "max_width", "interpolation", "mean", "std",
                                    "pad"))):
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


def export_easyocr(ckpt: Checkpoint, dst: Path, args: argparse.Namespace) -> None:
    """Write NAME.pth, NAME.yaml and NAME.py: a ``vgg_easyocr`` checkpoint as an EasyOCR custom recogniser."""
    check_not_foreign(ckpt)
    if dst.suffix != ".pth":
        raise UsageError(f"OUT {dst} must be NAME.pth: EasyOCR looks for NAME.pth, NAME.yaml and NAME.py")
    yaml_path, py_path = dst.with_suffix(".yaml"), dst.with_suffix(".py")
    for side in (yaml_path, py_path):
        _check_output(Path(args.input), side, args.force)
    if not ckpt.charset or not ckpt.config:
        raise CheckpointError(f"{ckpt.path} stores no charset and config (a bare state dict): convert a checkpoint "
                              "written by crnn-train or crnn-convert-ckpt --from easyocr")
    model_cfg, data_cfg = ckpt.config.get("model") or {}, ckpt.config.get("data") or {}
    origin = ckpt.raw.get("converted_from") if isinstance(ckpt.raw.get("converted_from"), dict) else {}
    langs = [x.strip() for x in args.lang.split(",") if x.strip()] if args.lang else origin.get("lang_list") or ["en"]
    height = int(data_cfg.get("height", 32))
    state, yaml_text, py_text = easyocr.custom_model_files(
        ckpt.model_state, ckpt.variant or model_cfg.get("variant", ""), model_cfg.get("batch_norm", True) is not False,
        Charset.from_dict(ckpt.charset), height, langs, dst.stem)
    if data_cfg.get("pad") != "easyocr" or (data_cfg.get("mean"), data_cfg.get("std")) != (0.5, 0.5):
        print(f"note: this model was trained with data.pad={data_cfg.get('pad')}, mean/std {data_cfg.get('mean')}/"
              f"{data_cfg.get('std')}; EasyOCR feeds it its own input (data.pad=easyocr, [-1, 1]): it may read worse")
    save_checkpoint(weights_only_checkpoint(state, half=True) if args.half else state, dst)
    for path, text in ((yaml_path, yaml_text), (py_path, py_text)):
        _write_text(path, text)
    print(f"wrote {dst} ({_size(dst)}), {yaml_path.name} (imgH {height}, lang_list {langs}, "
          f"{len(ckpt.charset.get('chars', ''))} characters) and {py_path.name} (EasyOCR's own generation-2 Model)")
    folder = str(dst.parent) or "."
    print(f"read with: easyocr.Reader({langs}, recog_network={dst.stem!r}, model_storage_directory={folder!r}, "
          f"user_network_directory={folder!r})")


def _write_text(path: Path, text: str) -> None:
    """Write a UTF-8 text file atomically (temp file, then os.replace)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise CheckpointError(f"cannot write {path}: {e.strerror or e}") from None


def _soup(first: Checkpoint, others: list[str]) -> Checkpoint:
    """--soup: the average of IN and OTHER..., crnn checkpoints of one architecture and alphabet."""
    from crnn.engine.interpolate import soup_checkpoints

    ckpts = [first, *(load_checkpoint(p) for p in others)]
    for ck in ckpts:
        _require_run_checkpoint(ck, "--soup")
    return soup_checkpoints(ckpts)


def _require_run_checkpoint(ck: Checkpoint, option: str) -> None:
    """--interpolate's fine-tuned model and every --soup ingredient: a crnn checkpoint with its config and alphabet."""
    check_not_foreign(ck)
    if ck.container != "crnn" or ck.charset is None or ck.config is None:
        raise CheckpointError(f"{ck.path}: {option} needs a crnn checkpoint of a fine-tuned model with its config and "
                              "alphabet, such as a run's last.pt")


def _validate_options(args: argparse.Namespace) -> None:
    """Refuse option combinations that do not mean anything."""
    if args.source and args.to != "plain":
        raise UsageError("--from writes a crnn checkpoint; drop --to")
    if not args.source and (args.charset or args.width or args.pad):
        raise UsageError("--charset, --width and --pad describe a foreign file: use them with --from")
    if args.width is not None and args.width < 8:
        raise UsageError(f"--width must be at least 8 pixels, got {args.width}")
    if args.lang and args.to != "easyocr":
        raise UsageError("--lang is the lang_list of an EasyOCR custom model: use it with --to easyocr")
    if (args.interpolate is None) != (args.alpha is None):
        raise UsageError("--interpolate START and --alpha A go together")
    if args.interpolate and (args.source or args.to != "plain" or args.pack):
        raise UsageError("--interpolate writes a crnn checkpoint of IN's kind: drop --from, --to and --pack")
    if args.cnn_alpha is not None and not args.interpolate:
        raise UsageError("--cnn-alpha is a share of --interpolate: give --interpolate START --alpha A too")
    if args.soup and (args.source or args.to != "plain" or args.pack):
        raise UsageError("--soup writes a crnn checkpoint of IN's kind: drop --from, --to and --pack")
    if args.read_width_scale is not None:
        if args.source or args.to != "plain" or args.soup or args.interpolate:
            raise UsageError("--read-width-scale sets a reading setting of a crnn checkpoint: use it with a plain "
                             "conversion or --pack (not --from, --to, --soup, --interpolate)")
        lo, hi = READ_WIDTH_SCALE_RANGE
        if not lo <= args.read_width_scale <= hi:
            raise UsageError(f"--read-width-scale must be within {lo:g}..{hi:g} (1 = as trained), got "
                             f"{args.read_width_scale}")


def _set_read_width_scale(obj: dict, ckpt: Checkpoint, scale: float | None) -> dict:
    """``obj`` with data.read_width_scale = ``scale`` in its config (unchanged when ``scale`` is None)."""
    if scale is None:
        return obj
    data = ((obj.get("config") or {}).get("data") if isinstance(obj, dict) else None)
    if ckpt.container != "crnn" or not isinstance(data, dict):
        raise UsageError(f"{ckpt.path} stores no config (a bare state dict): --read-width-scale needs a crnn "
                         "checkpoint written by crnn-train or crnn-convert-ckpt")
    if read_width_scale_problem(scale, bool(data.get("keep_ratio")), data.get("pad", "batch")):
        raise UsageError(f"{ckpt.path} reads fixed-width or edge-padded crops (data.keep_ratio "
                         f"{data.get('keep_ratio')}, data.pad {data.get('pad')}): --read-width-scale scales keep-ratio "
                         "widths only")
    obj = dict(obj)
    obj["config"] = {**obj["config"], "data": {**data, "read_width_scale": scale}}
    return obj


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
    if args.to == "easyocr":
        export_easyocr(ckpt, dst, args)
        return
    tuned = str(src)
    if args.soup:
        ckpt = _soup(ckpt, args.soup)
        tuned = f"the average of {', '.join([str(src), *args.soup])}"
    if args.interpolate:
        save_checkpoint(interpolated(ckpt, load_checkpoint(args.interpolate), args.alpha, args.half, args.cnn_alpha),
                        dst)
        cnn = ("" if args.cnn_alpha is None else
               f" (cnn.*: {1 - args.cnn_alpha:g} x the start + {args.cnn_alpha:g} x the fine-tuned)")
        print(f"wrote {dst} ({_size(dst)}): {1 - args.alpha:g} x {args.interpolate} + {args.alpha:g} x {tuned}{cnn}")
        return
    if args.soup:
        save_checkpoint(weights_only_checkpoint(ckpt.raw, half=args.half), dst)
        print(f"wrote {dst} ({_size(dst)}): {tuned}")
        return
    if args.pack:
        if ckpt.kind != "training" or not isinstance(ckpt.raw.get("state"), dict):
            raise UsageError(f"--pack needs a training checkpoint (a run's last.pt); {src} holds weights only")
        save_checkpoint(_set_read_width_scale(sitting_pack(ckpt.raw), ckpt, args.read_width_scale), dst)
        state = ckpt.raw["state"]
        print(f"wrote {dst} ({_size(dst)}): a sitting pack at step {state.get('step')} "
              f"({state.get('images_seen', 0):,} lines seen, {state.get('cpu_seconds', 0) / 3600:.2f} CPU-hours); "
              f"continue with train.resume={dst}")
        return
    if args.source or args.to in TARGETS:
        obj = import_foreign(ckpt, args) if args.source else export_foreign(ckpt, args.to)
        save_checkpoint(weights_only_checkpoint(obj, half=args.half) if args.half else obj, dst)
        print(f"wrote {dst} ({_size(dst)})")
        return
    det = detect(ckpt.model_state, ckpt.container) if ckpt.container != "crnn" else None
    if det is not None and det.problem:  # e.g. EasyOCR's detector: no key layout of it is of use to crnn
        raise ForeignFormatError(foreign_hint(ckpt.model_state, ckpt.container, str(src)))
    print(f"{src} has {describe_prefix(ckpt.source_prefix)}, writing {describe_prefix(TARGET_PREFIX[args.to])}")
    if det is not None:
        print(f"note: {foreign_hint(ckpt.model_state, ckpt.container, str(src))} (this run only rewrites the keys)")
    if args.half and not args.weights_only:
        print("--half implies --weights-only: dropping the training state")
    dropped = [k for k in TRAINING_STATE_KEYS if k in ckpt.raw] if (args.weights_only or args.half) else []
    if dropped:
        print(f"dropping {', '.join(dropped)}")
    save_checkpoint(_set_read_width_scale(convert(ckpt, args.to, args.weights_only, args.half), ckpt,
                                          args.read_width_scale), dst)
    print(f"wrote {dst} ({_size(dst)})" + ("" if args.read_width_scale is None else
                                         f", read with data.read_width_scale {args.read_width_scale:g}"))


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
