"""Typed configuration: dataclasses loaded from YAML and overridden by ``section.key=value`` arguments."""
from __future__ import annotations

import codecs
import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """An invalid configuration: unknown key, wrong type or bad value (the message names the key)."""


@dataclass
class ModelConfig:
    """Network shape and alphabet."""

    # vgg | vgg_small | resnet18 | vgg_clova (clovaai's VGG, T = W/4 - 1) | vgg_easyocr
    # | vgg_w8 / vgg_small_w8 (T = W/8: ~4 steps per square character, for Chinese lines)
    variant: str = "vgg_small"
    in_channels: int = 1  # 1 = grayscale, 3 = RGB
    hidden: int = 0  # LSTM hidden size; 0 = the variant's default
    batch_norm: bool = True  # false: a BN-free network (batch-size independent; used by equivalence tests)
    # VGG variants: convolution widths times this (multiples of 8; vgg_small_w8 at 2.0 has vgg_w8's convolutions);
    # tools/grow_cnn.py grows a trained file to it without changing what it reads
    cnn_width: float = 1.0
    res_blocks: int = 0  # VGG variants: residual blocks after each of the 2nd, 3rd and 4th pools (identity at start)
    # digits | alnum36 | printable94 | printable95 (with space) | zh_gb2312 | an alphabet file | the characters themselves
    charset: str = "alnum36"
    charset_encoding: str = "auto"  # alphabet file encoding: auto (BOM, UTF-8, then GB18030) | utf-8 | gbk | utf-16 | ...
    lowercase: bool | None = None  # fold labels to lower case; None = when the charset has no upper case
    unknown: str = "reject"  # characters outside the charset: reject the sample | drop the character


