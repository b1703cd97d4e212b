"""One trainer for a single device, nn.DataParallel and DistributedDataParallel (torchrun).

The mode is decided once, in :func:`setup_runtime`; everything after it works the same way in every mode.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import random
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn as nn

from crnn.charset import Charset
from crnn.config import Config, config_to_dict, dump_config
from crnn.engine import distributed as D
from crnn.engine.autotune import choose_amp
from crnn.engine.checkpoint import (CheckpointError, load_checkpoint, load_model_weights, model_checkpoint,
                                    save_checkpoint, unwrap_model)
from crnn.engine.evaluate import EvalResult, autocast_context, evaluate
from crnn.loss import ctc_loss
from crnn.metrics import normalize_text
from crnn.model import build_model, count_parameters

log = logging.getLogger("crnn")


class TrainingError(RuntimeError):
    """A condition that stops training with a clear message."""


# ----------------------------------------------------------------------------- runtime
@dataclass
class Runtime:
    """Decided once at start-up: device, parallel mode, ranks."""

    device: torch.device
    mode: str  # single | dp | ddp
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    device_ids: list[int] = field(default_factory=list)

    @property
    def main(self) -> bool:
        return self.rank == 0


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """auto | cpu | cuda | cuda:N -> torch.device (under DDP, cuda means cuda:LOCAL_RANK)."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise TrainingError(f"train.device={name} but CUDA is not available; use train.device=cpu or auto")
        if name == "cuda":
            return torch.device("cuda", local_rank)
    return torch.device(name)


def setup_runtime(cfg: Config) -> Runtime:
    """Pick single / DataParallel / DDP from the config and the environment, and initialise it."""
    t = cfg.train
    if D.launched_by_torchrun():
        if t.parallel == "dp":
            raise TrainingError("train.parallel=dp cannot run under torchrun: DDP is used there; drop the override")
        local_rank = int(os.environ["LOCAL_RANK"])
        device = resolve_device(t.model_parallel[0] if t.model_parallel else t.device, local_rank)
        info = D.init_distributed(device.type, t.backend, t.init_method, t.timeout_s)
        return Runtime(device, "ddp", info.rank, info.local_rank, info.world_size)
    device = resolve_device(t.model_parallel[0] if t.model_parallel else t.device)
    if t.parallel == "dp":
        n_gpu = torch.cuda.device_count() if device.type == "cuda" else 0
        ids = t.device_ids or list(range(n_gpu))
        if len(ids) < 2:
            log.info("train.parallel=dp needs at least 2 GPUs; found %d, running on a single device (%s)",
                     len(ids), device)
        else:
            return Runtime(torch.device("cuda", ids[0]), "dp", device_ids=ids)
    return Runtime(device, "single")


def setup_logging(main: bool) -> None:
    """Rank 0 logs INFO to stderr; other ranks only warnings."""
    logging.basicConfig(format="[crnn] %(message)s", level=logging.INFO if main else logging.WARNING, force=True)


def seed_everything(seed: int) -> None:
    """Seed python and torch (each rank passes its own derived seed)."""
    random.seed(seed)
    torch.manual_seed(seed)


# ----------------------------------------------------------------------------- data
def prepare_data(cfg: Config) -> None:
    """Generate synthetic LMDBs that the config names but that do not exist yet (runs on local rank 0 first)."""
    jobs = [(s["path"], cfg.data.synth_num, cfg.data.synth_seed) for s in cfg.data.train]
    jobs += [(p, cfg.data.synth_val_num, cfg.data.synth_seed + 10_000_019) for p in cfg.data.val]
    for path, num, seed in jobs:
        if Path(path).exists() or num <= 0:
            continue
        from crnn.data.synth import generate_lmdb

        opts = synth_options(cfg)
        log.info("generating %d synthetic %s into %s (seed %d)", num,
                 "samples" if opts.text == "words" else f"text lines for {cfg.model.charset}", path, seed)
        generate_lmdb(path, num, seed=seed, workers=cfg.data.synth_workers, progress=D.is_main_process(), opts=opts)


