"""crnn-eval --vertical: tall crops read as crnn.Recognizer(vertical=...) reads them, counted in the table and the
JSON; --vertical warn (the default) reads and reports exactly as before; torchrun shards add up."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import warnings

import pytest
import torch
from PIL import Image, ImageDraw

import crnn
from crnn.charset import Charset
from crnn.cli.evaluate import main
from crnn.config import Config
from crnn.data.lmdb_io import write_lmdb
from crnn.engine.checkpoint import model_checkpoint, save_checkpoint
from crnn.model import build_model
from tests.test_evaluate_cli import ROW_KEYS, SUMMARY_KEYS

MODES = ("stack", "rotate", "auto")
TIMING = ("seconds", "images_per_s")


def _tall(text: str, width: int = 16) -> Image.Image:
    """Letters stacked top to bottom, one every 20 px (a column at least twice as tall as wide)."""
    img = Image.new("L", (width, 8 + 20 * len(text)), 255)
    draw = ImageDraw.Draw(img)
    for i, ch in enumerate(text):
        draw.text((4, 4 + 20 * i), ch, fill=0)
    return img


def _word(text: str) -> Image.Image:
    img = Image.new("L", (8 * len(text) + 8, 20), 255)
    ImageDraw.Draw(img).text((4, 4), text, fill=0)
    return img


# tall crops at 0, 3 and 5: each of two torchrun shards (0-2, 3-5) holds some
CROPS = [_tall("KXM"), _word("apple"), _word("river"), _tall("AB"), _word("x7"), _tall("TAXI", 18)]
TALL = (0, 3, 5)


def _png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _readings(weights, mode: str) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # warn: the tall crops' warning
        return [r.text for r in crnn.Recognizer(weights, device="cpu", vertical=mode).read(CROPS)]


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """A tiny untrained keep-ratio checkpoint (its last layer sharpened) that reads the tall crops otherwise under
    every vertical mode than as they are: the first such of a few seeds."""
    cfg = Config()
    cfg.model.hidden, cfg.data.keep_ratio, cfg.data.width = 16, True, 48
    cs = Charset.from_spec("alnum36")
    path = tmp_path_factory.mktemp("w") / "tiny.pt"
    for seed in range(20):
        torch.manual_seed(seed)
        model = build_model("vgg_small", 1, cs.num_classes, 16).eval()
        with torch.no_grad():
            [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1].weight.mul_(8)
        save_checkpoint(model_checkpoint(model, cfg, cs, step=1), path)
        warn = _readings(path, "warn")
        if all(_readings(path, m) != warn for m in MODES):
            return path
    pytest.fail("no seed gives a model that reads the tall crops otherwise by mode")


@pytest.fixture(scope="module")
def data(tmp_path_factory, weights):
    """One LMDB per mode, labelled with what Recognizer(vertical=mode) reads (warn too)."""
    d = tmp_path_factory.mktemp("lmdb")
    images = [_png(c) for c in CROPS]
    out = {}
    for mode in ("warn", *MODES):
        out[mode] = d / f"{mode}.lmdb"
        write_lmdb(zip(images, _readings(weights, mode)), out[mode])
    return out


def run_json(argv: list[str], capsys) -> dict:
    rc = main([*argv, "--json", "--workers", "0", "--device", "cpu", "--protocol", "exact", "--worst", "10"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)


@pytest.mark.parametrize("mode", MODES)
def test_each_tall_crop_reads_as_the_recognizer_reads_it_in_that_mode(weights, data, mode, capsys):
    s = run_json(["--weights", str(weights), "--data", str(data[mode]), "--vertical", mode], capsys)
    row = s["datasets"][0]
    assert (row["samples"], row["word_acc"], row["worst"]) == (6, 1.0, [])  # every reading equals Recognizer's
    assert s["vertical"] == mode and row["vertical"] == s["overall"]["vertical"] == {"tall": 3, "read": 3}
    assert set(s) == SUMMARY_KEYS | {"vertical"} and set(row) == ROW_KEYS | {"undecodable_images", "worst",
                                                                            "vertical"}
    warn = run_json(["--weights", str(weights), "--data", str(data[mode])], capsys)["datasets"][0]
    wrong = {i for i, (a, b) in enumerate(zip(_readings(weights, "warn"), _readings(weights, mode))) if a != b}
    assert wrong and wrong <= set(TALL)  # the words read alike; only tall crops differ
    assert warn["samples"] - round(warn["word_acc"] * 6) == len(wrong)


def test_the_table_names_the_mode_and_the_count(weights, data, capsys):
    assert main(["--weights", str(weights), "--data", str(data["auto"]), "--vertical", "auto", "--workers", "0",
                 "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert ("vertical auto: 3 of 3 crop(s) at least 2x taller than wide read as horizontal lines, each the most "
            "confident way\n") in out


def test_a_set_without_tall_crops_says_so(weights, tmp_path, capsys):
    """Not "0 of 0 crop(s) ... read as horizontal lines"; the JSON counts stay numbers."""
    write_lmdb(((_png(c), "x") for c in CROPS[1:3]), tmp_path / "wide.lmdb")
    argv = ["--weights", str(weights), "--data", str(tmp_path / "wide.lmdb"), "--vertical", "auto"]
    assert main([*argv, "--workers", "0", "--device", "cpu"]) == 0
    assert "vertical auto: no crop is at least 2x taller than wide; every one read as it is\n" in capsys.readouterr().out
    assert run_json(argv, capsys)["overall"]["vertical"] == {"tall": 0, "read": 0}


def test_warn_reads_and_reports_as_without_the_option(weights, data, capsys):
    """--vertical warn is the default: the same JSON (timings aside) and the same table (img/s aside), no key or
    line about tall crops."""
    argv = ["--weights", str(weights), "--data", str(data["auto"])]
    default, warn = run_json(argv, capsys), run_json([*argv, "--vertical", "warn"], capsys)
    strip = lambda row: {k: v for k, v in row.items() if k not in TIMING}  # noqa: E731
    assert set(default) == set(warn) == SUMMARY_KEYS
    assert [strip(r) for r in warn["datasets"]] == [strip(r) for r in default["datasets"]]
    assert strip(warn["overall"]) == strip(default["overall"])
    assert {k: warn[k] for k in warn if k not in ("datasets", "overall")} == \
        {k: default[k] for k in default if k not in ("datasets", "overall")}
    tables = []
    for extra in ([], ["--vertical", "warn"]):
        assert main([*argv, "--workers", "0", "--device", "cpu", *extra]) == 0
        tables.append([line.rsplit(None, 1)[0] if line.startswith((str(data["auto"]), "overall")) else line
                       for line in capsys.readouterr().out.splitlines()])  # img/s is the last column
    assert tables[0] == tables[1] and not any("vertical" in line for line in tables[0])


def test_a_second_checkpoint_under_warn_reads_tall_crops_as_they_are_without_a_warning(weights, data, capsys):
    """--vertical warn: crnn-eval says nothing about tall crops, for a second --weights either; its column is named
    by the file alone and scores what the first reads."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = run_json(["--weights", str(weights), "--weights", str(weights), "--data", str(data["warn"])], capsys)
    assert [str(w.message) for w in caught if "taller than wide" in str(w.message)] == []
    (other,) = s["against"]
    assert other["name"] == str(weights) and other["overall"]["word_acc"] == s["overall"]["word_acc"] == 1.0


