"""Reliability: killed workers, crashes while saving, Ctrl-C/SIGTERM, non-finite losses, failing or hanging ranks and
bad input all end with a clear message, an intact last.pt and a run that train.resume=auto can finish.

Multi-process cases start real torchrun groups on the CPU (gloo) in their own session and are marked slow.
"""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from crnn.cli.train import main as train_main
from tests.procs import descendants, kill_tree
from tests.conftest import REPO, make_lmdb, random_words, render_png

TINY = ["data.batch_size=4", "data.num_workers=0", "train.amp=off", "train.log_every=1", "train.warmup_steps=0",
        "train.tensorboard=false", "train.show_predictions=0", "train.val_every=0", "data.val=[]"]
PY_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "PYTHON": sys.executable}
STEP_LINE = re.compile(r"^\[crnn\] step (\d+)/\d+ ", re.M)
RESUMED = re.compile(r"resumed from \S+ at step (\d+)")


def _args(out: Path, train: Path, *extra: str) -> list[str]:
    return [f"data.train=[{{path: {train}}}]", f"train.output_dir={out}", *TINY, *extra]


def _ckpt(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def _step_of(path: Path) -> int:
    """The step stored in a checkpoint, -1 while it does not exist (saves are atomic: never half-read)."""
    try:
        return _ckpt(path)["step"]
    except FileNotFoundError:
        return -1


def _error_line(err: str, prog: str = "crnn-train") -> str:
    """The single error line a CLI printed; fails on a traceback or on several error lines."""
    assert "Traceback" not in err, err[-3000:]
    lines = [ln for ln in err.splitlines() if ln.startswith(f"{prog}: error")]
    assert len(lines) == 1, err[-3000:]
    return lines[0]


# ------------------------------------------------------------------------------------------- processes
def _spawn(cmd: list[str], env: dict | None = None) -> subprocess.Popen:
    """Start ``cmd`` in its own session (so a signal can go to its whole process group), output merged."""
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
                            env=env or PY_ENV, start_new_session=True)






def _wait_for_checkpoint(proc: subprocess.Popen, path: Path, step: int, deadline_s: float = 300) -> None:
    """Poll until ``path`` holds a checkpoint of at least ``step``; fail if the process ends first."""
    end = time.monotonic() + deadline_s
    while _step_of(path) < step:
        if proc.poll() is not None:
            pytest.fail(f"training ended (rc {proc.returncode}) before step {step}:\n{proc.communicate()[0][-3000:]}")
        if time.monotonic() > end:
            pytest.fail(f"no checkpoint with step >= {step} in {path}")
        time.sleep(0.05)


def _worker_pid(agent: int, rank: int) -> int:
    """The pid of torchrun worker ``rank`` (read from the workers' environment in /proc)."""
    for pid in descendants(agent):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in env and any(v.startswith(b"TORCHELASTIC_RUN_ID=") for v in env):
            return pid
    pytest.fail(f"no torchrun worker with RANK={rank} under pid {agent}")


def _train_ddp(out: Path, train: Path, *extra: str, restarts: int = 3) -> list[str]:
    return ["bash", str(REPO / "scripts/train_ddp.sh"), "--nproc", "2", "--max-restarts", str(restarts),
            *_args(out, train, *extra)]