@dataclass
class DataConfig:
    """Datasets, image geometry and loading."""

    # [{path, ratio?, synth_seed?, synth_style?}]: per-source overrides of the synth_* keys below
    train: list[dict] = field(default_factory=lambda: [{"path": "data/synth_train.lmdb"}])
    val: list[str] = field(default_factory=list)  # LMDBs or folders with gt.txt
    height: int = 32
    width: int = 100  # fixed width, or the cap with keep_ratio
    keep_ratio: bool = False
    max_width: int = 400
    # keep_ratio (pad=batch): narrower crops are stretched to this width; 100 = words as a 32x100 model reads them
    min_width: int = 8
    # keep_ratio (pad=batch): the resized width is rounded to a multiple of this (1 = off). The model's horizontal
    # stride (8 for the *_w8 variants, 4 for the others) gives every line whole time steps and lets lines of nearly
    # equal width share a batch at inference (the Chinese line model: same or lower CER, ~1.5x the lines/s)
    width_step: int = 1
    # keep_ratio (pad=batch), reading only (validation, crnn-eval, crnn-predict, Recognizer, export metadata): resized
    # widths are multiplied by this - more time steps per character than in training (1 = as trained). The Chinese
    # line model reads at 1.15 (docs/chinese.md); training lines keep their own widths
    read_width_scale: float = 1.0
    interpolation: str = "bilinear"  # resize filter: bilinear | bicubic
    mean: float = 0.5  # pixels are normalised as (pixel / 255 - mean) / std; 0.5 / 0.5 = [-1, 1]
    std: float = 0.5
    pad: str = "batch"  # keep_ratio: batch (zero-pad to the batch's widest) | edge (to width, last column repeated)
    # | easyocr (EasyOCR's recogniser input: OpenCV-style bilinear to the height, last column repeated to
    #   ceil(w/h) * height, batches padded the same way; max_width caps it)
    batch_size: int = 64  # per process
    num_workers: int = 2
    max_label_length: int = 25
    augment: bool = False
    synth_num: int = 0  # >0: generate a synthetic LMDB of this size where a train path is missing
    synth_val_num: int = 0  # >0: generate a synthetic validation LMDB next to it and validate on it
    synth_seed: int = 0
    synth_style: str = "default"  # default | street (crnn-synth --style: street-view geometry, photo backgrounds)
    synth_workers: int = 0  # 0 = all cores
    # rehearsal against forgetting when fine-tuning: mix what the base model already knew into every batch
    rehearsal: str = ""  # "" = none | an LMDB / folder with gt.txt | a synthetic LMDB to generate (rehearsal_num)
    rehearsal_ratio: float = 0.5  # share of each training batch drawn from data.rehearsal
    rehearsal_num: int = 0  # >0: generate this many synthetic base-style words at data.rehearsal when missing
    rehearsal_seed: int = 7  # its seed (the base-style held-out set train.base_val_num uses another)
    # the generated rehearsal words: default | street (crnn-synth --style street) | base: as train.init_weights was
    # trained, from the data.synth_* keys stored in it (a start trained on rendered data: synth_online or synth_num);
    # train.base_val_num's held-out words then follow that style too
    rehearsal_style: str = "default"
    synth_line_len: int = 0  # text lines: every generated line has this many characters (crnn-synth --line-len); 0 = 1..max_label_length
    synth_uniform_share: float = 0.10  # text lines: share of line pieces drawn uniformly from the alphabet (rare chars)
    # text lines: share of lines in a CJK face whose ASCII runs (numbers, Latin words) are set in a Western face, as
    # documents set them (crnn-synth --mixed-fonts); 0 = every line in one face
    synth_mixed_fonts: float = 0.0
    # text lines and words: shares of samples squeezed or stretched 0.5x-1.5x, drawn bolder or thinner, with glyphs
    # jittered in size and baseline (crnn-synth --squeeze / --weight / --jitter); 0 = off
    synth_squeeze: float = 0.0
    synth_weight: float = 0.0
    synth_jitter: float = 0.0
    synth_photos: float = 0.0  # share of samples set on a crop of a photograph (Debian's wallpapers)
    # share of samples whose strokes are bent by a smooth random displacement field, as brushes and hands draw them
    # (crnn-synth --elastic); 0 = off
    synth_elastic: float = 0.0
    # words: share of texts as signs, labels and codes write them - phrases with spaces (OPEN 24 HOURS), camel case
    # (iPhone, eBay), product codes (SKU-4471b), letter-spaced words (K N I G H T) (crnn-synth --signs); 0 = off
    synth_signs: float = 0.0
    # words, synth_style default: share of samples in the street style (perspective, arcs, harsh camera, photographs)
    # (crnn-synth --street); 0 = off
    synth_street: float = 0.0
    # text lines: share of lines whose corpus words are written in traditional forms (发展 -> 發展, 头发 -> 頭髮;
    # each line in OpenCC's, Taiwan's or Hong Kong's forms: 爲 / 為; crnn-synth --traditional); needs an alphabet with
    # them (model.charset=zh_gb2312_trad); 0 = off
    synth_traditional: float = 0.0
    # true: the loader's workers render every training batch on the fly (data.synth_* settings, train.seed; lines of
    # one batch share their length); data.train is not read, nothing is stored, no line repeats;
    # data.synth_num = lines per (virtual) epoch
    synth_online: bool = False
    synth_pool: int = 1  # synth_online: render this many batches at a time and regroup their lines by width (less padding)
    # synth_online: real crops mixed into the rendered batches - an LMDB or a folder with gt.txt, and the share of
    # samples taken from it (lightly augmented; which crop goes where follows the seed, so resumes repeat it); several
    # sources: a list of paths and a list of shares, one per path, adding up to less than 1 ([a, b] and [0.05, 0.1])
    synth_real: str | list[str] = ""
    synth_real_share: float | list[float] = 0.0
    # synth_online, the real crops only (rendered words have the synth_* effects): the probability of each effect,
    # applied before the crop is resized (crnn/data/real_augment.py); 0 = off
    real_tighten: float = 0.0  # cut off: up to 6 % of the height at top and bottom, 15 % of a character's width
    #                            at each end (the crop's width over the label's length)
    real_loosen: float = 0.0  # a margin of its own border (colour and noise): up to 25 % of the height above and
    #                           below, 50 % of it at each end
    real_perspective: float = 0.0  # one end farther away (55-80 % as tall), rotated up to 8 degrees
    real_curve: float = 0.0  # the baseline bent onto an arc 30-60 % of the height deep
    real_elastic: float = 0.0  # bent by a smooth random field (shifts of 2-7 % of the height)
    real_blur: float = 0.0  # out of focus (sigma 0.5-1.5 px at data.height) or far away (seen 35-70 % of data.height)

    def real_sources(self) -> list[tuple[str, float]]:
        """(path, share) of each real-crop source that data.synth_real / synth_real_share mix in (share > 0)."""
        paths, shares = _real_lists(self)
        return [(p, s) for p, s in zip(paths, shares) if s > 0 and p]

    def real_unused(self) -> list[str]:
        """The data.synth_real paths given a share of 0: named in the config, mixed into no batch."""
        paths, shares = _real_lists(self)
        return [p for p, s in zip(paths, shares) if s == 0 and p]


