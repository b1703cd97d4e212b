"""The training loop: one trainer for a single device, nn.DataParallel and DistributedDataParallel (torchrun).

Read it from :func:`fit` down. The mode, devices and ranks are decided once in :mod:`crnn.engine.runtime`; the training
state, the output folder and the resume decision live in :mod:`crnn.engine.state`; log lines, TensorBoard and the
stop-signal flag in :mod:`crnn.engine.reporting`; optimizer and schedule in :mod:`crnn.engine.optim`.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import time
from pathlib import Path

import torch
import torch.nn as nn

from crnn.charset import Charset
from crnn.config import Config
from crnn.engine import distributed as D
from crnn.engine.autotune import choose_amp
from crnn.engine.average import WeightAverage
from crnn.engine.curve import CostClock, append_curve, protocol_set
from crnn.engine.checkpoint import CheckpointError, check_not_foreign, load_model_weights, unwrap_model
from crnn.engine.evaluate import autocast_context, evaluate
from crnn.engine.alphabet_change import fit_alphabet
from crnn.engine.finetune import (KEPT_METRICS, ValSets, base_protocol, build_base_pull, check_freeze, cnn_frozen,
                                  forgetting_report, freeze_bn_statistics, start_config, set_cnn_frozen,
                                  validate_base, build_teacher, write_interpolated)
from crnn.data.datasets import DataError
from crnn.data.feed import Feed, build, prepare
from crnn.data.loader import reading_changes, stop_workers
from crnn.data.rehearsal import needs_start_config
from crnn.engine.health import Health
from crnn.engine.optim import build_optimizer, build_scaler, build_scheduler, lr_factor  # noqa: F401 (re-exported)
from crnn.engine.reporting import (STOP_SIGNALS, Meter, StopFlag, _fmt_time, log_extra_protocols, log_validation,
                                   open_tensorboard)
from crnn.engine.runtime import Runtime, TrainingError, seed_everything, setup_logging, setup_runtime
from crnn.engine.state import (TrainState, _checkpoint_problem, check_output_dir, create_output_dir,
                               record_synth_fonts, remove_stale_temporaries, restore, resume_checkpoint,
                               save_training_checkpoint, shared_checkpoint)
from crnn.loss import ctc_loss
from crnn.metrics import describe_protocol, resolve_protocol
from crnn.model import build_model_from, count_parameters

log = logging.getLogger("crnn")


# ----------------------------------------------------------------------------- data
def prepare_run_data(cfg: Config, rt: Runtime) -> None:
    """The data room's :func:`~crnn.data.feed.prepare` on this process (:func:`fit` runs it on rank 0 first, then on
    each machine's local rank 0), with the starting checkpoint's stored config where its style is rendered."""
    try:
        prepare(cfg, progress=rt.main, start=start_config(cfg) if needs_start_config(cfg) else None)
    except DataError as e:
        raise TrainingError(str(e)) from None


def build_run_data(cfg: Config, charset: Charset, rt: Runtime) -> Feed:
    """The data room's loaders for this rank; their workers ignore the stop signals (:func:`_worker_init`)."""
    try:
        feed = build(cfg, charset, rank=rt.rank, world_size=rt.world_size)
    except DataError as e:
        raise TrainingError(str(e)) from None
    for loader in feed.loaders():
        loader.worker_init_fn = functools.partial(_worker_init, loader.worker_init_fn)
    return feed


def _worker_init(previous, worker_id: int) -> None:
    """DataLoader workers ignore the stop signals (SIGINT/SIGTERM/SIGHUP/SIGUSR1): Ctrl-C or a SIGTERM sent to the whole
    process group (a terminal, torchrun, a scheduler) must reach only the training process, which finishes its step,
    saves and stops the workers itself. Without this a worker dies first and the main process fails with "DataLoader
    worker killed"."""
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    if previous is not None:
        previous(worker_id)


