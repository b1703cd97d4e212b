"""Training-step speed of crnn's own step against a plain fp32 CRNN written the usual way, in the same run.

For each model variant (vgg, vgg_small, resnet18 from ``crnn.model.build_model``) at 1x32x100, batch 64:

* a **reference** written the way the common CRNN repos write it (meijieru/crnn.pytorch): VGG (or ResNet) CNN,
  time-major ``nn.LSTM`` inside ``BidirectionalLSTM`` blocks (LSTM + Linear on ``view(T*b, 2h)``), output
  ``[T, B, K]``, ``log_softmax`` + ``nn.CTCLoss``; fp32, eager; same layers and parameter count as our variant;
* **our step**: ``crnn.engine.trainer.build_training_model`` / ``train_step`` / ``optimizer_step`` (batch-first
  logits, ``crnn.loss.ctc_loss``, autocast from ``crnn.engine.evaluate.autocast_context``) in each mode:
  fp32, bf16 autocast, channels_last, both, and torch.compile (fp32 / bf16).

Both sides do Adam (lr 1e-3) with gradient clipping at 5. Timing interleaves the configurations round by round
(the machine is shared, so only ratios taken in the same round mean much); a ratio is the median over rounds of
reference-time / config-time. Also reported: GFLOP/s of the step (FLOPs from ``FlopCounterMode``) against an n x n
matmul (--matmul-size: 2048, or 512 with --quick) timed in the same run, peak memory (``VmHWM`` of a fresh subprocess per configuration), and the
largest |loss difference| between our fp32 step and the reference over a few steps from the same weights and batches.

    python benchmarks/bench_train.py --out bench_train.json           # full run (14 min at 1 thread on 2 busy cores)
    python benchmarks/bench_train.py --variants vgg_small             # one variant
    python benchmarks/bench_train.py --quick --out /tmp/q.json        # CI-sized: vgg_small, batch 8, no compile
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable

import torch
import torch.nn as nn
from torch.utils.flop_counter import FlopCounterMode

from crnn.charset import Charset
from crnn.config import Config
from crnn.data.collate import Batch
from crnn.engine.autotune import choose_amp
from crnn.engine.trainer import (Runtime, build_optimizer, build_scaler, build_scheduler, build_training_model,
                                 optimizer_step, train_step)
from crnn.model import VGG_SPECS, VARIANTS, count_parameters

CHARSET = "alnum36"
HEIGHT, WIDTH = 32, 100
LR, CLIP = 1e-3, 5.0
# mode name -> (amp, channels_last, compile)
MODES: dict[str, tuple[str, bool, bool]] = {
    "fp32": ("off", False, False),
    "bf16": ("bf16", False, False),
    "channels_last": ("off", True, False),
    "bf16+channels_last": ("bf16", True, False),
    "compile": ("off", False, True),
    "compile+bf16": ("bf16", False, True),
}
REFERENCE = "reference"


# ----------------------------------------------------------------------------- the reference (meijieru style)
class BidirectionalLSTM(nn.Module):
    """meijieru/crnn.pytorch's block: time-major bidirectional LSTM, then a Linear on the flattened output."""

    def __init__(self, n_in: int, n_hidden: int, n_out: int) -> None:
        super().__init__()
        self.rnn = nn.LSTM(n_in, n_hidden, bidirectional=True)
        self.embedding = nn.Linear(n_hidden * 2, n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (T, b, n_in) -> (T, b, n_out)
        recurrent, _ = self.rnn(x)
        T, b, h = recurrent.size()
        output = self.embedding(recurrent.view(T * b, h))  # (T*b, n_out)
        return output.view(T, b, -1)


class ReferenceCRNN(nn.Module):
    """CNN -> squeeze height -> (T, b, C) -> BidirectionalLSTM x2 -> (T, b, K): the plain fp32 reference."""

    def __init__(self, cnn: nn.Module, n_feat: int, nh: int, nclass: int) -> None:
        super().__init__()
        self.cnn = cnn
        self.rnn = nn.Sequential(BidirectionalLSTM(n_feat, nh, nh), BidirectionalLSTM(nh, nh, nclass))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        conv = self.cnn(x)  # (b, c, 1, w)
        b, c, h, w = conv.size()
        assert h == 1, "the height of conv must be 1"
        conv = conv.squeeze(2).permute(2, 0, 1)  # (w, b, c)
        return self.rnn(conv)  # (T, b, nclass)


def reference_vgg(nc: int, nm: tuple[int, ...]) -> nn.Sequential:
    """meijieru's CNN (BN after convs 2, 4, 6); conv bias only where no BN follows, to match our parameter count."""
    ks, ps = [3, 3, 3, 3, 3, 3, 2], [1, 1, 1, 1, 1, 1, 0]
    cnn = nn.Sequential()

    def conv_relu(i: int, bn: bool = False) -> None:
        n_in = nc if i == 0 else nm[i - 1]
        cnn.add_module(f"conv{i}", nn.Conv2d(n_in, nm[i], ks[i], 1, ps[i], bias=not bn))
        if bn:
            cnn.add_module(f"batchnorm{i}", nn.BatchNorm2d(nm[i]))
        cnn.add_module(f"relu{i}", nn.ReLU(True))

    conv_relu(0)
    cnn.add_module("pooling0", nn.MaxPool2d(2, 2))  # 64x16x50
    conv_relu(1)
    cnn.add_module("pooling1", nn.MaxPool2d(2, 2))  # 128x8x25
    conv_relu(2, True)
    conv_relu(3)
    cnn.add_module("pooling2", nn.MaxPool2d((2, 2), (2, 1), (0, 1)))  # 256x4x16
    conv_relu(4, True)
    conv_relu(5)
    cnn.add_module("pooling3", nn.MaxPool2d((2, 2), (2, 1), (0, 1)))  # 512x2x16
    conv_relu(6, True)  # 512x1x16
    return cnn


def reference_resnet18(nc: int) -> nn.Sequential:
    """torchvision ResNet-18 without pool/fc, layers 2-4 striding in height only."""
    from torchvision.models import resnet18

    net = resnet18(weights=None)
    net.conv1 = nn.Conv2d(nc, 64, 7, 2, 3, bias=False)
    for layer in (net.layer2, net.layer3, net.layer4):
        layer[0].conv1.stride = (2, 1)
        layer[0].downsample[0].stride = (2, 1)
    return nn.Sequential(*list(net.children())[:-2])


def build_reference(variant: str, nc: int, nclass: int) -> ReferenceCRNN:
    """The reference model with the same layers and parameter count as our ``variant``."""
    spec = VARIANTS[variant]
    cnn = reference_resnet18(nc) if variant == "resnet18" else reference_vgg(nc, VGG_SPECS[variant].channels)
    return ReferenceCRNN(cnn, spec.feat_channels, spec.hidden, nclass)


def copy_weights(src: nn.Module, dst: nn.Module) -> None:
    """Copy parameters and buffers position by position (the two models register them in the same order)."""
    s, d = list(src.state_dict().values()), dst.state_dict()
    if len(s) != len(d) or any(a.shape != b.shape for a, b in zip(s, d.values())):
        raise ValueError("reference and crnn model differ in their parameters/buffers")
    dst.load_state_dict(dict(zip(d.keys(), s)), strict=True)


# ----------------------------------------------------------------------------- steps
def make_batches(n: int, batch_size: int, seed: int = 0) -> list[Batch]:
    """``n`` random batches: images in [-1, 1], labels of 3-10 characters of the charset."""
    g = torch.Generator().manual_seed(seed)
    charset = Charset.from_spec(CHARSET)
    out = []
    for _ in range(n):
        images = torch.rand(batch_size, 1, HEIGHT, WIDTH, generator=g) * 2 - 1  # (B, 1, 32, 100)
        lengths = torch.randint(3, 11, (batch_size,), generator=g)
        targets = torch.randint(1, charset.num_classes, (int(lengths.sum()),), generator=g)
        labels = [charset.decode(ids.tolist()) for ids in targets.split(lengths.tolist())]
        out.append(Batch(images, targets, lengths, labels, torch.full((batch_size,), WIDTH)))
    return out


def reference_step_fn(variant: str, seed: int = 0, device: str = "cpu") -> tuple[Callable[[Batch], float], nn.Module]:
    """(step, model) for the reference: forward, log_softmax, nn.CTCLoss, backward, clip, Adam (on ``device``)."""
    torch.manual_seed(seed)
    nclass = Charset.from_spec(CHARSET).num_classes
    model = build_reference(variant, 1, nclass).to(device).train()
    crit = nn.CTCLoss(zero_infinity=True)
    opt = torch.optim.Adam(model.parameters(), lr=LR)

    def step(batch: Batch) -> float:
        preds = model(batch.images.to(device, non_blocking=True))  # (T, B, K)
        preds_size = torch.full((preds.size(1),), preds.size(0), dtype=torch.long)
        loss = crit(preds.log_softmax(2), batch.targets, preds_size, batch.target_lengths)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        return loss.item()

    return step, model


def crnn_config(variant: str, mode: str, device: str = "cpu", modes: dict | None = None) -> Config:
    """The crnn config of one mode (of ``modes``, default :data:`MODES`): Adam at a constant LR, clip 5."""
    amp, channels_last, compile_ = (modes or MODES)[mode][:3]
    cfg = Config()
    cfg.model.variant, cfg.model.charset = variant, CHARSET
    t = cfg.train
    t.device, t.amp, t.channels_last, t.compile = device, amp, channels_last, bool(compile_)
    t.optimizer, t.lr, t.grad_clip, t.schedule, t.warmup_steps = "adam", LR, CLIP, "constant", 0
    return cfg


def crnn_step_fn(variant: str, mode: str, init: nn.Module, device: str = "cpu",
                 modes: dict | None = None) -> tuple[Callable[[Batch], float], nn.Module]:
    """(step, bare model) for crnn's own training step in ``mode``, starting from ``init``'s weights.

    A mode's optional fourth field is a ``torch.compile`` mode (e.g. ``"reduce-overhead"``: CUDA graphs)."""
    spec = (modes or MODES)[mode]
    cfg = crnn_config(variant, mode, device, modes)
    rt = Runtime(torch.device(device), "single")
    if len(spec) > 3 and spec[3]:
        cfg.train.compile = False  # compiled below with the mode asked for
    model, bare = build_training_model(cfg, Charset.from_spec(CHARSET), rt)
    copy_weights(init, bare)
    if cfg.train.channels_last:  # load_state_dict keeps the parameters' memory format, but be sure
        bare.to(memory_format=torch.channels_last)
    if len(spec) > 3 and spec[3]:
        model = torch.compile(model, mode=spec[3])
    opt, scaler = build_optimizer(cfg, model), build_scaler(cfg, rt)
    sched = build_scheduler(cfg, opt)
    model.train()

    def step(batch: Batch) -> float:
        loss, _ = train_step(model, batch, opt, scaler, cfg, rt, True, bare)
        optimizer_step(model, opt, sched, scaler, cfg)
        return loss

    return step, bare


def build_steps(variant: str, modes: list[str], seed: int = 0) -> dict[str, Callable[[Batch], float]]:
    """Reference step plus one crnn step per mode, all from the reference's initial weights."""
    ref_step, ref_model = reference_step_fn(variant, seed)
    steps = {REFERENCE: ref_step}
    for mode in modes:
        steps[mode] = crnn_step_fn(variant, mode, ref_model)[0]
    return steps


# ----------------------------------------------------------------------------- measurements
def time_interleaved(fns: dict[str, Callable[[], object]], rounds: int, calls: int, warmup: int,
                     log: Callable[[str], None] = print) -> dict[str, dict]:
    """Seconds per call of each function, timed round by round in rotating order.

    Returns {name: {"warmup_s", "times", "cpu_times", "s_per_call", "x_baseline", "x_baseline_cpu"}}: per-round
    wall-clock and process-CPU seconds per call, their medians, and the median over rounds of baseline time /
    this time (the first name is the baseline). CPU time leaves out the time this process waited for a core.
    """
    names = list(fns)
    out: dict[str, dict] = {}
    for name in names:
        t0 = time.perf_counter()
        for _ in range(warmup):
            fns[name]()
        out[name] = {"warmup_s": round(time.perf_counter() - t0, 2), "times": [], "cpu_times": []}
        log(f"  warm-up {name}: {out[name]['warmup_s']:.1f} s")
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(calls):
                fns[name]()
            out[name]["times"].append((time.perf_counter() - t0) / calls)
            out[name]["cpu_times"].append((time.process_time() - c0) / calls)
        log(f"  round {r + 1}/{rounds}: " + "  ".join(f"{n} {out[n]['times'][-1]:.2f}s" for n in names))
    base = out[names[0]]
    for name in names:
        o = out[name]
        o["s_per_call"] = statistics.median(o["times"])
        o["x_baseline"] = statistics.median(b / t for b, t in zip(base["times"], o["times"]))
        o["x_baseline_cpu"] = statistics.median(b / t for b, t in zip(base["cpu_times"], o["cpu_times"]))
    return out


def step_flops(variant: str, batch: Batch) -> int:
    """FLOPs of one forward + backward of our fp32 model (oneDNN off so the LSTM's matmuls are visible)."""
    step, _ = crnn_step_fn(variant, "fp32", build_reference(variant, 1, Charset.from_spec(CHARSET).num_classes))
    counter = FlopCounterMode(display=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.backends.mkldnn.flags(enabled=False), counter:
            step(batch)
    return counter.get_total_flops()


def matmul_fns(n: int = 2048) -> dict[str, Callable[[], object]]:
    """An n x n matmul in fp32 and bf16 (2 n^3 FLOPs each)."""
    a32, b32 = torch.randn(n, n), torch.randn(n, n)
    a16, b16 = a32.bfloat16(), b32.bfloat16()
    return {"matmul_fp32": lambda: a32 @ b32, "matmul_bf16": lambda: a16 @ b16}


def loss_curves(variant: str, batches: list[Batch], mode: str = "fp32", seed: int = 1) -> dict:
    """Losses of the reference and of our step in ``mode`` from the same weights on the same batches."""
    ref_step, ref_model = reference_step_fn(variant, seed)
    ours, _ = crnn_step_fn(variant, mode, ref_model)
    ours_l = [ours(b) for b in batches]
    ref_l = [ref_step(b) for b in batches]
    diff = max(abs(a - b) for a, b in zip(ours_l, ref_l))
    rel = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(ours_l, ref_l))
    return {"mode": mode, "reference": ref_l, "crnn": ours_l, "max_abs_diff": diff, "max_rel_diff": rel}


def read_status() -> dict[str, int]:
    """VmRSS and VmHWM of this process in kB (from /proc/self/status; empty where there is no /proc)."""
    out = {}
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                key, _, val = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(val.split()[0])
    except OSError:
        pass
    return out


def memory_child(variant: str, mode: str, batch_size: int, steps: int) -> dict:
    """In a fresh process: RSS before training, and the peak RSS (VmHWM) after ``steps`` steps, in MB."""
    nclass = Charset.from_spec(CHARSET).num_classes
    batches = make_batches(1, batch_size)
    if mode == REFERENCE:
        step = reference_step_fn(variant)[0]
    else:
        step = crnn_step_fn(variant, mode, build_reference(variant, 1, nclass))[0]
    before = read_status().get("VmRSS", 0)
    for _ in range(steps):
        step(batches[0])
    peak = read_status().get("VmHWM", 0)
    return {"rss_before_mb": round(before / 1024, 1), "peak_mb": round(peak / 1024, 1),
            "step_peak_mb": round((peak - before) / 1024, 1)}


def peak_memory(variant: str, mode: str, batch_size: int, threads: int, steps: int = 2) -> dict:
    """Run :func:`memory_child` in a fresh interpreter (a clean VmHWM) and return its numbers."""
    cmd = [sys.executable, os.path.abspath(__file__), "--memory-child", variant, mode,
           "--batch-size", str(batch_size), "--threads", str(threads), "--memory-steps", str(steps)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        tail = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"memory measurement of {variant}/{mode} failed: {tail}")
    return json.loads(res.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- driver
def machine_info() -> dict:
    """CPU model (lscpu), core count, torch version and threads, load average: for the documentation's table."""
    model = platform.processor() or platform.machine()
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        model = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), model)
    except OSError:
        pass
    return {"cpu": model, "cpus": os.cpu_count(), "torch": torch.__version__, "python": platform.python_version(),
            "torch_threads": torch.get_num_threads(), "loadavg_start": list(os.getloadavg())}


