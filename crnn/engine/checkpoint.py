"""Checkpoints: one unwrap, one key cleaner, atomic plain-data saves, weights_only loads, strict checked loading.

Training checkpoint (``last.pt``/``best.pt``), all plain data so ``torch.load(weights_only=True)`` reads it::

    {"format": "crnn", "version": 1, "kind": "training", "model": <state dict, plain keys>,
     "config": <nested dict>, "charset": <Charset.to_dict()>, "variant": str, "num_classes": int,
     "step": int, "epoch": int, "best_metric": float, "optimizer": ..., "scheduler": ..., "scaler": ...,
     "rng": ..., "metrics": dict}

A weights file has ``kind == "weights"`` and no optimizer/scheduler/scaler/rng. Files from other projects (a bare
state dict, plain or ``module.``-prefixed, or ``{"state_dict": ...}`` / ``{"model": ...}``) load as ``kind ==
"state_dict"`` without config or charset; one with another CRNN repository's key names is refused by
``check_not_foreign`` with the ``crnn-convert-ckpt --from`` command that converts it (see ``crnn.foreign``).
"""
from __future__ import annotations

import collections
import os
import pickle
import pickletools
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

from crnn.charset import Charset
from crnn.config import Config, ConfigError, config_from_dict, config_to_dict
from crnn.foreign.detect import foreign_hint
from crnn.model import CRNN, build_model_from

__all__ = [
    "CheckpointError", "Checkpoint", "unwrap_model", "clean_state_dict", "add_prefix", "detect_prefix",
    "save_checkpoint", "load_checkpoint", "load_model_weights", "build_from_checkpoint", "weights_only_checkpoint",
    "model_checkpoint", "describe_prefix", "TRAINING_STATE_KEYS", "check_not_foreign", "sitting_pack",
]

FORMAT = "crnn"
VERSION = 1
WRAPPER_PREFIXES = ("module.", "_orig_mod.")  # DataParallel/DDP, torch.compile
TRAINING_STATE_KEYS = ("optimizer", "scheduler", "scaler", "rng", "train_model")  # train_model: raw weights (EMA)
STATE_KEYS = ("state_dict", "model", "model_state_dict", "net")  # where other projects keep the weights
_PREFIX_NAMES = {
    "": "plain keys",
    "module.": "DataParallel/DDP keys (module.)",
    "_orig_mod.": "torch.compile keys (_orig_mod.)",
    "module._orig_mod.": "DDP + torch.compile keys (module._orig_mod.)",
    "_orig_mod.module.": "torch.compile + DDP keys (_orig_mod.module.)",
}


class CheckpointError(ValueError):
    """A checkpoint that cannot be read, written or loaded into a model (one-line message naming the file/keys)."""


@dataclass
class Checkpoint:
    """A loaded checkpoint: the model state with plain keys plus whatever metadata the file carried."""

    path: str
    model_state: dict[str, torch.Tensor]
    config: dict | None = None
    charset: dict | None = None
    variant: str | None = None
    num_classes: int | None = None
    kind: str = "state_dict"  # training | weights | state_dict
    source_prefix: str = ""  # the key prefix the file had ("" / "module." / "_orig_mod." / "module._orig_mod.")
    container: str = "bare"  # where the state was found: crnn | state_dict | model | bare
    step: int | None = None
    raw: dict = field(default_factory=dict)  # the whole loaded object (optimizer state etc. for resuming)


# ---------------------------------------------------------------------------------------------- keys and wrappers
def unwrap_model(model: nn.Module) -> nn.Module:
    """The bare model inside nn.DataParallel / DistributedDataParallel / torch.compile wrappers (any nesting)."""
    while True:
        if isinstance(model, (nn.DataParallel, DistributedDataParallel)):
            model = model.module
        elif isinstance(getattr(model, "_orig_mod", None), nn.Module):  # torch._dynamo OptimizedModule
            model = model._orig_mod
        else:
            return model


def _strip_key(key: str) -> str:
    """Remove leading wrapper prefixes, repeatedly; never touches a prefix-like substring further in."""
    stripped = True
    while stripped:
        stripped = False
        for prefix in WRAPPER_PREFIXES:
            if key.startswith(prefix):
                key = key[len(prefix):]
                stripped = True
    return key


