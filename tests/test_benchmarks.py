"""Benchmarks: every benchmarks/bench_*.py runs in --quick mode, prints a table and writes JSON, also with the shared
real-data folder hidden; the reference model of bench_train is the same network as ours; the timing and scaling
arithmetic is right.

No speed is asserted: the numbers depend on the machine.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from crnn.shared_data import ENV_VAR, shared_dataset

REPO = Path(__file__).resolve().parent.parent
BENCH_DIR = REPO / "benchmarks"
SCRIPTS = sorted(BENCH_DIR.glob("bench_*.py"))
# Every script runs with the shared data folder pointed at a folder that does not exist (what a fresh clone has, even
# though CI has ../shared); the scripts that read real crops when they are there run a second time with them.
USES_SHARED = [p for p in SCRIPTS if "crnn.shared_data" in p.read_text(encoding="utf-8")]
QUICK_RUNS = [(p, "hidden") for p in SCRIPTS] + [(p, "present") for p in USES_SHARED]


def test_benchmark_scripts_exist():
    names = {p.name for p in SCRIPTS}
    assert {"bench_train.py", "bench_ddp.py"} <= names


@pytest.mark.slow
@pytest.mark.parametrize("script,shared", QUICK_RUNS, ids=[f"{p.stem}-shared_{s}" for p, s in QUICK_RUNS])
def test_quick_run_prints_table_and_writes_json(script, shared, tmp_path):
    """Exit 0, a table and JSON, with or without the real crops (without them each script falls back to synthetic
    crops and says so: none may fail for their absence)."""
    out = tmp_path / "result.json"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if shared == "hidden":
        env[ENV_VAR] = str(tmp_path / "no-shared-data")
    elif shared_dataset("iiit5k_train") is None:
        pytest.skip("no shared real crops on this machine (the hidden-data run covers the fallback)")
    res = subprocess.run([sys.executable, str(script), "--quick", "--out", str(out)], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=900)
    assert "Traceback" not in res.stdout + res.stderr, f"{script.name} --quick:\n{res.stderr[-3000:]}"
    assert res.returncode == 0, f"{script.name} --quick failed:\n{res.stderr[-3000:]}"
    table = [line for line in res.stdout.splitlines() if line.strip()]
    assert len(table) >= 3, f"{script.name} printed no table:\n{res.stdout}"
    data = json.loads(out.read_text(encoding="utf-8"))
    assert isinstance(data, dict) and data


@pytest.fixture
def bench(monkeypatch):
    """Import the benchmark modules from benchmarks/ (they are scripts, not a package)."""
    monkeypatch.syspath_prepend(str(BENCH_DIR))
    import bench_ddp
    import bench_train

    return bench_train, bench_ddp


@pytest.mark.parametrize("variant", ["vgg_small", "resnet18"])
def test_reference_is_the_same_network(bench, variant):
    """Same parameter count, and with copied weights the reference's [T, B, K] equals our [B, T, K]."""
    bt, _ = bench
    from crnn.model import build_model, count_parameters

    torch.manual_seed(0)
    ref = bt.build_reference(variant, 1, 11).eval()
    ours = build_model(variant, 1, 11).eval()
    assert count_parameters(ref) == count_parameters(ours)
    bt.copy_weights(ref, ours)
    x = torch.randn(2, 1, 32, 100)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), ref(x).transpose(0, 1), rtol=1e-4, atol=1e-5)


def test_paper_vgg_reference_parameter_count(bench):
    bt, _ = bench
    from crnn.model import build_model, count_parameters

    assert count_parameters(bt.build_reference("vgg", 1, 37)) == count_parameters(build_model("vgg", 1, 37))


def test_copy_weights_refuses_a_different_network(bench):
    bt, _ = bench
    from crnn.model import build_model

    with pytest.raises(ValueError, match="differ"):
        bt.copy_weights(bt.build_reference("vgg_small", 1, 11), build_model("vgg_small", 1, 12))


def test_fp32_loss_curve_equals_reference(bench):
    """Our fp32 step (trainer path) and the reference step give the same losses from the same weights."""
    bt, _ = bench
    chk = bt.loss_curves("vgg_small", bt.make_batches(3, 2, seed=3))
    assert len(chk["crnn"]) == 3 and chk["crnn"][0] > 0
    assert chk["max_abs_diff"] < 1e-4
    assert chk["reference"][0] != chk["reference"][-1]  # the weights did move


def test_time_interleaved_counts_calls_and_ratios(bench):
    bt, _ = bench
    calls = {"a": 0, "b": 0}

    def make(name):
        def f():
            calls[name] += 1
        return f

    out = bt.time_interleaved({"a": make("a"), "b": make("b")}, rounds=3, calls=2, warmup=1, log=lambda m: None)
    assert calls == {"a": 1 + 3 * 2, "b": 1 + 3 * 2}
    assert len(out["a"]["times"]) == len(out["b"]["cpu_times"]) == 3
    assert out["a"]["x_baseline"] == 1.0