def cycling(step: Callable[[Batch], float], batches: list[Batch]) -> Callable[[], float]:
    """A no-argument call that feeds ``step`` the next batch of ``batches`` each time."""
    state = {"i": 0}

    def call() -> float:
        state["i"] += 1
        return step(batches[state["i"] % len(batches)])

    return call


def run_variant(variant: str, args: argparse.Namespace, log: Callable[[str], None]) -> dict:
    """Timings, FLOPs, loss check and peak memory of one variant."""
    nclass = Charset.from_spec(CHARSET).num_classes
    batches = make_batches(args.num_batches, args.batch_size)
    modes = [m for m in args.modes if not MODES[m][2] or variant in args.compile_variants]
    steps = build_steps(variant, modes)
    fns = {name: cycling(step, batches) for name, step in steps.items()} | matmul_fns(args.matmul_size)
    log(f"{variant}: timing {', '.join(fns)}")
    timing = time_interleaved(fns, args.rounds, args.calls, args.warmup, log)
    t0 = time.perf_counter()
    flops = step_flops(variant, batches[0])
    log(f"  FLOPs counted in {time.perf_counter() - t0:.0f} s")
    peak = {dt: 2 * args.matmul_size ** 3 / timing[f"matmul_{dt}"]["s_per_call"] / 1e9 for dt in ("fp32", "bf16")}
    rows = {}
    for name in steps:
        t = timing[name]
        dt = "bf16" if name != REFERENCE and MODES[name][0] == "bf16" else "fp32"
        gflops = flops / t["s_per_call"] / 1e9
        rows[name] = {"images_per_s": args.batch_size / t["s_per_call"], "x_reference": t["x_baseline"],
                      "x_reference_cpu_time": t["x_baseline_cpu"], "cpu_times": t["cpu_times"],
                      "s_per_step": t["s_per_call"], "times": t["times"], "warmup_s": t["warmup_s"],
                      "gflop_per_s": gflops, "matmul_dtype": dt, "of_matmul_peak": gflops / peak[dt]}
    ref_model = build_reference(variant, 1, nclass)
    ours = crnn_step_fn(variant, "fp32", ref_model)[1]
    result = {"params_reference": count_parameters(ref_model), "params_crnn": count_parameters(ours),
              "gflop_per_step": flops / 1e9, "matmul_gflop_per_s": peak, "rows": rows}
    t0 = time.perf_counter()
    choice = choose_amp(ours, torch.device("cpu"), 1, 32, 100, args.batch_size, channels_last=True)
    result["amp_auto"] = {"amp": choice.amp, "probe_speedup": choice.speedup, "reason": choice.reason}
    log(f"  train.amp=auto probe in {time.perf_counter() - t0:.1f} s: {choice.amp} ({choice.reason})")
    loss_batches = make_batches(args.loss_steps, args.batch_size, seed=1)
    t0 = time.perf_counter()
    result["loss_check"] = {m: loss_curves(variant, loss_batches, m) for m in ("fp32", "bf16") if m in modes}
    log(f"  loss check in {time.perf_counter() - t0:.0f} s")
    for name in args.memory_configs:
        if name in rows:
            rows[name].update(peak_memory(variant, name, args.batch_size, torch.get_num_threads()))
            log(f"  memory {name}: peak {rows[name]['peak_mb']:.0f} MB")
    return result