# ------------------------------------------------------------------------------------------- elastic restarts
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_killed_worker_is_restarted_and_resumes_from_the_last_checkpoint(tmp_path, words_lmdb):
    """kill -9 of rank 0 mid-run: torchrun restarts the group, which resumes from last.pt and finishes."""
    out, save_every, steps = tmp_path / "run", 4, 24
    proc = _spawn(_train_ddp(out, words_lmdb, f"train.steps={steps}", f"train.save_every={save_every}"))
    try:
        _wait_for_checkpoint(proc, out / "last.pt", 2 * save_every)
        os.kill(_worker_pid(proc.pid, 0), signal.SIGKILL)
        log = proc.communicate(timeout=540)[0]
    finally:
        kill_tree(proc)
    assert proc.returncode == 0, log[-3000:]
    assert _ckpt(out / "last.pt")["step"] == steps
    assert re.search(r"exitcode\s*:\s*-9|failed \(exitcode: -9\)", log), log[-3000:]
    resumed = RESUMED.findall(log)
    assert len(resumed) == 1, log[-3000:]
    before = log[: log.index("resumed from")]
    kill_step, start = max(int(s) for s in STEP_LINE.findall(before)), int(resumed[0])
    assert start >= 2 * save_every and start % save_every == 0
    assert 0 <= kill_step - start <= save_every  # at most one checkpoint interval was trained twice
    assert f"done: {steps} steps" in log


# ------------------------------------------------------------------------------------------- crash while saving
CHILD_SAVER = """
import sys, torch
from crnn.engine.checkpoint import save_checkpoint
path = sys.argv[1]
ck = torch.load(path, map_location="cpu", weights_only=True)
ck["pad"] = torch.arange(8_000_000, dtype=torch.float32)  # ~32 MB: each save takes long enough to be interrupted
while True:
    save_checkpoint(ck, path)
"""


def _kill_while_saving(last: Path) -> Path:
    """Run a process that re-saves ``last`` in a loop and SIGKILL it in the middle of a write; return its tmp file."""
    for _ in range(20):
        proc = subprocess.Popen([sys.executable, "-c", CHILD_SAVER, str(last)], cwd=REPO, env=PY_ENV)
        tmp = last.with_name(f"{last.name}.{proc.pid}.tmp")
        try:
            while proc.poll() is None and not (tmp.exists() and tmp.stat().st_size > 0):
                time.sleep(0.002)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait()
        if tmp.exists():  # killed half-way through a write (else the rename won the race: try again)
            return tmp
    pytest.fail("could not interrupt a checkpoint write in 20 attempts")


def test_crash_while_saving_leaves_the_previous_checkpoint_intact(tmp_path, words_lmdb, capsys):
    out = tmp_path / "run"
    assert train_main(_args(out, words_lmdb, "train.steps=4", "train.stop_after=2", "train.save_every=0")) == 0
    last = out / "last.pt"
    tmp = _kill_while_saving(last)
    assert tmp.stat().st_size > 0  # the half-written file sits beside the final path, not at it
    ck = _ckpt(last)  # the final path always holds a complete checkpoint: the old one or a fully written new one
    assert ck["step"] == 2
    if "pad" in ck:
        assert torch.equal(ck["pad"], torch.arange(8_000_000, dtype=torch.float32))
    capsys.readouterr()
    assert train_main(_args(out, words_lmdb, "train.steps=4", "train.save_every=0", "train.resume=auto")) == 0
    err = capsys.readouterr().err
    assert "resumed from" in err and "at step 2" in err
    assert "removed 1 half-written checkpoint file" in err and not tmp.exists()
    assert _ckpt(last)["step"] == 4


