"""The evaluation report (crnn-eval --report): exact confusions and bins on crafted cases, escaped and paged HTML,
the CLI and API, and the page opened in headless Chromium (every image loads, every section is there)."""
from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from pathlib import Path

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
from crnn.report import analysis as A
from crnn.report.render import DatasetInput, readable_names, readable_path, write_report

CRAFTED = [A.Sample(0, "cat", "cut", 0.9, 60, 20), A.Sample(1, "dog", "dg", 0.4, 60, 20),
           A.Sample(2, "sun", "sunn", 0.95, 90, 30), A.Sample(3, "cat", "cut", 0.2, 120, 30),
           A.Sample(4, "<b>&\"'", "<b>&\"'", 0.99, 30, 30), A.Sample(5, "Zoo!", "zoo", 0.8, 100, 20)]


def crop(i: int) -> Image.Image:
    img = Image.new("L", (40 + 10 * i, 20), 255)
    ImageDraw.Draw(img).text((2, 4), f"w{i}", fill=0)
    return img


def test_alignment_marks_each_kind_of_error():
    assert A.align("cat", "cut") == [("=", "c", "c"), ("sub", "a", "u"), ("=", "t", "t")]
    assert A.align("dog", "dg") == [("=", "d", "d"), ("del", "o", ""), ("=", "g", "g")]
    assert A.align("sun", "sunn") == [("=", "s", "s"), ("=", "u", "u"), ("ins", "", "n"), ("=", "n", "n")]
    assert A.align("", "ab") == [("ins", "", "a"), ("ins", "", "b")]
    assert A.align("ab", "") == [("del", "a", ""), ("del", "b", "")]


def test_confusion_counts_on_a_crafted_case():
    rows = A.compare(CRAFTED, "exact")
    assert [r.distance for r in rows] == [1, 1, 1, 1, 0, 2]
    assert A.confusions(rows) == [A.Confusion("sub", "a", "u", 2, 0, 2, (0, 3)),
                                  A.Confusion("del", "!", "", 1, 5, 1, (5,)), A.Confusion("del", "o", "", 1, 1, 1, (1,)),
                                  A.Confusion("ins", "", "n", 1, 2, 1, (2,)), A.Confusion("sub", "Z", "z", 1, 5, 1, (5,))]
    clearer = A.compare([A.Sample(0, "foot", "f", 0.1), A.Sample(1, "to", "t", 0.1)], "exact")
    # two crops miss an o (one of them twice: it counts once); the example is the crop with fewest other errors
    assert A.confusions(clearer)[0] == A.Confusion("del", "o", "", 2, 1, 3, (1, 0))
    loose = A.compare(CRAFTED, "alnum-insensitive")  # "Zoo!" == "zoo" once lower-cased and cut to 0-9a-z
    assert [r.correct for r in loose] == [False, False, False, False, True, True]
    assert [c.count for c in A.confusions(loose)] == [2, 1, 1]


def test_one_badly_misread_crop_does_not_fill_the_confusion_cards(tmp_path):
    """Issue 61: "Singapore's" read as "2" gave 9 of the 30 cards. Its errors count once per crop, and it is shown on
    at most two cards; confusions seen in several crops come first."""
    samples = [A.Sample(0, "Singapore's", "2", 0.3, 90, 20)]
    samples += [A.Sample(i, "cat", "cut", 0.9, 40, 20) for i in range(1, 4)]
    samples += [A.Sample(i, "dog", "dg", 0.9, 40, 20) for i in range(4, 6)]
    conf = A.confusions(A.compare(samples, "exact"))
    assert [(c.kind, c.truth, c.pred, c.count) for c in conf[:2]] == [("del", "o", "", 3), ("sub", "a", "u", 3)]
    picked = A.top_confusions(conf, 30)
    assert sum(crop == 0 for _, crop in picked) == 2 and len(picked) == 4
    html = write_report(tmp_path, [DatasetInput("d", {}, samples, crop)],
                        {"weights": "w", "protocol": "exact"}).read_text(encoding="utf-8")
    assert html.count("<figure class='conf'>") == 4 and "<b>3</b> crops:" in html and "<b>1</b> crop:" in html