def synth_options(cfg: Config):
    """What data.synth_num makes: English words (defaults), or text lines of model.charset beyond ASCII."""
    from crnn.data.synth import SynthOptions
    from crnn.data.words import text_mode

    lines = SynthOptions(charset=cfg.model.charset, height=cfg.data.height, max_len=cfg.data.max_label_length,
                         text="lines")
    return lines if text_mode(SynthOptions(charset=cfg.model.charset)) == "lines" else SynthOptions(text="words")


def build_loaders(cfg: Config, charset: Charset, rt: Runtime):
    """Training loader (sharded under DDP) and named validation loaders."""
    from crnn.data.datasets import DatasetError
    from crnn.data.loader import build_eval_loader, build_train_loader

    d = cfg.data
    geom = dict(height=d.height, width=d.width, keep_ratio=d.keep_ratio, max_width=d.max_width,
                channels=cfg.model.in_channels)
    try:
        train = build_train_loader(d.train, charset, **geom, batch_size=d.batch_size, num_workers=d.num_workers,
                                   max_label_length=d.max_label_length, augment=d.augment, seed=cfg.train.seed,
                                   rank=rt.rank, world_size=rt.world_size)
    except DatasetError as e:
        raise TrainingError(f"data.train: {e}") from None
    vals = {}
    for p in d.val:
        try:
            vals[p] = build_eval_loader(p, **geom, batch_size=d.batch_size, num_workers=min(d.num_workers, 1),
                                        rank=rt.rank, world_size=rt.world_size)
        except DatasetError as e:
            raise TrainingError(f"data.val: {e}") from None
    for loader in (train.loader, *vals.values()):
        loader.worker_init_fn = functools.partial(_worker_init, loader.worker_init_fn)
    return train, vals


