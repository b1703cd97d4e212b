"""The documentation site and the README: the site builds strictly, and every command they show is a real one.

`mkdocs build --strict` fails on a broken link or anchor and on a page left out of the navigation (mkdocs.yml,
``validation``); the command checks below catch an example that names a command, option, config key, script or
recipe that no longer exists. The Python examples of the reading page run in tests/test_api.py."""
from __future__ import annotations

import configparser
import contextlib
import importlib
import io
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import fields
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# the pages a reader sees: the README, the site's pages, and the two files the site includes as they are
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "weights" / "README.md",
         REPO / "benchmarks" / "README.md"]


def _build(config_dir: Path, site: Path) -> subprocess.CompletedProcess:
    # no -q: mkdocs counts the warnings that --strict turns into a failure only when it logs them
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
                          cwd=config_dir, capture_output=True, text=True, timeout=600,
                          env={"NO_MKDOCS_2_WARNING": "1", "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"})


def test_the_site_builds_strictly(tmp_path):
    out = _build(REPO, tmp_path / "site")
    assert out.returncode == 0, out.stderr[-3000:]
    for page in ("index.html", "training/index.html", "models/index.html", "api/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    assert "Recognizer" in api and "Reads the text in cropped word or line images" in api  # from the docstrings
    # the pictures: the report page and the Chinese model's learning curve (a link to the weights folder's file)
    assert (tmp_path / "site" / "eval_report.png").is_file()
    assert (tmp_path / "site" / "crnn_zh_lines_curve.png").read_bytes() == \
        (REPO / "weights" / "crnn_zh_lines_curve.png").read_bytes()


@pytest.mark.parametrize("damage", ["orphan page", "broken link", "broken anchor"])
def test_a_broken_link_or_a_page_left_out_of_the_navigation_fails_the_build(tmp_path, damage):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("crnn", "weights", "benchmarks", "CHANGELOG.md"):
        (src / name).symlink_to(REPO / name)
    shutil.copy(REPO / "mkdocs.yml", src)  # a copy: mkdocs finds docs/ beside the real path of its config file
    shutil.copytree(REPO / "docs", src / "docs", symlinks=True)
    if damage == "orphan page":
        (src / "docs" / "orphan.md").write_text("# not in the navigation\n")
    else:
        target = "no-such-page.md" if damage == "broken link" else "training.md#no-such-heading"
        with open(src / "docs" / "index.md", "a", encoding="utf-8") as f:
            f.write(f"\n[gone]({target})\n")
    out = _build(src, tmp_path / "site")
    assert out.returncode != 0
    assert ("orphan.md" if damage == "orphan page" else "no-such-") in out.stderr


# ------------------------------------------------------------------------------------------ commands on the pages
def _shell_lines(text: str) -> list[str]:
    """The command lines of a page's ```bash blocks, continuation lines joined, comments dropped."""
    lines = []
    for block in re.findall(r"```(?:bash|sh)\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def _words(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError:  # an unbalanced quote inside a $(...) example: plain splitting is enough for the checks
        return line.split()


@lru_cache(maxsize=None)
def _console_scripts() -> dict[str, str]:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    pairs = [ln.split("=", 1) for ln in cfg["options.entry_points"]["console_scripts"].strip().splitlines()]
    return {name.strip(): target.strip() for name, target in pairs}


@lru_cache(maxsize=None)
def _help(command: str) -> str:
    """What `command --help` prints, from its main(argv) in this process."""
    module, func = _console_scripts()[command].split(":")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):  # argparse exits, or main returns 0
        getattr(importlib.import_module(module), func)(["--help"])
    return buf.getvalue()


def _config_keys() -> set[str]:
    from crnn.config import Config

    cfg = Config()
    return {f"{s.name}.{f.name}" for s in fields(cfg) for f in fields(getattr(cfg, s.name))}


def _commands() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for line in _shell_lines(page.read_text(encoding="utf-8")):
            found.append((page.relative_to(REPO).as_posix(), line))
    return found


def test_the_pages_show_commands():
    commands = [line for _, line in _commands()]
    for name in _console_scripts():
        assert any(line.startswith(name + " ") for line in commands), f"no page shows {name}"


@pytest.mark.parametrize("page,line", _commands())
def test_every_command_names_real_options_keys_scripts_and_recipes(page, line):
    words = _words(line)
    keys = _config_keys()
    for i, word in enumerate(words):
        if word in _console_scripts():
            helptext = _help(word)
            for opt in words[i + 1:]:
                if opt in ("|", "&&", ";", ">", "2>&1") or opt in _console_scripts():
                    break
                flag = opt.split("=", 1)[0]
                if re.fullmatch(r"--[a-z][a-z0-9-]*", flag):
                    assert re.search(rf"(^|[\s,\[]){re.escape(flag)}\b", helptext), f"{page}: {word} has no {flag}"
        # section.key=value overrides (crnn-train, train_ddp.sh, train_slurm.sh, finetune_soup.sh pass them on)
        m = re.fullmatch(r"(model|data|train)\.([a-z_0-9]+)=.*", word)
        if m:
            assert f"{m[1]}.{m[2]}" in keys, f"{page}: no config key {m[1]}.{m[2]}"
        # the repository's own files: scripts, tools, benchmarks and recipes a command runs or reads
        for path in re.findall(r"(?:^|[\s=/])((?:scripts|tools|benchmarks|configs)/[\w./-]+\.(?:sh|py|yaml))", word):
            assert (REPO / path).is_file(), f"{page}: {path} does not exist"


@pytest.mark.parametrize("page", [p.relative_to(REPO).as_posix() for p in PAGES])
def test_every_python_example_compiles(page):
    """The ```python blocks parse (the reading page's run in tests/test_api.py; the rest need peers' files)."""
    for i, block in enumerate(re.findall(r"```python\n(.*?)```", (REPO / page).read_text(encoding="utf-8"), re.S)):
        compile(block, f"{page} python block {i + 1}", "exec")



def _runnable_reads() -> list[tuple[str, str, str]]:
    """crnn-predict lines of the pages whose every input ships in the repository, read by a shipped name or the
    default: (page, command, comment)."""
    from crnn.infer import WEIGHTS_BY_NAME

    found = []
    for page in PAGES:
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S):
            for line in block.splitlines():
                command, _, comment = line.partition(" #")
                words = _words(command)
                if words[:1] != ["crnn-predict"] or any(c in command for c in "|>"):
                    continue
                args = [w for i, w in enumerate(words[1:], 1)
                        if not w.startswith("-") and not (words[i - 1].startswith("--") and "=" not in words[i - 1])]
                weights = words[words.index("--weights") + 1] if "--weights" in words else "en"
                if args and all((REPO / a).is_file() for a in args) and weights in WEIGHTS_BY_NAME:
                    found.append((page.relative_to(REPO).as_posix(), command.strip(), comment.strip()))
    return found