def test_charts_are_wide_enough_for_their_title_and_bars():
    from crnn.report.svg import H, W, bar_chart, chart_width

    bins = [A.Bin(chr(97 + i), 4, 1) for i in range(23)]
    title = "Error rate of the 23 most-missed characters"
    svg = bar_chart(title, bins, rate="error", x_title="character")
    width = chart_width(title, len(bins))
    assert width > W and f'width="{width}" height="{H}"' in svg and f'<text x="{width / 2:.0f}" y="18"' in svg
    assert width >= len(title) * 7.5 and width >= 23 * 22  # the whole title, 22 px per bar
    assert chart_width("Accuracy by label length", 8) == W


def test_worst_first_order():
    rows = A.compare(CRAFTED, "exact")
    order = [r.sample.index for r in A.worst_first(rows)]
    # ned: Zoo! 2/4, cat 1/3 (x2: confidence 0.9 before 0.2), dog 1/3 (0.4), sun 1/4
    assert order == [5, 0, 1, 3, 2]


def test_bins_and_calibration():
    rows = A.compare(CRAFTED, "exact")
    by_len = A.by_label_length(rows)
    assert [(b.label, b.n, b.correct) for b in by_len] == [("3", 4, 0), ("4", 1, 0), ("6", 1, 1)]
    calib = A.calibration(rows)
    assert len(calib) == 10 and sum(b.n for b in calib) == 6
    assert [(b.label, b.n, b.correct) for b in calib if b.n] == [("0.2", 1, 0), ("0.4", 1, 0), ("0.8", 1, 0),
                                                                  ("0.9", 3, 1)]
    assert calib[9].mean_confidence == pytest.approx((0.9 + 0.95 + 0.99) / 3)
    ece = A.expected_calibration_error(calib)
    assert ece == pytest.approx((0.2 + 0.4 + 0.8 + 3 * abs(1 / 3 - calib[9].mean_confidence)) / 6)
    widths = A.by_quantile(rows, lambda r: r.sample.width, n_bins=3)
    assert [(b.label, b.n) for b in widths] == [("30-60", 3), ("90", 1), ("100-120", 2)]  # ties stay together


def test_characters_never_read_right_and_cer_by_frequency():
    rows = A.compare(CRAFTED, "exact")
    stats = {s.char: (s.occurrences, s.right) for s in A.char_stats(rows)}
    assert stats["a"] == (2, 0) and stats["o"] == (3, 2) and stats["t"] == (2, 2) and stats["Z"] == (1, 0)
    never = [s.char for s in A.never_right(A.char_stats(rows))]
    assert never == ["a", "!", "Z"]  # most frequent first, then by code point
    bins = A.cer_by_frequency(A.char_stats(rows))
    total = sum(len(s.label) for s in CRAFTED)
    assert sum(b.n for b in bins) == total
    assert sum(b.n - b.correct for b in bins) == 5  # 2 a->u, o missed, Z->z, ! missed


def test_page_escapes_text_pages_errors_and_counts_everything(tmp_path):
    many = CRAFTED + [A.Sample(10 + i, f"w{i}", "x", 0.5, 50, 20) for i in range(7)]
    many += [A.Sample(20, "<b>&", "", 0.99, 50, 20), A.Sample(21, "ok", "<i>", 0.98, 50, 20)]  # worst two
    data = DatasetInput("set <1> & 'co'", {"word_acc": 1 / 15, "cer": 0.5, "ned_similarity": 0.4}, many,
                        lambda i: crop(i))
    meta = {"weights": "w<&>.pt", "variant": "vgg_small", "num_classes": 37, "protocol": "exact",
            "protocol_requested": "exact", "decoder": "greedy", "device": "cpu", "warnings": []}
    index = write_report(tmp_path / "rep", [data], meta, max_errors=8, page_size=3)
    html = index.read_text(encoding="utf-8")
    assert "<b>&" not in html and "&lt;b&gt;&amp;" in html  # the label is text, never markup
    assert "<i>" not in html and "(nothing read)" in html
    assert "<span class='i'>&lt;</span><span class='s'>i&gt;</span>" in html  # "ok" read as "<i>": added, 2 subs
    assert "set &lt;1&gt; &amp; &#x27;co&#x27;" in html and "w&lt;&amp;&gt;.pt" in html
    assert "14 errors (the 8 worst are shown)" in html  # counts cover every image, the gallery is capped
    pages = sorted(p.name for p in (tmp_path / "rep").glob("d0-errors-*.html"))
    assert pages == ["d0-errors-2.html", "d0-errors-3.html"]  # 8 errors, 3 per page
    assert html.count("<figure class='err'>") == 3
    assert (tmp_path / "rep" / "d0-errors-3.html").read_text(encoding="utf-8").count("<figure class='err'>") == 2
    srcs = re.findall(r'<img src="([^"]+)"', html)
    assert srcs and all((tmp_path / "rep" / s).is_file() for s in srcs)
    assert "raw: <q>Zoo!</q>" not in html  # exact protocol: nothing was changed, so no raw line
    (tmp_path / "rep" / "notes.txt").write_text("mine")
    write_report(tmp_path / "rep", [data], meta, max_errors=3, page_size=3)  # again, smaller: no stale pages/crops
    assert not list((tmp_path / "rep").glob("d0-errors-*.html")) and (tmp_path / "rep" / "notes.txt").is_file()
    assert len(list((tmp_path / "rep" / "img").glob("*.png"))) == len(set(re.findall(
        r'<img src="([^"]+)"', index.read_text(encoding="utf-8"))))
    for section in ("Where it fails", "Most frequent character confusions", "Characters", "Errors, worst first"):
        assert f"<h3>{section}</h3>" in html


