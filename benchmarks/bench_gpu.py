"""Training speed on a GPU: crnn's step against the plain reference loop on the same device, the loader against the
step's demand, and the step's TFLOP/s against the device's measured bf16 matmul peak. Every table names the device.

Reuses bench_train (reference CRNN written the meijieru way, our step through ``crnn.engine.trainer``, interleaved
timing, FLOP count) and bench_data (JPEG word-crop LMDB, loader timing). Sections:

* **steps**: images/s of the reference (fp32, eager) and of our step in each mode (fp32, bf16, fp16 + GradScaler,
  channels_last, bf16 + channels_last, torch.compile fp32 / bf16, CUDA graphs via ``torch.compile(mode=
  "reduce-overhead")`` with bf16; the compiled modes for ``--compile-variants``, default vgg_small) for ``vgg`` and
  ``vgg_small`` at batch 256; ratios are medians over interleaved
  rounds of reference time / mode time, so they hold even when the machine's speed drifts. TF32 stays at torch's
  defaults (off for matmuls) for both sides.
* **peak**: an n x n bf16 (and fp32) matmul timed on the device in the same run; each mode's achieved TFLOP/s
  (FLOPs counted once on the CPU with ``FlopCounterMode``, linear in the batch) over that peak.
* **loader**: images/s of ``build_train_loader`` (32x100 JPEG crops, no augmentation) with 1, 2, 4, ... workers;
  images/s per worker; the workers the fastest step needs (its images/s over one worker's).
* **busy**: GPU busy share = (seconds per step on a batch already in memory) / (seconds per step fed by the loader
  with W workers, pinned memory, non_blocking copies): 100 % means the step never waits for data.
* **retune**: cudnn.benchmark on a keep-ratio style run: median over widths never seen before of the first step's time
  over the second step's, with benchmark on and off (crnn turns it off for batch-padded keep-ratio data).

CUDA-only modes (fp16, compile, CUDA graphs, busy share, retune) are skipped with the reason on a CPU; ``--quick`` runs
the CPU rehearsal in seconds (vgg_small, batch 4, fp32), which tests/test_benchmarks.py does on every run.

    python benchmarks/bench_gpu.py --out bench_gpu.json                       # on a GPU (estimate: 3 min)
    python benchmarks/bench_gpu.py --quick --out /tmp/q.json                  # CPU rehearsal, seconds
    python benchmarks/bench_gpu.py --sections steps peak --variants vgg       # a part
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark scripts
import bench_data  # noqa: E402
import bench_train as bt  # noqa: E402

from crnn.charset import Charset  # noqa: E402
from crnn.data.lmdb_io import write_lmdb  # noqa: E402

# mode -> (amp, channels_last, compile, torch.compile mode or None, needs CUDA)
GPU_MODES: dict[str, tuple] = {
    "fp32": ("off", False, False, None, False),
    "bf16": ("bf16", False, False, None, False),
    "fp16": ("fp16", False, False, None, True),
    "channels_last": ("off", True, False, None, False),
    "bf16+channels_last": ("bf16", True, False, None, False),
    "compile": ("off", False, True, None, True),
    "compile+bf16": ("bf16", False, True, None, True),
    "cudagraphs+bf16": ("bf16", False, True, "reduce-overhead", True),
}
COMPILED = {m for m, spec in GPU_MODES.items() if spec[2]}
SECTIONS = ("steps", "peak", "loader", "busy", "retune")


def sync(device: torch.device) -> None:
    """Wait for queued GPU work (timings must include it)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_info(device: torch.device) -> dict:
    """Device name, memory, torch/CUDA/cuDNN versions and CPU count: the heading of every table."""
    info = {"device": str(device), "torch": torch.__version__, "python": platform.python_version(),
            "cpus": os.cpu_count()}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        info.update(name=p.name, memory_gib=round(p.total_memory / 2 ** 30, 1), sms=p.multi_processor_count,
                    cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                    bf16=torch.cuda.is_bf16_supported())
    else:
        info["name"] = f"CPU ({bt.machine_info()['cpu']})"
    return info


def skipped_modes(modes: list[str], device: torch.device) -> dict[str, str]:
    """Modes that cannot run here, with the reason."""
    out = {}
    for m in modes:
        amp, _, compiled, _, needs_cuda = GPU_MODES[m]
        if needs_cuda and device.type != "cuda":
            out[m] = "needs CUDA" + (" (fp16 autocast is CUDA-only here)" if amp == "fp16" else "")
        elif amp == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
            out[m] = "this GPU has no bf16"
        elif amp == "bf16" and device.type == "cpu":
            from crnn.engine.autotune import cpu_bf16_capable

            if not cpu_bf16_capable():
                out[m] = "this CPU has no native bf16 (emulated: minutes per step)"
    return out


