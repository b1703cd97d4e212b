"""scripts/lever_probe.sh: two arms from the committed pack that differ only by the lever (checked on --dry-run)."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from crnn.engine.curve import cpu_name

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "lever_probe.sh"
FACES = "faces 3 files (system 2, web-latin 1), names 0123456789abcdef"


def _tree(root: Path, faces: str = FACES) -> Path:
    """A copy of the script at ``root`` beside the repository's weights and configs, with a .venv/bin/python that
    only prints ``faces`` (what crnn.data.fonts.faces_stamp says): the test's own faces, whatever fonts are here."""
    (root / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, root / "scripts")
    for name in ("weights", "configs"):
        (root / name).symlink_to(REPO / name)
    _set_faces(root, faces)
    return root


def _set_faces(root: Path, faces: str) -> None:
    """What the fake python of :func:`_tree` prints as the machine's faces."""
    py = root / ".venv" / "bin" / "python"
    py.parent.mkdir(parents=True, exist_ok=True)
    py.write_text(f"#!/bin/sh\necho '{faces}'\n")
    py.chmod(0o755)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _head(model: str = "zh") -> str:
    """The first lines of an arm's stamp: its pack's and config's hashes."""
    pack, config = {"zh": ("crnn_zh_lines.pt", "shipped_zh.yaml"), "en": ("crnn_en.pt", "shipped_en.yaml")}[model]
    return f"pack {_sha(REPO / 'weights' / pack)}\nconfig {_sha(REPO / 'configs' / config)}\n"


def _run(*args: str, nproc: str = "2", amp: str | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "NPROC": nproc, **({"AMP": amp} if amp else {})}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, cwd=REPO, timeout=60, env=env)


def test_the_arms_differ_only_by_the_lever_and_share_the_base():
    r = _run("--dry-run", "elastic", "4000", "data.synth_elastic=0.3", "data.synth_weight=0")
    assert r.returncode == 0, r.stderr
    base, arm = r.stdout.splitlines()
    assert base.split() + ["data.synth_elastic=0.3", "data.synth_weight=0"] == \
        arm.replace("runs/probe/elastic_n2", "runs/probe/base_4000_n2").split()
    for line in (base, arm):
        assert "train.init_weights=weights/crnn_zh_lines.pt" in line and "train.steps=4000" in line
        assert "train.val_every=1000" in line and "data.val=[data/zh_faces/dev_print]" in line
        assert "--nproc 2" in line and "train.resume=none" in line
    assert "train.output_dir=runs/probe/base_4000_n2" in base and "data.synth_elastic" not in base
    other = _run("--dry-run", "weight", "4000", "data.synth_weight=0.5", nproc="1").stdout.splitlines()
    assert "train.output_dir=runs/probe/base_4000_n1" in other[0] and "--nproc 1" in other[0]


def test_bad_arguments_print_the_usage_and_exit_2():
    for args in (("elastic",), ("elastic", "4000"), ("elastic", "x", "a=b"), ("base_1", "4000", "a=b"),
                 ("elastic", "4000", "nokey")):
        r = _run(*args)
        assert r.returncode == 2 and r.stdout + r.stderr, args
    assert "lever_probe.sh NAME STEPS" in _run("elastic").stdout


def test_a_second_validation_set_goes_to_the_lever_arm_only():
    """--val trad_print: the lever arm validates on the traditional yardstick too; the base arm, whose alphabet may not
    write those labels, stays the shared one."""
    r = _run("--dry-run", "--val", "trad_print", "trad", "4000", "model.charset=zh_gb2312_trad",
             "data.synth_traditional=0.2")
    assert r.returncode == 0, r.stderr
    base, arm = r.stdout.splitlines()
    assert base == _run("--dry-run", "weight", "4000", "data.synth_weight=0.5").stdout.splitlines()[0]
    assert "data.val=[data/zh_faces/dev_print,data/zh_faces/trad_print]" in arm.split()
    assert arm.endswith("train.output_dir=runs/probe/trad_n2 model.charset=zh_gb2312_trad data.synth_traditional=0.2")
    for args in (("--val",), ("--val", "a b", "x", "4000", "a=b"), ("--val", "../x", "x", "4000", "a=b")):
        assert _run(*args).returncode == 2, args


