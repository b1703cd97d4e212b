"""Trainer: single process, DataParallel fallback, DDP under torchrun (gloo), equivalences and resume."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from crnn.cli.train import main as train_main
from crnn.config import ConfigError, load_config
from crnn.engine.trainer import fit, lr_factor
from tests.conftest import REPO

TINY = ["data.batch_size=8", "data.num_workers=0", "train.amp=off", "train.log_every=1", "train.warmup_steps=0",
        "train.tensorboard=false", "train.show_predictions=0"]


def _overrides(tmp_path: Path, train_lmdb: Path, val_lmdb: Path | None, *extra: str) -> list[str]:
    val = f"data.val=[{val_lmdb}]" if val_lmdb else "data.val=[]"
    return [f"data.train=[{{path: {train_lmdb}}}]", val, f"train.output_dir={tmp_path / 'run'}", *TINY, *extra]


def _model_state(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)["model"]


def _torchrun(args: list[str], nproc: int = 2, timeout: int = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
           f"--nproc_per_node={nproc}", "-m", "crnn.cli.train", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)


def test_single_process_smoke_writes_plain_checkpoints(tmp_path, words_lmdb, val_lmdb):
    rc = train_main(["--config", str(REPO / "configs/smoke.yaml"),
                     *_overrides(tmp_path, words_lmdb, val_lmdb, "train.steps=4", "train.val_every=2",
                                 "train.save_every=2", "train.tensorboard=true")])
    assert rc == 0
    run = tmp_path / "run"
    ck = torch.load(run / "last.pt", map_location="cpu", weights_only=True)
    assert ck["step"] == 4 and ck["kind"] == "training"
    assert not any(k.startswith("module.") for k in ck["model"])
    assert {"optimizer", "scheduler", "rng", "config", "charset"} <= set(ck)
    assert ck["config"]["train"]["steps"] == 4
    assert (run / "best.pt").is_file() and (run / "config.yaml").is_file()
    assert list((run / "tb").glob("events.out.tfevents.*"))


def test_dataparallel_request_falls_back_on_cpu(tmp_path, words_lmdb, caplog):
    caplog.set_level("INFO", logger="crnn")
    rc = train_main(_overrides(tmp_path, words_lmdb, None, "train.steps=2", "train.parallel=dp",
                               "train.device=cpu"))
    assert rc == 0
    assert "needs at least 2 GPUs" in caplog.text
    assert not any(k.startswith("module.") for k in _model_state(tmp_path / "run" / "last.pt"))


def test_resume_equals_uninterrupted_run(tmp_path, words_lmdb):
    common = ["train.steps=6", "train.save_every=0", "train.val_every=0", "train.optimizer=adam", "train.lr=3e-3"]
    straight = fit(load_config(None, _overrides(tmp_path / "a", words_lmdb, None, *common)))
    assert straight["step"] == 6
    first = fit(load_config(None, _overrides(tmp_path / "b", words_lmdb, None, *common, "train.stop_after=3")))
    assert first["ended"] == "stop_after" and first["step"] == 3
    second = fit(load_config(None, _overrides(tmp_path / "b", words_lmdb, None, *common, "train.resume=auto")))
    assert second["step"] == 6
    a, b = _model_state(tmp_path / "a/run/last.pt"), _model_state(tmp_path / "b/run/last.pt")
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=0, atol=1e-6, msg=k)


def test_resume_that_reads_crops_otherwise_says_so_once(tmp_path, words_lmdb, capsys):
    """Resuming a run under a recipe that reads crops otherwise (another height or width: the 32 px run's last.pt
    under the 48 px recipe) names each changed setting in one warning; the same recipe resumes without one."""
    common = ["train.steps=3", "train.save_every=0", "train.val_every=0"]
    assert train_main(_overrides(tmp_path, words_lmdb, None, *common, "train.stop_after=1")) == 0
    assert train_main(_overrides(tmp_path, words_lmdb, None, *common, "train.stop_after=2", "train.resume=auto")) == 0
    assert "was trained reading crops otherwise" not in capsys.readouterr().err
    assert train_main(_overrides(tmp_path, words_lmdb, None, *common, "train.resume=auto", "data.width=96")) == 0
    warned = [ln for ln in capsys.readouterr().err.splitlines() if "was trained reading crops otherwise" in ln]
    assert len(warned) == 1 and f"train.resume {tmp_path / 'run' / 'last.pt'} was trained" in warned[0], warned
    assert "data.width 100 -> 96 (the checkpoint's -> this run's)" in warned[0]
    assert torch.load(tmp_path / "run" / "last.pt", map_location="cpu", weights_only=True)["step"] == 3


def test_resume_from_weights_only_file_is_refused(tmp_path, words_lmdb, capsys):
    from crnn.engine.checkpoint import load_checkpoint, save_checkpoint, weights_only_checkpoint

    assert train_main(_overrides(tmp_path, words_lmdb, None, "train.steps=1")) == 0
    w = tmp_path / "w.pt"
    save_checkpoint(weights_only_checkpoint(load_checkpoint(tmp_path / "run/last.pt").raw), w)
    capsys.readouterr()
    assert train_main(_overrides(tmp_path / "x", words_lmdb, None, "train.steps=1", f"train.resume={w}")) == 1
    errors = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("crnn-train: error")]
    assert errors == [f"crnn-train: error: {w} holds weights only; use train.init_weights={w} to start from it"]
    assert not (tmp_path / "x" / "run" / "last.pt").exists()
    assert train_main(_overrides(tmp_path / "y", words_lmdb, None, "train.steps=1", f"train.init_weights={w}")) == 0


def test_lr_schedule_warmup_then_cosine():
    cfg = load_config(None, ["train.steps=100", "train.warmup_steps=10", "train.min_lr_ratio=0.0"])
    assert lr_factor(0, cfg) == pytest.approx(0.1)
    assert lr_factor(9, cfg) == pytest.approx(1.0)
    assert lr_factor(55, cfg) == pytest.approx(0.5, abs=0.02)
    assert lr_factor(100, cfg) == pytest.approx(0.0, abs=1e-9)


@pytest.mark.slow
def test_ddp_two_processes_smoke_and_identical_ranks(tmp_path, words_lmdb, val_lmdb):
    args = ["--config", str(REPO / "configs/smoke.yaml"),
            *_overrides(tmp_path, words_lmdb, val_lmdb, "train.steps=4", "train.val_every=2", "train.save_every=2",
                        "train.sync_bn=true")]
    res = _torchrun(args)
    assert res.returncode == 0, res.stderr[-3000:]
    log = res.stderr + res.stdout
    assert "mode: ddp on cpu (world size 2)" in log
    assert "not applicable on CPU" in log
    state = _model_state(tmp_path / "run" / "last.pt")
    assert not any(k.startswith("module.") for k in state)


@pytest.mark.slow
def test_ddp_step_equals_single_step_on_double_batch(tmp_path, words_lmdb):
    """One DDP step with 2 ranks x batch b == one single-process step with batch 2b: gradients averaged once."""
    common = ["train.steps=1", "train.optimizer=sgd", "train.lr=0.5", "train.grad_clip=0", "train.schedule=constant",
              "model.batch_norm=false", "train.val_every=0", "train.save_every=0"]
    res = _torchrun(_overrides(tmp_path / "ddp", words_lmdb, None, *common, "data.batch_size=4"))
    assert res.returncode == 0, res.stderr[-3000:]
    single = _overrides(tmp_path / "one", words_lmdb, None, *common)
    assert train_main(single) == 0
    init = _initial_state(words_lmdb, tmp_path)
    a, b = _model_state(tmp_path / "ddp/run/last.pt"), _model_state(tmp_path / "one/run/last.pt")
    moved = 0
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=1e-5, msg=k)
        moved += int(not torch.equal(a[k], init[k]))
    assert moved > 0  # the step did change the weights


@pytest.mark.slow
def test_ddp_bf16_gradient_all_reduce_is_used_and_close_to_fp32(tmp_path, words_lmdb):
    """train.ddp_comm=bf16: the same DDP step as the fp32 all-reduce up to bf16 rounding of the averaged gradient
    (2^-8 relative), and not bit-equal to it (so the hook really ran)."""
    common = ["train.steps=1", "train.optimizer=sgd", "train.lr=0.5", "train.grad_clip=0", "train.schedule=constant",
              "model.batch_norm=false", "train.val_every=0", "train.save_every=0", "data.batch_size=4"]
    for comm in ("fp32", "bf16"):
        res = _torchrun(_overrides(tmp_path / comm, words_lmdb, None, *common, f"train.ddp_comm={comm}"))
        assert res.returncode == 0, res.stderr[-3000:]
        assert f"DDP: gradients all-reduced in {comm}, 25 MB buckets" in res.stderr + res.stdout
    init = _initial_state(words_lmdb, tmp_path)
    a, b = _model_state(tmp_path / "fp32/run/last.pt"), _model_state(tmp_path / "bf16/run/last.pt")
    differs = 0
    for k in a:
        step_fp32, step_bf16 = a[k] - init[k], b[k] - init[k]  # lr x averaged gradient
        scale = float(step_fp32.abs().max())
        torch.testing.assert_close(step_bf16, step_fp32, rtol=0, atol=2 ** -7 * scale + 1e-7, msg=k)
        differs += int(not torch.equal(a[k], b[k]))
    assert differs > 0


def _initial_state(words_lmdb: Path, tmp_path: Path) -> dict:
    """The seeded initial weights (step 0) of the equivalence test's model."""
    from crnn.charset import Charset
    from crnn.engine.trainer import seed_everything
    from crnn.model import build_model

    seed_everything(0)
    model = build_model("vgg_small", 1, Charset.from_spec("alnum36").num_classes, batch_norm=False)
    return model.state_dict()


