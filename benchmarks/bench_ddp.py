"""DDP scaling on the CPU: 1 process vs 2 gloo processes on the same global batch, and the cost of the all-reduce.

One ``torchrun --standalone --nproc_per_node=2`` launch (gloo) runs every configuration, interleaved round by round
so that a shared, noisy machine drifts the same way for all of them:

* ``ddp``: 2 processes x 1 thread, each on half the global batch: crnn's own DDP path (``engine.distributed.wrap_ddp``,
  ``trainer.train_step`` / ``optimizer_step``), fp32 and bf16 autocast, with the product's default gradient
  all-reduce dtype (``train.ddp_comm=auto``: bf16 under bf16 autocast); bf16 autocast is also run with an fp32
  all-reduce, the default before ``ddp_comm`` existed;
* ``ddp no all-reduce``: the same under ``no_sync()`` (no gradient communication): what 2 processes cost without it;
* ``1 proc x 1 thread`` / ``1 proc x 2 threads``: rank 0 alone on the whole global batch (a plain model, no process
  group traffic) while rank 1 waits at a barrier;
* a DDP ``bucket_cap_mb`` sweep (1, 5, 25) whose all-reduce time per step is taken by a comm hook that times each
  bucket's all-reduce future (launch -> completion), plus a plain ``dist.all_reduce`` of the whole gradient size.

Scaling efficiency = (ddp images/s) / (n_proc x 1-process images/s) with the same threads per process.
Model: vgg_small on random 1x32x100 tensors (no data loading), Adam, grad clip 5.

    python benchmarks/bench_ddp.py --out bench_ddp.json         # full run (a few minutes on 2 cores)
    python benchmarks/bench_ddp.py --quick --out /tmp/q.json    # CI-sized
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from bench_train import CHARSET, crnn_config, machine_info, make_batches  # benchmarks/ is the script's folder
from crnn.charset import Charset
from crnn.engine import distributed as D
from crnn.engine.trainer import Runtime, build_optimizer, build_scheduler, build_training_model, optimizer_step, \
    train_step
from crnn.model import count_parameters

VARIANT = "vgg_small"
MODE_OF_DTYPE = {"fp32": "fp32", "bf16": "bf16"}


# ----------------------------------------------------------------------------- all-reduce timing
@dataclass
class CommTimer:
    """A DDP comm hook that all-reduces each bucket (mean) and records when it was launched and completed."""

    launched: list[float] = field(default_factory=list)
    completed: list[float] = field(default_factory=list)
    bucket_bytes: list[int] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)

    def hook(self, state, bucket):  # no annotations: DDP checks them and these would be strings
        """Average ``bucket`` (a dist.GradBucket) over ranks; note the launch and completion times."""
        buf = bucket.buffer()
        self.launched.append(time.perf_counter())
        self.bucket_bytes.append(buf.numel() * buf.element_size())
        fut = dist.all_reduce(buf.div_(dist.get_world_size()), async_op=True).get_future()

        def done(f: torch.futures.Future) -> torch.Tensor:
            self.completed.append(time.perf_counter())
            return f.value()[0]

        return fut.then(done)

    def end_step(self) -> None:
        """Close one step: all-reduce span (first launch -> last completion, overlaps the backward pass),
        tail (last launch -> last completion: the part no backward compute hides) and summed bucket times."""
        if self.launched:
            busy = sum(c - s for s, c in zip(self.launched, self.completed))
            self.steps.append({"span_s": max(self.completed) - min(self.launched),
                               "tail_s": max(self.completed) - max(self.launched), "busy_s": busy,
                               "buckets": len(self.launched), "bytes": sum(self.bucket_bytes)})
        self.launched, self.completed, self.bucket_bytes = [], [], []


# ----------------------------------------------------------------------------- configurations
@dataclass
class Case:
    """One timed configuration: ``run()`` does one step; ``solo`` cases run on rank 0 only."""

    run: Callable[[], None]
    solo: bool
    threads: int
    timer: CommTimer | None = None


def ddp_case(dtype: str, batch: int, rank: int, world: int, bucket_cap_mb: int | None, sync: bool = True,
             comm: str = "auto") -> Case:
    """crnn's DDP step on ``batch`` images per rank (``bucket_cap_mb=None``: the product's wrap_ddp, all-reducing in
    ``comm`` as ``train.ddp_comm``; a bucket size: plain DDP with fp32 buckets and the timing hook)."""
    cfg = crnn_config(VARIANT, MODE_OF_DTYPE[dtype])
    rt = Runtime(torch.device("cpu"), "ddp", rank, rank, world)
    torch.manual_seed(0)
    _, bare = build_training_model(cfg, Charset.from_spec(CHARSET), Runtime(torch.device("cpu"), "single"))
    timer = None
    if bucket_cap_mb is None:
        model = D.wrap_ddp(bare, rt.device, False, comm=D.resolve_ddp_comm(comm, cfg.train.amp))
    else:
        model = DDP(bare, bucket_cap_mb=bucket_cap_mb)
        timer = CommTimer()
        model.register_comm_hook(None, timer.hook)
    opt = build_optimizer(cfg, model)
    sched = build_scheduler(cfg, opt)
    batches = make_batches(2, batch, seed=1 + rank)
    state = {"i": 0}

    def run() -> None:
        state["i"] += 1
        train_step(model, batches[state["i"] % 2], opt, None, cfg, rt, sync, bare)
        optimizer_step(model, opt, sched, None, cfg)
        if timer is not None:
            timer.end_step()

    return Case(run, False, 1, timer)


def solo_case(dtype: str, batch: int, threads: int) -> Case:
    """crnn's single-process step on the whole global batch (run by rank 0 alone)."""
    cfg = crnn_config(VARIANT, MODE_OF_DTYPE[dtype])
    rt = Runtime(torch.device("cpu"), "single")
    torch.manual_seed(0)
    model, bare = build_training_model(cfg, Charset.from_spec(CHARSET), rt)
    opt = build_optimizer(cfg, model)
    sched = build_scheduler(cfg, opt)
    batches = make_batches(2, batch, seed=0)
    state = {"i": 0}

    def run() -> None:
        state["i"] += 1
        train_step(model, batches[state["i"] % 2], opt, None, cfg, rt, True, bare)
        optimizer_step(model, opt, sched, None, cfg)

    return Case(run, True, threads)


