"""Checkpoint conversion, the work behind ``crnn-convert-ckpt``: re-key (plain / ``module.``), strip, halve or pack a
checkpoint, describe one, average fine-tunes (a soup), interpolate towards their start (WiSE-FT), import other
repositories' and EasyOCR's files, and export to meijieru's or EasyOCR's layout.

:func:`convert_file` does what one ``crnn-convert-ckpt`` command does, from :class:`ConvertOptions` (the command's
options by the same names); what it has to say goes line by line to ``say`` (the CLI passes ``print``). Bad option
combinations raise ConvertUsageError; unreadable or unwritable files CheckpointError, ForeignFormatError or
CharsetError.
"""
from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from crnn.charset import Charset
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

Say = Callable[[str], None]
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


class ConvertUsageError(ValueError):
    """Options that do not go together, or an output that would overwrite a file (crnn-convert-ckpt: exit code 2)."""


@dataclass
class ConvertOptions:
    """One conversion: crnn-convert-ckpt's options, by the same names and with the same defaults."""

    input: str
    output: str | None = None
    to: str = "plain"  # plain | module | meijieru | easyocr
    source: str | None = None  # --from: meijieru | sierkinhane | clovaai | easyocr
    charset: str | None = None
    width: int | None = None
    lang: str | None = None
    pad: bool = False
    weights_only: bool = False
    half: bool = False
    pack: bool = False
    interpolate: str | None = None
    alpha: float | None = None
    cnn_alpha: float | None = None
    soup: list[str] = field(default_factory=list)
    force: bool = False
    read_width_scale: float | None = None
    info: bool = False


# ---------------------------------------------------------------------------------------------- --info
def file_size(path: Path) -> str:
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
    lines.append(f"reads: {_reading_geometry((ckpt.config or {}).get('data'))}")
    return lines


def _reading_geometry(data: dict | None) -> str:
    """``32 px high, keep-ratio 16-400 px wide in steps of 4``: how the file's model was trained to read crops (the
    data keys a fine-tuning or reading config should keep), from its stored config."""
    if not isinstance(data, dict) or "height" not in data:
        return "not stored (no training config in the file: give data.height / data.width as it was trained)"
    if data.get("keep_ratio"):
        step = data.get("width_step", 1)
        size = (f"keep-ratio {data.get('min_width', 1)}-{data.get('max_width')} px wide"
                + (f" in steps of {step}" if step and step > 1 else ""))
    else:
        size = f"fixed {data.get('width')} px wide"
    pad = data.get("pad", "batch")
    scale = data.get("read_width_scale", 1.0)
    return (f"{data['height']} px high, {size}" + (f", pad {pad}" if pad != "batch" else "")
            + (f", read at {scale:g}x the trained widths" if scale and scale != 1.0 else "")
            + " (data.height / keep_ratio / width / min_width / max_width / width_step)")