def build_training_model(cfg: Config, charset: Charset, rt: Runtime,
                         info: dict | None = None) -> tuple[nn.Module, nn.Module]:
    """Return (model as trained — possibly wrapped, the bare model).

    ``train.init_weights`` trained on another alphabet has its output rows matched by character
    (:mod:`crnn.engine.alphabet_change`). ``info``, when given, receives ``base_charset`` (that checkpoint's
    alphabet, None without one) and ``alphabet_change``."""
    m, t = cfg.model, cfg.train
    model = build_model_from(m, charset.num_classes)
    if t.init_weights:
        try:
            ck = shared_checkpoint("train.init_weights", t.init_weights, rt)
            check_not_foreign(ck)
            state, change, base_charset = fit_alphabet(ck, charset, model)
            load_model_weights(model, state, strict=True)
        except CheckpointError as e:
            raise TrainingError(_checkpoint_problem("train.init_weights", t.init_weights, e)) from None
        log.info("initialised weights from %s (%s, keys had prefix %r)", t.init_weights, ck.kind, ck.source_prefix)
        if change is not None and not change.unchanged and rt.main:
            log.info(change.describe())
        if rt.main and (changes := reading_changes(ck.config, cfg)):
            log.warning("train.init_weights %s was trained reading crops otherwise than this run reads them: %s "
                        "(the start's -> this run's; unless the recipe means to change them, give the start's)",
                        t.init_weights, ", ".join(changes))
        if info is not None:
            info.update(base_charset=base_charset, alphabet_change=change, init_checkpoint=ck)
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
    elif rt.main:  # the log names the precision however it was chosen (lever_probe.sh compares its arms' by it)
        log.info("mixed precision: %s (train.amp)%s", t.amp, " - float32 throughout" if t.amp == "off" else "")
    bare = model
    if t.freeze_cnn_steps:  # before any wrapper: DDP only reduces the parameters that need gradients then
        check_freeze(cfg, rt.mode)
        set_cnn_frozen(model, True, 0, rt.main)
    if t.sync_bn and rt.mode == "ddp":
        if rt.device.type == "cuda":
            model = D.convert_sync_bn(model)
            bare = model
            log.info("SyncBatchNorm: converted BatchNorm layers")
        else:
            log.info("train.sync_bn=true is not applicable on CPU (SyncBatchNorm needs CUDA); keeping BatchNorm")
    if t.freeze_bn:  # after SyncBatchNorm's conversion (it replaces the layers), before compile and DDP
        freeze_bn_statistics(model, rt.main)
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


def describe_model(cfg: Config, bare: nn.Module, num_classes: int) -> str:
    """The model's log line: its parameters (all, and those trained now where some are frozen), its classes, and its
    time steps T - for its fixed width, or per 100 px and at the narrowest and widest crop where crops keep their
    ratio (each is read at its own width)."""
    d, t = cfg.data, cfg.train
    total, trained = sum(p.numel() for p in bare.parameters()), count_parameters(bare)
    size = f"{total / 1e6:.2f} M parameters"
    if trained != total:
        why = f"train.freeze_cnn_steps={t.freeze_cnn_steps}" if t.freeze_cnn_steps else "frozen"
        size += f", {trained / 1e6:.2f} M of them trained now (the CNN frozen: {why})"
    steps = lambda w: int(bare.output_length(w))  # noqa: E731
    if d.keep_ratio:
        length = (f"T = {steps(100)} per 100 px of width, each crop read at its own width ({steps(d.min_width)} at "
                  f"data.min_width {d.min_width}, {steps(d.max_width)} at data.max_width {d.max_width})")
    else:
        length = f"T = {steps(d.width)} for its fixed width {d.width} (data.width)"
    return f"model {cfg.model.variant}: {size}, {num_classes} classes; {length}"


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