def test_both_arms_train_in_the_precision_asked_for():
    """AMP pins both arms' precision (a loaded machine can tip train.amp=auto's start-up measurement one way for one
    arm and the other way for the other); unset, both measure it (auto)."""
    base, arm = _run("--dry-run", "elastic", "2000", "data.synth_elastic=0.3", amp="bf16").stdout.splitlines()
    assert "train.amp=bf16" in base.split() and "train.amp=bf16" in arm.split()
    base, arm = _run("--dry-run", "elastic", "2000", "data.synth_elastic=0.3").stdout.splitlines()
    assert "train.amp=auto" in base.split() and "train.amp=auto" in arm.split()


def _finished(arm: Path, steps: int, stamp: str | None) -> None:
    arm.mkdir(parents=True)
    (arm / "curve.tsv").write_text(f"step\tlines_seen\tcpu_seconds\twall_seconds\tset\tcer\tword_acc\n"
                                   f"{steps}\t1\t1\t1\tdata/zh_faces/dev_print\t0.1\t0.5\n")
    if stamp is not None:
        (arm / "probe.stamp").write_text(stamp)


def test_a_finished_arm_is_kept_only_while_its_pack_config_command_and_faces_are_the_same(tmp_path):
    """The shared base arm outlives a sitting's new pack, a kept lever's config change and a fetch of web faces;
    comparing a new lever arm with it then would measure the pack, the recipe or the faces, not the lever. Its stamp
    says what it was trained from."""
    root = _tree(tmp_path / "repo")
    env = {"PATH": "/usr/bin:/bin", "NPROC": "2"}
    args = ["bash", str(root / "scripts" / "lever_probe.sh"), "--dry-run", "squeeze", "2000", "data.synth_squeeze=0.5"]
    fresh = subprocess.run(args, capture_output=True, text=True, cwd=root, timeout=60, env=env)
    assert fresh.returncode == 0 and fresh.stderr == "", fresh.stderr
    base_cmd = fresh.stdout.splitlines()[0]
    assert "train.output_dir=runs/probe/base_2000_n2" in base_cmd.split()
    stamp = f"{_head()}command {base_cmd}\n{FACES}\n"
    _finished(root / "runs/probe/base_2000_n2", 2000, stamp)
    _finished(root / "runs/probe/squeeze_n2", 2000, stamp.replace("pack ", "pack 0"))  # another pack
    r = subprocess.run(args, capture_output=True, text=True, cwd=root, timeout=60, env=env)
    assert r.returncode == 0 and r.stdout == fresh.stdout
    assert "runs/probe/base_2000_n2 is done" in r.stderr and "kept" in r.stderr
    assert "runs/probe/squeeze_n2 was trained from another pack, config, command or faces" in r.stderr
    _set_faces(root, FACES.replace("1), names 0123", "2), names 4567"))  # Latin web faces fetched since
    r = subprocess.run(args, capture_output=True, text=True, cwd=root, timeout=60, env=env)
    assert r.returncode == 0 and r.stdout == fresh.stdout
    assert "runs/probe/base_2000_n2 was trained from another pack, config, command or faces than now " \
        "(runs/probe/base_2000_n2/probe.stamp; faces now: 3 files (system 2, web-latin 2), names 4567" in r.stderr
    _set_faces(root, FACES)
    (root / "runs/probe/base_2000_n2/probe.stamp").write_text(stamp.replace(f"{FACES}\n", ""))  # before faces
    r = subprocess.run(args, capture_output=True, text=True, cwd=root, timeout=60, env=env)
    assert "runs/probe/base_2000_n2 was trained from another" in r.stderr
    (root / "runs/probe/base_2000_n2/probe.stamp").unlink()  # arms from before stamps: trained again
    r = subprocess.run(args, capture_output=True, text=True, cwd=root, timeout=60, env=env)
    assert "runs/probe/base_2000_n2 was trained from another" in r.stderr