@dataclass
class TrainConfig:
    """Optimisation, devices, parallelism, logging and checkpoints."""

    output_dir: str = "runs/default"
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    parallel: str = "auto"  # auto | none | dp   (DDP is chosen by torchrun's environment)
    device_ids: list[int] = field(default_factory=list)  # DataParallel GPUs; empty = all visible
    model_parallel: list[str] = field(default_factory=list)  # [cnn_device, sequence_device]
    backend: str = "auto"  # auto (nccl on CUDA, gloo on CPU) | nccl | gloo
    init_method: str = "env://"  # env:// | file:///path | tcp://host:port
    timeout_s: int = 1800  # process-group timeout
    sync_bn: bool = False
    ddp_comm: str = "auto"  # DDP gradient all-reduce: auto (bf16 when amp=bf16, else fp32) | fp32 | bf16 | fp16
    ddp_bucket_mb: float = 25.0  # DDP gradient bucket size (torch's bucket_cap_mb)
    amp: str = "auto"  # auto (bf16 where measured faster, see crnn/engine/autotune.py) | off | fp16 | bf16
    channels_last: bool = False
    compile: bool = False
    threads: int = 0  # torch intra-op threads per process; 0 = leave the default
    optimizer: str = "adam"  # adam | adamw | adadelta | sgd (momentum 0.9)
    lr: float = 1e-3
    weight_decay: float = 0.0
    schedule: str = "cosine"  # cosine | onecycle | constant
    # what the cosine decays over: steps (train.steps) | cpu_hours (the CPU-hours spent of train.cpu_hours, so arms of
    # a CPU budget that cost differently per step each end their decay with their budget; warm-up stays in steps)
    schedule_over: str = "steps"
    warmup_steps: int = 200
    min_lr_ratio: float = 0.01
    steps: int = 1000  # optimizer steps in total
    stop_after: int = 0  # >0: stop (saving last.pt) after this many steps in this invocation; resume continues
    # >0: the run ends (validating, saving last.pt) once it has spent this many CPU-hours in all (every process and
    # its loader workers, counted across sittings as the curve's cpu_seconds; train.steps still caps it): the budget
    # of a lever probe whose arms cost differently per step
    cpu_hours: float = 0.0
    val_every_cpu_hours: float = 0.0  # >0: also validate whenever the run's CPU-hours pass a multiple of this
    grad_clip: float = 5.0  # 0 = off
    accum_steps: int = 1
    seed: int = 0
    log_every: int = 50
    val_every: int = 500  # 0 = only at the end
    save_every: int = 500
    resume: str = ""  # "" = none (auto under torchrun) | auto | PATH | none
    init_weights: str = ""  # load model weights only (any checkpoint layout)
    protocol: str = "auto"  # auto (alnum-insensitive for alnum36, else exact) | exact | alnum-insensitive | unicode
    # validation also scores the same readings (no second pass) under these protocols (exact | alnum-insensitive |
    # unicode): logged, and written to curve.tsv as rows of set SET@PROTOCOL; [] = train.protocol only
    extra_protocols: list[str] = field(default_factory=list)
    decoder: str = "greedy"
    show_predictions: int = 5
    max_nonfinite: int = 20  # stop after this many non-finite losses in a row
    base_val: list[str] = field(default_factory=list)  # the base domain: scored before and after (forgetting)
    base_val_num: int = 0  # >0: generate synthetic base-style held-out words at a missing base_val path
    base_protocol: str = "auto"  # base_val protocol; auto = that of the init_weights alphabet (alnum36: insensitive)
    freeze_cnn_steps: int = 0  # fine-tuning: the CNN is not trained during the first N steps; -1 = the whole run
    ema_decay: float = 0.0  # >0 (e.g. 0.999): validate, save and ship a moving average of the weights
    freeze_bn: bool = False  # fine-tuning: BatchNorm normalises with the starting statistics all run, never updated
    base_pull: float = 0.0  # fine-tuning: L2-SP strength, loss += base_pull / 2 * ||w - w_init||^2 (0 = off)
    # fine-tuning: loss += distill_base * KL(init_weights' per-frame distribution || the trained one, upper case
    # folded onto lower case) on the samples whose labels init_weights could read (0 = off)
    distill_base: float = 0.0
    # fine-tuning: loss += distill_new * the same KL on the samples whose labels have characters init_weights never
    # read (codes with '$', '#'...), the trained distribution renormalised over the start's classes (new characters
    # neither pushed down nor counted); needs distill_base > 0 (0 = off)
    distill_new: float = 0.0
    # fine-tuning: at the end also write interpolated.pt = (1 - a) * init_weights + a * the trained weights
    # (WiSE-FT; rows of new characters: the trained ones), scored like the trained model; 1 = off
    interpolate_base: float = 1.0
    tensorboard: bool = True


