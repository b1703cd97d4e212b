"""The English real development sets: the committed lists are the rules (en_dev, issue 44: all of svt_train,
iiit5k_train IMG/1001..2000; ic15_dev, issue 60: ic15_train IMG/word_4001..4468), exact in counts and disjoint from
the crops that may be trained on; the builder copies exactly the listed crops, says in one line where to point
CRNN_SHARED_DATA when they are absent, and notices a changed label or file. Everything here runs on a fake shared
folder made in tmp_path; the real crops, where present, only add a check that they are still the listed ones."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from crnn.charset import Charset
from crnn.config import load_config
from crnn.data import en_dev
from crnn.data.datasets import LabelFilter, open_dataset
from crnn.shared_data import shared_dataset
from tests.conftest import render_png


def test_the_list_is_the_rule_exact_in_counts():
    crops = en_dev.dev_crops()
    by_folder = {f: [c for c in crops if c.folder == f] for f in en_dev.FOLDERS}
    assert len(crops) == 1257 and {f: len(v) for f, v in by_folder.items()} == {"svt_train": 257, "iiit5k_train": 1000}
    assert [c.image for c in by_folder["svt_train"]] == [f"IMG/{n}.jpg" for n in range(1, 258)]
    assert [c.image for c in by_folder["iiit5k_train"]] == [f"IMG/{n}.jpg" for n in range(1001, 2001)]
    assert len({c.rel for c in crops}) == len(crops)
    assert all(c.label and c.label == c.label.strip() and "\t" not in c.label and c.label.isascii() for c in crops)
    assert all(re.fullmatch(r"[0-9a-f]{16}", c.sha256) for c in crops)
    assert sum(c.label != c.label.lower() and c.label != c.label.upper() for c in crops) > 100  # case matters here


def test_the_list_is_disjoint_from_what_may_be_trained_on():
    listed = {c.rel for c in en_dev.dev_crops()}
    trainable = {f"iiit5k_train/IMG/{n}.jpg" for n in range(1, 1001)}
    assert not listed & trainable
    assert all(en_dev.is_dev(*rel.split("/", 1)) for rel in listed)
    assert not any(en_dev.is_dev(*rel.split("/", 1)) for rel in trainable)
    assert not en_dev.is_dev("iiit5k_train", "IMG/2001.jpg") and not en_dev.is_dev("other", "IMG/1.jpg")


def _fake_shared(root: Path) -> tuple[Path, Path]:
    """A shared folder with both sets (three crops each, one of them not listed) and a list of four of them."""
    rows = ["folder\timage\tlabel\tsha256"]
    for folder, words in (("svt_train", ["OPEN", "Cafe", "EXIT"]), ("iiit5k_train", ["Hello", "road", "Sale!"])):
        (root / folder / "IMG").mkdir(parents=True)
        gt = []
        for n, word in enumerate(words, 1):
            path = root / folder / "IMG" / f"{n}.jpg"
            path.write_bytes(render_png(word))
            gt.append(f"IMG/{n}.jpg\t{word}\n")
            if n < 3:
                rows.append(f"{folder}\tIMG/{n}.jpg\t{word}\t{en_dev.file_hash(path)}")
        (root / folder / "gt.txt").write_text("".join(gt), encoding="utf-8")
    listed = root / "list.tsv"
    listed.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root, listed


def test_the_builder_writes_exactly_the_listed_crops_once(tmp_path):
    shared, listed = _fake_shared(tmp_path / "fake_shared")
    out = en_dev.build_en_dev(tmp_path / "dev", shared, list_file=listed)
    assert (out / "gt.txt").read_text(encoding="utf-8") == (
        "svt_train/IMG/1.jpg\tOPEN\nsvt_train/IMG/2.jpg\tCafe\n"
        "iiit5k_train/IMG/1.jpg\tHello\niiit5k_train/IMG/2.jpg\troad\n")
    assert (out / "iiit5k_train/IMG/2.jpg").read_bytes() == (shared / "iiit5k_train/IMG/2.jpg").read_bytes()
    assert not (out / "svt_train/IMG/3.jpg").exists()
    ds = open_dataset(out)  # what crnn-eval and data.val read
    assert len(ds) == 4 and ds[0][1] == "OPEN"
    stamp = (out / "gt.txt").stat().st_mtime_ns
    (shared / "svt_train/gt.txt").unlink()  # built from the same list: kept, the shared folder is not read again
    assert en_dev.build_en_dev(tmp_path / "dev", shared, list_file=listed) == out
    assert (out / "gt.txt").stat().st_mtime_ns == stamp


def test_absent_crops_are_one_line_naming_the_variable(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CRNN_SHARED_DATA", str(tmp_path / "nowhere"))
    assert en_dev.main(["--set", "en_dev", "--out", str(tmp_path / "dev")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("en_dev: error: the real crops are not in ") and err.count("\n") == 1
    assert "set CRNN_SHARED_DATA to the folder that holds svt_train/ and iiit5k_train/" in err
    assert not (tmp_path / "dev").exists()


@pytest.mark.parametrize("change", ["label", "file", "gone"])
def test_a_changed_shared_folder_is_noticed(tmp_path, change):
    shared, listed = _fake_shared(tmp_path / "fake_shared")
    gt = shared / "iiit5k_train" / "gt.txt"
    if change == "label":
        gt.write_text(gt.read_text(encoding="utf-8").replace("\troad\n", "\tRoad\n"), encoding="utf-8")
        why = "iiit5k_train/IMG/2.jpg: label 'Road', listed 'road'"
    elif change == "file":
        (shared / "iiit5k_train/IMG/2.jpg").write_bytes(render_png("Road"))
        why = "iiit5k_train/IMG/2.jpg: the file is not the listed one"
    else:
        gt.write_text(gt.read_text(encoding="utf-8").replace("IMG/2.jpg\troad\n", ""), encoding="utf-8")
        why = "iiit5k_train/IMG/2.jpg: not in its gt.txt"
    with pytest.raises(en_dev.DevSetError, match=re.escape(why)) as e:
        en_dev.build_en_dev(tmp_path / "dev", shared, list_file=listed)
    assert "1 of 4 crops differ" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "dev").exists()


def test_the_shared_crops_are_still_the_listed_ones():
    svt, iiit = shared_dataset("svt_train"), shared_dataset("iiit5k_train")
    if svt is None or iiit is None:
        pytest.skip("needs the shared real crops svt_train and iiit5k_train ($CRNN_SHARED_DATA)")
    en_dev.check_shared(svt.parent, en_dev.dev_crops())


def test_the_trainable_crops_are_every_shared_crop_the_rule_leaves_out(tmp_path):
    shared, listed = _fake_shared(tmp_path / "fake_shared")
    (shared / "iiit5k_train/IMG/1500.jpg").write_bytes(render_png("Dev"))  # a development number: never trainable
    with open(shared / "iiit5k_train/gt.txt", "a", encoding="utf-8") as f:
        f.write("IMG/1500.jpg\tDev\n")
    out = en_dev.build_trainable(tmp_path / "train", shared, list_file=listed)
    assert (out / "gt.txt").read_text(encoding="utf-8") == (
        "iiit5k_train/IMG/1.jpg\tHello\niiit5k_train/IMG/2.jpg\troad\niiit5k_train/IMG/3.jpg\tSale!\n")
    assert not (out / "svt_train").exists() and not (tmp_path / "train.tmp").exists()
    assert [label for _, label in open_dataset(out)] == ["Hello", "road", "Sale!"]


def test_the_ic15_list_is_the_rule_exact_in_counts():
    crops = en_dev.dev_crops(en_dev.IC15_LIST_FILE)
    assert [c.image for c in crops] == [f"IMG/word_{n}.png" for n in range(4001, 4469)]
    assert {c.folder for c in crops} == {"ic15_train"} and len(crops) == en_dev.EXPECTED["ic15_train"] == 468
    assert all(c.label and "\t" not in c.label and c.label.isascii() and c.label.isprintable() for c in crops)
    assert all(re.fullmatch(r"[0-9a-f]{16}", c.sha256) for c in crops)
    assert all(en_dev.is_dev(c.folder, c.image) for c in crops)
    trainable = [f"IMG/word_{n}.png" for n in range(1, 4001)] + ["IMG/word_4469.png", "IMG/4001.png"]
    assert not any(en_dev.is_dev("ic15_train", image) for image in trainable)
    assert not en_dev.is_dev("iiit5k_train", "IMG/word_1500.png")  # one folder's numbering is not another's


def test_the_non_ascii_ic15_labels_are_trainable_and_printable95_drops_them():
    assert not any(en_dev.is_dev("ic15_train", image) for image in en_dev.IC15_NON_ASCII)
    assert not any(label.isascii() for label in en_dev.IC15_NON_ASCII.values())
    keep = LabelFilter(Charset.from_spec("printable95"), 25)  # the English model's alphabet, model.unknown=reject
    assert [keep(label) for label in en_dev.IC15_NON_ASCII.values()] == [None] * 4
    assert keep.dropped["unknown_char"] == 4 and keep("WE'RE") == "WE'RE"
    ic15 = shared_dataset("ic15_train")
    if ic15 is not None:  # the shared folder, where present: these four are all it holds outside printable ASCII
        gt = en_dev.read_gt(ic15)
        assert {k: v for k, v in gt.items() if not (v.isascii() and v.isprintable())} == en_dev.IC15_NON_ASCII


def test_the_english_recipe_validates_on_both_sets_in_both_protocols():
    cfg = load_config("configs/shipped_en.yaml", [])
    assert cfg.data.val == [str(en_dev.DEFAULT_OUT), str(en_dev.IC15_OUT)] == ["data/en_dev", "data/ic15_dev"]
    assert cfg.train.protocol == "exact" and cfg.train.extra_protocols == ["alnum-insensitive"]


def _fake_ic15(root: Path) -> Path:
    """ic15_train with a trainable crop, one of its non-ASCII labels and two development crops; their list."""
    (root / "ic15_train" / "IMG").mkdir(parents=True)
    rows, gt = ["folder\timage\tlabel\tsha256"], []
    for n, word in ((1115, "WE\u00b4RE"), (4000, "EXIT"), (4001, "Commune"), (4002, "ACTION")):
        image = f"IMG/word_{n}.png"
        (root / "ic15_train" / image).write_bytes(render_png(word))
        gt.append(f"{image}\t{word}\n")
        if n > 4000:
            rows.append(f"ic15_train\t{image}\t{word}\t{en_dev.file_hash(root / 'ic15_train' / image)}")
    (root / "ic15_train" / "gt.txt").write_text("".join(gt), encoding="utf-8")
    (root / "ic15_dev.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root / "ic15_dev.tsv"


def test_one_command_builds_both_sets_and_refuses_a_changed_ic15(tmp_path, monkeypatch, capsys):
    shared, listed = _fake_shared(tmp_path / "fake_shared")
    ic15_list = _fake_ic15(shared)
    monkeypatch.setattr(en_dev, "SETS", {"en_dev": en_dev.DevSet(listed, en_dev.FOLDERS, tmp_path / "en"),
                                         "ic15_dev": en_dev.DevSet(ic15_list, ("ic15_train",), tmp_path / "ic15")})
    assert en_dev.main(["--shared", str(shared)]) == 0
    assert capsys.readouterr().out == f"{tmp_path / 'en'}: 4 crops (gt.txt)\n{tmp_path / 'ic15'}: 2 crops (gt.txt)\n"
    assert (tmp_path / "ic15" / "gt.txt").read_text(encoding="utf-8") == (
        "ic15_train/IMG/word_4001.png\tCommune\nic15_train/IMG/word_4002.png\tACTION\n")
    assert json.loads((tmp_path / "ic15" / "manifest.json").read_text(encoding="utf-8"))["set"] == "ic15_dev"
    (shared / "ic15_train/IMG/word_4002.png").write_bytes(render_png("ACTlON"))
    assert en_dev.main(["--shared", str(shared), "--set", "ic15_dev", "--force"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "1 of 2 crops differ (ic15_train/IMG/word_4002.png: the file is not the listed one" in err
    assert (tmp_path / "ic15" / "gt.txt").is_file()  # the set built before is left as it was
    with pytest.raises(SystemExit) as e:
        en_dev.main(["--out", str(tmp_path / "x")])
    assert e.value.code == 2
    assert "--out names one set's folder: add --set en_dev or --set ic15_dev" in capsys.readouterr().err


def test_trainable_ic15_crops_leave_the_block_out_and_keep_labels_as_published(tmp_path):
    shared, _ = _fake_shared(tmp_path / "fake_shared")
    ic15_list = _fake_ic15(shared)
    out = en_dev.build_trainable(tmp_path / "train", shared, list_file=ic15_list, sources=("ic15_train",))
    assert (out / "gt.txt").read_text(encoding="utf-8") == (
        "ic15_train/IMG/word_1115.png\tWE\u00b4RE\nic15_train/IMG/word_4000.png\tEXIT\n")
    assert [label for _, label in open_dataset(out, Charset.from_spec("printable95"))] == ["EXIT"]
    with pytest.raises(en_dev.DevSetError, match="^other_train: no development rule for this folder"):
        en_dev.build_trainable(tmp_path / "train2", shared, sources=("other_train",))
    assert not (tmp_path / "train2").exists()


def test_the_shared_ic15_crops_are_still_the_listed_ones():
    ic15 = shared_dataset("ic15_train")
    if ic15 is None:
        pytest.skip("needs the shared real crops ic15_train ($CRNN_SHARED_DATA)")
    en_dev.check_shared(ic15.parent, en_dev.dev_crops(en_dev.IC15_LIST_FILE))
