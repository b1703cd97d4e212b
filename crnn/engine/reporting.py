"""What a training run reports while it runs: log lines, TensorBoard, throughput, and the stop-signal flag."""
from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

from crnn.config import Config
from crnn.engine.evaluate import EvalResult
from crnn.engine.runtime import Runtime
from crnn.metrics import format_rates, ljust_display, normalize_text, protocol_warning

log = logging.getLogger("crnn")


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


# SIGUSR1: SLURM's pre-emption / time-limit warning (sbatch --signal=USR1@SECONDS): save last.pt, stop, get requeued
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1") if hasattr(signal, n))


class StopFlag:
    """Set by SIGINT/SIGTERM/SIGHUP/SIGUSR1; the loop checks it between steps, saves and exits cleanly.

    torchrun forwards these signals from its agent to every worker (and waits 30 s, --shutdown-timeout, before
    SIGKILL); a second signal gives up at once. ``agent``: the pid of the torchrun agent that started this worker;
    :meth:`poll` treats its death (kill -9, OOM killer) like SIGTERM, since without an agent nobody would ever stop
    the workers (they would go on training, unsupervised, holding their devices, until the last step).
    """

    def __init__(self, main: bool = True, agent: int | None = None) -> None:
        self.signum: int | None = None
        self.main = main
        self.agent = agent
        self._old: dict = {}

    def poll(self, rank: int) -> None:
        """Between steps: if the agent is gone (this process was re-parented), stop as if SIGTERM had arrived."""
        if self.signum is None and self.agent is not None and os.getppid() != self.agent:
            self.signum = signal.SIGTERM
            log.warning("rank %d: the torchrun agent (pid %d) is gone: finishing this step, saving a checkpoint "
                        "and stopping", rank, self.agent)

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
    log.info("val %s @ %d: %s  (%d samples, %.0f img/s)", name, step, format_rates(m, res.cer_first),
             m["samples"], res.images_per_s)
    if warning := protocol_warning(res.protocol, res.removed_share, name):
        log.warning(warning)
    for label, pred in res.examples:
        ok = normalize_text(label, res.protocol) == normalize_text(pred, res.protocol)
        log.info("    %s -> %s%s", ljust_display(label, 24), pred, "" if ok else "   *")
    if tb is None:
        return
    tag = Path(name).name or name
    for k in ("word_acc", "cer", "ned_similarity"):  # ned_similarity = 1-NED (higher is better)
        tb.add_scalar(f"val/{tag}/{k}", m[k], step)
    if res.sample_images is not None:
        import torchvision

        grid = torchvision.utils.make_grid(res.sample_images * 0.5 + 0.5, nrow=1, pad_value=1.0)
        tb.add_image(f"val/{tag}/samples", grid.clamp(0, 1), step)
        tb.add_text(f"val/{tag}/predictions",
                    "\n".join(f"    {i}: true `{t}` | pred `{p}`" for i, (t, p) in enumerate(res.examples)), step)


def log_extra_protocols(name: str, res: EvalResult, step: int, tb) -> None:
    """One log line and TensorBoard scalars (``val/SET@PROTOCOL/...``) per train.extra_protocols entry: the same
    readings as :func:`log_validation`'s, scored under that protocol."""
    for protocol, m in res.extra.items():
        log.info("val %s @ %d under %s: %s  (%d samples)", name, step, protocol, format_rates(m, res.cer_first),
                 m["samples"])
        if tb is not None:
            for k in ("word_acc", "cer", "ned_similarity"):
                tb.add_scalar(f"val/{Path(name).name or name}@{protocol}/{k}", m[k], step)


def _fmt_time(s: float) -> str:
    s = int(s)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
