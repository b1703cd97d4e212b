"""Clusters: two torchrun agents on 127.0.0.1 acting as two machines (c10d rendezvous), each with its own output folder;
the resume decision made once for the whole group; the group rules for choosing whose checkpoint wins.

The multi-process cases start real torchrun agents on the CPU (gloo) and are marked slow.
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from crnn.engine.state import Sighting, choose_source, look_at
from tests.procs import descendants, kill_tree, wait_all
from tests.conftest import REPO

TINY = ["model.variant=vgg_small", "data.batch_size=4", "data.num_workers=0", "train.amp=off", "train.log_every=1",
        "train.warmup_steps=0", "train.tensorboard=false", "train.show_predictions=0", "train.val_every=0",
        "data.val=[]", "train.save_every=1000"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "PYTHON": sys.executable}
STEP_LINE = re.compile(r"^\[crnn\] step (\d+)/\d+ ", re.M)


def free_port() -> int:
    """A TCP port nobody listens on right now (127.0.0.1)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _agent(out: Path, train: Path, port: int, *extra: str, run_id: str = "t") -> list[str]:
    """One torchrun agent = one 'machine' of a two-machine group with one worker, c10d rendezvous on 127.0.0.1."""
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1", "--max-restarts=0",
            "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", f"--rdzv_id={run_id}",
            "-m", "crnn.cli.train", f"data.train=[{{path: {train}}}]", f"train.output_dir={out}", *TINY, *extra]


def _two_nodes(cmds: list[list[str]], timeout: float = 150) -> list[tuple[int, str]]:
    """Run both agents at once; (return code, merged output) of each."""
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV, cwd=REPO,
                              start_new_session=True) for c in cmds]
    outs = wait_all(procs, timeout)
    return [(p.returncode, o) for p, o in zip(procs, outs)]






def _step(path: Path) -> int:
    return torch.load(path, map_location="cpu", weights_only=True)["step"] if path.is_file() else -1


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_nodes_with_unshared_output_folders_resume_together(tmp_path, words_lmdb):
    """First sitting stops at step 3 (train.stop_after); the relaunch resumes both ranks at 3 and finishes at 6,
    although only one machine's folder holds last.pt (rank 0 sends it to the other)."""
    a, b = tmp_path / "node_a", tmp_path / "node_b"
    port = free_port()
    first = _two_nodes([_agent(o, words_lmdb, port, "train.steps=6", "train.stop_after=3", run_id="first")
                        for o in (a, b)])
    assert [rc for rc, _ in first] == [0, 0], first[0][1][-3000:] + first[1][1][-3000:]
    steps = sorted([_step(a / "last.pt"), _step(b / "last.pt")])
    assert steps == [-1, 3], steps  # only rank 0's machine wrote a checkpoint

    port = free_port()
    second = _two_nodes([_agent(o, words_lmdb, port, "train.steps=6", run_id="second") for o in (a, b)])
    assert [rc for rc, _ in second] == [0, 0], second[0][1][-3000:] + second[1][1][-3000:]
    log = second[0][1] + second[1][1]
    assert re.search(r"resumed from \S+last\.pt at step 3 ", log), log[-3000:]
    assert len(re.findall(r"rank \d on \S+: train\.resume=\S+ here has no such file; following rank \d's \S+ on "
                          r"\S+ at step 3", log)) == 1, log[-3000:]
    assert sorted(int(s) for s in STEP_LINE.findall(log)) == [4, 5, 6]  # rank 0 logged only the steps after 3
    assert max(_step(a / "last.pt"), _step(b / "last.pt")) == 6



def _seen(*states: str) -> list[Sighting]:
    """Sightings from "absent" / "bad" / a step number, one per rank."""
    out = []
    for s in states:
        status = {"absent": "absent", "bad": "unreadable"}.get(s, "ok")
        out.append(Sighting("h", "p", status, int(s) if status == "ok" else -1))
    return out


@pytest.mark.parametrize("states, newest, source", [
    (("absent", "3"), True, 1),        # only the second machine's folder has last.pt: everybody follows it
    (("3", "3"), True, 0),             # a shared folder: rank 0
    (("2", "5"), True, 1),             # the newest wins
    (("bad", "5"), True, 0),           # a damaged file is reported, never silently skipped
    (("absent", "absent"), True, None),  # nothing to resume: a fresh start on every rank
    (("absent", "3"), False, 1),       # an explicit file (train.resume=PATH, init_weights): whoever has it
    (("absent", "absent"), False, 0),  # nobody: rank 0 loads it and reports the missing file
])
def test_one_rank_is_chosen_for_the_whole_group(states, newest, source):
    assert choose_source(_seen(*states), newest) == source