def test_a_bad_mode_is_argparse_s_refusal(weights, data, capsys):
    with pytest.raises(SystemExit) as e:
        main(["--weights", str(weights), "--data", str(data["auto"]), "--vertical", "sideways"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == ("crnn-eval: error: argument --vertical: invalid choice: 'sideways' (choose from 'warn', 'stack', "
                   "'rotate', 'auto')")
    with pytest.raises(ValueError) as v:
        crnn.evaluate(data["auto"], weights, vertical="sideways")
    assert str(v.value) == err.split(": error: ", 1)[1]


def test_the_report_reads_tall_crops_the_same_way(weights, data, tmp_path, capsys):
    s = run_json(["--weights", str(weights), "--data", str(data["auto"]), "--vertical", "auto", "--report",
                  str(tmp_path / "rep")], capsys)
    assert s["datasets"][0]["word_acc"] == 1.0 and s["overall"]["vertical"] == {"tall": 3, "read": 3}
    page = (tmp_path / "rep" / "index.html").read_text(encoding="utf-8")
    assert ("<tr><th>tall crops</th><td>vertical auto: 3 of 3 crop(s) at least 2x taller than wide read as horizontal "
            "lines, each the most confident way</td></tr>") in page
    run_json(["--weights", str(weights), "--data", str(data["auto"]), "--report", str(tmp_path / "plain")], capsys)
    assert "tall crops" not in (tmp_path / "plain" / "index.html").read_text(encoding="utf-8")


@pytest.mark.slow
def test_two_process_torchrun_counts_add_up(weights, data, capsys):
    """6 crops over 2 gloo ranks (tall crops in both shards): the counts and scores of one process."""
    argv = ["--weights", str(weights), "--data", str(data["auto"]), "--data", str(data["warn"]), "--vertical",
            "auto", "--batch-size", "2", "--device", "cpu", "--protocol", "exact", "--worst", "10"]
    one = json.loads(_capture(argv, capsys))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           "-m", "crnn.cli.evaluate", *argv, "--json", "--workers", "0"], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    two = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (two["processes"], one["processes"]) == (2, 1)
    assert [r["vertical"] for r in two["datasets"]] == [r["vertical"] for r in one["datasets"]] == \
        [{"tall": 3, "read": 3}] * 2
    assert two["overall"]["vertical"] == {"tall": 6, "read": 6}
    for key in ("samples", "word_acc", "cer", "ned_similarity"):
        assert two["overall"][key] == pytest.approx(one["overall"][key], abs=1e-12), key
    assert two["datasets"][0]["word_acc"] == 1.0


def _capture(argv: list[str], capsys) -> str:
    assert main([*argv, "--json", "--workers", "0"]) == 0
    return capsys.readouterr().out