# ------------------------------------------------------------------------------------------- Ctrl-C / SIGTERM
@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_single_process_saves_and_resume_finishes(tmp_path, words_lmdb, sig, capsys):
    """Signal the whole process group (as a terminal's Ctrl-C does), DataLoader workers included."""
    out, steps = tmp_path / "run", 16
    args = _args(out, words_lmdb, f"train.steps={steps}", "train.save_every=2", "data.num_workers=2")
    proc = _spawn([sys.executable, "-m", "crnn.cli.train", *args])
    try:
        _wait_for_checkpoint(proc, out / "last.pt", 2)
        os.killpg(proc.pid, sig)
        log = proc.communicate(timeout=240)[0]
    finally:
        kill_tree(proc)
    assert proc.returncode == 128 + sig, log[-3000:]
    assert "Traceback" not in log and "DataLoader worker" not in log, log[-3000:]
    assert log.count(f"received {sig.name}") == 1
    stopped = _ckpt(out / "last.pt")["step"]
    assert 2 <= stopped < steps
    assert f"stopped at step {stopped}/{steps} (signal)" in log
    assert train_main([*args, "train.resume=auto", "data.num_workers=0"]) == 0
    assert f"resumed from {out / 'last.pt'} at step {stopped}" in capsys.readouterr().err
    assert _ckpt(out / "last.pt")["step"] == steps


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ctrl_c_to_torchrun_stops_every_rank_cleanly_and_resume_finishes(tmp_path, words_lmdb):
    """SIGINT to the launcher's process group: torchrun forwards it, both ranks stop at the same step, rank 0 saves."""
    out, steps = tmp_path / "run", 16
    cmd = _train_ddp(out, words_lmdb, f"train.steps={steps}", "train.save_every=2")
    proc = _spawn(cmd)
    try:
        _wait_for_checkpoint(proc, out / "last.pt", 2)
        os.killpg(proc.pid, signal.SIGINT)
        log = proc.communicate(timeout=240)[0]
    finally:
        kill_tree(proc)
    assert proc.returncode == 130, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    assert "train_ddp.sh: stopped by SIGINT" in log
    stopped = _ckpt(out / "last.pt")["step"]
    assert 2 <= stopped < steps
    assert log.count(f"stopped at step {stopped}/{steps} (signal)") == 1  # rank 0 says it once, for both ranks
    again = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=PY_ENV, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert RESUMED.findall(again.stderr) == [str(stopped)]
    assert _ckpt(out / "last.pt")["step"] == steps


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigterm_to_torchrun_agent_saves_and_exits_143(tmp_path, words_lmdb):
    out, steps = tmp_path / "run", 16
    proc = _spawn(_train_ddp(out, words_lmdb, f"train.steps={steps}", "train.save_every=2"))
    try:
        _wait_for_checkpoint(proc, out / "last.pt", 2)
        os.kill(proc.pid, signal.SIGTERM)  # only the agent, as a scheduler would: it forwards SIGTERM to the workers
        log = proc.communicate(timeout=240)[0]
    finally:
        kill_tree(proc)
    assert proc.returncode == 143, log[-3000:]
    assert "Traceback" not in log and "received SIGTERM" in log, log[-3000:]
    stopped = _ckpt(out / "last.pt")["step"]
    assert 2 <= stopped < steps and f"stopped at step {stopped}/{steps} (signal)" in log


def test_ctrl_c_while_the_trainer_starts_is_one_line_and_130(tmp_path, words_lmdb, monkeypatch, capsys):
    """Ctrl-C in a worker's first seconds (config loading, before fit installs its signal handlers): one line."""
    import crnn.config

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(crnn.config, "load_config", interrupted)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    try:
        rc = train_main(_args(tmp_path / "run", words_lmdb))
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped crnn-train's main (a traceback for the user)")
    assert rc == 130
    assert capsys.readouterr().err == "crnn-train: rank 1 of 2: interrupted\n"