@pytest.mark.slow
def test_ddp_ranks_hold_identical_parameters(tmp_path, words_lmdb):
    """Every rank saves its own parameters and weight average through a test hook; they must be equal after several
    steps.

    (BatchNorm running statistics are per-rank between forwards — DDP broadcasts rank 0's before each forward.)
    """
    script = tmp_path / "dump.py"
    script.write_text(
        "import sys, torch, torch.distributed as dist\n"
        "import crnn.engine.trainer as T\n"
        "orig = T._save\n"
        "def save(name, model, *a, **k):\n"
        "    orig(name, model, *a, **k)\n"
        "    sd = dict(T.unwrap_model(model).named_parameters())\n"
        "    sd.update({'avg.' + n: p for n, p in a[8].model.named_parameters()})\n"  # the weight average
        f"    torch.save(sd, r'{tmp_path}/rank%d.pt' % dist.get_rank())\n"
        "T._save = save\n"
        "from crnn.cli.train import main\n"
        "sys.exit(main(sys.argv[1:]))\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(script),
           *_overrides(tmp_path, words_lmdb, None, "train.steps=3", "train.val_every=0", "train.save_every=0",
                       "train.ema_decay=0.9")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env, cwd=REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    r0 = torch.load(tmp_path / "rank0.pt", weights_only=True)
    r1 = torch.load(tmp_path / "rank1.pt", weights_only=True)
    assert len(r0) == len(r1) > 20 and any(k.startswith("avg.") for k in r0)
    for k in r0:
        assert torch.equal(r0[k], r1[k]), k


@pytest.mark.slow
def test_ddp_wrapper_is_gone_before_the_process_group_is_destroyed(tmp_path, words_lmdb):
    """A DDP wrapper still alive when the gloo group is destroyed keeps the group until interpreter finalisation,
    where a gloo thread that needs the GIL aborts the process ('terminate called without an active exception';
    5 of 20 two-rank runs of a small repro) and torchrun reports a finished run as failed. Each rank records how
    many wrappers are alive at that moment: none."""
    script = tmp_path / "teardown.py"
    script.write_text(
        "import gc, sys, torch.distributed as dist\n"
        "from torch.nn.parallel import DistributedDataParallel\n"
        "import crnn.engine.distributed as D\n"
        "orig = D.cleanup_distributed\n"
        "def cleanup():\n"
        "    if D.is_dist():\n"
        "        alive = sum(isinstance(o, DistributedDataParallel) for o in gc.get_objects())\n"
        f"        open(r'{tmp_path}/alive%d.txt' % dist.get_rank(), 'w').write(str(alive))\n"
        "    orig()\n"
        "D.cleanup_distributed = cleanup\n"
        "from crnn.cli.train import main\n"
        "sys.exit(main(sys.argv[1:]))\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(script),
           *_overrides(tmp_path, words_lmdb, None, "train.steps=2", "train.val_every=0", "train.save_every=0",
                       "train.ddp_comm=bf16")]  # bf16: a comm hook with Python futures, the likeliest to abort
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env, cwd=REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    assert [(tmp_path / f"alive{r}.txt").read_text() for r in (0, 1)] == ["0", "0"]


def test_torchrun_with_dp_is_an_error(tmp_path, words_lmdb, monkeypatch, capsys):
    """Refused by name before any process group is set up (exit 1 alone would also be a missing MASTER_ADDR)."""
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert train_main(_overrides(tmp_path, words_lmdb, None, "train.parallel=dp")) == 1
    errors = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("crnn-train: error")]
    assert errors == ["crnn-train: error: train.parallel=dp cannot run under torchrun: DDP is used there; "
                      "drop the override"]