def test_protocol_changes_are_shown_raw_and_normalised(tmp_path):
    data = DatasetInput("d", {}, CRAFTED, crop)
    meta = {"weights": "w.pt", "protocol": "alnum-insensitive", "protocol_requested": "auto"}
    html = write_report(tmp_path, [data], meta).read_text(encoding="utf-8")
    assert "raw: <q>sun</q> &rarr; <q>sunn</q>" not in html  # unchanged by the protocol: no raw line
    assert "changed 2 of 6 labels" in html  # "Zoo!" -> "zoo", the punctuation label -> "b"
    assert "4 errors" in html


# ---- the command line, on a tiny model, and the page in a browser


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    """An untrained tiny alnum36 model (it reads nothing or noise) and an LMDB with awkward labels."""
    d = tmp_path_factory.mktemp("rep")
    cfg = Config()
    cfg.model.hidden, cfg.data.width = 16, 48
    cs = Charset.from_spec("alnum36")
    torch.manual_seed(0)
    save_checkpoint(model_checkpoint(build_model("vgg_small", 1, cs.num_classes, 16).eval(), cfg, cs, step=1),
                    d / "tiny.pt")
    labels = ["apple", "<b>&amp;", "Tree's", "42", "x\"y", "moon", "RIVER", "a b"]

    def png(i: int, text: str) -> bytes:
        buf = io.BytesIO()
        img = Image.new("L", (30 + 8 * len(text), 24 + i % 3 * 4), 255)
        ImageDraw.Draw(img).text((2, 4), text, fill=0)
        img.save(buf, format="PNG")
        return buf.getvalue()
    write_lmdb([(png(i, t), t) for i, t in enumerate(labels)], d / "set.lmdb")
    return {"weights": d / "tiny.pt", "lmdb": d / "set.lmdb", "dir": d}


def test_cli_writes_the_report_and_both_metric_keys(tiny, tmp_path, capsys):
    out = tmp_path / "r"
    rc = main(["--weights", str(tiny["weights"]), "--data", str(tiny["lmdb"]), "--report", str(out), "--json",
               "--workers", "0", "--batch-size", "3"])
    stdout, err = capsys.readouterr()
    assert rc == 0, err
    s = json.loads(stdout)
    assert s["report"] == str(out / "index.html") and f"report written to {out / 'index.html'}" in err
    row = s["datasets"][0]
    assert row["ned"] == row["ned_similarity"] and s["overall"]["ned"] == s["overall"]["ned_similarity"]
    html = (out / "index.html").read_text(encoding="utf-8")
    errors = round(8 * (1 - row["word_acc"]))
    assert f"{errors:,} errors" in html and "<b>8</b><span>images</span>" in html
    assert "&lt;b&gt;&amp;amp;" in html  # the label "<b>&amp;" shown as those characters
    assert "--report DIR" in subprocess_help()