def _worker_init(previous, worker_id: int) -> None:
    """DataLoader workers ignore SIGINT/SIGTERM: Ctrl-C or a SIGTERM sent to the whole process group (a terminal,
    torchrun, a scheduler) must reach only the training process, which finishes its step, saves and stops the
    workers itself. Without this a worker dies first and the main process fails with "DataLoader worker killed"."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if previous is not None:
        previous(worker_id)


# ----------------------------------------------------------------------------- model / optimisation
def build_training_model(cfg: Config, charset: Charset, rt: Runtime) -> tuple[nn.Module, nn.Module]:
    """Return (model as trained — possibly wrapped, the bare model)."""
    m, t = cfg.model, cfg.train
    model = build_model(m.variant, m.in_channels, charset.num_classes, m.hidden or None, m.batch_norm)
    if t.init_weights:
        try:
            ck = load_checkpoint(t.init_weights)
            load_model_weights(model, ck.model_state, strict=True)
        except CheckpointError as e:
            raise TrainingError(_checkpoint_problem("train.init_weights", t.init_weights, e)) from None
        log.info("initialised weights from %s (%s, keys had prefix %r)", t.init_weights, ck.kind, ck.source_prefix)
    if t.model_parallel:
        model.place(t.model_parallel[0], t.model_parallel[1])
        log.info("model parallel: CNN on %s, sequence model on %s", *t.model_parallel)
    else:
        model.to(rt.device)
    if t.channels_last:
        model.to(memory_format=torch.channels_last)
    if t.amp == "auto":  # resolved once, here; the rest of the run (and its checkpoints) sees the chosen mode
        choice = choose_amp(model, rt.device, m.in_channels, cfg.data.height, cfg.data.width, cfg.data.batch_size,
                            t.channels_last)
        t.amp = choice.amp
        if rt.main:
            log.info("train.amp=auto -> %s: %s", choice.amp, choice.reason)
    bare = model
    if t.sync_bn and rt.mode == "ddp":
        if rt.device.type == "cuda":
            model = D.convert_sync_bn(model)
            bare = model
            log.info("SyncBatchNorm: converted BatchNorm layers")
        else:
            log.info("train.sync_bn=true is not applicable on CPU (SyncBatchNorm needs CUDA); keeping BatchNorm")
    if t.compile:
        model = torch.compile(model)
    if rt.mode == "ddp":
        comm = D.resolve_ddp_comm(t.ddp_comm, t.amp)
        model = D.wrap_ddp(model, rt.device, bool(t.model_parallel), t.ddp_bucket_mb, comm)
        log.info("DDP: gradients all-reduced in %s%s, %g MB buckets", comm,
                 " (train.ddp_comm=auto follows train.amp=bf16)" if t.ddp_comm == "auto" and comm == "bf16" else "",
                 t.ddp_bucket_mb)
    elif rt.mode == "dp":
        model = nn.DataParallel(model, device_ids=rt.device_ids)
    return model, bare


def build_optimizer(cfg: Config, model: nn.Module) -> torch.optim.Optimizer:
    """Adam / AdamW / Adadelta over the trainable parameters."""
    t = cfg.train
    params = [p for p in model.parameters() if p.requires_grad]
    if t.optimizer == "adam":
        return torch.optim.Adam(params, lr=t.lr, weight_decay=t.weight_decay)
    if t.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=t.lr, weight_decay=t.weight_decay)
    if t.optimizer == "sgd":
        return torch.optim.SGD(params, lr=t.lr, momentum=0.9, weight_decay=t.weight_decay)
    return torch.optim.Adadelta(params, lr=t.lr, rho=0.9, weight_decay=t.weight_decay)


def lr_factor(step: int, cfg: Config) -> float:
    """Multiplier of the base LR at ``step``: linear warm-up, then cosine / one-cycle / constant."""
    t = cfg.train
    warm = min(t.warmup_steps, t.steps - 1) if t.steps > 1 else 0
    if t.schedule == "onecycle":
        warm = max(warm, int(0.3 * t.steps))
    if step < warm:
        start = 0.04 if t.schedule == "onecycle" else 0.0
        return start + (1 - start) * (step + 1) / warm
    if t.schedule == "constant":
        return 1.0
    progress = (step - warm) / max(1, t.steps - warm)
    return t.min_lr_ratio + (1 - t.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


def build_scheduler(cfg: Config, opt: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LambdaLR:
    """LambdaLR over :func:`lr_factor` (state is just the step count, so resume is exact)."""
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, cfg))


def build_scaler(cfg: Config, rt: Runtime) -> torch.amp.GradScaler | None:
    """GradScaler for fp16 on CUDA; None otherwise (bf16 needs none)."""
    if cfg.train.amp == "fp16":
        if rt.device.type != "cuda":
            raise TrainingError("train.amp=fp16 needs CUDA; on the CPU use train.amp=bf16")
        return torch.amp.GradScaler("cuda")
    return None


# ----------------------------------------------------------------------------- state
@dataclass
class TrainState:
    """Counters that a checkpoint carries so a resumed run continues where it stopped."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    best_metric: float = -1.0
    images_seen: int = 0
    skipped_images: int = 0
    unfit_labels: int = 0
    nonfinite_steps: int = 0


def rng_state() -> dict:
    """RNG states as plain data (weights_only-loadable)."""
    st = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        st["cuda"] = torch.cuda.get_rng_state_all()
    return st


def set_rng_state(st: dict) -> None:
    """Inverse of :func:`rng_state`."""
    torch.set_rng_state(st["torch"])
    random.setstate(_to_tuple(st["python"]))
    if "cuda" in st and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(st["cuda"])


def _to_tuple(x):
    return tuple(_to_tuple(v) for v in x) if isinstance(x, (list, tuple)) else x


def save_training_checkpoint(path: Path, model, cfg, charset, opt, sched, scaler, st: TrainState) -> None:
    """Full training state to ``path`` (main process only; callers barrier afterwards)."""
    ck = model_checkpoint(model, cfg, charset, kind="training", step=st.step, epoch=st.epoch,
                          best_metric=st.best_metric, optimizer=opt.state_dict(), scheduler=sched.state_dict(),
                          scaler=scaler.state_dict() if scaler else None, rng=rng_state(),
                          state=vars(st).copy())
    save_checkpoint(ck, path)


