"""``train.amp=auto``: pick the autocast mode that is fastest on this machine, measured, not guessed.

bf16 autocast is about 2x fp32 on CPUs whose bf16 matmuls are native and fast (e.g. AMD Zen 4), but 0.8x on CPUs
that advertise ``avx512_bf16`` while their fp32 FMA units are faster still (measured on an Intel Xeon here, see
benchmarks/README.md). A CPU flag cannot tell the two apart, so on the CPU ``auto`` times a few training steps of a
copy of the model in fp32 and in bf16 and keeps bf16 only when it is clearly faster. On CUDA ``auto`` is bf16 where
the GPU supports it, else off. Under DDP rank 0 measures and every rank uses its answer.
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import torch

from crnn.engine import distributed as D
from crnn.engine.evaluate import autocast_context
from crnn.loss import ctc_loss

BF16_MIN_SPEEDUP = 1.1  # bf16 must beat fp32 by this factor to be chosen (it also costs a little accuracy headroom)


@dataclass
class AmpChoice:
    """The chosen mode and why (a sentence for the log)."""

    amp: str
    reason: str
    speedup: float | None = None  # fp32 step time / bf16 step time, when measured


def cpu_bf16_capable() -> bool:
    """True when oneDNN has native bf16 kernels on this CPU (otherwise bf16 is emulated and always slower)."""
    try:
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def time_steps(model: torch.nn.Module, images: torch.Tensor, targets: torch.Tensor, target_lengths: torch.Tensor,
               amp: str, reps: int) -> float:
    """Fastest of ``reps`` forward + CTC + backward passes of ``model`` under ``amp`` (seconds)."""
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        with autocast_context(images.device, amp):
            logits = model(images)
        steps = torch.full((logits.shape[0],), logits.shape[1], dtype=torch.long)
        ctc_loss(logits, targets, target_lengths, steps).loss.backward()
        best = min(best, time.perf_counter() - t0)
        model.zero_grad(set_to_none=True)
    return best


def measure_bf16_speedup(model: torch.nn.Module, in_channels: int, height: int, width: int, batch: int,
                         channels_last: bool, reps: int = 3) -> float:
    """fp32 step time / bf16 step time for a copy of ``model`` on a random batch (the model is not touched)."""
    probe = copy.deepcopy(model).train()
    gen = torch.Generator().manual_seed(0)
    images = torch.rand(batch, in_channels, height, width, generator=gen)
    if channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    length = max(1, min(5, probe.output_length(width) // 2))
    targets = torch.randint(1, 10, (batch * length,), generator=gen)
    target_lengths = torch.full((batch,), length, dtype=torch.long)
    times = {"off": [], "bf16": []}
    for amp in ("off", "bf16"):  # warm-up: oneDNN builds its kernels on first use
        time_steps(probe, images, targets, target_lengths, amp, 1)
    for _ in range(2):  # interleaved, so that a busy moment hits both modes
        for amp in times:
            times[amp].append(time_steps(probe, images, targets, target_lengths, amp, reps))
    return min(times["off"]) / min(times["bf16"])


def unmeasured_choice(device: torch.device, gpu_hint: str = "") -> AmpChoice | None:
    """``auto`` where nothing needs measuring: on CUDA bf16 if the GPU supports it (else off, plus ``gpu_hint``), on
    other non-CPU devices off; None on a CPU, where the caller measures."""
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported():
            return AmpChoice("bf16", "this GPU supports bf16")
        return AmpChoice("off", f"this GPU has no bf16 support{gpu_hint}")
    if device.type != "cpu":
        return AmpChoice("off", f"no automatic choice for device type {device.type!r}")
    return None


def choose_amp(model: torch.nn.Module, device: torch.device, in_channels: int, height: int, width: int,
               batch: int, channels_last: bool) -> AmpChoice:
    """The fastest autocast mode for training ``model`` on ``device`` (rank 0 decides under DDP)."""
    if (fixed := unmeasured_choice(device, " (train.amp=fp16 is the choice to try)")) is not None:
        return fixed
    choice = None
    if D.get_rank() == 0:
        if not cpu_bf16_capable():
            choice = AmpChoice("off", "this CPU has no native bf16 kernels")
        else:
            speedup = measure_bf16_speedup(model, in_channels, height, width, min(batch, 16), channels_last)
            amp = "bf16" if speedup >= BF16_MIN_SPEEDUP else "off"
            choice = AmpChoice(amp, f"a bf16 training step measured {speedup:.2f}x the fp32 step on this CPU "
                                    f"and needs >= {BF16_MIN_SPEEDUP}x", speedup)
    if D.is_dist():
        choice = D.broadcast_object(choice)
    return choice


READ_BF16_MIN_SPEEDUP = 1.1  # reading: bf16 weights must beat float32 by this factor for amp=auto to pick them


def measure_read_bf16_speedup(model: torch.nn.Module, in_channels: int, height: int, width: int,
                              reps: int = 5) -> float:
    """float32 time / bf16-weights time of one crop's forward pass through a copy of ``model`` (a CRNN; not touched),
    the two interleaved so that a busy moment hits both."""
    probe = copy.deepcopy(model).eval()
    images = torch.rand(1, in_channels, height, width, generator=torch.Generator().manual_seed(0))
    fast = copy.deepcopy(probe).hold_weights_in(torch.bfloat16)
    best = {"off": float("inf"), "bf16": float("inf")}
    with torch.inference_mode():
        for net in (probe, fast):  # warm-up: oneDNN builds its kernels on first use
            net(images)
        for _ in range(reps):
            for amp, net in (("off", probe), ("bf16", fast)):
                t0 = time.perf_counter()
                net(images)
                best[amp] = min(best[amp], time.perf_counter() - t0)
    return best["off"] / best["bf16"]


def choose_read_amp(model: torch.nn.Module, device: torch.device, in_channels: int, height: int,
                    width: int) -> AmpChoice:
    """``amp=auto`` for reading: bf16 where this device reads measurably faster in it, else off."""
    if (fixed := unmeasured_choice(device)) is not None:
        return fixed
    if not cpu_bf16_capable():
        return AmpChoice("off", "this CPU has no native bf16 kernels")
    speedup = measure_read_bf16_speedup(model, in_channels, height, width)
    amp = "bf16" if speedup >= READ_BF16_MIN_SPEEDUP else "off"
    return AmpChoice(amp, f"one crop read in bf16 weights measured {speedup:.2f}x float32 on this CPU and needs "
                          f">= {READ_BF16_MIN_SPEEDUP}x", speedup)