def test_an_arm_records_the_faces_it_drew_from_and_is_trained_again_with_other_faces(tmp_path):
    """A real (not dry) run with a stand-in trainer: probe.record and probe.stamp name the faces; run again, the
    finished arms are kept; with other faces here, both are trained again and record the new ones."""
    root = _tree(tmp_path / "repo")
    (root / "data" / "zh_faces" / "dev_print").mkdir(parents=True)
    (root / "data" / "zh_faces" / "dev_print" / "gt.txt").write_text("a.png\t中\n")
    trainer = root / "scripts" / "train_ddp.sh"
    trainer.write_text("#!/bin/bash\nfor a in \"$@\"; do case $a in train.output_dir=*) out=${a#*=} ;; esac; done\n"
                       "printf 'step\\tlines_seen\\tcpu_seconds\\twall_seconds\\tset\\tcer\\tword_acc\\n"
                       "8\\t1\\t1\\t1\\tdata/zh_faces/dev_print\\t0.1\\t0.5\\n' > \"$out/curve.tsv\"\n")
    trainer.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "NPROC": "2"}
    args = ["bash", str(root / "scripts" / "lever_probe.sh"), "squeeze", "8", "data.synth_squeeze=0.5"]
    first = subprocess.run(args, capture_output=True, text=True, cwd=root, timeout=60, env=env)
    assert first.returncode == 0, first.stderr
    arms = [root / "runs/probe/base_8_n2", root / "runs/probe/squeeze_n2"]
    for arm in arms:
        assert (arm / "probe.record").read_text().splitlines()[-1] == FACES
        assert (arm / "probe.stamp").read_text().splitlines()[-1] == FACES
    again = subprocess.run(args, capture_output=True, text=True, cwd=root, timeout=60, env=env)
    assert again.returncode == 0 and again.stderr.count("is done") == 2 and "log in" not in again.stdout
    assert again.stdout.splitlines() == first.stdout.splitlines()[2:]  # the table, nothing trained
    other = FACES.replace("names 0123", "names 9876")
    _set_faces(root, other)
    third = subprocess.run(args, capture_output=True, text=True, cwd=root, timeout=60, env=env)
    assert third.returncode == 0 and third.stderr.count("was trained from another pack, config, command or faces") == 2
    for arm in arms:
        assert (arm / "probe.record").read_text().splitlines()[-1] == other


def test_the_english_model_probes_on_its_real_development_set(tmp_path):
    """MODEL=en: the arms start from weights/crnn_en.pt with configs/shipped_en.yaml, validate on data/en_dev and
    end with both arms' exact and 36-class word accuracy at each validation, side by side."""
    _tree(tmp_path)
    for name in ("en_dev", "ic15_dev"):
        (tmp_path / "data" / name).mkdir(parents=True)
        (tmp_path / "data" / name / "gt.txt").write_text("a.png\tA\n")
    env = {"PATH": "/usr/bin:/bin", "NPROC": "2", "MODEL": "en"}
    args = ["bash", str(tmp_path / "scripts" / "lever_probe.sh"), "real", "8", "data.synth_real_share=0.2"]
    dry = subprocess.run(args[:2] + ["--dry-run"] + args[2:], capture_output=True, text=True, cwd=tmp_path,
                         timeout=60, env=env)
    assert dry.returncode == 0, dry.stderr
    base, arm = dry.stdout.splitlines()
    assert base.split() + ["data.synth_real_share=0.2"] == arm.replace("probe_en/real_n2", "probe_en/base_8_n2").split()
    assert "--config configs/shipped_en.yaml" in base and "train.init_weights=weights/crnn_en.pt" in base
    assert "data.val=[data/en_dev,data/ic15_dev]" in base.split()
    assert "train.output_dir=runs/probe_en/base_8_n2" in base.split()
    for out, cmd, acc in ((tmp_path / "runs/probe_en/base_8_n2", base, (0.80, 0.90)),
                          (tmp_path / "runs/probe_en/real_n2", arm, (0.85, 0.95))):
        out.mkdir(parents=True)
        rows = [f"{s}\t1\t1\t1\t{d}\t0.1\t{acc[0] + s / 800 - k}\n"
                f"{s}\t1\t1\t1\t{d}@alnum-insensitive\t0.1\t{acc[1] + s / 800 - k}\n"
                for s in (2, 4, 6, 8) for d, k in (("data/en_dev", 0), ("data/ic15_dev", 0.3))]
        (out / "curve.tsv").write_text("step\tlines_seen\tcpu_seconds\twall_seconds\tset\tcer\tword_acc\n"
                                       + "".join(rows))
        (out / "probe.stamp").write_text(f"{_head('en')}command {cmd}\n{FACES}\n")
    r = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "real development set (data/en_dev, 1,257 crops): word accuracy at each validation, exact / 36-class",
        "step\tbase\treal (data.synth_real_share=0.2)",
        "2\t80.25 / 90.25 %\t85.25 / 95.25 %", "4\t80.50 / 90.50 %\t85.50 / 95.50 %",
        "6\t80.75 / 90.75 %\t85.75 / 95.75 %", "8\t81.00 / 91.00 %\t86.00 / 96.00 %",
        "ICDAR 2015 development block (data/ic15_dev, 468 crops): word accuracy at each validation, exact / 36-class",
        "step\tbase\treal (data.synth_real_share=0.2)",
        "2\t50.25 / 60.25 %\t55.25 / 65.25 %", "4\t50.50 / 60.50 %\t55.50 / 65.50 %",
        "6\t50.75 / 60.75 %\t55.75 / 65.75 %", "8\t51.00 / 61.00 %\t56.00 / 66.00 %"]
    for bad_env in ({"MODEL": "fr"}, {"LR": "fast"}):
        bad = subprocess.run(args[:2] + ["--dry-run"] + args[2:], capture_output=True, text=True, cwd=tmp_path,
                             timeout=60, env={**env, **bad_env})
        assert bad.returncode == 2 and bad.stderr.startswith("lever_probe: "), bad_env