def validate_all(model, vals: dict, charset, cfg: Config, rt: Runtime, step: int, tb,
                 health: Health | None = None, metrics_out: dict | None = None) -> float | None:
    """Validate on every configured set; return the mean word accuracy (None without validation sets).
    ``metrics_out`` receives each data.val set's metrics by name, and by ``SET@PROTOCOL`` the same readings scored
    under each train.extra_protocols entry (which count for nothing else: not the mean, best.pt or health)."""
    if not vals:
        return None
    target = unwrap_model(model) if rt.mode == "ddp" else model
    accs = []
    for name, loader in vals.items():
        res = evaluate(target, loader, charset, rt.device, protocol=cfg.train.protocol,
                       decoder=cfg.train.decoder, amp=cfg.train.amp, max_examples=cfg.train.show_predictions,
                       extra_protocols=cfg.train.extra_protocols)
        if rt.main:
            log_validation(name, res, step, tb, cfg.train.protocol)
            log_extra_protocols(name, res, step, tb)
        if health is not None:
            health.validation(name, res, step)
        accs.append(res.metrics["word_acc"])
        if metrics_out is not None:
            metrics_out[name] = res.metrics
            metrics_out.update({protocol_set(name, p): m for p, m in res.extra.items()})
        if isinstance(vals, ValSets):
            vals.last[name] = {k: res.metrics[k] for k in KEPT_METRICS}
    if isinstance(vals, ValSets):
        validate_base(target, vals, charset, cfg, rt, step, tb)
    return sum(accs) / len(accs) if accs else None


# ----------------------------------------------------------------------------- the loop
def train_step(model, batch, opt, scaler, cfg: Config, rt: Runtime, last_micro: bool, bare,
               pull=None, teacher=None) -> tuple[float, int]:
    """Forward + backward of one micro-batch (no optimizer step); ``pull``: train.base_pull's penalty, added to the
    loss; ``teacher``: train.distill_base's BaseTeacher, its distillation term added too. Returns (CTC loss value,
    unfit labels)."""
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
        loss = res.loss if pull is None else res.loss + pull.penalty()
        if teacher is not None and not empty:
            with autocast_context(rt.device, cfg.train.amp):
                distill, _ = teacher.loss(logits, images, batch.labels, steps)
            loss = loss + distill
        loss = loss * (0.0 if empty else 1.0 / cfg.train.accum_steps)
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
        result = _fit(cfg, rt, st)
        if rt.mode == "ddp":
            D.finish_ddp()
        return result
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
        log.info("mode: %s on %s (world size %d)", rt.mode, rt.device, rt.world_size)
        if rt.device.type == "cuda":
            log.info("cudnn.benchmark=%s (%s)", torch.backends.cudnn.benchmark,
                     "keep-ratio batches vary in width" if cfg.data.keep_ratio and cfg.data.pad == "batch"
                     else "fixed-size batches")
    D.barrier()
    charset = Charset.from_config(cfg.model)
    if rt.main:
        log.info(describe_protocol(t.protocol, resolve_protocol(t.protocol, charset.chars)))
        if extra := [p for p in t.extra_protocols if p != resolve_protocol(t.protocol, charset.chars)]:
            log.info("validation also scores its readings under %s (train.extra_protocols; curve rows SET@%s)",
                     ", ".join(extra), extra[0])
    with D.main_process_first(local=False):  # one process of the whole cluster generates; every other rank waits
        if rt.main:
            prepare_run_data(cfg, rt)
    with D.main_process_first(local=True):  # a machine that cannot see rank 0's files (unshared disks) makes its own
        prepare_run_data(cfg, rt)
    feed = build_run_data(cfg, charset, rt)
    if rt.main:
        log.info(feed.description)
    try:
        return _fit_loaded(cfg, rt, st, charset, feed)
    finally:  # at once, also on errors: the workers ignore SIGTERM, so exit could not stop them (stop_workers)
        for loader in feed.loaders():
            stop_workers(loader)