@pytest.mark.parametrize("page,command,comment", _runnable_reads())
def test_reading_commands_on_the_pages_run_as_written(page, command, comment, monkeypatch, capsys):
    from crnn.cli.predict import main

    monkeypatch.chdir(REPO)
    assert main(_words(command)[1:]) == 0, f"{page}: {command}"
    readings = [line.split("\t")[1] for line in capsys.readouterr().out.splitlines()]
    truth = re.match(r"(?:truth|reads): (\S+)", comment)
    if truth:  # the page says what the image holds ("truth") or what the model reads ("reads"): it reads it so
        assert readings == [truth[1]], f"{page}: {command}"


def test_the_tour_reads_a_shipped_sample():
    assert ("README.md", "crnn-predict weights/samples/synth_2.png", "read an image with the shipped model") in \
        [(p, c, m) for p, c, m in _runnable_reads()]


@pytest.mark.parametrize("page", ["README.md", "CHANGELOG.md", "weights/README.md", "benchmarks/README.md",
                                  "tools/README.md"])
def test_links_outside_the_site_lead_somewhere(page):
    """The pages mkdocs does not check (it checks docs/): every relative link names a file of the repository."""
    text = (REPO / page).read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)\s#]+)", text):
        if not re.match(r"[a-z]+://", target):
            assert ((REPO / page).parent / target).exists(), f"{page}: {target}"