def test_ddp_summary_arithmetic(bench):
    """Efficiency = 1-process time / (world x DDP time), from the same rounds."""
    _, bd = bench
    args = bd.parse_args(["--dtypes", "fp32", "--bucket-caps", "25", "--global-batch", "64"])
    t = lambda v: {"times": [v, v], "idle_rank_cpu_s": [], "comm": None}  # noqa: E731
    comm = [{"span_s": 0.02, "tail_s": 0.01, "busy_s": 0.03, "buckets": 2, "bytes": 8}]
    raw = {"world_size": 2, "params": 1024, "raw": {
        "fp32 1 proc x 1 thread": t(1.0), "fp32 1 proc x 2 threads": t(0.8), "fp32 ddp 2 x 1 thread": t(0.625),
        "fp32 ddp 2 x 1, no all-reduce": t(0.5), "fp32 ddp bucket_cap_mb=25": {**t(0.6), "comm": comm},
        "all_reduce of the gradient size": t(0.004)}}
    res = bd.summarize(raw, args)
    s = res["scaling"]["fp32"]
    assert s["efficiency_vs_1x1"] == pytest.approx(0.8)
    assert s["ddp_vs_1_proc_x_threads"] == pytest.approx(1.28)
    assert s["efficiency_without_allreduce"] == pytest.approx(1.0)
    assert s["allreduce_share_of_step"] == pytest.approx(0.2)
    assert res["rows"]["fp32 ddp bucket_cap_mb=25"]["allreduce_span_ms"] == pytest.approx(20.0)
    assert res["rows"]["fp32 ddp bucket_cap_mb=25"]["x_no_allreduce"] == pytest.approx(0.5 / 0.6)
    assert res["rows"]["fp32 ddp 2 x 1 thread"]["images_per_s"] == pytest.approx(64 / 0.625)


def test_ddp_summary_reports_the_fp32_all_reduce_comparison_for_bf16(bench):
    _, bd = bench
    args = bd.parse_args(["--dtypes", "bf16", "--bucket-caps", "25", "--global-batch", "64"])
    t = lambda v: {"times": [v, v], "idle_rank_cpu_s": [], "comm": None}  # noqa: E731
    raw = {"world_size": 2, "params": 1024, "raw": {
        "bf16 1 proc x 1 thread": t(1.0), "bf16 1 proc x 2 threads": t(0.8), "bf16 ddp 2 x 1 thread": t(0.55),
        "bf16 ddp 2 x 1, no all-reduce": t(0.5), "bf16 ddp 2 x 1, fp32 all-reduce": t(0.625),
        "bf16 ddp bucket_cap_mb=25": t(0.6), "all_reduce of the gradient size": t(0.004)}}
    s = bd.summarize(raw, args)["scaling"]["bf16"]
    assert s["efficiency_vs_1x1"] == pytest.approx(1 / 1.1)
    assert s["efficiency_fp32_allreduce"] == pytest.approx(0.8)


def test_comm_timer_step_record(bench):
    _, bd = bench
    timer = bd.CommTimer(launched=[1.0, 1.5], completed=[1.25, 2.0], bucket_bytes=[4, 8])
    timer.end_step()
    assert timer.steps == [{"span_s": 1.0, "tail_s": 0.5, "busy_s": 0.75, "buckets": 2, "bytes": 12}]
    assert timer.launched == [] and timer.completed == []


@pytest.mark.slow
def test_bench_read_times_other_weights_as_an_arm_and_refuses_a_missing_file(tmp_path):
    """--against CKPT: other weights read as an arm of their own beside the shipped path (a cheaper network's speed),
    in fp32 or, with --against-amp bf16, as the bf16 arm reads; a path that is not there: one line, exit 1, no
    table."""
    out = tmp_path / "r.json"
    script = str(BENCH_DIR / "bench_read.py")
    res = subprocess.run([sys.executable, script, "--quick", "--arms", "shipped,bf16", "--against",
                          str(REPO / "weights" / "crnn_vgg_small.pt"), "--out", str(out)],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = json.loads(out.read_text(encoding="utf-8"))["rows"]
    assert [r["arm"] for r in rows] == ["shipped", "bf16", f"against {REPO / 'weights' / 'crnn_vgg_small.pt'}"]
    assert all(r["crops_per_s"] > 0 for r in rows)
    assert [r["amp"] for r in rows] == ["off", "bf16", "off"]
    res = subprocess.run([sys.executable, script, "--quick", "--arms", "shipped", "--against", "en", "--against-amp",
                          "bf16", "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = json.loads(out.read_text(encoding="utf-8"))["rows"]
    assert [(r["arm"], r["amp"]) for r in rows] == [("shipped", "off"), ("against en (bf16)", "bf16")]
    missing = tmp_path / "none.pt"
    res = subprocess.run([sys.executable, script, "--quick", "--against", str(missing)], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and res.stderr.strip() == f"bench_read: error: --against {missing}: no such file"
    assert "|" not in res.stdout