def resume_path(cfg: Config, rt: Runtime) -> Path | None:
    """The checkpoint to resume from: explicit path, ``auto`` (last.pt if present), or none."""
    r = cfg.train.resume or ("auto" if rt.mode == "ddp" else "none")
    if r == "none":
        return None
    if r == "auto":
        p = Path(cfg.train.output_dir) / "last.pt"
        return p if p.is_file() else None
    if not Path(r).is_file():
        raise TrainingError(f"train.resume={r}: file not found (use train.resume=auto to continue the output folder)")
    return Path(r)


def restore(path: Path, model, opt, sched, scaler, cfg: Config) -> TrainState:
    """Load a training checkpoint into model/optimizer/scheduler/scaler and return its counters."""
    try:
        ck = load_checkpoint(str(path))
        if ck.kind != "training":
            raise TrainingError(f"{path} holds weights only; use train.init_weights={path} to start from it")
        load_model_weights(model, ck.model_state, strict=True)
    except CheckpointError as e:
        raise TrainingError(_checkpoint_problem("train.resume", path, e) + "; resume from another checkpoint "
                            "(e.g. best.pt) with train.resume=PATH, or start afresh with train.resume=none") from None
    stored = (ck.config or {}).get("train", {}).get("optimizer", cfg.train.optimizer)
    if stored != cfg.train.optimizer:
        raise TrainingError(f"train.resume={path}: it was trained with train.optimizer={stored}, this run asks for "
                            f"{cfg.train.optimizer}; resume with train.optimizer={stored}, or start a new run from its "
                            f"weights with train.init_weights={path}")
    try:
        opt.load_state_dict(ck.raw["optimizer"])
        sched.load_state_dict(ck.raw["scheduler"])
        if scaler is not None and ck.raw.get("scaler"):
            scaler.load_state_dict(ck.raw["scaler"])
        set_rng_state(ck.raw["rng"])
    except (KeyError, ValueError, TypeError, RuntimeError) as e:
        raise TrainingError(f"train.resume={path}: its optimizer/scheduler state does not fit this run "
                            f"(train.optimizer={cfg.train.optimizer}; {type(e).__name__}: {e}); start a new run from "
                            f"its weights with train.init_weights={path}") from None
    st = TrainState(**{k: v for k, v in ck.raw.get("state", {}).items() if k in TrainState.__dataclass_fields__})
    log.info("resumed from %s at step %d (epoch %d)", path, st.step, st.epoch)
    return st


def _checkpoint_problem(key: str, path, e: Exception) -> str:
    """One line: the config key, the file and what is wrong with it (the path only once)."""
    msg = str(e)
    return f"{key}: {msg}" if str(path) in msg else f"{key}={path}: {msg}"


_STALE_TMP = re.compile(r".+\.pt\.\d+\.tmp")


def remove_stale_temporaries(out: Path) -> list[Path]:
    """Delete ``*.pt.<pid>.tmp`` left in ``out`` by a save that was killed half-way; returns what was removed."""
    if not out.is_dir():
        return []
    stale = [p for p in out.iterdir() if _STALE_TMP.fullmatch(p.name) and p.is_file()]
    for p in stale:
        p.unlink(missing_ok=True)
    if stale:
        log.info("removed %d half-written checkpoint file(s) left by an interrupted save: %s", len(stale),
                 ", ".join(p.name for p in stale))
    return stale


def check_output_dir(out: Path) -> None:
    """Fail early, before any data work, when ``out`` cannot become a writable folder (nothing is created)."""
    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise TrainingError(f"train.output_dir={out}: cannot create it, {probe} is a file, not a folder; "
                            "choose another train.output_dir")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise TrainingError(f"train.output_dir={out}: {probe} is not writable; choose another train.output_dir")