def test_legacy_local_rank_argument_is_accepted(tmp_path, words_lmdb):
    assert train_main(["--local_rank=0", *_overrides(tmp_path, words_lmdb, None, "train.steps=1")]) == 0


def test_keep_ratio_training_uses_per_sample_lengths(tmp_path, words_lmdb, monkeypatch):
    """With keep_ratio, CTC input lengths follow each image's own width, not the padded batch width."""
    import crnn.engine.trainer as T

    seen = []
    orig = T.ctc_loss

    def spy(logits, targets, target_lengths, input_lengths=None):
        seen.append((logits.shape[1], input_lengths.clone()))
        return orig(logits, targets, target_lengths, input_lengths)

    monkeypatch.setattr(T, "ctc_loss", spy)
    assert train_main(_overrides(tmp_path, words_lmdb, None, "train.steps=2", "data.keep_ratio=true",
                                 "data.max_width=200")) == 0
    assert seen
    for T_padded, lengths in seen:
        assert int(lengths.max()) <= T_padded
    assert any(int(lengths.min()) < T_padded for T_padded, lengths in seen)  # rendered words differ in width


@pytest.mark.parametrize("wrapper", ["dp", "ddp"])
def test_init_weights_from_wrapped_state_dicts(tmp_path, words_lmdb, wrapper):
    """train.init_weights takes a bare state dict written by nn.DataParallel or a DDP-wrapped model (module. keys)."""
    import torch.distributed as dist

    from crnn.charset import Charset
    from crnn.model import build_model

    torch.manual_seed(1)
    model = build_model("vgg_small", 1, Charset.from_spec("alnum36").num_classes)
    if wrapper == "dp":
        sd = torch.nn.DataParallel(model).state_dict()
    else:
        dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
        try:
            sd = torch.nn.parallel.DistributedDataParallel(model).state_dict()
        finally:
            dist.destroy_process_group()
    assert all(k.startswith("module.") for k in sd)
    src = tmp_path / f"{wrapper}.pt"
    torch.save(sd, src)
    over = _overrides(tmp_path, words_lmdb, None, "train.steps=1", "train.lr=0", "train.warmup_steps=0",
                      "train.schedule=constant", "train.optimizer=sgd", f"train.init_weights={src}")
    assert train_main(over) == 0
    out = _model_state(tmp_path / "run" / "last.pt")
    for k, v in model.state_dict().items():
        if v.is_floating_point() and "running" not in k:  # lr 0: weights unchanged (BN statistics do move)
            torch.testing.assert_close(out[k], v, rtol=0, atol=0, msg=k)