def _fit_loaded(cfg: Config, rt: Runtime, st: TrainState, charset: Charset, feed: Feed) -> dict:
    t = cfg.train
    out = Path(t.output_dir)
    info: dict = {}
    train_loader, vals = feed.train, ValSets(feed.val, feed.base_val, t.base_protocol)
    model, bare = build_training_model(cfg, charset, rt, info)
    pull = build_base_pull(cfg, bare, charset, info.get("alphabet_change"), rt.main)  # toward init, not a resumed state
    teacher = build_teacher(cfg, info.pop("init_checkpoint", None), info.get("base_charset"), charset, rt.device,
                            rt.main)
    vals.base_protocol = base_protocol(cfg, info.get("base_charset"), charset)
    if rt.main:
        check_label_length(cfg, bare)
    opt, scaler = build_optimizer(cfg, model), build_scaler(cfg, rt)
    sched = build_scheduler(cfg, opt, st)
    ck = resume_checkpoint(cfg, rt)  # one decision for the whole group, sent to every rank
    averaged = None  # the weight average a resumed checkpoint holds (it then keeps the raw weights apart)
    if ck is not None:
        # a run that changes how it reads crops between sittings is most often a recipe paired with the wrong run
        # (the 32 px run's last.pt under the 48 px recipe); where a recipe means it (width_step, read_width_scale),
        # the log says so once
        if rt.main and (changes := reading_changes(ck.config, cfg)):
            log.warning("train.resume %s was trained reading crops otherwise than this run reads them: %s (the "
                        "checkpoint's -> this run's); it goes on reading them this run's way: unless the recipe means "
                        "to change them, give the checkpoint's", ck.path, ", ".join(changes))
        vars(st).update(vars(restore(ck, model, opt, sched, scaler, cfg)))
        averaged = ck.model_state if "train_model" in ck.raw else None
        del ck
        if rt.rank > 0:
            seed_everything(t.seed + 1000 * rt.rank + st.step)
    if feed.fonts is not None:
        record_synth_fonts(st, feed.fonts, rt.main)
    average = WeightAverage(bare, t.ema_decay, st.ema_updates) if t.ema_decay > 0 else None
    if average is not None:
        if averaged is not None:
            average.load(averaged)
        if rt.main:
            log.info("weight average: decay %g (about the last %d steps), %s; validation, best.pt and last.pt's "
                     "weights are the average", t.ema_decay, round(1 / (1 - t.ema_decay)),
                     "continued" if averaged is not None else "started from the current weights")
    del averaged
    if rt.main:  # only now that the data, model and checkpoint were accepted: a bad input leaves nothing behind
        create_output_dir(cfg)
        remove_stale_temporaries(out)
        log.info("resolved config: %s (crnn-train --print-config [overrides] prints it)", out / "config.yaml")
    if t.freeze_cnn_steps:
        set_cnn_frozen(bare, cnn_frozen(cfg, st.step), st.step, rt.main)  # a resumed run may be past it
    if rt.main:
        log.info(describe_model(cfg, bare, charset.num_classes))
    tb = open_tensorboard(cfg, rt)
    health = Health(cfg, rt, bare, charset.num_classes, st.step)
    if vals.base and st.step == 0:  # the starting point, so that forgetting is measured, not guessed
        if rt.main:
            log.info("before training: scoring %s", ", ".join([*vals, *vals.base]))
        validate_all(model, vals, charset, cfg, rt, 0, tb)
        st.before = {k: dict(v) for k, v in vals.last.items()}
    try:
        agent = os.getppid() if rt.mode == "ddp" and "TORCHELASTIC_RUN_ID" in os.environ else None
        with StopFlag(rt.main, agent) as stop:
            ended = _loop(cfg, rt, model, bare, charset, train_loader, vals, opt, sched, scaler, st, tb, stop, health,
                          average, pull, teacher)
    finally:
        if tb is not None:
            tb.close()
    interpolated = None
    if ended == "done" and t.interpolate_base < 1:
        if average is not None:  # last.pt's model is the average: that is the trained model to interpolate
            bare.load_state_dict(average.model.state_dict())
        interpolated = _interpolate_at_end(cfg, rt, model, bare, charset, vals, st, tb)
    if rt.main and ended == "done" and st.before and vals.last:
        for line in forgetting_report(st.before, vals.last, list(vals.base), list(vals)):
            log.info("before -> after%s: %s", f" ({interpolated.name})" if interpolated else "", line)
    return {"step": st.step, "best_metric": st.best_metric, "output_dir": str(out), "ended": ended,
            "interrupted": ended == "signal", "signal": stop.signum, "images_seen": st.images_seen,
            "before": st.before, "base_after": {k: vals.last[k] for k in vals.base if k in vals.last},
            "base_protocol": vals.base_protocol if vals.base else None,
            "data_wait_share": health.data.run_share(), "health": list(health.warnings),
            "interpolated": str(interpolated) if interpolated else None}