def info_lines(ckpt: Checkpoint) -> list[str]:
    """Human-readable description of a loaded checkpoint, one fact per line."""
    raw = ckpt.raw
    version = f", format version {raw.get('version')}" if ckpt.container == "crnn" else ""
    hint = foreign_hint(ckpt.model_state, ckpt.container, ckpt.path) if ckpt.container != "crnn" else ""
    lines = [
        f"file: {ckpt.path} ({file_size(Path(ckpt.path))})",
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


def check_output(src: Path, dst: Path, force: bool) -> None:
    """Refuse to overwrite IN or an existing OUT unless --force."""
    if force or not dst.exists():
        return
    if dst.resolve() == src.resolve() or (src.exists() and dst.samefile(src)):
        raise ConvertUsageError(f"OUT {dst} is the input file; pass --force to overwrite it in place")
    raise ConvertUsageError(f"OUT {dst} already exists; pass --force to overwrite it")


def import_foreign(ckpt: Checkpoint, opts: ConvertOptions, say: Say = print) -> dict:
    """A crnn weights checkpoint from another repository's file (model loaded strictly to verify the mapping)."""
    if ckpt.container == "crnn":
        raise ConvertUsageError(f"{ckpt.path} is already a crnn checkpoint; --from is for other repositories' files")
    det = detect(ckpt.model_state, ckpt.container)
    if det is not None and det.source == "easyocr" and det.problem:
        raise ForeignFormatError(f"{ckpt.path}: {det.problem}")
    family = {"sierkinhane": "meijieru", "easyocr": "clovaai"}  # the same network: either name reads either file
    if det is not None and family.get(det.source, det.source) != family.get(opts.source, opts.source):
        raise ConvertUsageError(f"{ckpt.path} looks like a {det.name} checkpoint, not {SOURCES[opts.source]}: "
                                f"use --from {det.source}")
    extra: dict = {}
    if opts.source == "easyocr":
        imported, found = _import_easyocr(ckpt, opts)
        charset = found.charset
        extra = {"easyocr_model": found.model, "lang_list": found.lang_list, "charset_from": found.origin}
    else:
        imported = import_state(opts.source, ckpt.model_state, width=opts.width, pad=opts.pad)
        charset = resolve_charset(opts.charset, imported.num_classes, opts.source)
    cfg = imported_config(imported, charset)
    model = build_model(imported.variant, imported.in_channels, imported.num_classes, imported.hidden)
    load_model_weights(model, imported.state, strict=True, charset_size=len(charset))
    d = cfg.data
    size = f"ratio kept, edge-padded to {d.width}" if d.keep_ratio else f"{d.width} wide"
    if d.pad == "easyocr":
        size = f"ratio kept, EasyOCR's resize and padding (data.pad easyocr, up to {d.max_width} wide)"
    norm = "[-1, 1]" if (d.mean, d.std) == (0.5, 0.5) else f"(pixel / 255 - {d.mean}) / {d.std}"
    say(f"{ckpt.path}: {SOURCES[opts.source]} CRNN, in_channels {imported.in_channels}, hidden {imported.hidden}, "
        f"{imported.num_classes} classes -> crnn variant {imported.variant}")
    say(f"charset: {cfg.model.charset if len(cfg.model.charset) < 40 else f'{len(charset)} characters'}"
        f"{' from ' + extra['charset_from'] if extra else ''}; input: {d.height} x {size}, {d.interpolation}, {norm}")
    for note in imported.notes:
        say(note)
    if opts.source in ("meijieru", "sierkinhane"):
        say("note: meijieru's leakyRelu option cannot be seen in the weights; crnn uses ReLU (their default)")
    if opts.source == "easyocr":
        say("note: EasyOCR's recognize() re-reads crops below contrast_ths (0.1) with raised contrast; crnn reads "
            "each crop once (its first pass)")
    say(f"to fine-tune: crnn-train ... train.init_weights=OUT {' '.join(finetune_overrides(cfg))}")
    if opts.source == "easyocr":
        say("  (ALPHABET: an alphabet file, e.g. python -c \"import torch; print(torch.load('OUT', weights_only=True)"
            "['charset']['chars'])\" > chars.txt; data.max_width=400 trains faster)")
    origin = {"source": opts.source, "file": Path(ckpt.path).name, **{k: v for k, v in extra.items() if v}}
    # e.g. {"source": "easyocr", "file": "english_g2.pth", "easyocr_model": "english_g2", "lang_list": ["en"], ...}
    return model_checkpoint(model, cfg, charset, converted_from=origin)


def _import_easyocr(ckpt: Checkpoint, opts: ConvertOptions) -> tuple[Imported, easyocr.EasyOcrCharset]:
    """An EasyOCR generation-2 file as crnn weights, with its alphabet (and a custom model's imgH)."""
    try:
        imported = import_state("easyocr", ckpt.model_state, width=opts.width)
        found = easyocr.find_charset(opts.charset, imported.num_classes, ckpt.path)
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


def export_foreign(ckpt: Checkpoint, target: str, say: Say = print) -> dict:
    """Our weights in ``target``'s layout (a bare plain-key state dict)."""
    check_not_foreign(ckpt)
    model_cfg = (ckpt.config or {}).get("model") or {}
    variant = ckpt.variant or model_cfg.get("variant") or "vgg"
    state = export_state(target, ckpt.model_state, variant, model_cfg.get("batch_norm", True) is not False)
    say(f"writing {SOURCES[target]}'s layout: load it with {meijieru_constructor(state)} and "
        "model.load_state_dict(torch.load(OUT))")
    if ckpt.charset:
        say(f"alphabet (class 1 on, blank 0): {ckpt.charset.get('chars', '')!r}")
    return state


def export_easyocr(ckpt: Checkpoint, dst: Path, opts: ConvertOptions, say: Say = print) -> None:
    """Write NAME.pth, NAME.yaml and NAME.py: a ``vgg_easyocr`` checkpoint as an EasyOCR custom recogniser."""
    check_not_foreign(ckpt)
    if dst.suffix != ".pth":
        raise ConvertUsageError(f"OUT {dst} must be NAME.pth: EasyOCR looks for NAME.pth, NAME.yaml and NAME.py")
    yaml_path, py_path = dst.with_suffix(".yaml"), dst.with_suffix(".py")
    for side in (yaml_path, py_path):
        check_output(Path(opts.input), side, opts.force)
    if not ckpt.charset or not ckpt.config:
        raise CheckpointError(f"{ckpt.path} stores no charset and config (a bare state dict): convert a checkpoint "
                              "written by crnn-train or crnn-convert-ckpt --from easyocr")
    model_cfg, data_cfg = ckpt.config.get("model") or {}, ckpt.config.get("data") or {}
    origin = ckpt.raw.get("converted_from") if isinstance(ckpt.raw.get("converted_from"), dict) else {}
    langs = [x.strip() for x in opts.lang.split(",") if x.strip()] if opts.lang else origin.get("lang_list") or ["en"]
    height = int(data_cfg.get("height", 32))
    state, yaml_text, py_text = easyocr.custom_model_files(
        ckpt.model_state, ckpt.variant or model_cfg.get("variant", ""), model_cfg.get("batch_norm", True) is not False,
        Charset.from_dict(ckpt.charset), height, langs, dst.stem)
    if data_cfg.get("pad") != "easyocr" or (data_cfg.get("mean"), data_cfg.get("std")) != (0.5, 0.5):
        say(f"note: this model was trained with data.pad={data_cfg.get('pad')}, mean/std {data_cfg.get('mean')}/"
            f"{data_cfg.get('std')}; EasyOCR feeds it its own input (data.pad=easyocr, [-1, 1]): it may read worse")
    save_checkpoint(weights_only_checkpoint(state, half=True) if opts.half else state, dst)
    for path, text in ((yaml_path, yaml_text), (py_path, py_text)):
        _write_text(path, text)
    say(f"wrote {dst} ({file_size(dst)}), {yaml_path.name} (imgH {height}, lang_list {langs}, "
        f"{len(ckpt.charset.get('chars', ''))} characters) and {py_path.name} (EasyOCR's own generation-2 Model)")
    folder = str(dst.parent) or "."
    say(f"read with: easyocr.Reader({langs}, recog_network={dst.stem!r}, model_storage_directory={folder!r}, "
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


def soup(first: Checkpoint, others: list[str]) -> Checkpoint:
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


def validate_options(opts: ConvertOptions) -> None:
    """Refuse option combinations that do not mean anything."""
    if opts.source and opts.to != "plain":
        raise ConvertUsageError("--from writes a crnn checkpoint; drop --to")
    if not opts.source and (opts.charset or opts.width or opts.pad):
        raise ConvertUsageError("--charset, --width and --pad describe a foreign file: use them with --from")
    if opts.width is not None and opts.width < 8:
        raise ConvertUsageError(f"--width must be at least 8 pixels, got {opts.width}")
    if opts.lang and opts.to != "easyocr":
        raise ConvertUsageError("--lang is the lang_list of an EasyOCR custom model: use it with --to easyocr")
    if (opts.interpolate is None) != (opts.alpha is None):
        raise ConvertUsageError("--interpolate START and --alpha A go together")
    if opts.interpolate and (opts.source or opts.to != "plain" or opts.pack):
        raise ConvertUsageError("--interpolate writes a crnn checkpoint of IN's kind: drop --from, --to and --pack")
    if opts.cnn_alpha is not None and not opts.interpolate:
        raise ConvertUsageError("--cnn-alpha is a share of --interpolate: give --interpolate START --alpha A too")
    if opts.soup and (opts.source or opts.to != "plain" or opts.pack):
        raise ConvertUsageError("--soup writes a crnn checkpoint of IN's kind: drop --from, --to and --pack")
    if opts.read_width_scale is not None:
        if opts.source or opts.to != "plain" or opts.soup or opts.interpolate:
            raise ConvertUsageError("--read-width-scale sets a reading setting of a crnn checkpoint: use it with a "
                                    "plain conversion or --pack (not --from, --to, --soup, --interpolate)")
        lo, hi = READ_WIDTH_SCALE_RANGE
        if not lo <= opts.read_width_scale <= hi:
            raise ConvertUsageError(f"--read-width-scale must be within {lo:g}..{hi:g} (1 = as trained), got "
                                    f"{opts.read_width_scale}")


def _set_read_width_scale(obj: dict, ckpt: Checkpoint, scale: float | None) -> dict:
    """``obj`` with data.read_width_scale = ``scale`` in its config (unchanged when ``scale`` is None)."""
    if scale is None:
        return obj
    data = ((obj.get("config") or {}).get("data") if isinstance(obj, dict) else None)
    if ckpt.container != "crnn" or not isinstance(data, dict):
        raise ConvertUsageError(f"{ckpt.path} stores no config (a bare state dict): --read-width-scale needs a crnn "
                                "checkpoint written by crnn-train or crnn-convert-ckpt")
    if read_width_scale_problem(scale, bool(data.get("keep_ratio")), data.get("pad", "batch")):
        raise ConvertUsageError(f"{ckpt.path} reads fixed-width or edge-padded crops (data.keep_ratio "
                                f"{data.get('keep_ratio')}, data.pad {data.get('pad')}): --read-width-scale scales "
                                "keep-ratio widths only")
    obj = dict(obj)
    obj["config"] = {**obj["config"], "data": {**data, "read_width_scale": scale}}
    return obj


def convert_file(opts: ConvertOptions, say: Say = print) -> None:
    """Do what one crnn-convert-ckpt command does: describe IN (``info``), or convert it and write OUT atomically."""
    if opts.info:
        if opts.output:
            raise ConvertUsageError("--info takes only IN (drop OUT)")
        say("\n".join(info_lines(load_checkpoint(opts.input))))
        return
    if not opts.output:
        raise ConvertUsageError("give OUT (or use --info IN to describe the file)")
    validate_options(opts)
    src, dst = Path(opts.input), Path(opts.output)
    check_output(src, dst, opts.force)
    ckpt = load_checkpoint(src)
    if opts.to == "easyocr":
        export_easyocr(ckpt, dst, opts, say)
    elif opts.soup or opts.interpolate:
        _write_soup_or_interpolation(ckpt, src, dst, opts, say)
    elif opts.pack:
        _write_pack(ckpt, src, dst, opts, say)
    elif opts.source or opts.to in TARGETS:
        obj = import_foreign(ckpt, opts, say) if opts.source else export_foreign(ckpt, opts.to, say)
        save_checkpoint(weights_only_checkpoint(obj, half=opts.half) if opts.half else obj, dst)
        say(f"wrote {dst} ({file_size(dst)})")
    else:
        _write_rekeyed(ckpt, src, dst, opts, say)


def _write_soup_or_interpolation(ckpt: Checkpoint, src: Path, dst: Path, opts: ConvertOptions, say: Say) -> None:
    """--soup (the average of IN and OTHER...) and/or --interpolate (WiSE-FT of IN, or of the average, to START)."""
    tuned = str(src)
    if opts.soup:
        ckpt = soup(ckpt, opts.soup)
        tuned = f"the average of {', '.join([str(src), *opts.soup])}"
    if not opts.interpolate:
        save_checkpoint(weights_only_checkpoint(ckpt.raw, half=opts.half), dst)
        say(f"wrote {dst} ({file_size(dst)}): {tuned}")
        return
    save_checkpoint(interpolated(ckpt, load_checkpoint(opts.interpolate), opts.alpha, opts.half, opts.cnn_alpha), dst)
    cnn = ("" if opts.cnn_alpha is None else
           f" (cnn.*: {1 - opts.cnn_alpha:g} x the start + {opts.cnn_alpha:g} x the fine-tuned)")
    say(f"wrote {dst} ({file_size(dst)}): {1 - opts.alpha:g} x {opts.interpolate} + {opts.alpha:g} x {tuned}{cnn}")


def _write_pack(ckpt: Checkpoint, src: Path, dst: Path, opts: ConvertOptions, say: Say) -> None:
    """--pack: fp16 weights and the run's counters of a training checkpoint."""
    if ckpt.kind != "training" or not isinstance(ckpt.raw.get("state"), dict):
        raise ConvertUsageError(f"--pack needs a training checkpoint (a run's last.pt); {src} holds weights only")
    save_checkpoint(_set_read_width_scale(sitting_pack(ckpt.raw), ckpt, opts.read_width_scale), dst)
    state = ckpt.raw["state"]
    say(f"wrote {dst} ({file_size(dst)}): a sitting pack at step {state.get('step')} "
        f"({state.get('images_seen', 0):,} lines seen, {state.get('cpu_seconds', 0) / 3600:.2f} CPU-hours); "
        f"continue with train.resume={dst}")


def _write_rekeyed(ckpt: Checkpoint, src: Path, dst: Path, opts: ConvertOptions, say: Say) -> None:
    """--to plain|module: the same container re-keyed, optionally without training state, halved or re-read wider."""
    det = detect(ckpt.model_state, ckpt.container) if ckpt.container != "crnn" else None
    if det is not None and det.problem:  # e.g. EasyOCR's detector: no key layout of it is of use to crnn
        raise ForeignFormatError(foreign_hint(ckpt.model_state, ckpt.container, str(src)))
    say(f"{src} has {describe_prefix(ckpt.source_prefix)}, writing {describe_prefix(TARGET_PREFIX[opts.to])}")
    if det is not None:
        say(f"note: {foreign_hint(ckpt.model_state, ckpt.container, str(src))} (this run only rewrites the keys)")
    if opts.half and not opts.weights_only:
        say("--half implies --weights-only: dropping the training state")
    dropped = [k for k in TRAINING_STATE_KEYS if k in ckpt.raw] if (opts.weights_only or opts.half) else []
    if dropped:
        say(f"dropping {', '.join(dropped)}")
    save_checkpoint(_set_read_width_scale(convert(ckpt, opts.to, opts.weights_only, opts.half), ckpt,
                                          opts.read_width_scale), dst)
    say(f"wrote {dst} ({file_size(dst)})" + ("" if opts.read_width_scale is None else
                                           f", read with data.read_width_scale {opts.read_width_scale:g}"))