def clean_state_dict(sd: dict[str, Any]) -> dict[str, Any]:
    """Plain keys: strip leading ``module.`` / ``_orig_mod.`` (repeated); values are kept as the same objects."""
    out: dict[str, Any] = {}
    for key, value in sd.items():
        new = _strip_key(key)
        if new in out:
            raise CheckpointError(f"state dict has both {key!r} and another key that cleans to {new!r}")
        out[new] = value
    return out


def add_prefix(sd: dict[str, Any], prefix: str) -> dict[str, Any]:
    """Prepend ``prefix`` (e.g. ``"module."``) to every key; values are kept as the same objects."""
    return {prefix + key: value for key, value in sd.items()}


def detect_prefix(sd: dict[str, Any]) -> str:
    """The wrapper prefix shared by all keys: "" / "module." / "_orig_mod." / "module._orig_mod." (and so on)."""
    prefixes = {key[: len(key) - len(_strip_key(key))] for key in sd}
    return prefixes.pop() if len(prefixes) == 1 else ""


def describe_prefix(prefix: str) -> str:
    """Human words for a key prefix, e.g. "DataParallel/DDP keys (module.)"."""
    return _PREFIX_NAMES.get(prefix, f"keys prefixed {prefix!r}")


# ---------------------------------------------------------------------------------------------- saving
_PLAIN_SCALARS = (str, int, float, bool, type(None))


def _check_plain(obj: Any, where: str) -> None:
    """Raise CheckpointError naming the key path of anything that is not plain data (no pickled objects)."""
    if isinstance(obj, torch.Tensor):
        if type(obj) not in (torch.Tensor, nn.Parameter):
            raise CheckpointError(f"checkpoint entry {where} is a {type(obj).__name__} tensor; save a plain tensor")
        return
    if type(obj) in _PLAIN_SCALARS:
        return
    if type(obj) in (dict, collections.OrderedDict):
        for key, value in obj.items():
            if type(key) not in (str, int):
                raise CheckpointError(f"checkpoint entry {where} has a key {key!r} of type {type(key).__name__}")
            _check_plain(value, f"{where}.{key}" if where else str(key))
        return
    if type(obj) in (list, tuple, torch.Size):
        for i, value in enumerate(obj):
            _check_plain(value, f"{where}[{i}]")
        return
    raise CheckpointError(
        f"checkpoint entry {where or '<root>'} is a {type(obj).__module__}.{type(obj).__name__}; only tensors, "
        "numbers, strings, bools, None, lists, tuples and dicts may be saved (convert it to plain data)"
    )