def _interpolate_at_end(cfg: Config, rt: Runtime, model, bare, charset: Charset, vals, st: TrainState, tb) -> Path:
    """``train.interpolate_base``: every rank turns its model into the interpolation with ``train.init_weights``
    (the same numbers everywhere); rank 0 writes interpolated.pt; it is scored like the trained model was."""
    try:
        start = shared_checkpoint("train.init_weights", cfg.train.init_weights, rt)
        path = write_interpolated(cfg, bare, charset, start, rt.main)
    except CheckpointError as e:
        raise TrainingError(_checkpoint_problem("train.init_weights", cfg.train.init_weights, e)) from None
    D.barrier()
    if vals:
        if rt.main:
            log.info("scoring %s", path.name)
        validate_all(model, vals, charset, cfg, rt, st.step, None)
    return path


def _save(name: str, model, cfg, charset, opt, sched, scaler, st: TrainState, rt: Runtime,
          clock: CostClock | None = None, average: WeightAverage | None = None) -> None:
    if clock is not None:  # the checkpoint carries the cost so far (every rank: a collective under DDP)
        clock.advance(st)
    if rt.main:
        save_training_checkpoint(Path(cfg.train.output_dir) / name, model, cfg, charset, opt, sched, scaler, st,
                                 average)
    D.barrier()


def _loop(cfg, rt, model, bare, charset, loader, vals, opt, sched, scaler, st: TrainState, tb, stop,
          health: Health, average: WeightAverage | None = None, pull=None, teacher=None) -> str:
    """The step loop; returns why it ended: "done", "signal" (SIGINT/SIGTERM/SIGHUP/SIGUSR1) or "stop_after"."""
    t = cfg.train
    if len(loader) == 0:
        raise TrainingError(f"the training data gives no full batch of {cfg.data.batch_size} "
                            f"(lower data.batch_size or add data)")
    model.train()
    meter, accum, nonfinite_run = Meter(), t.accum_steps, 0
    t_start, step0 = time.perf_counter(), st.step
    clock = CostClock(rt.device)
    save = lambda name: _save(name, model, cfg, charset, opt, sched, scaler, st, rt, clock, average)  # noqa: E731
    # with a weight average, the average is validated; the raw weights are scored beside it for the log
    scored, raw = (model, None) if average is None else (average.model, model)
    micro, spent = 0, bool(t.cpu_hours) and st.cpu_seconds >= t.cpu_hours * 3600  # resumed with it spent: no step
    cpu_mark = _cpu_mark(t, st)
    while st.step < t.steps and not spent:
        for batch in health.data.batches(batches_from, loader, st.epoch, st.batch_in_epoch):
            st.batch_in_epoch += 1
            micro += 1
            loss, unfit = train_step(model, batch, opt, scaler, cfg, rt, micro % accum == 0, bare, pull, teacher)
            st.skipped_images += batch.num_skipped
            st.unfit_labels += unfit
            health.micro(batch, loss, unfit)
            n_img = len(batch.labels) * rt.world_size
            st.images_seen += n_img
            if micro % accum:
                continue
            ok = optimizer_step(model, opt, sched, scaler, cfg)
            if ok and average is not None:
                average.update(bare)
                st.ema_updates = average.updates
            why = health.step_done(ok, scaler)
            st.step += 1
            if t.freeze_cnn_steps > 0 and st.step == t.freeze_cnn_steps:
                set_cnn_frozen(bare, False, st.step, rt.main)
            nonfinite_run = 0 if ok else nonfinite_run + 1
            if ok:
                meter.add(loss, n_img)
            else:
                _count_nonfinite(st, nonfinite_run, cfg, rt, why)
            stop.poll(rt.rank)
            signalled = D.any_rank(stop.signum is not None, rt.device)  # NCCL reduces only CUDA tensors
            if signalled:  # another rank saw the agent die first: by now this one is re-parented too, and says so
                stop.poll(rt.rank)
            if not signalled:  # on a signal, save at once: no validation that could outlast torchrun's grace time
                _periodic(cfg, rt, scored, charset, vals, st, tb, meter, t_start, step0, opt,
                          save if nonfinite_run == 0 else None, health, clock, raw)
            time_boxed = t.stop_after > 0 and st.step - step0 >= t.stop_after and st.step < t.steps
            if signalled or time_boxed:
                save("last.pt")
                if rt.main:
                    log.warning("stopped at step %d/%d (%s); continue with train.resume=auto (or train.resume=%s)",
                                st.step, t.steps, "signal" if signalled else "train.stop_after",
                                Path(t.output_dir) / "last.pt")
                return "signal" if signalled else "stop_after"
            if (t.cpu_hours or t.val_every_cpu_hours) and st.step % min(CPU_CHECK_EVERY, t.log_every) == 0:
                clock.advance(st)  # every rank at the same step: the same summed count everywhere
                spent = bool(t.cpu_hours) and st.cpu_seconds >= t.cpu_hours * 3600
                if _cpu_mark(t, st) > cpu_mark and not spent:  # (the end validates anyway)
                    acc = _validate(cfg, rt, scored, charset, vals, st, tb, health, clock, raw)
                    if acc is not None and acc > st.best_metric and nonfinite_run == 0:
                        st.best_metric = acc
                        save("best.pt")
                cpu_mark = _cpu_mark(t, st)
            if st.step >= t.steps or spent:
                break
        else:
            st.epoch += 1
            st.batch_in_epoch = 0
    acc = (_validate(cfg, rt, scored, charset, vals, st, tb, health, clock, raw)
           if t.val_every == 0 or st.step % t.val_every else None)
    if acc is not None and acc > st.best_metric:
        st.best_metric = acc
        save("best.pt")
    save("last.pt")
    if rt.main:
        log.info("done: %d steps, %d images, %.1f min, %.2f CPU-hours in all%s; skipped %d undecodable images, %d "
                 "labels too long for T, %d non-finite steps; checkpoints in %s", st.step, st.images_seen,
                 (time.perf_counter() - t_start) / 60, st.cpu_seconds / 3600,
                 f" (train.cpu_hours={t.cpu_hours:g} spent)" if spent else "", st.skipped_images, st.unfit_labels,
                 st.nonfinite_steps, t.output_dir)
        if t.schedule_over == "cpu_hours" and not spent:
            log.warning(_budget_unspent(t, st, opt.param_groups[0]["lr"]))
    return "done"