@dataclass
class Config:
    """The whole run."""

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


# data.read_width_scale: the one range, and the one rule, for the config, crnn-convert-ckpt and the benchmarks
READ_WIDTH_SCALE_RANGE = (0.5, 2.0)


def read_width_scale_problem(scale: float, keep_ratio: bool, pad: str) -> str | None:
    """Why ``scale`` cannot be a model's data.read_width_scale (None: it can)."""
    lo, hi = READ_WIDTH_SCALE_RANGE
    if not lo <= scale <= hi:
        return f"must be within {lo:g}..{hi:g} (1 = read at the trained widths), got {scale}"
    if scale != 1 and not (keep_ratio and pad == "batch"):
        return "scales keep-ratio widths; it needs data.keep_ratio: true and data.pad: batch"
    return None


TRAIN_SOURCE_KEYS = {"path", "ratio", "synth_seed", "synth_style"}
REAL_EFFECTS = ("real_tighten", "real_loosen", "real_perspective", "real_curve", "real_elastic", "real_blur")
CHOICES = {
    "model.variant": ("vgg", "vgg_small", "resnet18", "vgg_clova", "vgg_easyocr", "vgg_w8", "vgg_small_w8"),
    "model.unknown": ("reject", "drop"),
    "data.interpolation": ("bilinear", "bicubic"),
    "data.pad": ("batch", "edge", "easyocr"),
    "data.synth_style": ("default", "street"),
    "data.rehearsal_style": ("default", "street", "base"),
    "train.parallel": ("auto", "none", "dp"),
    "train.backend": ("auto", "nccl", "gloo"),
    "train.amp": ("auto", "off", "fp16", "bf16"),
    "train.ddp_comm": ("auto", "fp32", "bf16", "fp16"),
    "train.optimizer": ("adam", "adamw", "adadelta", "sgd"),
    "train.schedule": ("cosine", "onecycle", "constant"),
    "train.schedule_over": ("steps", "cpu_hours"),
    "train.protocol": ("auto", "exact", "alnum-insensitive", "unicode"),
    "train.base_protocol": ("auto", "exact", "alnum-insensitive", "unicode"),
    "train.decoder": ("greedy", "beam"),
}