def test_a_cpu_budget_gives_both_arms_equal_cpu_hours_and_joins_them_on_it(tmp_path):
    """NAME 1h: both arms end when they have spent one CPU-hour (train.cpu_hours) with the precision pinned, validate
    at every quarter of it, and the table joins them on CPU-hours, each cell naming its steps; an arm that starts from
    another file (a grown pack) is trained again when that file changes."""
    _tree(tmp_path)
    (tmp_path / "data" / "zh_faces" / "dev_print").mkdir(parents=True)
    (tmp_path / "data" / "zh_faces" / "dev_print" / "gt.txt").write_text("a.png\t中\n")
    grown = tmp_path / "grown.pt"
    grown.write_bytes(b"grown weights")
    env = {"PATH": "/usr/bin:/bin", "NPROC": "2", "AMP": "bf16"}
    args = ["bash", str(tmp_path / "scripts" / "lever_probe.sh"), "wide", "1h", "model.cnn_width=2",
            f"train.init_weights={grown}"]
    dry = subprocess.run(args[:2] + ["--dry-run"] + args[2:], capture_output=True, text=True, cwd=tmp_path,
                         timeout=60, env=env)
    assert dry.returncode == 0, dry.stderr
    base, arm = dry.stdout.splitlines()
    for line in (base, arm):
        for kv in ("train.cpu_hours=1", "train.val_every_cpu_hours=0.25", "train.val_every=0", "train.amp=bf16",
                   "train.schedule=constant", "train.steps=100000000"):
            assert kv in line.split(), (kv, line)
    assert "train.output_dir=runs/probe/base_1h_n2" in base.split() and "model.cnn_width" not in base
    assert arm.endswith(f"train.output_dir=runs/probe/wide_n2 model.cnn_width=2 train.init_weights={grown}")
    for out, cmd, rows in ((tmp_path / "runs/probe/base_1h_n2", base, ((400, 905, 0.15), (1600, 3612, 0.14))),
                           (tmp_path / "runs/probe/wide_n2", arm, ((150, 910, 0.16), (600, 3650, 0.12)))):
        out.mkdir(parents=True)
        (out / "curve.tsv").write_text("step\tlines_seen\tcpu_seconds\twall_seconds\tset\tcer\tword_acc\n" + "".join(
            f"{s}\t1\t{c}\t1\tdata/zh_faces/dev_print\t{cer}\t0.5\n" for s, c, cer in rows))
        start = f"start {grown} {_sha(grown)}\n" if out.name == "wide_n2" else ""
        (out / "probe.stamp").write_text(f"{_head()}command {cmd}\n{FACES}\n{start}")
    r = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert "runs/probe/wide_n2 is done" in r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"arms of 1 CPU-hours each on {cpu_name()}, precision ")
    assert lines[1:] == ["development faces (print damage, 1,200 lines): CER at each validation",
                         f"CPU-h\tbase\twide (model.cnn_width=2 train.init_weights={grown})",
                         "0.25\t0.15 (step 400)\t0.16 (step 150)", "1.00\t0.14 (step 1600)\t0.12 (step 600)"]
    grown.write_bytes(b"grown again")  # another grown file: the lever arm is no longer the one it was
    again = subprocess.run(args[:2] + ["--dry-run"] + args[2:], capture_output=True, text=True, cwd=tmp_path,
                           timeout=60, env=env)
    assert "runs/probe/base_1h_n2 is done" in again.stderr
    assert "runs/probe/wide_n2 was trained from another pack, config, command or faces" in again.stderr
    for bad in ("0h", "h", "-1h", "1.5x"):
        assert _run("--dry-run", "wide", bad, "model.cnn_width=2").returncode == 2, bad