def test_ctrl_c_while_the_launcher_imports_torch_is_one_line_and_130(monkeypatch, capsys):
    """Ctrl-C during the launcher's first second or two (importing torch), before torchrun forwards signals."""
    import types

    from crnn.cli import launch

    class Importing(types.ModuleType):
        def __getattr__(self, name):
            if name == "run_torchrun":
                raise KeyboardInterrupt
            raise AttributeError(name)

    monkeypatch.setitem(sys.modules, "crnn.engine.distributed", Importing("crnn.engine.distributed"))
    monkeypatch.setenv("CRNN_LAUNCH_PROG", "train_ddp.sh")
    try:
        rc = launch.main(["--standalone", "--nproc_per_node=2", "-m", "crnn.cli.train"])
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped crnn-launch's main (a traceback for the user)")
    assert rc == 130
    assert capsys.readouterr().err == "train_ddp.sh: interrupted before training started\n"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_workers_stop_and_save_when_the_agent_is_killed(tmp_path, words_lmdb):
    """kill -9 of the torchrun agent alone: nobody is left to stop the workers, so they notice it themselves (their
    parent changed) and stop as on SIGTERM, with last.pt saved, instead of training on unsupervised."""
    out, steps = tmp_path / "run", 400
    proc = _spawn(_train_ddp(out, words_lmdb, f"train.steps={steps}", "train.save_every=2"))
    workers = []
    try:
        _wait_for_checkpoint(proc, out / "last.pt", 2)
        workers = [_worker_pid(proc.pid, r) for r in (0, 1)]
        os.kill(proc.pid, signal.SIGKILL)  # train_ddp.sh execs the launcher: this pid is the agent
        log = proc.communicate(timeout=120)[0]  # the workers hold the output pipe: EOF once both have exited
    finally:
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        kill_tree(proc)
    assert log.count(f"the torchrun agent (pid {proc.pid}) is gone") == 2, log[-3000:]
    stopped = _ckpt(out / "last.pt")["step"]
    assert 2 <= stopped < steps and f"stopped at step {stopped}/{steps} (signal)" in log, log[-3000:]


# ------------------------------------------------------------------------------------------- non-finite losses
def _nan_forward(monkeypatch, bad_calls) -> None:
    """Make the model's forward return NaN logits on the given (1-based) calls; ``bad_calls(n) -> bool``."""
    from crnn.model import CRNN

    orig, calls = CRNN.forward, [0]

    def forward(self, images):
        calls[0] += 1
        out = orig(self, images)
        return out * float("nan") if bad_calls(calls[0]) else out

    monkeypatch.setattr(CRNN, "forward", forward)


def _watch_updates(monkeypatch) -> list[tuple[bool, bool]]:
    """Record, for every optimizer step, (finite?, parameters changed?)."""
    import crnn.engine.trainer as T

    orig, seen = T.optimizer_step, []

    def step(model, *a, **k):
        before = [p.detach().clone() for p in model.parameters()]
        ok = orig(model, *a, **k)
        seen.append((ok, any(not torch.equal(b, p) for b, p in zip(before, model.parameters()))))
        return ok

    monkeypatch.setattr(T, "optimizer_step", step)
    return seen


def test_nonfinite_steps_are_skipped_counted_and_logged(tmp_path, words_lmdb, monkeypatch, capsys):
    _nan_forward(monkeypatch, lambda n: n in (2, 3))
    seen = _watch_updates(monkeypatch)
    out = tmp_path / "run"
    assert train_main(_args(out, words_lmdb, "train.steps=5", "train.save_every=0", "train.max_nonfinite=3")) == 0
    assert seen == [(True, True), (False, False), (False, False), (True, True), (True, True)]
    err = capsys.readouterr().err
    assert "step 2: non-finite loss/gradients, update skipped (1 in a row, 1 in total)" in err
    assert "step 3: non-finite loss/gradients, update skipped (2 in a row, 2 in total)" in err
    assert "2 non-finite steps" in err  # the final summary line
    assert _ckpt(out / "last.pt")["state"]["nonfinite_steps"] == 2


def test_too_many_nonfinite_steps_stop_with_last_good_checkpoint(tmp_path, words_lmdb, monkeypatch, capsys):
    _nan_forward(monkeypatch, lambda n: n > 3)
    out = tmp_path / "run"
    rc = train_main(_args(out, words_lmdb, "train.steps=20", "train.save_every=1", "train.max_nonfinite=3"))
    assert rc == 1
    line = _error_line(capsys.readouterr().err)
    assert "3 non-finite losses/gradients in a row at step 6" in line and "train.max_nonfinite=3" in line
    assert f"the last good checkpoint is {out / 'last.pt'}" in line
    ck = _ckpt(out / "last.pt")  # saved at step 3; steps 4-6 skipped and not saved over it
    assert ck["step"] == 3
    assert all(torch.isfinite(v).all() for v in ck["model"].values() if v.is_floating_point())