def _check_type(value: Any, tp: Any, key: str) -> Any:
    """Return ``value`` converted to the annotated type ``tp`` or raise ConfigError naming ``key``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _check_type(value, arg, key)
            except ConfigError:
                pass
        raise ConfigError(f"{key}: expected {tp}, got {value!r}")
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        (item_tp,) = typing.get_args(tp) or (Any,)
        return [_check_type(v, item_tp, f"{key}[{i}]") for i, v in enumerate(value)]
    if tp is Any:
        return value
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected true/false, got {value!r}")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        if value is False and "off" in CHOICES.get(key, ()):  # YAML 1.1 reads a bare `off` as false
            return "off"
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    if tp is dict:
        if isinstance(value, dict):
            return value
        raise ConfigError(f"{key}: expected a mapping, got {value!r}")
    raise ConfigError(f"{key}: unsupported type {tp}")


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _section_from_dict(cls: type, data: dict, prefix: str) -> Any:
    """Build one dataclass section, refusing unknown keys."""
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix}: expected a mapping of settings, got {data!r}")
    hints = _hints(cls)
    unknown = sorted(set(data) - set(hints))
    if unknown:
        raise ConfigError(f"unknown config key {prefix}.{unknown[0]} (valid keys in {prefix}: {', '.join(hints)})")
    kwargs = {k: _check_type(v, hints[k], f"{prefix}.{k}") for k, v in data.items()}
    return cls(**kwargs)


def config_from_dict(data: dict | None) -> Config:
    """Build a Config from nested plain data (YAML or a checkpoint), validating every key."""
    data = data or {}
    if not isinstance(data, dict):
        raise ConfigError(f"config must be a mapping with sections model/data/train, got {type(data).__name__}")
    unknown = sorted(set(data) - {"model", "data", "train"})
    if unknown:
        raise ConfigError(f"unknown config section {unknown[0]!r} (valid: model, data, train)")
    cfg = Config(
        model=_section_from_dict(ModelConfig, data.get("model") or {}, "model"),
        data=_section_from_dict(DataConfig, _plain_paths(data.get("data") or {}), "data"),
        train=_section_from_dict(TrainConfig, _plain_paths(data.get("train") or {}, "base_val"), "train"),
    )
    validate(cfg)
    return cfg


def _plain_paths(section: dict, *lists: str) -> dict:
    """One dataset given as a plain path: ``data.train=PATH`` means ``[{path: PATH}]``; ``data.val=PATH`` and
    ``train.base_val=PATH`` mean ``[PATH]``."""
    if not isinstance(section, dict):
        return section
    out = dict(section)
    if lists == () and isinstance(out.get("train"), str):
        out["train"] = [{"path": out["train"]}]
    for key in lists or ("val",):
        if isinstance(out.get(key), str):
            out[key] = [out[key]]
    return out


def config_to_dict(cfg: Config) -> dict:
    """Plain nested dict (only str/int/float/bool/None/list/dict), safe for YAML and weights_only checkpoints."""
    return dataclasses.asdict(cfg)


def _parse_override(item: str, cfg_dict: dict) -> tuple[list[str], Any]:
    if "=" not in item:
        raise ConfigError(f"override {item!r} must look like section.key=value (e.g. train.lr=3e-4)")
    key, raw = item.split("=", 1)
    parts = key.strip().split(".")
    if len(parts) != 2 or parts[0] not in cfg_dict:
        raise ConfigError(f"unknown config key {key!r} (use model.*, data.* or train.*)")
    section, name = parts
    hints = _hints(type(getattr(Config(), section)))
    if name not in hints:
        raise ConfigError(f"unknown config key {key} (valid keys in {section}: {', '.join(hints)})")
    if hints[name] is str:
        return parts, raw  # strings stay verbatim ("0123" is a charset, not a number)
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"{key}: cannot parse value {raw!r}: {e}") from None
    if str in typing.get_args(hints[name]) and not isinstance(value, list):
        return parts, raw  # a path or a list of paths: one path stays verbatim too
    return parts, value


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply ``section.key=value`` strings to nested plain data (values parsed as YAML)."""
    base = config_to_dict(Config())
    for item in overrides:
        (section, name), value = _parse_override(item, base)
        data.setdefault(section, {})
        if data[section] is None:
            data[section] = {}
        data[section][name] = value
    return data


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Load a YAML config (or the defaults) and apply overrides; errors name the file and the key."""
    data: dict = {}
    if path:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {p} not found (see configs/ for examples)")
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"{p}: invalid YAML: {e}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: expected a mapping with sections model/data/train")
    data = apply_overrides(data, overrides or [])
    try:
        return config_from_dict(data)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}" if path else str(e)) from None


def validate(cfg: Config) -> None:
    """Check value ranges and choices."""
    for key, choices in CHOICES.items():
        section, name = key.split(".")
        value = getattr(getattr(cfg, section), name)
        if value not in choices:
            raise ConfigError(f"{key}: {value!r} is not one of {', '.join(choices)}")
    for src in cfg.data.train:
        if not isinstance(src, dict) or "path" not in src or set(src) - TRAIN_SOURCE_KEYS:
            raise ConfigError(f"data.train: each entry needs 'path' (and optionally 'ratio', 'synth_seed', "
                              f"'synth_style'), got {src!r}")
        if src.get("synth_style", "default") not in CHOICES["data.synth_style"]:
            raise ConfigError(f"data.train: synth_style {src['synth_style']!r} is not one of "
                              f"{', '.join(CHOICES['data.synth_style'])}")
        if not isinstance(src.get("synth_seed", 0), int):
            raise ConfigError(f"data.train: synth_seed must be an integer, got {src['synth_seed']!r}")
    positive = {"data.height": cfg.data.height, "data.width": cfg.data.width, "data.batch_size": cfg.data.batch_size,
                "data.max_label_length": cfg.data.max_label_length, "train.steps": cfg.train.steps,
                "train.accum_steps": cfg.train.accum_steps, "train.log_every": cfg.train.log_every,
                "train.ddp_bucket_mb": cfg.train.ddp_bucket_mb, "data.std": cfg.data.std}
    for key, value in positive.items():
        if value <= 0:
            raise ConfigError(f"{key}: must be positive, got {value}")
    try:
        if cfg.model.charset_encoding != "auto":
            codecs.lookup(cfg.model.charset_encoding)
    except LookupError:
        raise ConfigError(f"model.charset_encoding: unknown encoding {cfg.model.charset_encoding!r} "
                          f"(auto, utf-8, gb18030, gbk, utf-16, ...)") from None
    if not 0 < cfg.data.rehearsal_ratio < 1:
        raise ConfigError(f"data.rehearsal_ratio: must be between 0 and 1 (the share of each batch), got "
                          f"{cfg.data.rehearsal_ratio}")
    if cfg.train.base_pull < 0:
        raise ConfigError(f"train.base_pull: must be 0 (off) or positive, got {cfg.train.base_pull}")
    if cfg.train.distill_base < 0:
        raise ConfigError(f"train.distill_base: must be 0 (off) or positive, got {cfg.train.distill_base}")
    if cfg.train.distill_new < 0:
        raise ConfigError(f"train.distill_new: must be 0 (off) or positive, got {cfg.train.distill_new}")
    if cfg.train.distill_new > 0 and cfg.train.distill_base <= 0:
        raise ConfigError(f"train.distill_new={cfg.train.distill_new} weighs the starting model's teaching on "
                          "labels with new characters: set train.distill_base > 0 too")
    if cfg.train.distill_base > 0 and not cfg.train.init_weights:
        raise ConfigError(f"train.distill_base={cfg.train.distill_base} distils the starting model: set "
                          "train.init_weights")
    if not 0 <= cfg.train.interpolate_base <= 1:
        raise ConfigError(f"train.interpolate_base: the share of the trained weights must be within 0..1 (1 = off), "
                          f"got {cfg.train.interpolate_base}")
    if cfg.train.interpolate_base < 1 and not cfg.train.init_weights:
        raise ConfigError(f"train.interpolate_base={cfg.train.interpolate_base} interpolates toward the starting "
                          "weights: set train.init_weights")
    if cfg.data.synth_pool < 1:
        raise ConfigError(f"data.synth_pool: must be at least 1, got {cfg.data.synth_pool}")
    if not 0 <= cfg.data.synth_uniform_share <= 1:
        raise ConfigError(f"data.synth_uniform_share: must be within 0..1, got {cfg.data.synth_uniform_share}")
    for name in ("synth_mixed_fonts", "synth_squeeze", "synth_weight", "synth_jitter", "synth_photos", "synth_signs",
                 "synth_street", "synth_elastic", "synth_traditional", *REAL_EFFECTS):
        if not 0 <= getattr(cfg.data, name) <= 1:
            raise ConfigError(f"data.{name}: must be within 0..1, got {getattr(cfg.data, name)}")
    _check_real(cfg.data)
    if cfg.data.synth_online and cfg.data.synth_num < cfg.data.batch_size:
        raise ConfigError(f"data.synth_online: set data.synth_num (lines per epoch) to at least data.batch_size "
                          f"({cfg.data.batch_size}), got {cfg.data.synth_num}")
    if cfg.data.width < 8:
        raise ConfigError(f"data.width: must be at least 8 pixels, got {cfg.data.width}")
    if not 0 <= cfg.train.ema_decay < 1:
        raise ConfigError(f"train.ema_decay: must be 0 (off) or below 1, e.g. 0.999, got {cfg.train.ema_decay}")
    if not 1 <= cfg.data.min_width <= cfg.data.max_width:
        raise ConfigError(f"data.min_width: must be between 1 and data.max_width ({cfg.data.max_width}), got "
                          f"{cfg.data.min_width}")
    if not 1 <= cfg.data.width_step <= cfg.data.max_width:
        raise ConfigError(f"data.width_step: must be between 1 (off) and data.max_width ({cfg.data.max_width}), got "
                          f"{cfg.data.width_step}")
    if why := read_width_scale_problem(cfg.data.read_width_scale, cfg.data.keep_ratio, cfg.data.pad):
        raise ConfigError(f"data.read_width_scale: {why}")
    if cfg.data.width_step > 1 and not (cfg.data.keep_ratio and cfg.data.pad == "batch"):
        raise ConfigError("data.width_step: rounds keep-ratio widths; it needs data.keep_ratio: true and data.pad: "
                          "batch (or leave it at 1)")
    if cfg.data.pad == "easyocr" and not cfg.data.keep_ratio:
        raise ConfigError("data.pad: easyocr keeps the aspect ratio; set data.keep_ratio: true")
    protocols = [p for p in CHOICES["train.protocol"] if p != "auto"]
    for p in cfg.train.extra_protocols:
        if p not in protocols:
            raise ConfigError(f"train.extra_protocols: {p!r} is not one of {', '.join(protocols)}")
    for key in ("cpu_hours", "val_every_cpu_hours"):
        if getattr(cfg.train, key) < 0:
            raise ConfigError(f"train.{key}: must be 0 (off) or positive, got {getattr(cfg.train, key):g}")
    if cfg.train.schedule_over == "cpu_hours" and (cfg.train.schedule != "cosine" or not cfg.train.cpu_hours):
        raise ConfigError("train.schedule_over: cpu_hours decays a cosine over a CPU budget; it needs "
                          f"train.schedule: cosine (got {cfg.train.schedule}) and train.cpu_hours above 0 "
                          f"(got {cfg.train.cpu_hours:g})")
    if cfg.model.cnn_width <= 0 or cfg.model.res_blocks < 0:
        raise ConfigError(f"model.cnn_width must be positive and model.res_blocks at least 0, got "
                          f"{cfg.model.cnn_width:g} and {cfg.model.res_blocks}")
    if cfg.train.model_parallel and len(cfg.train.model_parallel) != 2:
        raise ConfigError("train.model_parallel: give two devices, e.g. [cuda:0, cuda:1]")


def _real_lists(data: DataConfig) -> tuple[list[str], list[float]]:
    """data.synth_real and data.synth_real_share as lists (one path and one share: lists of one)."""
    paths = [data.synth_real] if isinstance(data.synth_real, str) else list(data.synth_real)
    share = data.synth_real_share
    return paths, [float(share)] if isinstance(share, (int, float)) else [float(s) for s in share]


def _check_real(data: DataConfig) -> None:
    """The real crops mixed into rendered batches: one share per path, each within 0..1, several adding up to less
    than 1, no path empty or twice; a share or an effect needs the online generator and a path."""
    paths, shares = _real_lists(data)
    several = len(paths) > 1 or len(shares) > 1
    if len(paths) != len(shares) and (paths or any(shares)):  # data.synth_real=[] alone: no real crops
        raise ConfigError(f"data.synth_real_share: give one share per data.synth_real path ({len(paths)} path(s), "
                          f"{len(shares)} share(s)), e.g. data.synth_real=[a,b] data.synth_real_share=[0.05,0.1]")
    for p, share in zip(paths, shares):
        if not 0 <= share <= 1:
            raise ConfigError(f"data.synth_real_share: must be within 0..1, got {share:g}"
                              + (f" for {p}" if several else ""))
    if several and sum(shares) >= 1:
        raise ConfigError(f"data.synth_real_share: the shares add up to {sum(shares):g}; several sources must leave "
                          "rendered words in every batch (less than 1 in all)")
    if several and (not all(paths) or len(set(paths)) < len(paths)):
        raise ConfigError(f"data.synth_real: every path once and none empty, got {paths}")
    if sum(shares) > 0 and not (data.synth_online and any(paths)):
        raise ConfigError("data.synth_real_share: needs data.synth_online=true and data.synth_real=PATH (an LMDB or a "
                          "folder with gt.txt)")
    for name in REAL_EFFECTS:
        if getattr(data, name) > 0 and not data.real_sources():
            raise ConfigError(f"data.{name}: changes the real crops of data.synth_real; set data.synth_real and "
                              f"data.synth_real_share too (with data.synth_online=true)")


def dump_config(cfg: Config) -> str:
    """YAML text of the resolved config."""
    return yaml.safe_dump(config_to_dict(cfg), sort_keys=False)