def test_an_arm_cut_short_resumes_on_the_same_cpu_and_starts_afresh_elsewhere(tmp_path):
    """An arm stopped before its end (a session's end) left last.pt and probe.pending: run again with the same pack,
    config, command and faces on a CPU of the same model, it resumes (train.resume=auto); a pending stamp from another
    CPU (the model name alone does not tell two CPUs apart), command or set of faces does not resume."""
    root = _tree(tmp_path / "repo")
    env = {"PATH": "/usr/bin:/bin", "NPROC": "2", "AMP": "bf16"}
    args = ["bash", str(root / "scripts" / "lever_probe.sh"), "--dry-run", "wide", "1h", "model.cnn_width=2"]
    fresh = subprocess.run(args, capture_output=True, text=True, cwd=root, timeout=60, env=env)
    assert fresh.returncode == 0, fresh.stderr
    base_cmd, arm_cmd = fresh.stdout.splitlines()
    cpu = cpu_name()  # the script names the CPU as the curve does: model name, family/model and bf16 flags
    arm = root / "runs/probe/wide_n2"
    arm.mkdir(parents=True)
    (arm / "last.pt").write_bytes(b"cut short")
    (arm / "probe.pending").write_text(f"{_head()}command {arm_cmd}\n{FACES}\ncpu {cpu}\n")
    r = subprocess.run(args, capture_output=True, text=True, cwd=root, timeout=60, env=env)
    assert r.stdout.splitlines() == [base_cmd, arm_cmd + " train.resume=auto"]
    assert "runs/probe/wide_n2 was cut short" in r.stderr and "it resumes" in r.stderr
    _set_faces(root, "faces none")
    r = subprocess.run(args, capture_output=True, text=True, cwd=root, timeout=60, env=env)
    assert r.stdout == fresh.stdout and "cut short" not in r.stderr
    _set_faces(root, FACES)
    for other in ("Another CPU", cpu.split(" (")[0]):  # the model name alone: "AMD EPYC" is Zen 2 to Zen 5
        (arm / "probe.pending").write_text(f"{_head()}command {arm_cmd}\n{FACES}\ncpu {other}\n")
        r = subprocess.run(args, capture_output=True, text=True, cwd=root, timeout=60, env=env)
        assert r.stdout == fresh.stdout and "cut short" not in r.stderr


def test_a_cosine_schedule_has_its_own_base_arm_and_decays_over_the_budget():
    """SCHEDULE=cosine: both arms decay (over their CPU budget for 1h, over their steps otherwise) and the base arm
    lives apart from the constant-rate one, which stays as it was; anything else is refused."""
    def dry(*args: str, schedule: str) -> subprocess.CompletedProcess:
        env = {"PATH": "/usr/bin:/bin", "NPROC": "2", "SCHEDULE": schedule}
        return subprocess.run(["bash", str(SCRIPT), "--dry-run", *args], capture_output=True, text=True, cwd=REPO,
                              timeout=60, env=env)

    base, arm = dry("wide", "1h", "model.cnn_width=1.5", schedule="cosine").stdout.splitlines()
    for line in (base, arm):
        assert "train.schedule=cosine train.schedule_over=cpu_hours" in line and "train.cpu_hours=1" in line
    assert "train.output_dir=runs/probe/base_1h_cos_n2" in base and "train.output_dir=runs/probe/wide_n2" in arm
    steps = dry("wide", "400", "model.cnn_width=1.5", schedule="cosine").stdout.splitlines()
    assert "train.schedule=cosine " in steps[0] and "schedule_over" not in steps[0]
    assert "train.output_dir=runs/probe/base_400_cos_n2" in steps[0]
    constant = dry("wide", "1h", "model.cnn_width=1.5", schedule="constant").stdout.splitlines()
    assert "train.schedule=constant" in constant[0] and "train.output_dir=runs/probe/base_1h_n2" in constant[0]
    bad = dry("wide", "1h", "model.cnn_width=1.5", schedule="linear")
    assert bad.returncode == 2 and bad.stderr.strip() == "lever_probe: SCHEDULE must be constant or cosine, got linear"