def build_cases(args: argparse.Namespace, rank: int, world: int) -> dict[str, Case]:
    """Every configuration of the run, keyed by its table name."""
    per_rank = args.global_batch // world
    cases: dict[str, Case] = {}
    for dt in args.dtypes:
        cases[f"{dt} 1 proc x 1 thread"] = solo_case(dt, args.global_batch, 1)
        cases[f"{dt} 1 proc x {world} threads"] = solo_case(dt, args.global_batch, world)
        cases[f"{dt} ddp {world} x 1 thread"] = ddp_case(dt, per_rank, rank, world, None)
        cases[f"{dt} ddp {world} x 1, no all-reduce"] = ddp_case(dt, per_rank, rank, world, None, sync=False)
        if dt == "bf16":
            cases[f"{dt} ddp {world} x 1, fp32 all-reduce"] = ddp_case(dt, per_rank, rank, world, None, comm="fp32")
    for cap in args.bucket_caps:
        cases[f"{args.dtypes[0]} ddp bucket_cap_mb={cap}"] = ddp_case(args.dtypes[0], per_rank, rank, world, cap)
    return cases


def allreduce_case(numel: int) -> Case:
    """A plain ``dist.all_reduce`` of a float32 tensor of the gradients' size (one flat buffer)."""
    flat = torch.zeros(numel)
    return Case(lambda: dist.all_reduce(flat), False, 1)


# ----------------------------------------------------------------------------- worker (runs under torchrun)
def run_case(case: Case, calls: int, rank: int) -> tuple[float | None, float]:
    """Barrier, ``calls`` steps (rank 0 alone for solo cases) at the case's thread count, barrier.

    Returns (seconds on this rank or None when it sat the case out, CPU seconds this rank used meanwhile). For the
    cases every rank runs, the time ends after the closing barrier: the slower rank's time, which is what a training
    loop gets (it matters for the no-all-reduce case, where nothing else makes rank 0 wait for rank 1).
    """
    D.barrier()
    c0, elapsed = time.process_time(), None
    if not case.solo or rank == 0:
        torch.set_num_threads(case.threads)
        t0 = time.perf_counter()
        for _ in range(calls):
            case.run()
        torch.set_num_threads(1)
        if case.solo:
            elapsed = time.perf_counter() - t0
    D.barrier()
    if not case.solo:
        elapsed = time.perf_counter() - t0
    return elapsed, time.process_time() - c0


def time_cases(cases: dict[str, Case], args: argparse.Namespace, rank: int) -> dict[str, dict]:
    """Warm up every case, then time them in rotating order for ``args.rounds`` rounds."""
    log = (lambda msg: print(msg, file=sys.stderr, flush=True)) if rank == 0 else (lambda msg: None)
    names = list(cases)
    out = {n: {"times": [], "idle_rank_cpu_s": []} for n in names}
    for name in names:
        for _ in range(args.warmup):
            run_case(cases[name], 1, rank)
        if cases[name].timer is not None:
            cases[name].timer.steps.clear()
    log(f"warmed up {len(names)} configurations")
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            elapsed, cpu = run_case(cases[name], args.calls, rank)
            if elapsed is not None:
                out[name]["times"].append(elapsed / args.calls)
            elif cases[name].solo:
                out[name]["idle_rank_cpu_s"].append(cpu)
        log(f"round {r + 1}/{args.rounds}: " + "  ".join(f"[{n}] {out[n]['times'][-1]:.2f}s" for n in names
                                                         if out[n]["times"]))
    return out