def test_model_parallel_on_cpu_pair(tmp_path, words_lmdb, capfd, monkeypatch):
    """The trainer places the two parts where train.model_parallel says (a cpu pair: the hop itself is held by
    test_model.py on cpu/meta and test_cuda.py on cuda/cpu)."""
    from crnn.model import CRNN

    placed, place = [], CRNN.place
    monkeypatch.setattr(CRNN, "place", lambda self, a, b: placed.append((str(a), str(b))) or place(self, a, b))
    assert train_main(_overrides(tmp_path, words_lmdb, None, "train.steps=2", "train.model_parallel=[cpu,cpu]")) == 0
    assert placed == [("cpu", "cpu")]
    assert "model parallel: CNN on cpu, sequence model on cpu" in capfd.readouterr().err
    assert not any(k.startswith("module.") for k in _model_state(tmp_path / "run" / "last.pt"))


def test_logged_images_per_second_counts_every_rank_once(monkeypatch, caplog):
    """Rank 0 logs the global rate: 2 ranks x 16 images x 10 steps in 4 s = 80 img/s (the meter already holds all
    ranks' images; it used to be multiplied by the world size a second time). A fixed clock, no timing."""
    import types

    import crnn.engine.trainer as T

    cfg = load_config(None, ["train.steps=100", "train.log_every=10", "train.val_every=0", "train.save_every=0"])
    rt = T.Runtime(torch.device("cpu"), "ddp", rank=0, local_rank=0, world_size=2)
    clock = types.SimpleNamespace(now=100.0)
    monkeypatch.setattr(T.time, "perf_counter", lambda: clock.now)
    meter = T.Meter()
    for _ in range(10):
        meter.add(1.0, 16 * rt.world_size)  # as the loop adds: this rank's batch x world size
    clock.now += 4.0
    st = T.TrainState(step=10)
    opt = types.SimpleNamespace(param_groups=[{"lr": 1e-3}])
    caplog.set_level("INFO", logger="crnn")
    T._periodic(cfg, rt, None, None, {}, st, None, meter, t_start=96.0, step0=0, opt=opt, save=None)
    assert "step 10/100  epoch 0  loss 1.0000  lr 1.00e-03  80 img/s" in caplog.text