def test_report_names_datasets_and_weights_as_a_reader_knows_them(tiny, tmp_path, monkeypatch, capsys):
    """Not this machine's absolute paths: relative to the current directory under it, else the folder's name."""
    work = tmp_path / "work"
    (work / "sets").mkdir(parents=True)
    shutil.copytree(tiny["lmdb"], work / "sets" / "set.lmdb")
    monkeypatch.chdir(work)
    assert main(["--weights", str(tiny["weights"]), "--data", str(work / "sets" / "set.lmdb"), "--data",
                 str(tiny["lmdb"]) + "/", "--report", "r", "--workers", "0"]) == 0
    capsys.readouterr()
    html = (work / "r" / "index.html").read_text(encoding="utf-8")
    assert str(tmp_path) not in html and str(tiny["dir"]) not in html
    assert "<h2>sets/set.lmdb</h2>" in html and "<h2>set.lmdb</h2>" in html  # under the cwd; elsewhere: its name
    assert "<td>tiny.pt (vgg_small" in html
    assert readable_names(["/a/x/val", "/b/y/val", "/a/x/val", "/c/train"], cwd="/d") == [
        "x/val", "y/val", "x/val", "train"]  # two different folders named alike: one more part each
    assert readable_path("/d/e/", cwd="/d") == "e" and readable_path("/d", cwd="/d") == "d"