def test_a_base_curve_given_is_joined_instead_of_training_the_base_arm(tmp_path):
    """BASE_CURVE=FILE: only the lever arm is trained (a 48 px arm fills a session alone); the table joins it with
    FILE's rows and says so; FILE must be a curve.tsv, trained in the lever arm's precision."""
    _tree(tmp_path)
    (tmp_path / "data" / "zh_faces" / "dev_print").mkdir(parents=True)
    (tmp_path / "data" / "zh_faces" / "dev_print" / "gt.txt").write_text("a.png\t中\n")
    head = "step\tlines_seen\tcpu_seconds\twall_seconds\tset\tcer\tword_acc\tned_similarity\tamp\n"
    given = tmp_path / "base.curve.tsv"
    given.write_text(head + "".join(f"{s}\t1\t{c}\t1\tdata/zh_faces/dev_print\t{cer}\t0.5\t0.9\tbf16\n"
                                    for s, c, cer in ((1860, 1821, 0.139), (7270, 7223, 0.134))))
    env = {"PATH": "/usr/bin:/bin", "NPROC": "2", "AMP": "bf16", "SCHEDULE": "cosine", "BASE_CURVE": str(given)}
    args = ["bash", str(tmp_path / "scripts" / "lever_probe.sh"), "h48", "2h", "data.height=48"]
    dry = subprocess.run(args[:2] + ["--dry-run"] + args[2:], capture_output=True, text=True, cwd=tmp_path,
                         timeout=60, env=env)
    assert dry.returncode == 0, dry.stderr
    [arm_cmd] = dry.stdout.splitlines()  # the lever arm alone
    assert "train.output_dir=runs/probe/h48_n2" in arm_cmd and "train.cpu_hours=2" in arm_cmd
    assert f"its rows are {given}'s" in dry.stderr
    arm = tmp_path / "runs/probe/h48_n2"
    arm.mkdir(parents=True)
    (arm / "curve.tsv").write_text(head + "".join(f"{s}\t1\t{c}\t1\tdata/zh_faces/dev_print\t{cer}\t0.5\t0.9\tbf16\n"
                                                  for s, c, cer in ((900, 1830, 0.16), (3500, 7250, 0.12))))
    (arm / "probe.stamp").write_text(f"{_head()}command {arm_cmd}\n{FACES}\n")
    (arm / "train.log").write_text("[crnn] mixed precision: bf16 (train.amp)\n")
    r = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "runs/probe/base_2h_cos_n2").exists()
    lines = r.stdout.splitlines()
    assert lines[1] == f"base arm not trained in this run: its rows are {given}'s"
    assert lines[-2:] == ["0.50\t0.139 (step 1860)\t0.16 (step 900)", "2.00\t0.134 (step 7270)\t0.12 (step 3500)"]
    (arm / "train.log").write_text("[crnn] mixed precision: off (train.amp)\n")  # another precision: refused
    r = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, timeout=60, env=env)
    assert r.returncode == 1 and f"{given} trained in bf16, runs/probe/h48_n2 in off" in r.stderr
    given.write_text("not a curve\n")
    r = subprocess.run(args[:2] + ["--dry-run"] + args[2:], capture_output=True, text=True, cwd=tmp_path,
                       timeout=60, env=env)
    assert r.returncode == 2 and f"BASE_CURVE={given} is not a curve.tsv" in r.stderr and r.stdout == ""