# ----------------------------------------------------------------------------- steps + peak
def matmul_peak(device: torch.device, n: int, rounds: int = 10) -> dict[str, float]:
    """TFLOP/s of an n x n x n matmul in bf16 and fp32 on ``device`` (median of ``rounds`` after 3 warm-ups)."""
    out = {}
    for name, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        a, b = (torch.randn(n, n, device=device).to(dtype) for _ in range(2))
        times = []
        for i in range(rounds + 3):
            sync(device)
            t0 = time.perf_counter()
            a @ b
            sync(device)
            if i >= 3:
                times.append(time.perf_counter() - t0)
        out[name] = 2 * n ** 3 / statistics.median(times) / 1e12
    return out


def count_flops(variant: str, batch_size: int) -> float:
    """FLOPs of one fp32 forward + backward at ``batch_size`` (counted on the CPU at batch 2, linear in the batch)."""
    return bt.step_flops(variant, bt.make_batches(1, 2)[0]) * batch_size / 2


def run_steps(variant: str, args: argparse.Namespace, device: torch.device, log: Callable[[str], None]) -> dict:
    """Reference vs our modes on ``device``: images/s, ratio, TFLOP/s (the peak is filled in by the caller)."""
    modes = [m for m in args.modes if m not in COMPILED or variant in args.compile_variants]
    skipped = skipped_modes(modes, device)
    modes = [m for m in modes if m not in skipped]
    batches = bt.make_batches(args.num_batches, args.batch_size)
    if device.type == "cuda":
        batches = [b.pin_memory() for b in batches]
    ref_step, ref_model = bt.reference_step_fn(variant, 0, str(device))
    steps = {bt.REFERENCE: ref_step}
    for m in modes:
        steps[m] = bt.crnn_step_fn(variant, m, ref_model, str(device), GPU_MODES)[0]
    fns = {name: bt.cycling(step, batches) for name, step in steps.items()}
    log(f"{variant} on {device}: timing {', '.join(fns)}")
    timing = bt.time_interleaved(fns, args.rounds, args.calls, args.warmup, log)
    flops = count_flops(variant, args.batch_size)
    rows = {}
    for name in steps:
        t = timing[name]
        rows[name] = {"images_per_s": args.batch_size / t["s_per_call"], "x_reference": t["x_baseline"],
                      "s_per_step": t["s_per_call"], "times": t["times"], "warmup_s": t["warmup_s"],
                      "tflop_per_s": flops / t["s_per_call"] / 1e12,
                      "dtype": "fp32" if name == bt.REFERENCE else {"off": "fp32"}.get(GPU_MODES[name][0],
                                                                                      GPU_MODES[name][0])}
    return {"gflop_per_step": flops / 1e9, "rows": rows, "skipped": skipped}


# ----------------------------------------------------------------------------- loader + busy share
def make_lmdb(path: str, n: int) -> str:
    """An LMDB of ``n`` 32x100 JPEG word crops (bench_data's: real crops when the shared folder is there)."""
    write_lmdb(bench_data.crop_samples(n), path)
    return path


def loader_rates(path: str, workers: list[int], batch_size: int, epochs: int, log: Callable[[str], None]) -> dict:
    """bench_data.time_loader for each worker count, plus images/s per worker."""
    out = {}
    for w in workers:
        r = bench_data.time_loader(path, w, batch_size, epochs, augment=False)
        r["images_per_s_per_worker"] = round(r["images_per_s"] / max(w, 1), 1)
        out[str(w)] = r
        log(f"  loader {w} workers: {r['images_per_s']:.0f} img/s")
    return out


def busy_share(variant: str, mode: str, path: str, workers: int, args: argparse.Namespace,
               device: torch.device) -> dict:
    """Seconds per step on a resident batch vs fed by the loader (``workers``): the share of time the GPU works."""
    from crnn.data.loader import build_train_loader

    step = bt.crnn_step_fn(variant, mode, bt.build_reference(variant, 1, Charset.from_spec(bt.CHARSET).num_classes),
                           str(device), GPU_MODES)[0]
    loader = build_train_loader([{"path": path}], Charset.from_spec(bt.CHARSET), **bench_data.SIZE,
                                batch_size=args.batch_size, num_workers=workers, max_label_length=25, augment=False,
                                seed=0)
    resident = bt.make_batches(1, args.batch_size)[0]
    for _ in range(args.warmup + 1):
        step(resident)

    def fed(n: int) -> float:
        done, epoch = 0, 0
        sync(device)
        t0 = time.perf_counter()
        while done < n:
            loader.set_epoch(epoch)
            for batch in loader:
                step(batch)
                done += 1
                if done >= n:
                    break
            epoch += 1
        sync(device)
        return (time.perf_counter() - t0) / n

    fed(2)  # workers started and warm
    n = args.busy_steps
    sync(device)
    t0 = time.perf_counter()
    for _ in range(n):
        step(resident)
    sync(device)
    t_res = (time.perf_counter() - t0) / n
    t_fed = fed(n)
    return {"workers": workers, "mode": mode, "s_per_step_resident": t_res, "s_per_step_fed": t_fed,
            "busy_share": min(1.0, t_res / t_fed), "images_per_s_fed": args.batch_size / t_fed}