def test_diverging_learning_rate_stops_cleanly(tmp_path, words_lmdb, capsys):
    out = tmp_path / "run"
    assert train_main(_args(out, words_lmdb, "train.steps=20", "train.lr=1e30", "train.max_nonfinite=2")) == 1
    assert "non-finite losses/gradients in a row" in _error_line(capsys.readouterr().err)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_failed_ddp_run_ends_with_the_launchers_one_line(tmp_path, words_lmdb):
    """Both ranks fail (diverging LR): each prints its error line, then train_ddp.sh one line naming the first failed
    rank and its exit code, and exits 1 — no traceback from the launcher."""
    res = subprocess.run(_train_ddp(tmp_path / "run", words_lmdb, "train.steps=20", "train.lr=1e30",
                                    "train.max_nonfinite=2", restarts=0),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=PY_ENV, timeout=240)
    assert res.returncode == 1, res.stdout[-3000:]
    assert "Traceback" not in res.stdout, res.stdout[-3000:]
    assert "crnn-train: error: rank 1 of 2: 2 non-finite losses/gradients in a row" in res.stdout \
        or "crnn-train: error: rank 0 of 2: 2 non-finite losses/gradients in a row" in res.stdout, res.stdout[-3000:]
    # which rank torchrun sees fail first, and so the exit code it reports, depends on timing
    assert re.fullmatch(r"train_ddp\.sh: training failed \(rank [01], exit code -?\d+\); its error line is above",
                        res.stdout.rstrip().splitlines()[-1]), res.stdout[-3000:]


# ------------------------------------------------------------------------------------------- failing / hanging ranks
FAULT_WRAPPER = """
import os, signal, sys, time
import crnn.engine.trainer as T
orig, calls = T.train_step, [0]
def train_step(*a, **k):
    calls[0] += 1
    if os.environ["RANK"] == os.environ["FAULT_RANK"] and calls[0] == int(os.environ["FAULT_AT"]):
        if os.environ["FAULT"] == "exit":
            os._exit(3)
        # hang outside any collective; SIGTERM is let through so torchrun's teardown does not wait 30 s to SIGKILL
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        while True:
            time.sleep(1)
    return orig(*a, **k)
T.train_step = train_step
from crnn.cli.train import main
sys.exit(main(sys.argv[1:]))
"""


def _run_with_fault(tmp_path: Path, train: Path, fault: str) -> subprocess.CompletedProcess:
    script = tmp_path / "fault.py"
    script.write_text(FAULT_WRAPPER)
    env = {**PY_ENV, "FAULT": fault, "FAULT_RANK": "1", "FAULT_AT": "3"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "--max-restarts=0",
           str(script), *_args(tmp_path / "run", train, "train.steps=20", "train.save_every=2", "train.timeout_s=5")]
    proc = _spawn(cmd, env)
    try:
        log = proc.communicate(timeout=240)[0]
    finally:
        kill_tree(proc)
    return subprocess.CompletedProcess(cmd, proc.returncode, log, "")


def _survivor_line(log: str) -> str:
    """rank 0's one-line error (torchrun prints its own failure report and traceback after it)."""
    assert "[rank0]: Traceback" not in log, log[-3000:]
    lines = [ln for ln in log.splitlines() if ln.startswith("crnn-train: error")]
    assert len(lines) == 1, log[-3000:]
    return lines[0]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_failing_rank_stops_the_group_and_is_named(tmp_path, words_lmdb):
    res = _run_with_fault(tmp_path, words_lmdb, "exit")
    assert res.returncode != 0
    log = res.stdout
    assert re.search(r"rank\s*:\s*1 \(local_rank: 1\)\s*\n\s*exitcode\s*:\s*3", log), log[-3000:]  # torchrun's report
    line = _survivor_line(log)
    assert line.startswith("crnn-train: error: rank 0 of 2: lost contact with the other ranks at step 2"), line
    assert "resumed from" not in log
    assert _ckpt(tmp_path / "run" / "last.pt")["step"] == 2


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_hanging_rank_times_out_after_train_timeout_s(tmp_path, words_lmdb):
    res = _run_with_fault(tmp_path, words_lmdb, "hang")
    assert res.returncode != 0
    line = _survivor_line(res.stdout)
    assert line.startswith("crnn-train: error: rank 0 of 2: lost contact with the other ranks at step 2"), line
    # gloo words it "Timed out waiting ..." or, when another collective times out first, "Application timeout ..."
    assert ("Timed out" in line or "Application timeout" in line) and "train.timeout_s=5" in line
    assert _ckpt(tmp_path / "run" / "last.pt")["step"] == 2


