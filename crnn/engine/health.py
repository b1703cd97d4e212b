"""Training health, said in words: waiting for data, collapsed outputs, non-finite steps, labels too long for T.

The trainer tells a :class:`Health` what it sees (the time blocked on the next batch, each micro-batch with its loss,
every validation result). It logs one WARNING line per finding that names the likely cause and the setting to change,
keeps those lines for ``crnn.train()``'s summary, and never stops training itself.
"""
from __future__ import annotations

import logging
import math
import os
from collections import deque
from collections.abc import Callable, Iterator

import torch

from crnn.config import Config
from crnn.engine import distributed as D
from crnn.engine.runtime import Runtime
from crnn.loss import ctc_min_steps

log = logging.getLogger("crnn")

DATA_WAIT_WARN = 0.4  # a logging window whose steps waited for data at least this share of their time warns
DATA_WAIT_REPEAT = 10  # logging windows between two such warnings while it stays high
COLLAPSE_GRACE_STEPS = 100  # no collapse warning before this step (nor during warm-up): early outputs are blanks
COLLAPSE_MIN_SAMPLES = 10  # nor on fewer validation predictions
ONE_STRING_SHARE = 0.5  # "collapsed onto one string": one text for at least this share of the samples, mostly wrong
LOSS_RISE = 1.5  # a loss this many times its lowest recent level counts as rising
WEIGHT_BLOWUP = 100.0  # weights this many times larger than at the start were blown up by the learning rate


class DataWait:
    """Share of the training step spent blocked in ``next()`` on the batch iterator, per logging window and in all.

    A step is timed from the first fetch of its batches to the end of its optimizer step, so validation, saving and
    logging between steps count in neither part. ``clock`` is :meth:`Runtime.clock` (on CUDA it first waits for the
    queued kernels, so that computation still running is not counted as waiting for data).
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.wait = self.total = self.run_wait = self.run_total = 0.0
        self._open: float | None = None  # when the step now running started fetching

    def batches(self, make: Callable[..., Iterator], *args) -> Iterator:
        """Iterate ``make(*args)``, timing each fetch (the iterator is made lazily: starting an epoch counts too)."""
        it = None
        while True:
            t0 = self.clock()
            if self._open is None:
                self._open = t0
            if it is None:
                it = iter(make(*args))
            batch = next(it, None)
            self.wait += self.clock() - t0  # (on CUDA nothing is queued by now: this sync is free)
            if batch is None:
                return
            yield batch

    def step_done(self) -> None:
        """The optimizer step ended: close the step's time."""
        if self._open is not None:
            self.total += self.clock() - self._open
            self._open = None

    def window(self) -> float:
        """The share since the last call (0.0 when nothing was timed); starts the next window."""
        share = min(self.wait / self.total, 1.0) if self.total > 0 else 0.0
        self.run_wait, self.run_total = self.run_wait + self.wait, self.run_total + self.total
        self.wait = self.total = 0.0
        return share

    def run_share(self) -> float | None:
        """The share over the whole sitting (None before the first step)."""
        total = self.run_total + self.total
        return min((self.run_wait + self.wait) / total, 1.0) if total > 0 else None


def highest_share(share: float, rt: Runtime) -> tuple[float, int]:
    """(the highest share over the ranks, its rank): one small all-reduce per logging window under DDP."""
    if rt.world_size == 1:
        return share, rt.rank
    v = torch.zeros(rt.world_size, device=rt.device)
    v[rt.rank] = share
    v = D.all_reduce_sum(v).cpu()
    r = int(v.argmax())
    return float(v[r]), r