def save_checkpoint(obj: dict, path: str | os.PathLike) -> None:
    """Validate ``obj`` is plain data, then write it atomically (temp file in the same folder, fsync, os.replace)."""
    _check_plain(obj, "")
    path = Path(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        if tmp.parent.is_dir():
            tmp.unlink(missing_ok=True)
        reason = "the folder is not writable" if isinstance(e, PermissionError) else e.strerror or str(e)
        raise CheckpointError(f"cannot write checkpoint {path}: {reason} ({path.parent})") from None
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    """Best effort: make the rename durable (not supported on every OS/filesystem)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------- loading
def _torch_load(path: Path) -> Any:
    """torch.load with weights_only=True, turning every failure into a one-line CheckpointError."""
    if not path.exists():
        raise CheckpointError(f"weights file {path} not found")
    if path.is_dir():
        raise CheckpointError(f"weights file {path} is a directory; give the .pt file inside it")
    if _is_torchscript(path):  # torch.load would hand it to torch.jit.load with a warning, then fail
        raise _unreadable(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        if "weights only load failed" in str(e).lower() and _parses_as_pickle(path):
            raise CheckpointError(
                f"{path} contains pickled Python objects; refusing to load it with weights_only=True (it could run "
                "arbitrary code) — if you trust it, re-save it as a plain state dict: "
                "torch.save(model.state_dict(), 'plain.pt')"
            ) from None
        raise _unreadable(path) from None
    except PermissionError:
        raise CheckpointError(f"weights file {path} is not readable (permission denied)") from None
    except Exception:  # zip/EOF/Key/Runtime errors from a damaged file
        raise _unreadable(path) from None


def _unreadable(path: Path) -> CheckpointError:
    """The error for a file torch.load cannot read: an export of crnn-export (ONNX, TorchScript) said as such."""
    kind = _export_kind(path)
    if not kind:
        return CheckpointError(f"{path} is not a readable checkpoint (truncated or corrupt?)")
    runtime = "onnxruntime" if "ONNX" in kind else "torch.jit.load"
    return CheckpointError(f"{path} is {kind}, not a checkpoint: pass the .pt file it was exported from (or a "
                           f"shipped model's name, e.g. en), or run the export without crnn, with {runtime} "
                           "(docs/export.md)")


def _export_kind(path: Path) -> str:
    """"an ONNX model exported by crnn-export (vgg_small)", "a TorchScript model", ... or "" for anything else."""
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    ours = b'"format": "crnn-export"' in data
    variant = re.search(rb'"variant": "([\w-]+)"', data) if ours else None
    by = f" exported by crnn-export ({variant[1].decode()})" if variant else (" exported by crnn-export" if ours else "")
    if zipfile.is_zipfile(path):
        return f"a TorchScript model{by}" if _is_torchscript(path) else ""
    if ours or path.suffix.lower() == ".onnx":
        return f"an ONNX model{by}"
    return ""


def _is_torchscript(path: Path) -> bool:
    """A torch.jit.save archive (its code/ folder and constants.pkl), read from the zip's directory only."""
    try:
        with zipfile.ZipFile(path) as zf:
            return any(n.endswith("/constants.pkl") or "/code/" in n for n in zf.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def _parses_as_pickle(path: Path) -> bool:
    """Whether the file's pickle stream is well formed: scanned with pickletools, nothing is executed."""
    try:
        if zipfile.is_zipfile(path):  # torch.save's format: the pickle is the archive's data.pkl
            with zipfile.ZipFile(path) as zf:
                data = zf.read(next(n for n in zf.namelist() if n.endswith("data.pkl")))
        else:
            data = path.read_bytes()
        for _ in pickletools.genops(data):
            pass
        return True
    except Exception:  # any parse failure means damaged bytes, not a foreign object
        return False


def _is_state_dict(obj: Any) -> bool:
    return isinstance(obj, dict) and bool(obj) and all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()
    )


def _find_state(obj: Any, path: Path) -> tuple[dict, str]:
    """Locate the model state inside a loaded object: (state, container name)."""
    if isinstance(obj, dict) and obj.get("format") == FORMAT:
        if not _is_state_dict(obj.get("model")):
            raise CheckpointError(f"{path} is a crnn checkpoint without model weights (no 'model' state dict)")
        return obj["model"], "crnn"
    if _is_state_dict(obj):
        return obj, "bare"
    key = _state_key(obj) if isinstance(obj, dict) else None
    if key is not None:
        return obj[key], key
    keys = ", ".join(map(str, list(obj)[:8])) if isinstance(obj, dict) else type(obj).__name__
    raise CheckpointError(f"{path} does not contain a model state dict (found: {keys})")


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Read any supported checkpoint layout safely (CPU, weights_only) and return plain-keyed model weights."""
    path = Path(path)
    obj = _torch_load(path)
    state, container = _find_state(obj, path)
    raw = obj if isinstance(obj, dict) else {}
    meta = raw if container == "crnn" else {}
    return Checkpoint(
        path=str(path),
        model_state=clean_state_dict(state),
        config=meta.get("config"),
        charset=meta.get("charset"),
        variant=meta.get("variant"),
        num_classes=meta.get("num_classes"),
        kind=meta.get("kind", "state_dict"),
        source_prefix=detect_prefix(state),
        container=container,
        step=raw.get("step") if isinstance(raw.get("step"), int) else None,
        raw=raw,
    )


# ---------------------------------------------------------------------------------------------- into a model
def _shape(t: torch.Tensor) -> str:
    return "[" + ", ".join(map(str, t.shape)) + "]"


def _listing(label: str, names: list[str], limit: int = 6) -> str:
    more = f" (+{len(names) - limit} more)" if len(names) > limit else ""
    return f"{label} ({len(names)}): {'; '.join(names[:limit])}{more}"


def _shape_mismatches(state: dict, expected: dict) -> list[str]:
    """'key: checkpoint [a, b] vs model [c, d]' for each common key whose shape differs (charset noted on head)."""
    out = []
    for key in expected:
        if key in state and state[key].shape != expected[key].shape:
            msg = f"{key}: checkpoint {_shape(state[key])} vs model {_shape(expected[key])}"
            if key.startswith("head.") and state[key].dim() >= 1 and state[key].shape[0] != expected[key].shape[0]:
                msg += f" — charset differs: {state[key].shape[0] - 1} vs {expected[key].shape[0] - 1} chars"
            out.append(msg)
    return out


def _mismatch_report(state: dict, expected: dict, strict: bool, variant: str | None = None) -> str:
    """One line describing key and shape mismatches, or "" when the state fits the model."""
    parts = []
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    if strict and missing:
        parts.append(_listing("missing keys", missing))
    if strict and unexpected:
        parts.append(_listing("unexpected keys", unexpected))
    shapes = _shape_mismatches(state, expected)
    if shapes:
        parts.append(_listing("shape mismatches", shapes, limit=4))
    if not parts:
        return ""
    if unexpected and all(_is_bias_before_bn(k, expected) for k in unexpected):
        parts.append("these are conv biases before BatchNorm, as meijieru/crnn.pytorch saves them: convert the "
                     "original file with crnn-convert-ckpt IN OUT --from meijieru (it folds them into the BN means)")
    elif missing or unexpected or any(not s.startswith("head.") for s in shapes):
        model = f"this {variant} model" if variant else "this model"
        parts.append(f"the checkpoint is from a different variant, hidden size, in_channels or batch_norm than {model}")
    return ". ".join(parts)


def _is_bias_before_bn(key: str, expected: dict) -> bool:
    """``cnn.N.bias`` where the model has no such bias and layer N + 1 is a BatchNorm (renamed meijieru weights)."""
    parts = key.split(".")
    if len(parts) != 3 or parts[0] != "cnn" or parts[2] != "bias" or not parts[1].isdigit():
        return False
    return f"cnn.{int(parts[1]) + 1}.running_mean" in expected


def load_model_weights(
    model: nn.Module, state: dict[str, torch.Tensor], strict: bool = True, charset_size: int | None = None
) -> None:
    """Check keys and shapes against ``unwrap_model(model)``, then copy ``state`` in (cast to the model's dtypes).

    ``charset_size``: the number of characters of the alphabet the caller will decode with; when given, the
    checkpoint's head must have ``charset_size + 1`` classes.
    """
    target = unwrap_model(model)
    state = clean_state_dict(state)
    expected = target.state_dict()
    report = _mismatch_report(state, expected, strict, getattr(target, "variant", None))
    if report:
        raise CheckpointError(f"checkpoint does not fit the model: {report}")
    head = state.get("head.weight")
    if charset_size is not None and head is not None and head.shape[0] != charset_size + 1:
        raise CheckpointError(
            f"head.weight: checkpoint has {head.shape[0]} classes ({head.shape[0] - 1} chars) but the charset has "
            f"{charset_size} chars; use the charset the model was trained with"
        )
    cast = {k: v.to(expected[k].dtype) if k in expected and v.is_floating_point() else v for k, v in state.items()}
    target.load_state_dict(cast, strict=strict)


def stored_config(ckpt: Checkpoint) -> Config | None:
    """The config a checkpoint was trained with (None for a bare state dict); an invalid one is a CheckpointError."""
    return None if ckpt.config is None else _config_of(ckpt, None)


def _config_of(ckpt: Checkpoint, config: Config | None) -> Config:
    if ckpt.config is None:
        if config is None:
            raise CheckpointError(f"{ckpt.path} is a bare state dict (no stored config); pass --config/--charset")
        return config
    try:
        return config_from_dict(_known_config_keys(ckpt.config))
    except ConfigError as e:
        raise CheckpointError(f"{ckpt.path}: stored config is invalid: {e}") from None


def _known_config_keys(data: dict) -> dict:
    """The stored config without keys this version no longer has (older checkpoints stay loadable)."""
    if not isinstance(data, dict):
        return data  # config_from_dict reports it
    out: dict = {}
    for section, known in config_to_dict(Config()).items():
        values = data.get(section)
        out[section] = {k: v for k, v in values.items() if k in known} if isinstance(values, dict) else values
    return out


def _charset_of(ckpt: Checkpoint, charset: Charset | None) -> Charset:
    if ckpt.charset is None:
        if charset is None:
            raise CheckpointError(f"{ckpt.path} is a bare state dict (no stored charset); pass --config/--charset")
        return charset
    try:
        return Charset.from_dict(ckpt.charset)
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{ckpt.path}: stored charset is invalid: {e}") from None


def check_not_foreign(ckpt: Checkpoint) -> None:
    """Raise a CheckpointError with the convert command when the weights use another repository's key names."""
    hint = foreign_hint(ckpt.model_state, ckpt.container, ckpt.path) if ckpt.container != "crnn" else ""
    if hint:
        raise CheckpointError(hint)


def build_from_checkpoint(
    ckpt: Checkpoint, device: str | torch.device = "cpu", config: Config | None = None, charset: Charset | None = None
) -> tuple[CRNN, Charset, Config]:
    """Rebuild the model from the checkpoint's own config + charset (fallbacks for bare state dicts), eval mode."""
    check_not_foreign(ckpt)
    cfg = _config_of(ckpt, config)
    cs = _charset_of(ckpt, charset)
    if ckpt.num_classes is not None and ckpt.num_classes != cs.num_classes:
        raise CheckpointError(
            f"{ckpt.path}: stored num_classes {ckpt.num_classes} does not match its charset ({len(cs)} chars + blank)"
        )
    m = cfg.model
    model = build_model_from(m, cs.num_classes)
    try:
        load_model_weights(model, ckpt.model_state, strict=True, charset_size=len(cs))
    except CheckpointError as e:
        raise CheckpointError(f"{ckpt.path}: {e}") from None
    return model.to(device).eval(), cs, cfg


# ---------------------------------------------------------------------------------------------- building dicts
def weights_only_checkpoint(ckpt_raw: dict, half: bool = False) -> dict:
    """A shippable copy: no optimizer/scheduler/scaler/rng, kind "weights", optionally fp16 floating tensors."""
    if _is_state_dict(ckpt_raw):  # a bare state dict has nothing to drop
        return _half_state(ckpt_raw) if half else dict(ckpt_raw)
    out = {k: v for k, v in ckpt_raw.items() if k not in TRAINING_STATE_KEYS}
    if out.get("format") == FORMAT:
        out["kind"] = "weights"
    key = _state_key(out)
    if half and key is not None:
        out[key] = _half_state(out[key])
        out["dtype"] = "float16"
    return out


def sitting_pack(ckpt_raw: dict) -> dict:
    """A training checkpoint as a sitting pack: fp16 weights and the run's counters, no optimizer state (a few MB,
    worth committing at the end of each sitting of a run that spans many; ``train.resume`` continues from it)."""
    out = weights_only_checkpoint(ckpt_raw, half=True)
    out["resumable"] = True
    return out


def _state_key(obj: dict) -> str | None:
    """The key holding the model state in a checkpoint dict (None when there is none)."""
    names = ("model",) if obj.get("format") == FORMAT else STATE_KEYS
    return next((name for name in names if _is_state_dict(obj.get(name))), None)


def _half_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.half() if v.is_floating_point() else v for k, v in state.items()}


def model_checkpoint(model: nn.Module, cfg: Config, charset: Charset, **extra: Any) -> dict:
    """The checkpoint dict for a (possibly wrapped) model: plain keys, config, charset, plus ``extra`` entries.

    ``kind`` defaults to "training" when ``extra`` carries optimizer/scheduler/scaler/rng, else "weights".
    """
    bare = unwrap_model(model)
    kind = "training" if any(k in extra for k in TRAINING_STATE_KEYS) else "weights"
    ckpt = {
        "format": FORMAT,
        "version": VERSION,
        "kind": kind,
        "model": clean_state_dict(bare.state_dict()),
        "config": config_to_dict(cfg),
        "charset": charset.to_dict(),
        "variant": getattr(bare, "variant", cfg.model.variant),
        "num_classes": getattr(bare, "num_classes", charset.num_classes),
    }
    ckpt.update(extra)
    return ckpt