# ----------------------------------------------------------------------------- cudnn.benchmark re-tuning
def retune(device: torch.device, batch_size: int, widths: int = 8) -> dict:
    """First-step / second-step time at widths never seen before, cudnn.benchmark off and on (vgg, fp32)."""
    from crnn.model import build_model

    model = build_model("vgg", 1, 37).to(device).train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-5)

    def step(width: int) -> float:
        x = torch.randn(batch_size, 1, 32, width, device=device)
        sync(device)
        t0 = time.perf_counter()
        model(x).float().logsumexp(-1).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(device)
        return time.perf_counter() - t0

    old = torch.backends.cudnn.benchmark
    out = {}
    try:
        step(100)
        for k, on in enumerate((False, True)):
            torch.backends.cudnn.benchmark = on
            ws = [104 + 8 * i + 4 * k for i in range(widths)]  # widths neither setting has seen
            firsts = [(step(w), step(w)) for w in ws]
            out["on" if on else "off"] = {"first_over_second": statistics.median(a / b for a, b in firsts),
                                          "first_ms": statistics.median(a for a, _ in firsts) * 1e3,
                                          "second_ms": statistics.median(b for _, b in firsts) * 1e3}
    finally:
        torch.backends.cudnn.benchmark = old
    return out


# ----------------------------------------------------------------------------- driver
def print_tables(res: dict) -> None:
    """One table per section; each starts with the device's name."""
    d = res["device"]
    head = f"[{d['name']}; torch {d['torch']}" + (f", CUDA {d['cuda']}, cuDNN {d['cudnn']}" if "cuda" in d else "")
    head += f"; batch {res['config']['batch_size']}]"
    peak = res.get("peak")
    for variant, v in res.get("steps", {}).items():
        print(f"\n{head} {variant}: training step, {v['gflop_per_step']:.1f} GFLOP/step"
              + (f"; measured matmul peak bf16 {peak['bf16']:.3g} / fp32 {peak['fp32']:.3g} TFLOP/s" if peak else ""))
        print(f"{'config':<20}{'img/s':>10}{'x ref':>7}{'TFLOP/s':>9}{'% bf16 peak':>12}")
        for name, r in v["rows"].items():
            share = f"{100 * r['tflop_per_s'] / peak['bf16']:>11.1f}%" if peak else f"{'-':>12}"
            print(f"{name:<20}{r['images_per_s']:>10.0f}{r['x_reference']:>7.2f}{r['tflop_per_s']:>9.3g}{share}")
        for m, why in v["skipped"].items():
            print(f"{m:<20} skipped: {why}")
    if "loader" in res:
        ld = res["loader"]
        print(f"\n{head} loader (32x100 JPEG crops, {ld['source']}) vs the step's demand "
              f"({ld['demand_images_per_s']:.0f} img/s: {ld['demand_from']})")
        print(f"{'workers':<10}{'img/s':>10}{'per worker':>12}")
        for w, r in ld["rates"].items():
            print(f"{w:<10}{r['images_per_s']:>10.0f}{r['images_per_s_per_worker']:>12.0f}")
        print(f"workers needed to feed the step: {ld['workers_needed']} "
              f"(of {d['cpus']} CPUs; one worker gives {ld['per_worker']:.0f} img/s)")
    if "busy" in res:
        for b in res["busy"]:
            print(f"{head} GPU busy share, {b['mode']} fed by {b['workers']} workers: {100 * b['busy_share']:.0f}% "
                  f"({1e3 * b['s_per_step_resident']:.1f} ms/step resident, {1e3 * b['s_per_step_fed']:.1f} fed, "
                  f"{b['images_per_s_fed']:.0f} img/s)")
    if "retune" in res:
        r = res["retune"]
        print(f"{head} new width, first/second step time: cudnn.benchmark off {r['off']['first_over_second']:.2f}x, "
              f"on {r['on']['first_over_second']:.2f}x")
    for section, why in res["skipped_sections"].items():
        print(f"{section}: skipped: {why}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options; ``--quick`` is the CPU rehearsal."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", nargs="+", default=["vgg_small", "vgg"])
    p.add_argument("--modes", nargs="+", choices=list(GPU_MODES), default=list(GPU_MODES))
    p.add_argument("--compile-variants", nargs="*", default=["vgg_small"],
                   help="variants that also run the torch.compile / CUDA-graph modes (each compile costs ~a minute)")
    p.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    p.add_argument("--device", default="auto", help="auto | cuda | cuda:N | cpu")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=5, help="steps per config per round")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per config (compiling happens here)")
    p.add_argument("--num-batches", type=int, default=4)
    p.add_argument("--matmul-size", type=int, default=8192)
    p.add_argument("--workers", nargs="+", type=int, help="loader worker counts (default 1 2 4 8 ... up to the CPUs)")
    p.add_argument("--loader-images", type=int, default=8192, help="images in the loader benchmark's LMDB")
    p.add_argument("--loader-epochs", type=int, default=2)
    p.add_argument("--busy-steps", type=int, default=30)
    p.add_argument("--quick", action="store_true", help="CPU rehearsal: vgg_small, batch 4, fp32, tiny loader")
    p.add_argument("--out", help="write results as JSON here")
    args = p.parse_args(argv)
    if args.quick:
        args.variants, args.compile_variants, args.batch_size, args.matmul_size = ["vgg_small"], [], 4, 256
        args.rounds, args.calls, args.warmup, args.num_batches = 2, 1, 1, 2
        args.workers, args.loader_images, args.loader_epochs, args.busy_steps = [0, 1], 64, 1, 2
        torch.set_num_threads(1)  # a CI machine's few busy cores: two threads made these tiny steps slower
        if not torch.cuda.is_available():
            args.modes = ["fp32"]
    if args.workers is None:
        cpus = os.cpu_count() or 1
        args.workers = sorted({w for w in (1, 2, 4, 8, 12, 16) if w <= cpus} | {max(1, cpus - 1)})
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the sections, print the tables, optionally write JSON."""
    args = parse_args(argv)
    from crnn.engine.runtime import resolve_device

    device = resolve_device(args.device)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    res: dict = {"device": device_info(device), "command": " ".join(["python benchmarks/bench_gpu.py",
                                                                   *(sys.argv[1:] if argv is None else argv)]),
                 "config": {k: v for k, v in vars(args).items() if k != "out"}, "skipped_sections": {}}
    log(f"bench_gpu on {res['device']['name']}")
    t0 = time.perf_counter()

    def save() -> None:  # after every section: a run stopped at its time limit keeps what it measured
        res["wall_s"] = round(time.perf_counter() - t0, 1)
        if args.out:
            with open(args.out, "w", encoding="utf-8") as f:
                json.dump(res, f, indent=2, default=str)

    if "peak" in args.sections:
        res["peak"] = matmul_peak(device, args.matmul_size)
        save()
    if "steps" in args.sections:
        res["steps"] = {v: run_steps(v, args, device, log) for v in args.variants}
        if "peak" in res:
            for v in res["steps"].values():
                for r in v["rows"].values():
                    r["of_bf16_peak"] = r["tflop_per_s"] / res["peak"]["bf16"]
        save()
    with tempfile.TemporaryDirectory() as tmp:
        if {"loader", "busy"} & set(args.sections):
            path = make_lmdb(os.path.join(tmp, "crops.lmdb"), args.loader_images)
        if "loader" in args.sections:
            rates = loader_rates(path, args.workers, args.batch_size, args.loader_epochs, log)
            best = max(((v, m, r["images_per_s"]) for v, s in res.get("steps", {}).items()
                        for m, r in s["rows"].items() if m != bt.REFERENCE), key=lambda x: x[2], default=None)
            one = rates.get("1", next(iter(rates.values())))
            per_worker = one["images_per_s"] / max(one["workers"], 1)
            demand = best[2] if best else 0.0
            res["loader"] = {"rates": rates, "per_worker": per_worker, "demand_images_per_s": demand,
                             "demand_from": f"{best[0]} {best[1]}" if best else "no steps measured",
                             "workers_needed": math.ceil(demand / per_worker) if per_worker else None,
                             "source": "real crops" if bench_data.shared_dataset("iiit5k_train") else "synthetic"}
            save()
        if "busy" in args.sections:
            if device.type != "cuda":
                res["skipped_sections"]["busy"] = "needs CUDA (the GPU's share of busy time)"
            else:
                mode = "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
                ws = sorted({args.workers[0], args.workers[-1]} | (
                    {min(res["loader"]["workers_needed"] or 1, args.workers[-1])} if "loader" in res else set()))
                res["busy"] = [busy_share(args.variants[0], mode, path, w, args, device) for w in ws]
                save()
    if "retune" in args.sections:
        if device.type != "cuda":
            res["skipped_sections"]["retune"] = "needs CUDA (cudnn.benchmark)"
        else:
            res["retune"] = retune(device, args.batch_size)
    save()
    print_tables(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