def test_a_cpu_budget_ends_the_run_and_validates_at_its_marks(tmp_path, words_lmdb, val_lmdb, capfd):
    """train.cpu_hours: the run stops once it has spent its CPU time (long before train.steps), saving last.pt with
    that cost; train.val_every_cpu_hours validates at each multiple on top of the end's validation."""
    import csv

    budget = 0.003  # 10.8 CPU-seconds, checked at every step (train.log_every=1)
    rc = train_main(["--config", str(REPO / "configs/smoke.yaml"),
                     *_overrides(tmp_path, words_lmdb, val_lmdb, "train.steps=100000", "train.val_every=0",
                                 f"train.cpu_hours={budget}", f"train.val_every_cpu_hours={budget / 3}",
                                 "train.save_every=0")])
    assert rc == 0
    ck = torch.load(tmp_path / "run" / "last.pt", map_location="cpu", weights_only=True)
    assert 0 < ck["step"] < 100000 and ck["state"]["cpu_seconds"] >= budget * 3600
    with open(tmp_path / "run" / "curve.tsv", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    cpu = [float(r["cpu_seconds"]) for r in rows]
    assert len(rows) >= 2 and cpu == sorted(cpu) and cpu[-1] >= budget * 3600 and cpu[0] < budget * 3600
    assert int(rows[-1]["step"]) == ck["step"]
    assert f"(train.cpu_hours={budget:g} spent)" in capfd.readouterr().err
    with pytest.raises(ConfigError, match="train.cpu_hours: must be 0"):
        load_config(None, ["train.cpu_hours=-1"])


def test_a_cosine_over_cpu_hours_decays_with_the_budget_spent_not_the_steps():
    """train.schedule_over=cpu_hours: after the warm-up the cosine's progress is the share of train.cpu_hours spent,
    whatever train.steps says; it is refused where it could not mean that."""
    cfg = load_config(None, ["train.steps=100000000", "train.warmup_steps=10", "train.min_lr_ratio=0.0",
                             "train.cpu_hours=2", "train.schedule_over=cpu_hours"])
    assert lr_factor(0, cfg, 0.0) == pytest.approx(0.1)  # warm-up in steps, as before
    assert lr_factor(50, cfg, 0.0) == pytest.approx(1.0)
    assert lr_factor(50, cfg, 3600.0) == pytest.approx(0.5)  # half the budget spent: half way down
    assert lr_factor(50, cfg, 7200.0) == pytest.approx(0.0, abs=1e-9)
    assert lr_factor(50, cfg, 9000.0) == pytest.approx(0.0, abs=1e-9)  # past the budget: stays at the floor
    steps = load_config(None, ["train.steps=100000000", "train.warmup_steps=10", "train.cpu_hours=2"])
    assert lr_factor(50, steps, 3600.0) == pytest.approx(1.0, abs=1e-6)  # over steps: the CPU count plays no part
    for bad in (["train.schedule_over=cpu_hours"], ["train.cpu_hours=1", "train.schedule=constant",
                                                   "train.schedule_over=cpu_hours"]):
        with pytest.raises(ConfigError, match="train.schedule_over: cpu_hours decays a cosine over a CPU budget"):
            load_config(None, bad)
    with pytest.raises(ConfigError, match="train.schedule_over"):
        load_config(None, ["train.schedule_over=wall"])


@pytest.mark.parametrize("over", ["steps", "cpu_hours"])
def test_the_first_step_after_a_sitting_pack_is_warmed_up_at_the_pack_s_cpu_count(over):
    """A pack holds no Adam moments: its first update is warmed up again (1/warmup of the schedule), and a schedule
    over CPU-hours stands where the pack's CPU count puts it, not at the start of its budget."""
    from crnn.engine.checkpoint import Checkpoint
    from crnn.engine.optim import build_optimizer, build_scheduler
    from crnn.engine.state import TrainState, restore

    cfg = load_config(None, ["train.steps=1000", "train.warmup_steps=10", "train.lr=1e-3", "train.min_lr_ratio=0",
                             "train.cpu_hours=1", f"train.schedule_over={over}"])
    model, st = torch.nn.Linear(2, 2), TrainState()
    opt = build_optimizer(cfg, model)
    sched = build_scheduler(cfg, opt, st)
    pack = Checkpoint("pack.pt", model.state_dict(), kind="weights",
                      raw={"resumable": True, "state": {"step": 500, "cpu_seconds": 2700.0}})
    vars(st).update(vars(restore(pack, model, opt, sched, None, cfg)))
    at = lr_factor(500, cfg, 2700.0)  # three quarters of the budget spent, or 490 of the 990 steps after the warm-up
    assert at == pytest.approx(0.1464 if over == "cpu_hours" else 0.5079, abs=1e-4)
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-3 * at / 10)
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-3 * lr_factor(501, cfg, 2700.0) * 2 / 10)