def test_look_at_reads_only_the_step(tmp_path):
    from crnn.engine.checkpoint import save_checkpoint

    good, bad = tmp_path / "last.pt", tmp_path / "bad.pt"
    save_checkpoint({"format": "crnn", "kind": "training", "step": 7, "model": {"w": torch.zeros(2)}}, good)
    bad.write_bytes(b"not a checkpoint")
    assert (look_at(good, True).status, look_at(good, True).step) == ("ok", 7)
    assert look_at(bad, True).status == "unreadable" and look_at(bad, False).status == "ok"
    assert look_at(tmp_path / "none.pt", True).status == "absent" and look_at("", True).status == "absent"
    assert look_at(good, True).host == socket.gethostname()


def _node(out: Path, train: Path, port: int, join_s: int, *extra: str) -> subprocess.Popen:
    """scripts/train_ddp.sh as one of two machines (NNODES=2, c10d on 127.0.0.1:port), in its own session."""
    env = {**ENV, "NNODES": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RDZV_ID": "kill"}
    cmd = ["bash", str(REPO / "scripts/train_ddp.sh"), "--nproc", "1", "--max-restarts", "1", "--join-timeout",
           str(join_s), f"data.train=[{{path: {out.parent / 'words.lmdb'}}}]", f"train.output_dir={out}", *TINY,
           *extra]
    # Ctrl-C as a terminal delivers it: a shell without job control (CI launched in the background, nohup ... &) starts
    # its children with SIGINT ignored, and bash cannot trap a signal ignored at its start
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO,
                            start_new_session=True, preexec_fn=_default_sigint)


def _default_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_killed_machine_ends_the_survivor_within_the_join_time_then_both_resume(tmp_path, words_lmdb):
    """kill -9 of one machine (agent + worker) mid-run: the other gives up within the join time with one line naming
    the lost machine, without tracebacks; relaunching both resumes from last.pt (and goes on: 2 more steps here)."""
    import shutil
    import signal
    import time

    shutil.copytree(words_lmdb, tmp_path / "words.lmdb")
    a, b, join_s, steps = tmp_path / "node_a", tmp_path / "node_b", 8, 400
    port = free_port()
    run = ("train.steps=%d" % steps, "train.save_every=2")
    survivor = _node(a, words_lmdb, port, join_s, *run)
    time.sleep(2)  # the first machine hosts the rendezvous store
    victim = _node(b, words_lmdb, port, join_s, *run)
    try:
        deadline = time.monotonic() + 180
        while max(_step(a / "last.pt"), _step(b / "last.pt")) < 4:
            assert survivor.poll() is None and victim.poll() is None, "training ended before the kill"
            assert time.monotonic() < deadline, "no checkpoint at step 4"
            time.sleep(0.1)
        for pid in [victim.pid, *descendants(victim.pid)]:  # the machine dies: its agent and its worker
            os.kill(pid, signal.SIGKILL)
        log = survivor.communicate(timeout=join_s + 120)[0]  # a safety net only: the line below says why it ended
    finally:
        for p in (survivor, victim):
            kill_tree(p)
    assert survivor.returncode != 0 and "Traceback" not in log, log[-4000:]
    lines = [ln for ln in log.splitlines() if ln.startswith("train_ddp.sh: gave up")]
    assert len(lines) == 1, log[-4000:]
    assert lines[0].startswith(f"train_ddp.sh: gave up after the join time ({join_s} s) waiting for the group to "
                               "form; lost machine(s): "), lines[0]
    assert f"(agent pid {victim.pid})" in lines[0], lines[0]
    assert f"waiting for 2 machine(s) to join (1 so far: " in log and f"giving up after {join_s} s (" in log
    stopped = max(_step(a / "last.pt"), _step(b / "last.pt"))
    assert stopped >= 4

    port = free_port()
    procs = [_node(o, words_lmdb, port, 60, *run, "train.stop_after=2") for o in (a, b)]
    logs = wait_all(procs, 240)
    assert [p.returncode for p in procs] == [0, 0], logs[0][-3000:] + logs[1][-3000:]
    assert re.search(rf"resumed from \S+last\.pt at step {stopped} ", logs[0] + logs[1])
    assert max(_step(a / "last.pt"), _step(b / "last.pt")) == stopped + 2