# ------------------------------------------------------------------------------------------- bad input: training data
def _raw_lmdb(path: Path, entries: dict[bytes, bytes]) -> Path:
    """An LMDB with exactly these keys (for layouts the product's writer refuses to make)."""
    import lmdb

    env = lmdb.open(str(path), map_size=1 << 24)
    with env.begin(write=True) as txn:
        for k, v in entries.items():
            txn.put(k, v)
    env.close()
    return path


def _assert_bad_train_input(tmp_path, capsys, argv: list[str], *needles: str, rc: int = 1) -> str:
    """Run crnn-train on bad input: exit code, one error line naming ``needles``, no output folder created."""
    out = tmp_path / "run"
    assert train_main([*argv, f"train.output_dir={out}"]) == rc
    line = _error_line(capsys.readouterr().err)
    for needle in needles:
        assert needle in line, line
    assert not out.exists()  # nothing half-written
    return line


def _data(path) -> list[str]:
    return [f"data.train=[{{path: {path}}}]", *TINY, "train.steps=2"]


@pytest.mark.parametrize("kind", ["missing", "empty_dir", "not_lmdb"])
def test_unusable_dataset_path(tmp_path, capsys, kind):
    path = tmp_path / "data"
    if kind == "empty_dir":
        path.mkdir()
    elif kind == "not_lmdb":
        path.mkdir()
        (path / "data.mdb").write_bytes(b"\0not an lmdb" * 100)
    _assert_bad_train_input(tmp_path, capsys, _data(path), "data.train:", str(path))


def test_lmdb_without_num_samples(tmp_path, capsys):
    path = _raw_lmdb(tmp_path / "x.lmdb", {b"image-000000001": render_png("ab"), b"label-000000001": b"ab"})
    _assert_bad_train_input(tmp_path, capsys, _data(path), str(path), "num-samples")


def test_num_samples_larger_than_stored(tmp_path, capsys):
    entries = {b"num-samples": b"10"}
    for i in range(1, 4):
        entries[b"image-%09d" % i], entries[b"label-%09d" % i] = render_png("ab"), b"ab"
    path = _raw_lmdb(tmp_path / "x.lmdb", entries)
    _assert_bad_train_input(tmp_path, capsys, _data(path), str(path), "num-samples says 10", "truncated")


def test_missing_validation_set(tmp_path, words_lmdb, capsys):
    _assert_bad_train_input(tmp_path, capsys, [*_data(words_lmdb), f"data.val=[{tmp_path / 'nope'}]"],
                            "data.val:", str(tmp_path / "nope"))


def test_corrupt_images_are_skipped_and_counted(tmp_path, capsys):
    from crnn.data.lmdb_io import write_lmdb

    words = random_words(16, seed=3)
    path = tmp_path / "mixed.lmdb"
    write_lmdb(((b"\x89PNG broken" if i % 2 else render_png(w), w) for i, w in enumerate(words)), path)
    out = tmp_path / "run"
    assert train_main([*_data(path), "train.steps=4", f"train.output_dir={out}"]) == 0
    err = capsys.readouterr().err
    skipped = _ckpt(out / "last.pt")["state"]["skipped_images"]
    assert 0 < skipped < 16
    assert f"skipped {skipped} undecodable images" in err