def _budget_unspent(t, st: TrainState, lr: float) -> str:
    """The warning for a cosine over CPU-hours that train.steps ended before its budget: it stopped mid-decay."""
    share = min(1.0, st.cpu_seconds / (3600 * t.cpu_hours))
    return (f"train.steps={t.steps} ended the run at {st.cpu_seconds / 3600:.2f} of its "
            f"train.cpu_hours={t.cpu_hours:g}: the cosine over CPU-hours (train.schedule_over) stopped {share:.0%} of "
            f"the way, at a learning rate of {lr:.3g}; raise train.steps so that the budget ends the run")


CPU_CHECK_EVERY = 10  # most steps between two looks at the CPU-hours spent (train.cpu_hours, .val_every_cpu_hours)


def _cpu_mark(t, st: TrainState) -> int:
    """How many multiples of train.val_every_cpu_hours the run has spent (0 when that is off)."""
    return int(st.cpu_seconds // (3600 * t.val_every_cpu_hours)) if t.val_every_cpu_hours else 0


def _count_nonfinite(st: TrainState, run: int, cfg: Config, rt: Runtime, why: str | None = None) -> None:
    """Count and log a skipped update with its likely cause (``why``, from :class:`Health`); raise after
    train.max_nonfinite in a row (same step on every rank)."""
    t = cfg.train
    st.nonfinite_steps += 1
    if rt.main:
        log.warning("step %d: non-finite loss/gradients, update skipped (%d in a row, %d in total)%s",
                    st.step, run, st.nonfinite_steps, f": {why}" if why else "")
    elif why:  # this rank's own batch gave the non-finite loss
        log.warning("rank %d: step %d: %s", rt.rank, st.step, why)
    if run >= t.max_nonfinite:
        last = Path(t.output_dir) / "last.pt"
        kept = f"the last good checkpoint is {last}" if last.is_file() else "no checkpoint had been written yet"
        raise TrainingError(f"{run} non-finite losses/gradients in a row at step {st.step} (train.max_nonfinite="
                            f"{t.max_nonfinite}): stopping; {kept} ({why or 'lower train.lr, or check the data'})")


def _validate(cfg, rt, model, charset, vals, st: TrainState, tb, health, clock: CostClock | None,
              raw=None) -> float | None:
    """validate_all, then the learning curve: one curve.tsv row per data.val set (and per set and extra protocol)
    with the cost so far. ``raw``: the
    raw weights when ``model`` is their average (train.ema_decay), scored on data.val for the log and TensorBoard."""
    metrics: dict = {}
    acc = validate_all(model, vals, charset, cfg, rt, st.step, tb, health, metrics)
    if raw is not None and metrics:
        _score_raw(raw, vals, charset, cfg, rt, st.step, tb, metrics)
    if clock is not None and metrics:
        clock.advance(st)
        if rt.main:
            append_curve(cfg.train.output_dir, st, metrics, rt.device.type, rt.world_size, cfg.train.amp)
            if tb is not None:
                for name, m in metrics.items():
                    tb.add_scalar(f"curve/{name}/cer_vs_cpu_seconds", m["cer"], int(st.cpu_seconds))
                    tb.add_scalar(f"curve/{name}/cer_vs_lines_seen", m["cer"], st.images_seen)
    return acc


def _score_raw(raw, vals, charset, cfg: Config, rt: Runtime, step: int, tb, averaged: dict) -> None:
    """Score the raw weights on each data.val set and log them next to their average's figures."""
    target = unwrap_model(raw) if rt.mode == "ddp" else raw
    for name, loader in vals.items():
        m = evaluate(target, loader, charset, rt.device, protocol=cfg.train.protocol, decoder=cfg.train.decoder,
                     amp=cfg.train.amp, max_examples=0).metrics
        if rt.main:
            log.info("step %d: %s: weight average CER %.4f, word acc %.4f; raw weights CER %.4f, word acc %.4f", step,
                     name, averaged[name]["cer"], averaged[name]["word_acc"], m["cer"], m["word_acc"])
            if tb is not None:
                tb.add_scalar(f"val_raw/{name}/cer", m["cer"], step)
                tb.add_scalar(f"val_raw/{name}/word_acc", m["word_acc"], step)


def _periodic(cfg, rt, model, charset, vals, st: TrainState, tb, meter: Meter, t_start, step0, opt, save,
              health: Health | None = None, clock: CostClock | None = None, raw=None) -> None:
    """Logging, validation and checkpointing that happen every N steps.

    ``save`` is None while updates are being skipped for non-finite gradients: the checkpoints on disk then stay
    those of the last good step.
    """
    t = cfg.train
    if st.step % t.log_every == 0 or st.step == t.steps:
        lr = opt.param_groups[0]["lr"]
        elapsed = time.perf_counter() - t_start
        eta = elapsed / max(st.step - step0, 1) * (t.steps - st.step)
        wait = health.window(st.step) if health is not None else None  # every rank: one all-reduce under DDP
        if rt.main and meter.n:
            rate = meter.rate()  # the meter counts images of all ranks already
            budget = f"  CPU {st.cpu_seconds / 3600:.2f}/{t.cpu_hours:g} h" if t.cpu_hours else f"  ETA {_fmt_time(eta)}"
            log.info("step %d/%d  epoch %d  loss %.4f  lr %.2e  %.0f img/s%s  skipped %d  unfit %d%s",
                     st.step, t.steps, st.epoch, meter.loss / meter.n, lr, rate, budget,
                     st.skipped_images, st.unfit_labels, "" if wait is None else f"  data {wait * 100:.0f}%")
            if tb is not None and wait is not None:
                tb.add_scalar("train/data_wait_share", wait, st.step)
            if tb is not None:
                tb.add_scalar("train/loss", meter.loss / meter.n, st.step)
                tb.add_scalar("train/lr", lr, st.step)
                tb.add_scalar("train/images_per_s", rate, st.step)
                tb.add_scalar("train/skipped_images", st.skipped_images, st.step)
                tb.add_scalar("train/unfit_labels", st.unfit_labels, st.step)
                tb.add_scalar("train/nonfinite_steps", st.nonfinite_steps, st.step)
        if health is not None:
            health.advise()
        meter.reset()
    if t.val_every and st.step % t.val_every == 0:
        acc = _validate(cfg, rt, model, charset, vals, st, tb, health, clock, raw)
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