def test_the_launcher_gives_torchrun_its_join_time(monkeypatch):
    """What bounds a survivor's wait (the kill test above) without a clock: torchrun's rendezvous gets the join time."""
    import signal

    import torch.distributed.run as torchrun
    from torch.distributed.elastic.rendezvous import dynamic_rendezvous as dr

    from crnn.engine.distributed import run_torchrun

    seen = []
    monkeypatch.setattr(torchrun, "main", lambda argv: seen.append(argv))
    monkeypatch.setattr(dr.DynamicRendezvousHandler, "next_rendezvous", dr.DynamicRendezvousHandler.next_rendezvous)
    usr1 = signal.getsignal(signal.SIGUSR1)  # run_torchrun points SIGUSR1 at the agent's stop: not pytest's
    try:
        assert run_torchrun(["--nnodes=2", "-m", "crnn.cli.train"], 8, print) == 0
    finally:
        signal.signal(signal.SIGUSR1, usr1)
    assert seen == [["--rdzv_conf=join_timeout=8", "--nnodes=2", "-m", "crnn.cli.train"]]


def test_lmdb_leftovers_of_another_host_are_never_removed(tmp_path):
    """Temporary folders carry the host name: a dead pid of another machine (shared folder) is not ours to clean."""
    from crnn.data.lmdb_io import _host, remove_abandoned_writes

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    mine, theirs = tmp_path / f"s.lmdb.tmp-{_host()}-{pid}", tmp_path / f"s.lmdb.tmp-other-node-7-{pid}"
    for d in (mine, theirs):
        d.mkdir()
    assert remove_abandoned_writes(str(tmp_path / "s.lmdb")) == [mine.name]
    assert theirs.exists() and not mine.exists()