def test_the_readme_activates_the_venv_before_its_commands_and_they_are_then_found(tmp_path):
    """The set-up commands put the crnn-* commands in .venv/bin: the README says to activate it before the tour,
    and after that line a fresh shell (no .venv on its PATH) finds crnn-predict and reads the tour's sample."""
    lines = _shell_lines((REPO / "README.md").read_text(encoding="utf-8"))
    activate = [i for i, line in enumerate(lines) if line.startswith("source ") and "activate" in line]
    first_command = next(i for i, line in enumerate(lines) if _words(line)[0] in _console_scripts())
    assert activate and activate[0] < first_command and lines[activate[0]] == "source .venv/bin/activate"
    if not (REPO / ".venv" / "bin" / "crnn-predict").is_file():
        pytest.skip("no .venv with the package in this checkout (bash scripts/setup.sh makes it)")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OMP_NUM_THREADS": "1"}
    shell = ["bash", "--noprofile", "--norc", "-c"]
    before = subprocess.run([*shell, "command -v crnn-predict"], cwd=REPO, env=env, capture_output=True, text=True)
    assert before.returncode != 0  # what a new user met: command not found
    after = subprocess.run([*shell, f"{lines[activate[0]]} && crnn-predict weights/samples/synth_2.png"], cwd=REPO,
                           env=env, capture_output=True, text=True, timeout=300)
    assert after.returncode == 0, after.stderr[-2000:]
    assert after.stdout.split("\t")[:2] == ["weights/samples/synth_2.png", "IMMEDIATELY"]


def test_the_finetune_trial_is_short_makes_sets_of_its_own_and_is_followed_by_reading_its_interpolated_file():
    """docs/finetune.md's first try: fewer steps and smaller generated sets than the recipe, at paths of its own (a
    generated set at a path is reused as it is, so the full run must not find the trial's), then the two commands
    that read the file the run says to read, interpolated.pt of the trial's output folder."""
    from crnn.config import load_config

    lines = _shell_lines((REPO / "docs" / "finetune.md").read_text(encoding="utf-8"))
    trial = _words(next(line for line in lines if "train.output_dir=" in line and "train.steps=" in line))
    overrides = [w.replace("ALPHABET", "printable95") for w in trial if re.fullmatch(r"(model|data|train)\..+=.*", w)]
    recipe = trial[trial.index("--config") + 1]
    cfg, full = load_config(str(REPO / recipe), overrides), load_config(str(REPO / recipe), [])
    assert cfg.train.steps <= full.train.steps // 10 and cfg.train.freeze_cnn_steps >= cfg.train.steps
    assert cfg.data.rehearsal_num < full.data.rehearsal_num and cfg.train.base_val_num < full.train.base_val_num
    assert cfg.data.rehearsal != full.data.rehearsal and not set(cfg.train.base_val) & set(full.train.base_val)
    assert cfg.train.output_dir != full.train.output_dir and cfg.train.interpolate_base < 1  # interpolated.pt is made
    reads = [_words(line) for line in lines if line.startswith(("crnn-eval ", "crnn-predict ")) and
             f"{cfg.train.output_dir}/" in line]
    assert sorted(w[0] for w in reads) == ["crnn-eval", "crnn-predict"]
    assert all(w[w.index("--weights") + 1] == f"{cfg.train.output_dir}/interpolated.pt" for w in reads)