def test_batches_of_only_corrupt_images_do_not_stop_training(tmp_path, capsys):
    from crnn.data.lmdb_io import write_lmdb

    path = tmp_path / "broken.lmdb"
    write_lmdb(((b"not an image", w) for w in random_words(8)), path)
    out = tmp_path / "run"
    assert train_main([*_data(path), "train.steps=2", f"train.output_dir={out}"]) == 0
    ck = _ckpt(out / "last.pt")
    assert ck["step"] == 2 and ck["state"]["skipped_images"] == 8  # 2 steps x 4, all skipped
    assert all(torch.isfinite(v).all() for v in ck["model"].values() if v.is_floating_point())


def test_empty_and_out_of_charset_labels_are_dropped_and_counted(tmp_path, capsys):
    labels = random_words(12, seed=4) + ["", "", "ab#", "a b"]
    path = make_lmdb(tmp_path / "labels.lmdb", labels)
    out = tmp_path / "run"
    assert train_main([*_data(path), f"train.output_dir={out}"]) == 0
    assert f"{path}: 12 of 16 samples kept (dropped: empty=2, unknown_char=2)" in capsys.readouterr().err


def test_no_usable_labels_at_all(tmp_path, capsys):
    path = make_lmdb(tmp_path / "labels.lmdb", ["", "#", "a#", "?!"])
    _assert_bad_train_input(tmp_path, capsys, _data(path), "data.train:", str(path), "no usable samples")


def test_labels_longer_than_the_model_sequence_warn_and_are_counted(tmp_path, capsys):
    path = make_lmdb(tmp_path / "long.lmdb", ["abcdefghijklmnopqrst"] * 4 + ["ab"] * 4)  # 20 chars > T=9
    out = tmp_path / "run"
    assert train_main([*_data(path), "data.width=32", f"train.output_dir={out}"]) == 0
    err = capsys.readouterr().err
    assert "data.max_label_length=25 is more than the 9 time steps the model has for width 32" in err
    unfit = _ckpt(out / "last.pt")["state"]["unfit_labels"]
    assert unfit > 0 and f"{unfit} labels too long for T" in err


# ------------------------------------------------------------------------------------------- bad input: config, files
@pytest.mark.parametrize("override,needle", [("train.bogus=1", "train.bogus"), ("train.steps=abc", "train.steps"),
                                             ("model.variant=vgg99", "model.variant"), ("bogus.key=1", "bogus.key")])
def test_bad_config_values(tmp_path, words_lmdb, capsys, override, needle):
    _assert_bad_train_input(tmp_path, capsys, [*_data(words_lmdb), override], needle, rc=2)