GEN_WRAPPER = """
import os, sys, time
import crnn.data.synth as S
orig = S.generate_lmdb
def generate_lmdb(out, num, *a, **k):
    with open(os.environ["GEN_LOG"], "a") as f:
        f.write(os.environ["RANK"] + "\\n")
    time.sleep(1)  # long enough for a second generator to show up if the others did not wait
    return orig(out, num, *a, **k)
S.generate_lmdb = generate_lmdb
from crnn.cli.train import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_synthetic_data_is_generated_once_per_cluster(tmp_path):
    """Two machines (one worker each) asking for the same missing synthetic LMDB: one process writes it."""
    script, gen_log = tmp_path / "gen.py", tmp_path / "generated.txt"
    script.write_text(GEN_WRAPPER)
    port, data = free_port(), tmp_path / "synth" / "train.lmdb"
    cmds = [[*_agent(tmp_path / f"run_{i}", data, port, "train.steps=1", "data.synth_num=32",
                     "data.synth_workers=1", run_id="gen")] for i in range(2)]
    for c in cmds:  # run the wrapper instead of the module
        c[c.index("-m", 3):c.index("-m", 3) + 2] = [str(script)]
    env_backup = dict(ENV)
    ENV["GEN_LOG"] = str(gen_log)
    try:
        res = _two_nodes(cmds)
    finally:
        ENV.clear()
        ENV.update(env_backup)
    assert [rc for rc, _ in res] == [0, 0], res[0][1][-3000:] + res[1][1][-3000:]
    assert gen_log.read_text().split() == ["0"]  # rank 0 only, once
    assert not [p for p in data.parent.iterdir() if ".tmp-" in p.name]


@pytest.mark.parametrize("nodelist, first", [("gpu[07-09,12],cpu3", "gpu07"), ("a,b", "a"), ("node5", "node5"),
                                             ("n[1-2]", "n1"), ("localhost", "localhost")])
def test_first_slurm_host(nodelist, first):
    from crnn.engine.distributed import first_slurm_host

    assert first_slurm_host(nodelist) == first


def test_slurm_variables_become_ranks():
    from crnn.engine.distributed import adopt_slurm_env

    env = {"SLURM_PROCID": "3", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_NODELIST": "gpu[02-05]",
           "SLURM_JOB_ID": "123456"}
    assert adopt_slurm_env(env)
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["MASTER_ADDR"], env["MASTER_PORT"]) == \
        ("3", "8", "1", "gpu02", str(20000 + 123456 % 20000))
    assert not adopt_slurm_env({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"})  # one task: a plain run
    assert not adopt_slurm_env({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "SLURM_PROCID": "5",
                                "SLURM_NTASKS": "8"})  # torchrun under srun: torchrun's ranks win


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_srun_style_processes_form_one_group(tmp_path, words_lmdb):
    """Two processes with only SLURM_* set (as srun starts them, on localhost) train as one DDP group."""
    port = free_port()
    procs = []
    for rank in range(2):
        env = {k: v for k, v in ENV.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")}
        env.update(SLURM_PROCID=str(rank), SLURM_NTASKS="2", SLURM_LOCALID=str(rank), SLURM_NODELIST="localhost",
                   SLURM_JOB_ID="42", MASTER_PORT=str(port))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "crnn.cli.train", f"data.train=[{{path: {words_lmdb}}}]",
             f"train.output_dir={tmp_path / 'run'}", *TINY, "train.steps=2"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO))
    logs = wait_all(procs, 200)
    assert [p.returncode for p in procs] == [0, 0], logs[0][-3000:] + logs[1][-3000:]
    assert "mode: ddp on cpu (world size 2)" in logs[0]
    assert _step(tmp_path / "run" / "last.pt") == 2


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigusr1_preemption_saves_last_pt_and_the_requeued_run_resumes(tmp_path, words_lmdb):
    """SLURM's pre-emption warning (SIGUSR1): finish the step, save last.pt, exit 138; the rerun resumes from it."""
    import signal
    import time

    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "crnn.cli.train", f"data.train=[{{path: {words_lmdb}}}]", f"train.output_dir={out}",
           *TINY, "train.steps=400"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV, cwd=REPO)
    try:
        deadline = time.monotonic() + 120
        while not STEP_LINE.search(_peek_output(proc)):
            assert proc.poll() is None and time.monotonic() < deadline, "training did not start"
        proc.send_signal(signal.SIGUSR1)
        log = _peek_output(proc) + proc.communicate(timeout=120)[0]
    finally:
        kill_tree(proc)
    assert proc.returncode == 128 + signal.SIGUSR1, log[-3000:]
    assert "received SIGUSR1" in log and "Traceback" not in log
    stopped = _step(out / "last.pt")
    assert 1 <= stopped < 400
    rerun = subprocess.run([*cmd[:-1], "train.steps=400", "train.resume=auto", "train.stop_after=1"],
                           capture_output=True, text=True, env=ENV, cwd=REPO, timeout=200)
    assert rerun.returncode == 0 and f"at step {stopped} " in rerun.stderr, rerun.stderr[-3000:]
    assert _step(out / "last.pt") == stopped + 1


_SEEN: dict[int, str] = {}


def _peek_output(proc: subprocess.Popen) -> str:
    """Read one more line of ``proc``'s output (blocking), keeping what was read so far."""
    line = proc.stdout.readline()
    _SEEN[proc.pid] = _SEEN.get(proc.pid, "") + line
    return _SEEN[proc.pid]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_ctrl_c_while_waiting_for_the_other_machines_stops_at_once(tmp_path, words_lmdb):
    """One of two machines started: it says it is waiting; Ctrl-C ends it within seconds with one line and 130."""
    import shutil
    import signal

    shutil.copytree(words_lmdb, tmp_path / "words.lmdb")
    proc = _node(tmp_path / "run", words_lmdb, free_port(), 300)
    try:
        seen = ""
        while "waiting for 2 machine(s) to join" not in seen:
            line = proc.stdout.readline()
            assert line, seen[-3000:]
            seen += line
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        seen += proc.communicate(timeout=60)[0]  # a safety net: it waits 300 s for the other machine unless stopped
    finally:
        kill_tree(proc)
    assert proc.returncode == 130 and "Traceback" not in seen, seen[-3000:]
    said = [ln for ln in seen.splitlines() if ln.startswith("train_ddp.sh: ") and "waiting" not in ln]
    assert said == ["train_ddp.sh: interrupted; run the same command again to resume from last.pt"], said
