"""scripts/zh_benchmark.py on the yardstick harness: scores under the unicode protocol, every model timed one line per
call in interleaved rounds (ours with --amp auto and a float32 row, --batched a labelled row of its own), a peer that
is not installed skipped in one line, and --build-only still building the sets alone. A tiny stand-in Chinese model
made in tmp_path; the clean set needs jieba and fonts-noto-cjk."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from crnn.charset import Charset
from crnn.config import Config
from crnn.engine.checkpoint import model_checkpoint, save_checkpoint
from crnn.model import build_model

NOTO_CJK = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")


@pytest.fixture(scope="module")
def bench(zh_bench):
    return zh_bench


@pytest.fixture(scope="module")
def tiny_zh(tmp_path_factory) -> Path:
    """An untrained keep-ratio zh_gb2312 model (hidden 16): it reads noise, fast."""
    cfg, cs = Config(), Charset.from_spec("zh_gb2312")
    cfg.model.charset, cfg.model.hidden = "zh_gb2312", 16
    cfg.data.height, cfg.data.keep_ratio, cfg.data.width, cfg.data.max_width = 32, True, 48, 256
    torch.manual_seed(0)
    model = build_model(cfg.model.variant, cfg.model.in_channels, cs.num_classes, cfg.model.hidden).eval()
    path = tmp_path_factory.mktemp("zhw") / "tiny_zh.pt"
    save_checkpoint(model_checkpoint(model, cfg, cs), path)
    return path


def test_scores_under_the_unicode_protocol_and_the_table(bench):
    s = bench.score(["中文，ab", "x"], ["中文,ab", "y"])  # full-width comma = comma under NFKC
    assert s["line_acc"] == 0.5 and s["cer"] == pytest.approx(1 / 6) and s["samples"] == 2
    col = bench.Column("m", "h", {"clean": ["中文"]}, seconds=0.5, items=1)
    rows = bench.results([col], {"clean": ["中文"]})
    assert rows[0]["lines_per_s"] == 2 and rows[0]["clean"]["cer"] == 0
    assert bench.markdown(rows, ["clean"], 1, 2).splitlines()[2] == "| m | 0.00 % / 100.0 % | 2 |"
    assert bench.class_errors("会1975年去", "会1995年去")["digits"] == [1, 4]  # the report's alignment, per class
    assert bench.class_errors("ab中文", "中文") == {"Hanzi": [0, 2], "Latin": [2, 0], "digits": [0, 0],
                                                  "other": [0, 0]}


def test_ratios_to_both_peers_are_medians_of_per_round_ratios(bench):
    cols = [bench.Column(n, items=1, seconds=1.0) for n in ("zh", bench.PPOCR, bench.PPOCR6)]
    cols[0].rounds, cols[1].rounds, cols[2].rounds = [300.0, 200.0, 400.0], [150.0, 50.0, 100.0], [100.0] * 3
    ours = bench.results(cols, {})[0]
    assert ours["lines_per_s"] == 300.0 and ours["lines_per_s_pass"] == 1.0
    assert ours["x_ppocr4"] == 4.0 and ours["x_ppocr6_small"] == 3.0  # ratios 2, 4, 4 (the medians' ratio: 3)
    table = bench.markdown(bench.results(cols, {}), [], 3, 2, "in 3 rounds")
    assert "| zh |  | 300 (4.0x / 3.0x) |" in table and "lines/s one line per call" in table


@pytest.mark.skipif(not NOTO_CJK.is_file(), reason="needs fonts-noto-cjk")
def test_every_row_reads_one_line_per_call_and_batched_is_a_row_of_its_own(bench, tiny_zh, tmp_path, monkeypatch,
                                                                          capsys):
    pytest.importorskip("jieba")
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name.startswith("rapidocr")
                        else real(name, *a))  # as without the peers extra
    w = str(tiny_zh)
    argv = ["--weights", w, "--sets", "clean", "--num", "3", "--work", str(tmp_path), "--json", "--threads", "1",
            "--speed-rounds", "2", "--speed-lines", "3"]
    assert bench.main([*argv, "--amp", "off", "--amp", "bf16", "--batched"]) == 0
    out, err = capsys.readouterr()
    rows = json.loads(out)["rows"]
    assert [r["model"] for r in rows] == [w, f"{w} (bf16)", f"{w}, batched", f"{w} (bf16), batched"]
    assert "one crop per call" in rows[0]["how"] and "batches of equal resized width" in rows[2]["how"]
    assert rows[0]["clean"] == {k: v for k, v in rows[2]["clean"].items()}  # the same readings either way
    assert all(len(r["rounds"]) == 2 and r["clean"]["samples"] == 3 for r in rows)
    assert "timing round 2/2" in err and "skipped PP-OCRv4 (rapidocr): rapidocr_onnxruntime not installed" in err
    assert "skipped PP-OCRv6 small (rapidocr 3.10): rapidocr not installed (pip install 'crnn[peers]')" in err
    readings = (tmp_path / "readings.tsv").read_text(encoding="utf-8").splitlines()
    assert readings[0] == f"set\tpath\ttruth\t{w}\t{w} (bf16)\t{w}, batched\t{w} (bf16), batched"
    assert bench.main(argv) == 0  # default: --amp auto and a float32 row (auto alone where it is float32 here)
    names = [r["model"] for r in json.loads(capsys.readouterr()[0])["rows"]]
    assert names in ([f"{w} (auto: bf16)", w], [w])
    assert bench.main(argv + ["--speed-rounds", "-1"]) == 2
    assert "--speed-rounds must be >= 0" in capsys.readouterr().err


@pytest.mark.skipif(not NOTO_CJK.is_file(), reason="needs fonts-noto-cjk")
def test_build_only_makes_the_sets_and_reads_nothing(bench, tmp_path, monkeypatch, capsys):
    pytest.importorskip("jieba")
    from crnn.data import zh_sets

    monkeypatch.setattr(bench, "make_readers", lambda args: pytest.fail("--build-only read with a model"))
    assert bench.main(["--build-only", "--sets", "clean", "--num", "2", "--work", str(tmp_path)]) == 0
    gt = (tmp_path / "clean" / "gt.txt").read_text(encoding="utf-8").splitlines()
    assert len(gt) == 2 and json.loads((tmp_path / "clean" / "manifest.json").read_text())["version"] == zh_sets.VERSION
    assert bench.build_set is zh_sets.build_set and bench.face_files is zh_sets.face_files  # the names stay here


def test_require_peers_stops_before_anything_is_read_when_a_peer_is_missing(bench, tmp_path, monkeypatch, capsys):
    """The model card's report reads beside both peers: with --require-peers a missing one is a one-line error, exit 2,
    before a set is built or a line read (without it, the row is skipped with one line and the run goes on)."""
    monkeypatch.setitem(sys.modules, "rapidocr_onnxruntime", None)  # as on a machine without it
    work = tmp_path / "work"
    assert bench.main(["--require-peers", "--num", "2", "--sets", "unseen_clean", "--work", str(work)]) == 2
    err = capsys.readouterr().err
    assert err == ("zh_benchmark: error: PP-OCRv4 (rapidocr): rapidocr_onnxruntime not installed "
                   "(pip install 'crnn[peers]'); --require-peers reads beside both\n")
    assert not work.exists()
    assert bench.main(["--require-peers", "--no-ppocr", "--work", str(work)]) == 2
    assert "leave out --no-ppocr" in capsys.readouterr().err