def test_a_run_with_a_cosine_over_its_cpu_budget_ends_near_the_floor(tmp_path, words_lmdb, val_lmdb, capsys):
    """The scheduler reads the run's CPU count: at the end of the budget the learning rate is near min_lr_ratio."""
    budget = 0.002  # 7.2 CPU-seconds, looked at every step (train.log_every=1)
    rc = train_main(["--config", str(REPO / "configs/smoke.yaml"),
                     *_overrides(tmp_path, words_lmdb, val_lmdb, "train.steps=100000", "train.val_every=0",
                                 f"train.cpu_hours={budget}", "train.schedule_over=cpu_hours", "train.warmup_steps=2",
                                 "train.min_lr_ratio=0.0", "train.save_every=0")])
    assert rc == 0
    ck = torch.load(tmp_path / "run" / "last.pt", map_location="cpu", weights_only=True)
    lr0 = load_config(REPO / "configs/smoke.yaml").train.lr
    last_lr = ck["optimizer"]["param_groups"][0]["lr"]
    assert ck["step"] > 2 and last_lr < 0.05 * lr0
    assert "raise train.steps" not in capsys.readouterr().err  # the budget ended it: no word on train.steps
    rc = train_main(["--config", str(REPO / "configs/smoke.yaml"),  # resumed with its budget spent: not one step more
                     *_overrides(tmp_path, words_lmdb, val_lmdb, "train.steps=100000", "train.val_every=0",
                                 f"train.cpu_hours={budget}", "train.schedule_over=cpu_hours", "train.warmup_steps=2",
                                 "train.min_lr_ratio=0.0", "train.save_every=0", "train.resume=auto")])
    assert rc == 0
    assert torch.load(tmp_path / "run" / "last.pt", map_location="cpu", weights_only=True)["step"] == ck["step"]


def test_a_cosine_over_cpu_hours_cut_short_by_train_steps_says_so(tmp_path, words_lmdb, capsys):
    """train.steps (1000 by default) still caps a run: one that ends by it long before its budget stopped mid-decay,
    and the log says so, with the fix."""
    rc = train_main(["--config", str(REPO / "configs/smoke.yaml"),
                     *_overrides(tmp_path, words_lmdb, None, "train.steps=3", "train.val_every=0", "train.cpu_hours=1",
                                 "train.schedule_over=cpu_hours", "train.save_every=0")])
    assert rc == 0
    err = capsys.readouterr().err
    assert "train.steps=3 ended the run at 0.00 of its train.cpu_hours=1: the cosine over CPU-hours " \
           "(train.schedule_over) stopped 0% of the way, at a learning rate of " in err
    assert err.rstrip().endswith("; raise train.steps so that the budget ends the run")