def print_table(results: dict) -> None:
    """One block per variant: img/s, ratio to the reference, GFLOP/s and share of matmul peak, memory."""
    m = results["machine"]
    print(f"{m['cpu']}, {m['cpus']} CPUs, torch {m['torch']}, {m['torch_threads']} threads, load average "
          f"{m['loadavg_start'][0]:.1f} -> {m['loadavg_end'][0]:.1f}; batch {results['config']['batch_size']}, "
          f"{results['config']['rounds']} rounds")
    head = (f"{'config':<20}{'img/s':>8}{'x ref':>7}{'x ref cpu':>10}{'GFLOP/s':>9}{'%peak':>7}{'peak MB':>9}"
            f"{'step MB':>9}")
    for variant, res in results["variants"].items():
        mm = res["matmul_gflop_per_s"]
        print(f"\n{variant}: {res['params_crnn'] / 1e6:.2f} M params (reference {res['params_reference'] / 1e6:.2f} "
              f"M), {res['gflop_per_step']:.1f} GFLOP/step; matmul {results['config']['matmul_size']}^2 fp32 {mm['fp32']:.0f} / bf16 "
              f"{mm['bf16']:.0f} GFLOP/s")
        print(head)
        for name, r in res["rows"].items():
            mem = f"{r['peak_mb']:>9.0f}{r['step_peak_mb']:>9.0f}" if "peak_mb" in r else f"{'-':>9}{'-':>9}"
            print(f"{name:<20}{r['images_per_s']:>8.1f}{r['x_reference']:>7.2f}{r['x_reference_cpu_time']:>10.2f}"
                  f"{r['gflop_per_s']:>9.1f}"
                  f"{100 * r['of_matmul_peak']:>6.0f}%{mem}")
        if "amp_auto" in res:
            a = res["amp_auto"]
            print(f"train.amp=auto (channels_last) picks {a['amp']} here: {a['reason']}")
        for mode, chk in res["loss_check"].items():
            print(f"loss check {mode} vs reference fp32 over {len(chk['crnn'])} steps: max |diff| = "
                  f"{chk['max_abs_diff']:.2e} (relative {chk['max_rel_diff']:.1e}; losses {chk['reference'][0]:.3f} "
                  f"-> {chk['reference'][-1]:.3f})")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options; ``--quick`` shrinks every size."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=["vgg_small", "vgg", "resnet18"])
    p.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    p.add_argument("--compile-variants", nargs="*", choices=sorted(VARIANTS), default=["vgg_small"],
                   help="variants that also run the torch.compile modes (each costs about a minute of compiling)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5, help="timing rounds (each config once per round)")
    p.add_argument("--calls", type=int, default=1, help="steps per config per round")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per config (compilation happens here)")
    p.add_argument("--num-batches", type=int, default=4, help="distinct random batches cycled through")
    p.add_argument("--loss-steps", type=int, default=5, help="steps of the equal-loss-curve check")
    p.add_argument("--memory-configs", nargs="*", choices=[REFERENCE, *MODES], default=None,
                   help="configs whose peak memory is measured, one fresh subprocess each (default: all but the "
                        "compiled ones, which would compile again; give none to skip)")
    p.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's)")
    p.add_argument("--quick", action="store_true",
                   help="CI-sized: vgg_small, batch 4, fp32 (and bf16 where the CPU has native bf16), 2 rounds")
    p.add_argument("--out", help="write results as JSON here")
    p.add_argument("--matmul-size", type=int, default=2048,
                   help="n of the n x n matmul that gives the peak GFLOP/s (--quick: 512; emulated bf16 at 2048 takes "
                        "over a minute per call on CPUs without native bf16)")
    p.add_argument("--memory-child", nargs=2, metavar=("VARIANT", "MODE"), help=argparse.SUPPRESS)
    p.add_argument("--memory-steps", type=int, default=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        from crnn.engine.autotune import cpu_bf16_capable

        # emulated bf16 (no native kernels, e.g. AVX2-only CPUs) takes minutes even at this size and proves nothing
        modes = ["fp32", "bf16"] if torch.cuda.is_available() or cpu_bf16_capable() else ["fp32"]
        args.variants, args.modes, args.batch_size, args.matmul_size = ["vgg_small"], modes, 4, 512
        args.rounds, args.warmup, args.num_batches, args.loss_steps = 2, 1, 2, 2
        args.memory_configs = ["fp32"] if args.memory_configs is None else args.memory_configs
    if args.memory_configs is None:
        args.memory_configs = [REFERENCE] + [m for m in args.modes if not MODES[m][2]]
    return args


def main(argv: list[str] | None = None) -> int:
    """Run every variant, print the tables, optionally write JSON."""
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.memory_child:
        print(json.dumps(memory_child(*args.memory_child, args.batch_size, args.memory_steps)))
        return 0
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    command = " ".join(["python benchmarks/bench_train.py", *(sys.argv[1:] if argv is None else argv)])
    results: dict = {"machine": machine_info(), "command": command,
                     "config": {k: v for k, v in vars(args).items() if k not in ("out", "memory_child")},
                     "variants": {}}
    t0 = time.perf_counter()
    for variant in args.variants:
        results["variants"][variant] = run_variant(variant, args, log)
    results["machine"]["loadavg_end"] = list(os.getloadavg())
    results["wall_s"] = round(time.perf_counter() - t0, 1)
    print_table(results)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