def worker(args: argparse.Namespace) -> None:
    """Body of each torchrun process: time the cases, rank 0 writes the raw results, then tear the group down."""
    info = D.init_distributed("cpu", "gloo")
    try:
        time_and_write(args, info)
        # Every DDP wrapper (and its reducer, comm hook and futures) was a local of that call; collect the cycles
        # now, so that the gloo group dies in destroy_process_group below and not during interpreter finalisation,
        # where a gloo thread that needs the GIL aborts the process ('terminate called without an active
        # exception' after the last round, seen in CI).
        D.finish_ddp()
    finally:
        D.cleanup_distributed()


def time_and_write(args: argparse.Namespace, info: D.DistInfo) -> None:
    """Build the cases, time them, gather the idle ranks' CPU use; rank 0 writes the raw results."""
    torch.set_num_threads(1)
    cases = build_cases(args, info.rank, info.world_size)
    numel = count_parameters(crnn_model_for_size())
    cases["all_reduce of the gradient size"] = allreduce_case(numel)
    raw = time_cases(cases, args, info.rank)
    idle = [None] * info.world_size
    dist.all_gather_object(idle, {n: r["idle_rank_cpu_s"] for n, r in raw.items()})
    if info.rank == 0:
        for name, case in cases.items():
            raw[name]["idle_rank_cpu_s"] = [v for other in idle[1:] for v in other[name]]
            raw[name]["solo"], raw[name]["threads"] = case.solo, case.threads
            raw[name]["comm"] = case.timer.steps if case.timer else None
        result = {"world_size": info.world_size, "params": numel, "raw": raw}
        with open(args.worker, "w", encoding="utf-8") as f:
            json.dump(result, f)


def crnn_model_for_size() -> torch.nn.Module:
    """The benchmarked model (only its parameter count is used)."""
    from crnn.model import build_model

    return build_model(VARIANT, 1, Charset.from_spec(CHARSET).num_classes)


# ----------------------------------------------------------------------------- driver
def per_round_ratio(a: list[float], b: list[float]) -> float:
    """Median over rounds of a[r] / b[r] (times from the same round)."""
    return statistics.median(x / y for x, y in zip(a, b))


def summarize(raw: dict, args: argparse.Namespace) -> dict:
    """Images/s per configuration, scaling efficiencies from same-round ratios, all-reduce times."""
    world = raw["world_size"]
    rows = {}
    for name, r in raw["raw"].items():
        s = statistics.median(r["times"])
        rows[name] = {"s_per_step": s, "images_per_s": args.global_batch / s, "times": r["times"],
                      "idle_rank_cpu_s": r["idle_rank_cpu_s"]}
        if r["comm"]:
            for key in ("span", "tail", "busy"):
                rows[name][f"allreduce_{key}_ms"] = 1e3 * statistics.median(c[f"{key}_s"] for c in r["comm"])
            rows[name]["buckets"] = r["comm"][0]["buckets"]
            nosync = raw["raw"][f"{args.dtypes[0]} ddp {world} x 1, no all-reduce"]["times"]
            rows[name]["x_no_allreduce"] = per_round_ratio(nosync, r["times"])
    flat = rows.pop("all_reduce of the gradient size")
    scaling = {}
    for dt in args.dtypes:
        keys = ("1 proc x 1 thread", f"1 proc x {world} threads", f"ddp {world} x 1 thread",
                f"ddp {world} x 1, no all-reduce")
        one, many, ddp, nosync = (raw["raw"][f"{dt} {k}"]["times"] for k in keys)
        scaling[dt] = {"efficiency_vs_1x1": per_round_ratio(one, ddp) / world,
                       "ddp_vs_1_proc_x_threads": per_round_ratio(many, ddp),
                       "efficiency_without_allreduce": per_round_ratio(one, nosync) / world,
                       "allreduce_share_of_step": 1 - per_round_ratio(nosync, ddp)}
        fp32_ar = raw["raw"].get(f"{dt} ddp {world} x 1, fp32 all-reduce")
        if fp32_ar is not None:  # the same step with the gradients all-reduced in fp32
            scaling[dt]["efficiency_fp32_allreduce"] = per_round_ratio(one, fp32_ar["times"]) / world
    grad_mb = raw["params"] * 4 / 2 ** 20
    return {"world_size": world, "params": raw["params"], "grad_mb": grad_mb, "rows": rows, "scaling": scaling,
            "flat_allreduce_ms": 1e3 * flat["s_per_step"],
            "flat_allreduce_gb_per_s": grad_mb / 1024 / flat["s_per_step"]}