def test_unwritable_report_folder_is_a_one_line_error(tiny, tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    rc = main(["--weights", str(tiny["weights"]), "--data", str(tiny["lmdb"]), "--workers", "0",
               "--report", str(tmp_path / "file" / "r")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err[-1].startswith(f"crnn-eval: error: {tmp_path / 'file' / 'r'}: cannot write the report")


def test_cli_report_of_a_chinese_model(tmp_path, capsys):
    """A zh_gb2312 model that reads nothing: exact protocol, Chinese truth in the gallery, every character missed."""
    cfg = Config()
    cfg.model.hidden, cfg.data.width, cfg.model.charset = 16, 48, "zh_gb2312"
    cs = Charset.from_config(cfg.model)
    model = build_model("vgg_small", 1, cs.num_classes, 16).eval()
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.zero_()
        model.head.bias[0] = 10.0  # blank wins at every step
    save_checkpoint(model_checkpoint(model, cfg, cs, step=1), tmp_path / "zh.pt")
    write_lmdb([(_png(t), t) for t in ["中文识别", "模型<1>", "识别"]], tmp_path / "zh.lmdb")
    assert main(["--weights", str(tmp_path / "zh.pt"), "--data", str(tmp_path / "zh.lmdb"), "--workers", "0",
                 "--report", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    html = (tmp_path / "r" / "index.html").read_text(encoding="utf-8")
    assert "metric protocol: exact (auto: the charset is not alnum36)" in html and "6894 characters" in html
    assert "<span class='d'>中文识别</span>" in html and "<span class='d'>模型&lt;1&gt;</span>" in html
    assert "Never read right: 9 character(s)" in html  # 识 and 别 twice first
    assert re.search(r"<code class='c'>识</code><small>&times;2</small>", html)


def _png(text: str) -> bytes:
    buf = io.BytesIO()
    Image.new("L", (20 + 10 * len(text), 24), 255).save(buf, format="PNG")
    return buf.getvalue()


def subprocess_help() -> str:
    from crnn.cli.evaluate import build_parser
    return build_parser().format_help()


def test_api_report_argument(tiny, tmp_path):
    s = crnn.evaluate(tiny["lmdb"], weights=tiny["weights"], device="cpu", workers=0, report=tmp_path / "api")
    assert Path(s["report"]).is_file() and (tmp_path / "api" / "img").is_dir()
    with pytest.raises(ValueError, match="report-errors"):
        crnn.evaluate(tiny["lmdb"], weights=tiny["weights"], device="cpu", workers=0, report=tmp_path, report_errors=-1)


def chromium() -> str:
    """The headless browser, or skip with how to get it."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("Debian's chromium is not installed (scripts/setup.sh installs it as root: apt-get install "
                    "chromium); the report page was not opened in a browser")
    return exe


def open_in_browser(page: Path, tmp_path: Path) -> str:
    """The page's DOM after load (its script has written data-images / data-broken onto <body>)."""
    proc = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000",
                           "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def loaded(dom: str) -> tuple[int, int]:
    m = re.search(r'<body[^>]*data-images="(\d+)"[^>]*data-broken="(\d+)"', dom)
    assert m, "the page's image check did not run: " + dom[:300]
    return int(m.group(1)), int(m.group(2))


def test_report_opens_in_headless_chromium_with_every_image(tiny, tmp_path):
    chromium()
    out = tmp_path / "r"
    assert main(["--weights", str(tiny["weights"]), "--data", str(tiny["lmdb"]), "--data", str(tiny["lmdb"]),
                 "--report", str(out), "--workers", "0"]) == 0
    dom = open_in_browser(out / "index.html", tmp_path)
    n_img = (out / "index.html").read_text(encoding="utf-8").count("<img ")
    assert n_img > 0 and loaded(dom) == (n_img, 0)  # every crop decoded: naturalWidth > 0
    assert 'id="d0"' in dom and 'id="d1"' in dom and dom.count("<svg") == 2 * 6  # 4 charts + 2 character charts each
    for section in ("Where it fails", "Most frequent character confusions", "Characters", "Errors, worst first"):
        assert dom.count(f"<h3>{section}</h3>") == 2
    paged = write_report(tmp_path / "paged", [DatasetInput("d", {}, CRAFTED, crop)],
                         {"weights": "w", "protocol": "exact"}, page_size=2)  # 5 errors: index.html + 2 more pages, each with its own crops
    for page in (paged, paged.with_name("d0-errors-3.html")):
        assert loaded(open_in_browser(page, tmp_path))[1] == 0
    shutil.copytree(out, tmp_path / "moved")  # the check can fail: a crop missing next to the page is reported
    next((tmp_path / "moved" / "img").glob("*.png")).unlink()
    dom = open_in_browser(tmp_path / "moved" / "index.html", tmp_path)
    assert loaded(dom)[1] >= 1 and "images did not load" in dom


def test_large_alphabet_shows_characters_by_frequency(tmp_path):
    """200 distinct CJK characters: frequency buckets instead of a per-character chart; never-read-right listed."""
    chars = [chr(0x4E00 + i) for i in range(200)]
    samples = [A.Sample(i, chars[i] + chars[(i + 1) % 200], chars[i] + ("" if i < 20 else chars[(i + 1) % 200]),
                        0.5, 40, 20) for i in range(200)]  # the first 20 lose their second character
    html = write_report(tmp_path, [DatasetInput("zh", {}, samples, crop)],
                        {"weights": "zh.pt", "protocol": "exact"}).read_text(encoding="utf-8")
    assert "200 distinct characters" in html and "Error rate by character frequency" in html
    assert "most-missed characters" not in html  # too many characters for one bar each
    assert "Never read right: 0 character(s)" not in html and "Every character was read right" in html
    misses = A.char_stats(A.compare(samples, "exact"))
    assert sum(s.occurrences - s.right for s in misses) == 20  # chars 1..20 missed once, each read right once too


def test_a_large_set_gives_pages_a_browser_opens(tmp_path):
    """30,000 crops, a third wrong: every count is complete, the pages hold at most 100 crops of errors each."""
    samples = [A.Sample(i, f"w{i % 97}", f"w{i % 97}" if i % 3 else "x", (i % 100) / 100, 40 + i % 50, 20)
               for i in range(30_000)]
    index = write_report(tmp_path, [DatasetInput("big", {}, samples, lambda i: crop(i % 50))],
                         {"weights": "w.pt", "protocol": "exact"})
    html = index.read_text(encoding="utf-8")
    assert "<b>30,000</b><span>images</span>" in html and "10,000 errors (the 500 worst are shown)" in html
    assert html.count("<img ") <= 100 + 30 and len(html) < 2_000_000
    assert len(list(tmp_path.glob("d0-errors-*.html"))) == 4 and len(list((tmp_path / "img").glob("*.png"))) <= 530


def test_indexed_batches_keep_indices_through_moves():
    """Batch.to / pin_memory rebuild the batch with dataclasses.replace: the report's indices and sizes survive."""
    from crnn.report.collect import IndexedBatch

    b = IndexedBatch(torch.zeros(2, 1, 4, 8), torch.zeros(0, dtype=torch.long), torch.zeros(2, dtype=torch.long),
                     ["a", "b"], torch.tensor([8, 8]), 1, indices=[3, 5], sizes=[(10, 4), (12, 4)])
    moved = b.to("cpu")
    assert type(moved) is IndexedBatch and moved.indices == [3, 5] and moved.sizes == [(10, 4), (12, 4)]


def test_undecodable_images_are_skipped_without_shifting_indices():
    from crnn.data.loader import make_collate
    from crnn.report.collect import _IndexedCollate

    collate = _IndexedCollate(make_collate(None, height=4, width=8, keep_ratio=False, channels=1))
    img = torch.zeros(1, 4, 8)
    b = collate([(img, "a", 0, (16, 8)), (None, "b", 1, (0, 0)), (img, "c", 2, (24, 8))])
    assert (b.labels, b.indices, b.sizes, b.num_skipped) == (["a", "c"], [0, 2], [(16, 8), (24, 8)], 1)