def create_output_dir(cfg: Config) -> None:
    """Create the output folder and write the resolved config.yaml into it (atomically)."""
    out = Path(cfg.train.output_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        tmp = out / f"config.yaml.{os.getpid()}.tmp"
        tmp.write_text(dump_config(cfg), encoding="utf-8")
        os.replace(tmp, out / "config.yaml")
    except OSError as e:
        raise TrainingError(f"train.output_dir={out}: cannot write there ({e.strerror or e}); "
                            "choose a writable train.output_dir") from None


def check_label_length(cfg: Config, bare: nn.Module) -> None:
    """Warn when data.max_label_length admits labels longer than the model's T (CTC cannot align them)."""
    d = cfg.data
    width = d.max_width if d.keep_ratio else d.width
    steps = int(bare.output_length(width))
    if d.max_label_length > steps:
        log.warning("data.max_label_length=%d is more than the %d time steps the model has for width %d: labels "
                    "longer than %d (fewer with repeated letters) cannot be learned; they count as 'unfit' in the "
                    "log (lower data.max_label_length or raise data.%s)", d.max_label_length, steps, width, steps,
                    "max_width" if d.keep_ratio else "width")


# ----------------------------------------------------------------------------- logging
class Meter:
    """Running sums between two log lines."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.loss, self.n, self.images, self.t0 = 0.0, 0, 0, time.perf_counter()

    def add(self, loss: float, images: int) -> None:
        self.loss += loss
        self.n += 1
        self.images += images

    def rate(self) -> float:
        return self.images / max(time.perf_counter() - self.t0, 1e-9)


STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))


class StopFlag:
    """Set by SIGINT/SIGTERM/SIGHUP; the loop checks it between steps, saves and exits cleanly.

    torchrun forwards these signals from its agent to every worker (and waits 30 s, --shutdown-timeout, before
    SIGKILL); a second signal gives up at once.
    """

    def __init__(self, main: bool = True) -> None:
        self.signum: int | None = None
        self.main = main
        self._old: dict = {}

    def __enter__(self) -> "StopFlag":
        for s in STOP_SIGNALS:
            try:
                self._old[s] = signal.signal(s, self._handle)
            except ValueError:  # not the main thread (e.g. called from a test runner thread)
                pass
        return self

    def _handle(self, signum, frame) -> None:
        if self.signum is not None:  # second Ctrl-C: give up immediately
            raise KeyboardInterrupt
        self.signum = signum
        if self.main:
            log.warning("received %s: finishing this step, saving a checkpoint and stopping",
                        signal.Signals(signum).name)

    def __exit__(self, *exc) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)


def open_tensorboard(cfg: Config, rt: Runtime):
    """SummaryWriter under output_dir/tb on rank 0, else None."""
    if not (rt.main and cfg.train.tensorboard):
        return None
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(str(Path(cfg.train.output_dir) / "tb"))


def log_validation(name: str, res: EvalResult, step: int, tb, protocol: str) -> None:
    """Print one validation result and a few predictions; write TensorBoard scalars and a sample grid."""
    m = res.metrics
    log.info("val %s @ %d: acc %.4f  CER %.4f  NED %.4f  (%d samples, %.0f img/s)",
             name, step, m["word_acc"], m["cer"], m["ned"], m["samples"], res.images_per_s)
    for label, pred in res.examples:
        ok = normalize_text(label, protocol) == normalize_text(pred, protocol)
        log.info("    %-24s -> %s%s", label, pred, "" if ok else "   *")
    if tb is None:
        return
    tag = Path(name).name or name
    for k in ("word_acc", "cer", "ned"):
        tb.add_scalar(f"val/{tag}/{k}", m[k], step)
    if res.sample_images is not None:
        import torchvision

        grid = torchvision.utils.make_grid(res.sample_images * 0.5 + 0.5, nrow=1, pad_value=1.0)
        tb.add_image(f"val/{tag}/samples", grid.clamp(0, 1), step)
        tb.add_text(f"val/{tag}/predictions",
                    "\n".join(f"    {i}: true `{t}` | pred `{p}`" for i, (t, p) in enumerate(res.examples)), step)


def validate_all(model, vals: dict, charset, cfg: Config, rt: Runtime, step: int, tb) -> float | None:
    """Validate on every configured set; return the mean word accuracy (None without validation sets)."""
    if not vals:
        return None
    target = unwrap_model(model) if rt.mode == "ddp" else model
    accs = []
    for name, loader in vals.items():
        res = evaluate(target, loader, charset, rt.device, protocol=cfg.train.protocol,
                       decoder=cfg.train.decoder, amp=cfg.train.amp, max_examples=cfg.train.show_predictions)
        if rt.main:
            log_validation(name, res, step, tb, cfg.train.protocol)
        accs.append(res.metrics["word_acc"])
    return sum(accs) / len(accs)


# ----------------------------------------------------------------------------- the loop
def train_step(model, batch, opt, scaler, cfg: Config, rt: Runtime, last_micro: bool, bare) -> tuple[float, int]:
    """Forward + backward of one micro-batch (no optimizer step). Returns (loss value, unfit labels)."""
    images, targets, target_lengths = batch.images, batch.targets, batch.target_lengths
    empty = len(batch.labels) == 0  # every image of the batch was corrupt: step on a dummy with zero weight,
    if empty:                       # so that every DDP rank still takes part in the gradient all-reduce
        images = torch.zeros(1, cfg.model.in_channels, cfg.data.height, cfg.data.width)
        targets, target_lengths = torch.zeros(0, dtype=torch.long), torch.zeros(1, dtype=torch.long)
    images = images.to(rt.device, non_blocking=True)
    if cfg.train.channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    sync = last_micro or rt.mode != "ddp"
    ctx = model.no_sync() if not sync else contextlib.nullcontext()
    with ctx:
        with autocast_context(rt.device, cfg.train.amp):
            logits = model(images)  # (B, T, K)
        steps = torch.full((logits.shape[0],), logits.shape[1], dtype=torch.long)  # (B,) valid time steps
        if cfg.data.keep_ratio and not empty and getattr(batch, "widths", None) is not None:
            steps = bare.output_length(batch.widths.long()).clamp(max=logits.shape[1])  # padding is not text
        res = ctc_loss(logits, targets, target_lengths, steps)
        loss = res.loss * (0.0 if empty else 1.0 / cfg.train.accum_steps)
        (scaler.scale(loss) if scaler else loss).backward()
    return float(res.loss.detach()), res.num_unfit


def optimizer_step(model, opt, sched, scaler, cfg: Config) -> bool:
    """Clip, check for non-finite gradients (identical on all ranks after all-reduce), step. False = skipped."""
    if scaler:
        scaler.unscale_(opt)
    clip = cfg.train.grad_clip if cfg.train.grad_clip > 0 else float("inf")
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    finite = bool(torch.isfinite(norm))
    if scaler:
        scaler.step(opt)  # skips by itself on inf/nan
        scaler.update()
    elif finite:
        opt.step()
    opt.zero_grad(set_to_none=True)
    sched.step()
    return finite


def batches_from(loader, epoch: int, skip: int):
    """Iterate one epoch of ``loader`` starting after ``skip`` batches (used when resuming mid-epoch)."""
    loader.set_epoch(epoch)
    it = iter(loader)
    if skip:
        if hasattr(loader, "skip_batches"):
            it = loader.skip_batches(skip)
        else:
            for _ in range(skip):
                next(it, None)
    return it


def fit(cfg: Config) -> dict:
    """Train according to ``cfg``; returns a summary dict (final step, best metric, paths)."""
    rt = setup_runtime(cfg)
    setup_logging(rt.main)
    st = TrainState()
    try:
        return _fit(cfg, rt, st)
    except RuntimeError as e:
        lost = lost_contact(e, rt, cfg, st.step)
        if lost is None:
            raise
        raise lost from None
    finally:
        D.cleanup_distributed()


def lost_contact(e: BaseException, rt: Runtime, cfg: Config, step: int) -> TrainingError | None:
    """A collective that failed because another rank crashed or hung, as one line naming this rank (else None)."""
    if rt.mode != "ddp" or isinstance(e, TrainingError) or not D.is_comm_failure(e):
        return None
    return TrainingError(f"rank {rt.rank} of {rt.world_size}: lost contact with the other ranks at step {step} "
                         f"({D.comm_failure_reason(e)}); another rank failed or hung — see its message; ranks wait "
                         f"at most train.timeout_s={cfg.train.timeout_s} s for each other")


def _fit(cfg: Config, rt: Runtime, st: TrainState) -> dict:
    t = cfg.train
    out = Path(t.output_dir)
    if t.threads > 0:
        torch.set_num_threads(t.threads)
    seed_everything(t.seed + 1000 * rt.rank)
    if rt.main:
        check_output_dir(out)
        log.info("resolved config:\n%s", dump_config(cfg).rstrip())
        log.info("mode: %s on %s (world size %d)", rt.mode, rt.device, rt.world_size)
    D.barrier()
    charset = Charset.from_spec(cfg.model.charset, cfg.model.lowercase, cfg.model.unknown)
    with D.main_process_first(local=True):
        prepare_data(cfg)
    train_loader, vals = build_loaders(cfg, charset, rt)
    model, bare = build_training_model(cfg, charset, rt)
    if rt.main:
        log.info("model %s: %.2f M parameters, %d classes, T=%d for width %d", cfg.model.variant,
                 count_parameters(bare) / 1e6, charset.num_classes, bare.output_length(cfg.data.width), cfg.data.width)
        check_label_length(cfg, bare)
    opt, scaler = build_optimizer(cfg, model), build_scaler(cfg, rt)
    sched = build_scheduler(cfg, opt)
    rp = resume_path(cfg, rt)
    if rp is not None:
        vars(st).update(vars(restore(rp, model, opt, sched, scaler, cfg)))
        if rt.rank > 0:
            seed_everything(t.seed + 1000 * rt.rank + st.step)
    if rt.main:  # only now that the data, model and checkpoint were accepted: a bad input leaves nothing behind
        create_output_dir(cfg)
        remove_stale_temporaries(out)
    tb = open_tensorboard(cfg, rt)
    try:
        with StopFlag(rt.main) as stop:
            ended = _loop(cfg, rt, model, bare, charset, train_loader, vals, opt, sched, scaler, st, tb, stop)
    finally:
        if tb is not None:
            tb.close()
    return {"step": st.step, "best_metric": st.best_metric, "output_dir": str(out), "ended": ended,
            "interrupted": ended == "signal", "signal": stop.signum, "images_seen": st.images_seen}


def _save(name: str, model, cfg, charset, opt, sched, scaler, st: TrainState, rt: Runtime) -> None:
    if rt.main:
        save_training_checkpoint(Path(cfg.train.output_dir) / name, model, cfg, charset, opt, sched, scaler, st)
    D.barrier()


def _loop(cfg, rt, model, bare, charset, loader, vals, opt, sched, scaler, st: TrainState, tb, stop) -> str:
    """The step loop; returns why it ended: "done", "signal" (SIGINT/SIGTERM/SIGHUP) or "stop_after"."""
    t = cfg.train
    if len(loader) == 0:
        raise TrainingError(f"the training data gives no full batch of {cfg.data.batch_size} "
                            f"(lower data.batch_size or add data)")
    model.train()
    meter, accum, nonfinite_run = Meter(), t.accum_steps, 0
    t_start, step0 = time.perf_counter(), st.step
    save = lambda name: _save(name, model, cfg, charset, opt, sched, scaler, st, rt)  # noqa: E731
    micro = 0
    while st.step < t.steps:
        for batch in batches_from(loader, st.epoch, st.batch_in_epoch):
            st.batch_in_epoch += 1
            micro += 1
            loss, unfit = train_step(model, batch, opt, scaler, cfg, rt, micro % accum == 0, bare)
            st.skipped_images += batch.num_skipped
            st.unfit_labels += unfit
            n_img = len(batch.labels) * rt.world_size
            st.images_seen += n_img
            if micro % accum:
                continue
            ok = optimizer_step(model, opt, sched, scaler, cfg)
            st.step += 1
            nonfinite_run = 0 if ok else nonfinite_run + 1
            if ok:
                meter.add(loss, n_img)
            else:
                _count_nonfinite(st, nonfinite_run, cfg, rt)
            signalled = D.any_rank(stop.signum is not None)
            if not signalled:  # on a signal, save at once: no validation that could outlast torchrun's grace time
                _periodic(cfg, rt, model, charset, vals, st, tb, meter, t_start, step0, opt,
                          save if nonfinite_run == 0 else None)
            time_boxed = t.stop_after > 0 and st.step - step0 >= t.stop_after and st.step < t.steps
            if signalled or time_boxed:
                save("last.pt")
                if rt.main:
                    log.warning("stopped at step %d/%d (%s); continue with train.resume=auto (or train.resume=%s)",
                                st.step, t.steps, "signal" if signalled else "train.stop_after",
                                Path(t.output_dir) / "last.pt")
                return "signal" if signalled else "stop_after"
            if st.step >= t.steps:
                break
        else:
            st.epoch += 1
            st.batch_in_epoch = 0
    acc = validate_all(model, vals, charset, cfg, rt, st.step, tb) if t.val_every == 0 or st.step % t.val_every else None
    if acc is not None and acc > st.best_metric:
        st.best_metric = acc
        save("best.pt")
    save("last.pt")
    if rt.main:
        log.info("done: %d steps, %d images, %.1f min; skipped %d undecodable images, %d labels too long for T, "
                 "%d non-finite steps; checkpoints in %s", st.step, st.images_seen,
                 (time.perf_counter() - t_start) / 60, st.skipped_images, st.unfit_labels, st.nonfinite_steps,
                 t.output_dir)
    return "done"


def _count_nonfinite(st: TrainState, run: int, cfg: Config, rt: Runtime) -> None:
    """Count and log a skipped update; raise after train.max_nonfinite in a row (same step on every rank)."""
    t = cfg.train
    st.nonfinite_steps += 1
    if rt.main:
        log.warning("step %d: non-finite loss/gradients, update skipped (%d in a row, %d in total)",
                    st.step, run, st.nonfinite_steps)
    if run >= t.max_nonfinite:
        last = Path(t.output_dir) / "last.pt"
        kept = f"the last good checkpoint is {last}" if last.is_file() else "no checkpoint had been written yet"
        raise TrainingError(f"{run} non-finite losses/gradients in a row at step {st.step} (train.max_nonfinite="
                            f"{t.max_nonfinite}): stopping; {kept} (lower train.lr, or check the data)")


def _periodic(cfg, rt, model, charset, vals, st: TrainState, tb, meter: Meter, t_start, step0, opt, save) -> None:
    """Logging, validation and checkpointing that happen every N steps.

    ``save`` is None while updates are being skipped for non-finite gradients: the checkpoints on disk then stay
    those of the last good step.
    """
    t = cfg.train
    if st.step % t.log_every == 0 or st.step == t.steps:
        lr = opt.param_groups[0]["lr"]
        elapsed = time.perf_counter() - t_start
        eta = elapsed / max(st.step - step0, 1) * (t.steps - st.step)
        if rt.main and meter.n:
            rate = meter.rate()  # the meter counts images of all ranks already
            log.info("step %d/%d  epoch %d  loss %.4f  lr %.2e  %.0f img/s  ETA %s  skipped %d  unfit %d",
                     st.step, t.steps, st.epoch, meter.loss / meter.n, lr, rate, _fmt_time(eta),
                     st.skipped_images, st.unfit_labels)
            if tb is not None:
                tb.add_scalar("train/loss", meter.loss / meter.n, st.step)
                tb.add_scalar("train/lr", lr, st.step)
                tb.add_scalar("train/images_per_s", rate, st.step)
                tb.add_scalar("train/skipped_images", st.skipped_images, st.step)
                tb.add_scalar("train/unfit_labels", st.unfit_labels, st.step)
                tb.add_scalar("train/nonfinite_steps", st.nonfinite_steps, st.step)
        meter.reset()
    if t.val_every and st.step % t.val_every == 0:
        acc = validate_all(model, vals, charset, cfg, rt, st.step, tb)
        if acc is not None and acc > st.best_metric and save is not None:
            st.best_metric = acc
            save("best.pt")
    if t.save_every and st.step % t.save_every == 0 and st.step < t.steps:
        if save is None:
            if rt.main:
                log.warning("step %d: not saving last.pt during non-finite steps (keeping the last good one)",
                            st.step)
        else:
            save("last.pt")


def _fmt_time(s: float) -> str:
    s = int(s)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