def print_table(res: dict) -> None:
    """Configurations with images/s, then the scaling summary and the all-reduce numbers."""
    m, c = res["machine"], res["config"]
    print(f"{m['cpu']}, {m['cpus']} CPUs, torch {m['torch']}, load average {m['loadavg_start'][0]:.1f} -> "
          f"{m['loadavg_end'][0]:.1f}; {VARIANT}, global batch {c['global_batch']}, {c['rounds']} rounds")
    print(f"\n{'configuration':<34}{'img/s':>8}{'s/step':>8}{'buckets':>8}{'AR span ms':>12}{'AR tail ms':>12}"
          f"{'x no-AR':>9}")
    for name, r in res["rows"].items():
        ar = (f"{r['buckets']:>8d}{r['allreduce_span_ms']:>12.1f}{r['allreduce_tail_ms']:>12.1f}"
              f"{r['x_no_allreduce']:>9.2f}" if "buckets" in r else "")
        print(f"{name:<34}{r['images_per_s']:>8.1f}{r['s_per_step']:>8.3f}{ar}")
    w = res["world_size"]
    print(f"\n{'dtype':<6}{f'eff vs 1x1':>12}{f'{w}x1 / 1x{w}':>12}{'eff w/o all-reduce':>20}{'all-reduce share':>18}"
          f"{'eff, fp32 all-reduce':>22}")
    for dt, s in res["scaling"].items():
        fp32_ar = f"{s['efficiency_fp32_allreduce']:>22.2f}" if "efficiency_fp32_allreduce" in s else ""
        print(f"{dt:<6}{s['efficiency_vs_1x1']:>12.2f}{s['ddp_vs_1_proc_x_threads']:>12.2f}"
              f"{s['efficiency_without_allreduce']:>20.2f}{100 * s['allreduce_share_of_step']:>17.0f}%{fp32_ar}")
    print(f"\nplain all_reduce of {res['grad_mb']:.1f} MB ({res['params']} fp32 gradients): "
          f"{res['flat_allreduce_ms']:.1f} ms ({res['flat_allreduce_gb_per_s']:.2f} GB/s)")


def launch(args: argparse.Namespace, result_path: str) -> None:
    """Run this script's worker under torchrun (gloo, standalone rendezvous); raise on failure."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={args.nproc}",
           os.path.abspath(__file__), "--worker", result_path, "--global-batch", str(args.global_batch),
           "--rounds", str(args.rounds), "--calls", str(args.calls), "--warmup", str(args.warmup),
           "--dtypes", *args.dtypes, "--bucket-caps", *map(str, args.bucket_caps)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    res = subprocess.run(cmd, env=env, check=False)
    if res.returncode != 0 or not os.path.getsize(result_path):
        raise RuntimeError(f"torchrun exited with code {res.returncode} (its output is above)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options; ``--quick`` shrinks every size."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nproc", type=int, default=2, help="DDP processes (each with 1 thread)")
    p.add_argument("--global-batch", type=int, default=64, help="images per step over all processes")
    p.add_argument("--dtypes", nargs="+", choices=list(MODE_OF_DTYPE), default=["fp32", "bf16"])
    p.add_argument("--bucket-caps", nargs="+", type=int, default=[1, 5, 25], help="DDP bucket_cap_mb sweep")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=1, help="steps per configuration per round")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="CI-sized: global batch 8, 2 rounds, caps 1 and 25")
    p.add_argument("--out", help="write results as JSON here")
    p.add_argument("--worker", metavar="RESULT", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.global_batch, args.rounds, args.warmup, args.bucket_caps = 8, 2, 1, [1, 25]
    if args.global_batch % args.nproc:
        p.error(f"--global-batch {args.global_batch} must be a multiple of --nproc {args.nproc}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Launch the torchrun worker, summarise, print the tables, optionally write JSON."""
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    command = " ".join(["python benchmarks/bench_ddp.py", *(sys.argv[1:] if argv is None else argv)])
    info = machine_info()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "raw.json")
        open(path, "w").close()
        try:
            launch(args, path)
        except RuntimeError as e:
            print(f"bench_ddp: {e}", file=sys.stderr)
            return 1
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    info["loadavg_end"] = list(os.getloadavg())
    results = {"machine": info, "command": command, "wall_s": round(time.perf_counter() - t0, 1),
               "config": {k: v for k, v in vars(args).items() if k not in ("out", "worker")},
               **summarize(raw, args)}
    print_table(results)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