def test_unknown_key_in_config_file(tmp_path, words_lmdb, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("train:\n  stepz: 3\n")
    _assert_bad_train_input(tmp_path, capsys, ["--config", str(cfg), *_data(words_lmdb)], str(cfg), "train.stepz",
                            rc=2)


def test_output_dir_under_a_file(tmp_path, words_lmdb, capsys):
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / "run"
    assert train_main([*_data(words_lmdb), f"train.output_dir={out}"]) == 1
    line = _error_line(capsys.readouterr().err)
    assert f"train.output_dir={out}" in line and "is a file" in line


def _weights(path: Path, charset: str = "alnum36", *overrides: str) -> Path:
    """A weights-only checkpoint of an untrained model built from ``overrides``."""
    from crnn.charset import Charset
    from crnn.config import load_config
    from crnn.engine.checkpoint import model_checkpoint, save_checkpoint
    from crnn.model import build_model

    cfg = load_config(None, [f"model.charset={charset}", *overrides])
    cs = Charset.from_spec(charset)
    m = cfg.model
    save_checkpoint(model_checkpoint(build_model(m.variant, 1, cs.num_classes, m.hidden or None), cfg, cs), path)
    return path


@pytest.mark.parametrize("charset,overrides,needle", [("alnum36", ["model.hidden=32"], "different variant")])
def test_init_weights_from_another_model(tmp_path, words_lmdb, capsys, charset, overrides, needle):
    w = _weights(tmp_path / "other.pt", charset, *overrides)
    _assert_bad_train_input(tmp_path, capsys, [*_data(words_lmdb), f"train.init_weights={w}"],
                            f"train.init_weights={w}", needle)


def test_truncated_checkpoint_on_resume(tmp_path, words_lmdb, capsys):
    out = tmp_path / "run"
    assert train_main([*_data(words_lmdb), "train.steps=1", f"train.output_dir={out}"]) == 0
    last = out / "last.pt"
    data = last.read_bytes()
    last.write_bytes(data[: len(data) // 2])
    capsys.readouterr()
    assert train_main([*_data(words_lmdb), "train.resume=auto", f"train.output_dir={out}"]) == 1
    line = _error_line(capsys.readouterr().err)
    assert "train.resume" in line and str(last) in line and "truncated or corrupt" in line and "best.pt" in line
    assert last.read_bytes() == data[: len(data) // 2]  # left as it was for inspection


def test_resume_with_another_optimizer(tmp_path, words_lmdb, capsys):
    out = tmp_path / "run"
    assert train_main([*_data(words_lmdb), "train.steps=1", f"train.output_dir={out}"]) == 0
    capsys.readouterr()
    rc = train_main([*_data(words_lmdb), "train.resume=auto", "train.optimizer=adadelta", f"train.output_dir={out}"])
    assert rc == 1
    line = _error_line(capsys.readouterr().err)
    assert "train.optimizer=adam" in line and f"train.init_weights={out / 'last.pt'}" in line


# ------------------------------------------------------------------------------------------- loader workers at exit
EXIT_WITH_HELD_ERROR = """
import sys
import crnn.engine.trainer as T
from crnn.config import load_config
real, calls = T.train_step, [0]
def train_step(*a, **k):
    calls[0] += 1
    if calls[0] == 3:
        raise RuntimeError("Connection closed by peer")  # what a collective raises when another rank died
    return real(*a, **k)
T.train_step = train_step
try:
    T.fit(load_config(None, sys.argv[1:]))
except RuntimeError as e:
    held = [e]
    held.append(held)  # the error kept in a reference cycle until exit, as fit's 'lost contact' error is
print("error caught; exiting", flush=True)
"""


@pytest.mark.timeout(300)
def test_process_exits_after_a_training_error_with_loader_workers(tmp_path, words_lmdb):
    """A training error with data.num_workers=1 whose traceback survives until exit: the process still exits. The
    workers ignore SIGTERM, so Python's exit (SIGTERM to daemonic children, then join) waited forever on them when the
    loader was still alive; a DDP rank that printed 'lost contact' then hung until torchrun's SIGKILL."""
    cmd = [sys.executable, "-c", EXIT_WITH_HELD_ERROR, *_args(tmp_path / "run", words_lmdb, "train.steps=50",
                                                          "data.num_workers=1")]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=PY_ENV, timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("the process did not exit within 180 s after a training error (loader workers left running)")
    assert res.returncode == 0 and "error caught; exiting" in res.stdout, res.stderr[-3000:]


def test_loader_workers_are_stopped_when_training_fails(tmp_path, words_lmdb, monkeypatch):
    import multiprocessing

    from crnn.config import load_config

    import crnn.engine.trainer as T

    real, calls = T.train_step, [0]

    def failing(*a, **k):
        calls[0] += 1
        if calls[0] == 2:
            raise T.TrainingError("injected")
        return real(*a, **k)

    monkeypatch.setattr(T, "train_step", failing)
    with pytest.raises(T.TrainingError, match="injected") as info:
        T.fit(load_config(None, _args(tmp_path / "run", words_lmdb, "train.steps=50", "data.num_workers=1")))
    assert info.value.__traceback__ is not None  # the frames (and the loader in them) are still referenced here
    assert not [p for p in multiprocessing.active_children() if p.is_alive()]