def cpu_cores() -> int:
    """CPU cores this process may use, shared by the processes of this machine (torchrun's LOCAL_WORLD_SIZE)."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(n // max(int(os.environ.get("LOCAL_WORLD_SIZE", "1")), 1), 1)


def data_wait_message(share: float, rank: int, world_size: int, first: int, last: int, num_workers: int) -> str:
    """The warning for a logging window whose steps waited for data ``share`` of their time."""
    who = f"rank {rank}'s step" if world_size > 1 else "the step"
    head = f"{who} waited for data {share * 100:.0f} % of the time (steps {first}-{last})"
    cores = cpu_cores()
    if num_workers < cores:
        return f"{head}: raise data.num_workers (now {num_workers}; {cores} CPU cores per process)"
    return (f"{head}: data.num_workers={num_workers} already matches the {cores} CPU cores per process, so reading "
            f"and decoding images is the bottleneck: data.augment, large images or a slow disk (an LMDB reads faster "
            f"than a folder of files)")


def fit_width(bare, need: int, start: int) -> int:
    """The smallest input width >= ``start`` whose T (``bare.output_length``) is at least ``need``."""
    lo, hi = start, max(start, 8)
    while int(bare.output_length(hi)) < need:
        lo, hi = hi, hi * 2
        if hi > 1 << 20:
            return hi
    while lo < hi:  # output_length grows with the width
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if int(bare.output_length(mid)) < need else (lo, mid)
    return lo


def collapse_message(name: str, res, step: int, cfg: Config, num_classes: int) -> str | None:
    """A validation whose greedy predictions are all empty, or mostly one wrong text: the warning, else None."""
    n, t = int(res.metrics["samples"]), cfg.train
    if step < max(COLLAPSE_GRACE_STEPS, t.warmup_steps) or n < COLLAPSE_MIN_SAMPLES:
        return None  # a model in its first steps outputs blanks: that is no news
    if res.empty_predictions >= n:
        return (f"the model outputs only blanks at step {step} (all {n} validation predictions on {name} are empty): "
                f"usual in the first thousands of steps, longer with a large alphabet ({num_classes - 1} characters "
                f"here); if it persists lower train.lr (now {t.lr:g}) or check that the labels match the images")
    if res.top_predictions:
        text, k, hits = res.top_predictions[0]
        if k >= ONE_STRING_SHARE * n and 2 * hits < k:
            return (f"the model outputs the same text {text!r} for {k} of {n} validation predictions on {name} at "
                    f"step {step} (it is their label {hits} times): it has collapsed onto one string; brief early in "
                    f"training, if it persists lower train.lr (now {t.lr:g}), check that the labels match the images "
                    f"and that no single text dominates the training data")
    return None


class Health:
    """What the trainer watches during a sitting, and the warnings it has given (``warnings``)."""

    def __init__(self, cfg: Config, rt: Runtime, bare, num_classes: int, step0: int = 0) -> None:
        self.cfg, self.rt, self.bare, self.num_classes = cfg, rt, bare, num_classes
        self.data = DataWait(rt.clock)
        self.warnings: list[str] = []
        self._window_start, self._windows, self._data_warned = step0, 0, -DATA_WAIT_REPEAT
        self._last: tuple | None = None  # the last logging window: (share, its rank, first step, last step)
        self._micro: list = []  # (batch, loss, unfit) of the step now running
        self._losses: deque = deque(maxlen=50)  # recent finite step losses
        self.unfit, self.unfit_need, self._unfit_told, self._capped = 0, 0, 0, False
        self._weights0 = self.largest_weight()  # to tell weights blown up by the learning rate

    def warn(self, message: str) -> None:
        """Log one health warning and keep it for the summary."""
        log.warning(message)
        if len(self.warnings) < 100:
            self.warnings.append(message)

    # ------------------------------------------------------------------------- steps
    def micro(self, batch, loss: float, unfit: int) -> None:
        """One micro-batch was trained on, with this loss and this many labels too long for its T."""
        self._micro.append((batch, loss, unfit))

    def step_done(self, ok: bool, scaler=None) -> str | None:
        """The optimizer step ended (``ok``: its gradients were finite); the likely cause when they were not."""
        self.data.step_done()
        micro, self._micro = self._micro, []
        for batch, _, unfit in micro:
            if unfit:
                self._count_unfit(batch)
        if ok:
            self._losses.append(sum(m[1] for m in micro) / max(len(micro), 1))
            return None
        if not self.rt.main and all(math.isfinite(m[1]) for m in micro):
            return None  # under DDP the gradients are non-finite on every rank: rank 0 explains; others speak only
        return self.explain_nonfinite(micro, scaler)  # when the non-finite loss came from their own batch

    def _needs(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        """([B] time steps each label needs, [B] time steps its image gives), as the trainer's CTC loss sees them."""
        full = int(self.bare.output_length(batch.images.shape[-1]))
        have = torch.full((len(batch.labels),), full, dtype=torch.long)
        if self.cfg.data.keep_ratio and getattr(batch, "widths", None) is not None:
            have = self.bare.output_length(batch.widths.long().cpu()).clamp(max=full)
        return ctc_min_steps(batch.targets.long().cpu(), batch.target_lengths.long().cpu()), have

    def _count_unfit(self, batch) -> None:
        need, have = self._needs(batch)
        bad = need > have
        self.unfit += int(bad.sum())
        if bad.any():
            self.unfit_need = max(self.unfit_need, int(need[bad].max()))
            d = self.cfg.data
            self._capped |= bool(d.keep_ratio and (batch.widths[bad] >= d.max_width).any())

    def explain_nonfinite(self, micro: list, scaler) -> str:
        """The likely source of a non-finite step, in words, from its micro-batches and the losses before it."""
        lr = self.cfg.train.lr
        loss_ok = all(math.isfinite(m[1]) for m in micro)
        what = "the loss was finite, its gradients were not" if loss_ok else "the loss itself was not finite"
        causes = []
        if scaler is not None:
            causes.append(f"fp16 overflow{'' if loss_ok else ' in the forward pass'}: train.amp=fp16's GradScaler "
                          f"skips such steps and lowers its scale (now {scaler.get_scale():g}), usual in the first "
                          f"steps; if it keeps happening use train.amp=bf16 or off")
        w = self.largest_weight()
        if rise := self.loss_rise():
            causes.append(f"the learning rate: the loss rose from {rise[0]:.3g} to {rise[1]:.3g} over the last "
                          f"{rise[2]} steps; lower train.lr (now {lr:g}) or raise train.warmup_steps")
        elif not math.isfinite(w) or w > WEIGHT_BLOWUP * max(self._weights0, 1.0):
            causes.append(f"the learning rate: the largest weight grew from {self._weights0:.3g} to {w:.3g} since "
                          f"the start; lower train.lr (now {lr:g}) or raise train.warmup_steps")
        causes += self._label_causes(micro)
        if not causes:
            causes.append("none of the usual ones (the loss was not rising, every label fits T, no fp16); "
                          f"lower train.lr (now {lr:g}) or look for broken images")
        return f"{what}; likely cause: " + "; or ".join(causes)

    def largest_weight(self) -> float:
        """The largest absolute parameter value of the model (nan when one is not finite)."""
        with torch.no_grad():
            return max((float(p.detach().abs().max()) for p in self.bare.parameters() if p.numel()), default=0.0)

    def loss_rise(self) -> tuple[float, float, int] | None:
        """(lowest recent level, last level, steps) when the last 5 step losses average well above the lowest 5."""
        v = list(self._losses)
        if len(v) < 10:
            return None
        means = [sum(v[i:i + 5]) / 5 for i in range(len(v) - 4)]
        low, last = min(means), means[-1]
        return (low, last, len(v)) if last > LOSS_RISE * low else None

    def _label_causes(self, micro: list) -> list[str]:
        empty, unfit = [], []
        for batch, _, _ in micro:
            if len(batch.labels) == 0:
                continue
            need, have = self._needs(batch)
            for label, n, h in zip(batch.labels, need.tolist(), have.tolist()):
                if n == 0:
                    empty.append(label)
                elif n > h:
                    unfit.append((label, n, h))
        out = []
        if empty:
            out.append(f"{len(empty)} empty label(s) in the batch")
        if unfit:
            label, n, h = max(unfit, key=lambda u: u[1] - u[2])
            out.append(f"{len(unfit)} label(s) in the batch too long for T (CTC needs T >= length + repeated "
                       f"letters), e.g. {label!r} needs {n} with T={h}")
        return out

    # ------------------------------------------------------------------------- logging windows and validation
    def window(self, step: int) -> float:
        """A logging window ended at ``step``: the highest data-wait share over the ranks (call on every rank: one
        small all-reduce under DDP); :meth:`advise` then gives the window's warnings."""
        share, rank = highest_share(self.data.window(), self.rt)
        self._last = (share, rank, self._window_start + 1, step)
        self._window_start = step
        self._windows += 1
        return share

    def advise(self) -> None:
        """Rank 0, after the window's log line: warn about waiting for data and about labels too long for T."""
        if not self.rt.main or self._last is None:
            return
        share, rank, first, last = self._last
        # the first window of a sitting includes starting the DataLoader workers: no verdict on it
        if share >= DATA_WAIT_WARN and self._windows > 1 and self._windows - self._data_warned >= DATA_WAIT_REPEAT:
            self._data_warned = self._windows
            self.warn(data_wait_message(share, rank, self.rt.world_size, first, last, self.cfg.data.num_workers))
        if self.unfit_need > self._unfit_told:
            self._unfit_told = self.unfit_need
            self.warn(self.unfit_message())

    def unfit_message(self) -> str:
        """Labels too long for T so far, with the input width that would fit the longest of them."""
        d, need = self.cfg.data, self.unfit_need
        head = (f"{self.unfit} labels so far need more time steps than the model gives them; the longest needs "
                f"T >= {need}")
        if not d.keep_ratio:
            w = fit_width(self.bare, need, d.width)
            return (f"{head} (T={int(self.bare.output_length(d.width))} at data.width={d.width}): set data.width >= "
                    f"{w} or data.keep_ratio=true, or lower data.max_label_length (now {d.max_label_length}) to drop "
                    f"them")
        w = fit_width(self.bare, need, 8)
        fix = (f"raise data.max_width (now {d.max_width}) to >= {w}" if self._capped else
               f"their crops are narrow for their text: check those labels, or set data.keep_ratio=false "
               f"data.width>={w}")
        return f"{head}, an image {w} px wide (data.keep_ratio: T follows each image's width): {fix}"

    def validation(self, name: str, res, step: int) -> None:
        """Warn (rank 0) when a validation's predictions collapsed to blanks or to one string."""
        if self.rt.main and (msg := collapse_message(name, res, step, self.cfg, self.num_classes)):
            self.warn(msg)
