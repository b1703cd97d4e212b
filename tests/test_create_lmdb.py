"""crnn-create-lmdb: validation, bad-line reports, exit codes, nothing half-written."""
from __future__ import annotations

import os

import pytest

from crnn.charset import Charset
from crnn.cli.create_lmdb import main
from crnn.data.datasets import LmdbDataset
from tests.conftest import shared_dataset
from tests.test_datasets import png_bytes

IIIT5K = shared_dataset("iiit5k_train")  # None when the optional real crops are absent


def _folder(root, lines: list[str]):
    (root / "IMG").mkdir(parents=True)
    for i in range(3):
        (root / "IMG" / f"{i}.png").write_bytes(png_bytes(value=i))
    (root / "IMG" / "bad.jpg").write_bytes(b"\xff\xd8 truncated jpeg")
    (root / "gt.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


MIXED = ["IMG/0.png\tgood", "IMG/1.png no tab", "IMG/9.png\tmissing", "IMG/bad.jpg\tcorrupt", "IMG/2.png\t",
         "", "IMG/2.png\tlast"]


def test_writes_good_lines_and_reports_bad_ones(tmp_path, capsys):
    root = _folder(tmp_path / "f", MIXED)
    out = tmp_path / "out.lmdb"
    assert main(["--images", str(root), "--out", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err.splitlines()
    gt = str(root / "gt.txt")
    assert err == [f"{gt}:2: expected 'relative/path<TAB>label' but found no tab; fix the line",
                   f"{gt}:3: cannot read image 'IMG/9.png' (No such file or directory)",
                   f"{gt}:4: image 'IMG/bad.jpg' cannot be decoded (corrupt or not an image)",
                   f"{gt}:5: empty label for 'IMG/2.png'"]
    ds = LmdbDataset(out, charset=None)
    assert [ds[i][1] for i in range(len(ds))] == ["good", "last"]


def test_check_only_writes_nothing(tmp_path, capsys):
    root = _folder(tmp_path / "f", MIXED)
    assert main(["--images", str(root), "--check", "--quiet", "--out", str(tmp_path / "o")]) == 1
    assert "2 good, 4 bad" in capsys.readouterr().out
    assert not (tmp_path / "o").exists()
    clean = _folder(tmp_path / "c", ["IMG/0.png\ta", "IMG/1.png\tb"])
    assert main(["--images", str(clean), "--check", "--quiet"]) == 0


def test_strict_and_all_bad_write_nothing(tmp_path, capsys):
    root = _folder(tmp_path / "f", MIXED)
    assert main(["--images", str(root), "--out", str(tmp_path / "s"), "--strict", "--quiet"]) == 1
    assert f"{root / 'gt.txt'}:2: expected 'relative/path<TAB>label' but found no tab" in capsys.readouterr().err
    bad = _folder(tmp_path / "b", ["IMG/bad.jpg\tx"])
    assert main(["--images", str(bad), "--out", str(tmp_path / "n"), "--quiet"]) == 1
    assert "no valid samples" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["b", "f"]


def test_existing_output_needs_overwrite(tmp_path, capsys):
    root = _folder(tmp_path / "f", ["IMG/0.png\ta"])
    out = tmp_path / "o"
    assert main(["--images", str(root), "--out", str(out), "--quiet"]) == 0
    assert main(["--images", str(root), "--out", str(out), "--quiet"]) == 2
    assert "already exists" in capsys.readouterr().err
    (root / "gt.txt").write_text("IMG/0.png\ta\nIMG/1.png\tb\n")
    assert main(["--images", str(root), "--out", str(out), "--quiet", "--overwrite"]) == 0
    assert len(LmdbDataset(out)) == 2


def test_missing_inputs_are_one_line_errors(tmp_path, capsys):
    assert main(["--images", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["--images", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "image folder not found" in err[0] and "gt file not found" in err[1]
    with pytest.raises(SystemExit):
        main(["--images", str(tmp_path)])  # --out required without --check


@pytest.mark.skipif(IIIT5K is None, reason="shared IIIT5K crops not available")
def test_iiit5k_train_to_lmdb(tmp_path):
    out = tmp_path / "iiit5k.lmdb"
    assert main(["--images", str(IIIT5K), "--out", str(out), "--quiet"]) == 0
    raw = LmdbDataset(out, charset=None)
    assert len(raw) == 2000 and raw[0][1] == "You"
    kept = LmdbDataset(out, charset=Charset.from_spec("alnum36"))
    assert len(kept) + sum(kept.dropped.values()) == 2000


def _zh_folder(root, gt_text: str, encoding: str = "utf-8"):
    (root / "images").mkdir(parents=True)
    for i in range(3):
        (root / "images" / f"2045582{i}_2605100732.jpg").write_bytes(png_bytes(value=i, fmt="JPEG"))
    (root / "gt.txt").write_bytes(gt_text.encode(encoding))
    return root


def _labels(path) -> list[str]:
    ds = LmdbDataset(path, charset=None)
    return [ds[i][1] for i in range(len(ds))]


def test_space_separated_gbk_labels_keep_inner_spaces(tmp_path, capsys):
    gt = ("images/20455820_2605100732.jpg 中文 识别\r\n"
          "images/20455821_2605100732.jpg 模型，训练\r\n"
          "images/20455822_2605100732.jpg\r\n")
    root = _zh_folder(tmp_path / "f", gt, "gbk")
    out = tmp_path / "out.lmdb"
    argv = ["--images", str(root), "--gt-format", "space", "--out", str(out), "--quiet"]
    assert main(argv) == 1  # GBK bytes read as UTF-8: a clear hint per line, nothing written
    assert "gt.txt:1: line is not valid utf-8; pass --encoding gbk (or gb18030)" in capsys.readouterr().err
    assert not out.exists()
    assert main([*argv, "--encoding", "gbk"]) == 1  # the third line has no label
    assert capsys.readouterr().err.strip().endswith(
        "gt.txt:3: expected 'relative/path label' separated by a space; fix the line")
    assert _labels(out) == ["中文 识别", "模型，训练"]


def test_index_labels_use_0_based_alphabet_lines_with_blank(tmp_path, capsys):
    alphabet = tmp_path / "char_std_5990.txt"
    alphabet.write_bytes("blank\r\n中\r\n文\r\n识\r\n别\r\n \r\n".encode("gb18030"))  # line 5 is the space
    root = _zh_folder(tmp_path / "f", "images/20455820_2605100732.jpg 1 2 3 4\n"
                                      "images/20455821_2605100732.jpg 3 4 5 1\n"
                                      "images/20455822_2605100732.jpg 0 1\n"
                                      "images/20455822_2605100732.jpg 1 9\n"
                                      "images/20455822_2605100732.jpg 1 x\n")
    out = tmp_path / "out.lmdb"
    rc = main(["--images", str(root), "--gt-format", "indices", "--alphabet", str(alphabet), "--out", str(out),
               "--quiet"])
    err = capsys.readouterr().err.splitlines()
    gt = str(root / "gt.txt")
    assert rc == 1 and err == [
        f"{gt}:3: index 0 is alphabet line 0, the blank placeholder, not one character",
        f"{gt}:4: index 9 is past the alphabet's last line (5); is --alphabet the file these labels were made with?",
        f"{gt}:5: 'x' is not a character index (0-based alphabet line number)"]
    assert _labels(out) == ["中文识别", "识别 中"]


def test_label_format_option_errors(tmp_path, capsys):
    root = _zh_folder(tmp_path / "f", "images/20455820_2605100732.jpg 1\n")
    base = ["--images", str(root), "--out", str(tmp_path / "o"), "--quiet"]
    cases = {"needs --alphabet FILE": ["--gt-format", "indices"],
             f"--alphabet: alphabet file {tmp_path / 'nope.txt'} not found":
                 ["--gt-format", "indices", "--alphabet", str(tmp_path / "nope.txt")],
             "only used with --gt-format indices": ["--alphabet", str(tmp_path / "a.txt")],
             "unknown label file encoding 'big9'": ["--encoding", "big9"]}
    for expected, extra in cases.items():
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith("crnn-create-lmdb: error: ") and expected in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "o").exists()


def test_mmocr_textrecog_json_and_its_older_json_lines(tmp_path, capsys):
    """mmocr 1.x's textrecog_train.json (data_list of img_path + one instance's text) and mmocr 0.x's JSON lines:
    the labels as written (spaces, Chinese), bad entries named by number, the good ones written."""
    import json

    root = _folder(tmp_path / "f", [])
    doc = {"metainfo": {"dataset_type": "TextRecogDataset", "task_name": "textrecog"},
           "data_list": [{"img_path": "IMG/0.png", "instances": [{"text": "GRAND Hotel"}]},
                         {"img_path": "IMG/1.png", "instances": [{"text": "中文"}, {"text": "x"}]},
                         {"instances": [{"text": "no path"}]},
                         {"img_path": "IMG/9.png", "instances": [{"text": "missing"}]},
                         {"img_path": "IMG/2.png", "instances": [{"text": "中文"}]}]}
    gt = root / "textrecog_train.json"
    gt.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    out = tmp_path / "mm.lmdb"
    assert main(["--images", str(root), "--gt", str(gt), "--gt-format", "mmocr", "--out", str(out), "--quiet"]) == 1
    cap = capsys.readouterr()
    assert cap.err.splitlines() == [
        f"{gt}: entry 2: 'IMG/1.png' has 2 instances; a recognition entry holds one instance with its text",
        f"{gt}: entry 3: no \"img_path\" text in the entry",
        f"{gt}: entry 4: cannot read image 'IMG/9.png' (No such file or directory)"]
    assert cap.out.startswith(f"{gt}: 2 good, 3 bad, wrote 2 samples")
    assert _labels(out) == ["GRAND Hotel", "中文"]

    lines = root / "train_label.jsonl"
    lines.write_text('{"filename": "IMG/0.png", "text": "OpenMMLab"}\n\n{"filename": "IMG/2.png", "text": "MMOCR"}\n'
                     '{"filename": "IMG/1.png"}\n', encoding="utf-8")
    out2 = tmp_path / "mm0.lmdb"
    assert main(["--images", str(root), "--gt", str(lines), "--gt-format", "mmocr", "--out", str(out2),
                 "--quiet"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"{lines}:4: expected {{\"filename\": ..., \"text\": ...}} with text values"]
    assert _labels(out2) == ["OpenMMLab", "MMOCR"]


def test_doctr_labels_json_and_a_file_of_another_layout(tmp_path, capsys):
    import json

    root = _folder(tmp_path / "f", ["IMG/0.png\tgood"])
    gt = root / "labels.json"
    gt.write_text(json.dumps({"IMG/0.png": "Hello, World!", "IMG/1.png": 7, "IMG/2.png": "ok"}), encoding="utf-8")
    out = tmp_path / "d.lmdb"
    assert main(["--images", str(root), "--gt", str(gt), "--gt-format", "doctr", "--out", str(out), "--quiet"]) == 1
    assert capsys.readouterr().err.splitlines() == [f"{gt}: entry 2: the label of 'IMG/1.png' is int, not text"]
    assert _labels(out) == ["Hello, World!", "ok"]
    # a tab gt.txt given as JSON, a doctr file given as mmocr: one line naming the file and the layout, nothing written
    for path, kind, expected in [(root / "gt.txt", "doctr", "not JSON (Expecting value at line 1 column 1)"),
                                 (gt, "mmocr", "no \"data_list\" list; --gt-format mmocr reads mmocr's textrecog")]:
        assert main(["--images", str(root), "--gt", str(path), "--gt-format", kind, "--out", str(tmp_path / "n"),
                     "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"crnn-create-lmdb: error: {path}: {expected}") and len(err.splitlines()) == 1, err
    assert not (tmp_path / "n").exists() and not list(tmp_path.glob("n.tmp*"))
