"""Runtime set-up, decided once at start-up: device, parallel mode (single / DataParallel / DDP) and ranks."""
from __future__ import annotations

import logging
import os
import random
import time
from dataclasses import dataclass, field

import torch

from crnn.config import Config
from crnn.engine import distributed as D

log = logging.getLogger("crnn")


class TrainingError(RuntimeError):
    """A condition that stops training with a clear message."""


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

    def clock(self) -> float:
        """Seconds, for timing training steps: on CUDA once the device has finished its queued work (kernels run
        asynchronously, so without this the time a step then waits for its next batch would include the device's
        tail of the previous step, counting computation as waiting for data)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()


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


def cudnn_benchmark_wanted(cfg: Config) -> bool:
    """Whether cuDNN should time its convolution algorithms (``torch.backends.cudnn.benchmark``).

    On for fixed-size batches (fixed width, or keep_ratio with ``data.pad=edge``): each shape is tuned once, then
    every step reuses the fastest algorithm. Off for keep-ratio batches padded to the batch's widest image
    (``data.pad=batch``): up to ``(max_width - min_width) / 4`` distinct widths would each be timed again when they first
    appear (and for the validation and last partial batches), so the heuristics' choice is used instead.
    """
    return not (cfg.data.keep_ratio and cfg.data.pad == "batch")


def configure_cudnn(cfg: Config, device: torch.device) -> bool | None:
    """Set ``cudnn.benchmark`` once for a CUDA run (see :func:`cudnn_benchmark_wanted`); None off CUDA."""
    if device.type != "cuda":
        return None
    on = cudnn_benchmark_wanted(cfg)
    torch.backends.cudnn.benchmark = on
    return on


def setup_runtime(cfg: Config) -> Runtime:
    """Pick single / DataParallel / DDP from the config and the environment, and initialise it."""
    rt = _setup_runtime(cfg)
    configure_cudnn(cfg, rt.device)
    return rt


def _setup_runtime(cfg: Config) -> Runtime:
    t = cfg.train
    if D.launched_by_torchrun() or D.adopt_slurm_env():  # torchrun, or srun with one task per process
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
