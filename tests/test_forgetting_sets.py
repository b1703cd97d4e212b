"""tools/forgetting_sets.py and tools/forgetting_table.py: held-out sets split and warped reproducibly, locked
slices kept out until asked for, and the table's paired differences against the base."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from crnn.charset import Charset
from crnn.config import Config
from crnn.data.datasets import open_dataset
from crnn.data.lmdb_io import READERS
from crnn.engine.checkpoint import model_checkpoint, save_checkpoint
from crnn.model import build_model

REPO = Path(__file__).resolve().parent.parent


def _script(name: str):
    """Import tools/<name>.py as a module (tools/ is not a package)."""
    sys.path.insert(0, str(REPO / "tools"))
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _folder(root: Path, name: str, labels: list[str]) -> None:
    """A gt.txt folder of dark bars on light grounds, one width per crop."""
    d = root / name
    (d / "IMG").mkdir(parents=True)
    lines = []
    for i, label in enumerate(labels):
        arr = np.full((32, 60 + 10 * i, 3), 220, np.uint8)
        arr[8:24, 6:-6] = 20
        Image.fromarray(arr).save(d / "IMG" / f"{i}.jpg")
        lines.append(f"IMG/{i}.jpg\t{label}")
    (d / "gt.txt").write_text("\n".join(lines) + "\n")


@pytest.fixture()
def real(tmp_path: Path) -> Path:
    root = tmp_path / "real_crops"
    _folder(root, "svt_train", [f"SVT{i}" for i in range(9)])
    _folder(root, "iiit5k_train", [f"word{i}" for i in range(4)])
    return root


def _raw(path: Path) -> list[tuple[bytes, bytes]]:
    """Every key and value of an LMDB (through the process's one handle per path)."""
    with READERS.borrow(path) as env, env.begin() as txn:
        return sorted((bytes(k), bytes(v)) for k, v in txn.cursor())


def test_sets_split_warp_and_repeat_byte_for_byte(real: Path, tmp_path: Path, capsys) -> None:
    mod = _script("forgetting_sets")
    assert mod.main(["--data", str(real), "--out", str(tmp_path / "a")]) == 0
    assert mod.main(["--data", str(real), "--out", str(tmp_path / "b")]) == 0
    manifest = json.loads((tmp_path / "a" / "sets.json").read_text())
    sets = {s["name"]: s for s in manifest["sets"]}
    assert set(sets) == {f"{h}{w}" for h in ("svt_dev", "svt_lock", "iiit5k") for w in ("", "_perspective", "_curve")}
    assert [sets[n]["samples"] for n in ("svt_dev", "svt_lock", "iiit5k")] == [5, 4, 4]
    assert [sets[n]["samples"] for n in ("svt_dev_curve", "svt_lock_perspective")] == [15, 12]  # 3 warp draws
    assert {n for n, s in sets.items() if s["locked"]} == {"svt_lock", "svt_lock_perspective", "svt_lock_curve"}
    assert {n for n, s in sets.items() if s["seen_by_base"]} == {"iiit5k", "iiit5k_perspective", "iiit5k_curve"}
    labels = {n: [open_dataset(tmp_path / "a" / f"{n}.lmdb")[i][1] for i in range(sets[n]["samples"])] for n in sets}
    assert sorted(labels["svt_dev"] + labels["svt_lock"], key=lambda t: int(t[3:])) == [f"SVT{i}" for i in range(9)]
    assert labels["svt_dev_curve"] == labels["svt_dev"] * 3 and labels["iiit5k_perspective"] == labels["iiit5k"] * 3
    straight, bent = open_dataset(tmp_path / "a" / "svt_dev.lmdb")[0][0], open_dataset(tmp_path / "a" /
                                                                                     "svt_dev_curve.lmdb")[0][0]
    assert straight.size[0] == bent.size[0] and bent.size[1] > straight.size[1]  # the arc makes it taller
    for n in sets:  # same data and seed: same bytes
        assert _raw(tmp_path / "a" / f"{n}.lmdb") == _raw(tmp_path / "b" / f"{n}.lmdb"), n
    assert mod.main(["--data", str(real), "--out", str(tmp_path / "c"), "--seed", "5"]) == 0
    other = [open_dataset(tmp_path / "c" / "svt_lock.lmdb")[i][1] for i in range(4)]
    assert other != labels["svt_lock"]  # the seed decides the split


def test_warped_sets_hold_several_draws_the_first_is_the_one_draw_set(real: Path, tmp_path: Path, capsys) -> None:
    mod = _script("forgetting_sets")
    assert mod.main(["--data", str(real), "--out", str(tmp_path / "one"), "--draws", "1"]) == 0
    assert mod.main(["--data", str(real), "--out", str(tmp_path / "three")]) == 0  # default: 3 draws
    three = json.loads((tmp_path / "three" / "sets.json").read_text())
    sets = {s["name"]: s for s in three["sets"]}
    assert three["draws"] == 3 and sets["svt_dev"]["samples"] == 5 and sets["svt_dev"]["draws"] == 1
    assert sets["svt_dev_perspective"]["samples"] == 15 and sets["iiit5k_curve"]["samples"] == 12
    one, many = (open_dataset(tmp_path / d / "svt_dev_perspective.lmdb") for d in ("one", "three"))
    pix = lambda ds, i: np.asarray(ds[i][0])  # noqa: E731
    assert all(np.array_equal(pix(one, i), pix(many, i)) for i in range(5))  # draw 0 = the one-draw set
    assert [many[i][1] for i in range(15)] == [one[i][1] for i in range(5)] * 3
    assert not all(pix(many, i).shape == pix(many, i + 5).shape and np.array_equal(pix(many, i), pix(many, i + 5))
                   for i in range(5))  # draw 1 is another warp of the same crops
    capsys.readouterr()
    assert mod.main(["--data", str(real), "--out", str(tmp_path / "one")]) == 1  # 1-draw sets are not mixed in
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "holds sets of seed 33 with 1 draw(s); write seed 33 with 3 draw(s) " \
        "into another --out" in err


def test_missing_real_crops_is_a_one_line_error_and_nothing_written(tmp_path: Path, capsys) -> None:
    mod = _script("forgetting_sets")
    assert mod.main(["--data", str(tmp_path / "none"), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "svt_train/gt.txt not found; pass --data FOLDER" in err
    assert not (tmp_path / "out").exists()


def _tiny_checkpoint(path: Path, alphabet: str) -> Path:
    """A seeded, untrained vgg_small (hidden 16) of ``alphabet``, saved as the trainer saves one."""
    cs = Charset.from_spec(alphabet)
    cfg = Config()
    cfg.model.hidden = 16
    torch.manual_seed(0)
    save_checkpoint(model_checkpoint(build_model("vgg_small", 1, cs.num_classes, 16), cfg, cs), path)
    return path


def test_table_differences_are_paired_against_the_first_model(real: Path, tmp_path: Path, capsys) -> None:
    """The same weights twice: every difference 0 with nothing lost or gained; the locked slice only with
    --unlock; an extra set with its own protocol."""
    _script("forgetting_sets").main(["--data", str(real), "--out", str(tmp_path / "sets")])
    capsys.readouterr()
    ckpt = _tiny_checkpoint(tmp_path / "m.pt", "alnum36")
    table = _script("forgetting_table")
    out = tmp_path / "t.json"
    args = ["--sets", str(tmp_path / "sets"), "--weights", f"base={ckpt}", "--weights", f"again={ckpt}",
            "--extra", f"codes={real / 'svt_train'}:exact", "--cache", str(tmp_path / "cache.json"), "--out", str(out)]
    assert table.main(args) == 0
    res = json.loads(out.read_text())
    names = [s["name"] for s in res["sets"]]
    assert "svt_lock" not in names and "svt_dev" in names and names[-1] == "codes"
    again = res["rows"][1]["cells"]
    assert all(c["delta"] == 0 and c["lost"] == 0 and c["gained"] == 0 for c in again.values())
    assert res["sets"][-1]["protocol"] == "exact"
    printed = capsys.readouterr().out
    assert printed.splitlines()[0].startswith("| model | svt_dev (5) |") and "| again | " in printed
    assert table.main([*args, "--unlock"]) == 0
    assert "svt_lock" in [s["name"] for s in json.loads(out.read_text())["sets"]]
    b = [True, True, False, False]
    assert table.score(["A-1", "b", "c", ""], ["a1", "B", "x", "d"], "alnum-insensitive") == b


def test_one_folder_and_its_warps_nothing_locked(real: Path, tmp_path: Path, capsys) -> None:
    """--folder: one set the base never trained on (the English development set) and its warps, the same bytes from
    the same seed; an --out holding other sets is refused, --name without --folder too."""
    mod = _script("forgetting_sets")
    _folder(tmp_path, "en_dev", ["Hello", "WORLD", "24h", "Caf3", "no."])
    for out in ("a", "b"):
        assert mod.main(["--folder", str(tmp_path / "en_dev"), "--out", str(tmp_path / out)]) == 0
    manifest = json.loads((tmp_path / "a" / "sets.json").read_text())
    sets = {s["name"]: s for s in manifest["sets"]}
    assert list(sets) == ["en_dev", "en_dev_perspective", "en_dev_curve"]
    assert [s["samples"] for s in sets.values()] == [5, 15, 15] and manifest["draws"] == 3
    assert not any(s["locked"] or s["seen_by_base"] for s in sets.values())
    labels = {n: [open_dataset(tmp_path / "a" / f"{n}.lmdb")[i][1] for i in range(s["samples"])]
              for n, s in sets.items()}
    assert labels["en_dev"] == ["Hello", "WORLD", "24h", "Caf3", "no."]
    assert labels["en_dev_curve"] == labels["en_dev"] * 3
    for n in sets:
        assert _raw(tmp_path / "a" / f"{n}.lmdb") == _raw(tmp_path / "b" / f"{n}.lmdb"), n
    straight = open_dataset(tmp_path / "a" / "en_dev.lmdb")[1][0]
    assert np.array_equal(np.asarray(straight), np.asarray(Image.open(tmp_path / "en_dev" / "IMG" / "1.jpg")))
    assert mod.main(["--folder", str(tmp_path / "en_dev"), "--name", "dev", "--out", str(tmp_path / "c"),
                     "--draws", "1"]) == 0
    assert [s["name"] for s in json.loads((tmp_path / "c" / "sets.json").read_text())["sets"]] == [
        "dev", "dev_perspective", "dev_curve"]
    capsys.readouterr()
    assert mod.main(["--data", str(real), "--out", str(tmp_path / "a")]) == 1  # svt/iiit5k sets beside en_dev's
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "holds other sets (en_dev, en_dev_curve, en_dev_perspective); write these " \
        "into another --out" in err
    with pytest.raises(SystemExit):
        mod.main(["--name", "x", "--out", str(tmp_path / "d")])
    assert not (tmp_path / "d").exists()


def test_table_scores_a_set_under_two_protocols_from_one_reading(real: Path, tmp_path: Path, capsys) -> None:
    """--protocol exact --protocol alnum-insensitive: every set of --sets twice (NAME@PROTOCOL), an extra under
    ':exact,alnum-insensitive' likewise, each read once; worst vs base over the yardsticks, not the new text."""
    mod = _script("forgetting_sets")
    _folder(tmp_path, "en_dev", ["Hello", "WORLD"])
    assert mod.main(["--folder", str(tmp_path / "en_dev"), "--out", str(tmp_path / "sets"), "--draws", "1"]) == 0
    table = _script("forgetting_table")
    sets = table.load_sets(str(tmp_path / "sets"), False, [f"codes={real / 'svt_train'}:exact",
                                                           f"seen={real / 'iiit5k_train'}:exact,alnum-insensitive",
                                                           f"plain={real / 'iiit5k_train'}"],
                           ["exact", "alnum-insensitive"])
    assert [(s["name"], s["protocol"], s["yardstick"]) for s in sets] == [
        ("en_dev@exact", "exact", True), ("en_dev@alnum-insensitive", "alnum-insensitive", True),
        ("en_dev_perspective@exact", "exact", True),
        ("en_dev_perspective@alnum-insensitive", "alnum-insensitive", True),
        ("en_dev_curve@exact", "exact", True), ("en_dev_curve@alnum-insensitive", "alnum-insensitive", True),
        ("codes", "exact", False), ("seen@exact", "exact", False),
        ("seen@alnum-insensitive", "alnum-insensitive", False), ("plain", "alnum-insensitive", True)]
    assert [s["name"] for s in table.load_sets(str(tmp_path / "sets"), False, [])][:1] == ["en_dev"]  # as before
    with pytest.raises(SystemExit, match="unknown metric protocol 'exakt'"):
        table.load_sets(None, False, [f"x={real / 'svt_train'}:exakt"])
    ckpt = _tiny_checkpoint(tmp_path / "m.pt", "printable95")
    out = tmp_path / "t.json"
    capsys.readouterr()
    assert table.main(["--sets", str(tmp_path / "sets"), "--protocol", "exact", "--protocol", "alnum-insensitive",
                       "--weights", f"base={ckpt}", "--weights", f"again={ckpt}", "--extra",
                       f"codes={real / 'svt_train'}:exact", "--cache", str(tmp_path / "cache.json"),
                       "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0].startswith("| model | en_dev@exact (2) | en_dev@alnum-insensitive (2) |")
    assert captured.err.count(": en_dev@exact read") == 1 and "en_dev@alnum-insensitive read" not in captured.err
    assert captured.err.count(": codes read") == 1  # one reading of each set, whatever the protocols
    res = json.loads(out.read_text())
    assert len(res["rows"][1]["cells"]) == 7 and res["sets"][-1]["protocol"] == "exact"
    ok = {True: [True, False], False: [False, False]}
    preds, labels = ["hello", "WORLD!"], ["Hello", "WORLD"]
    assert table.score(preds, labels, "exact") == ok[False] and table.score(preds, labels, "alnum-insensitive") == [
        True, True]
    assert table.markdown({"sets": [{"name": "y", "protocol": "exact", "yardstick": True},
                                    {"name": "t", "protocol": "exact", "yardstick": False}],
                           "rows": [{"name": "base", "cells": {"y": {"acc": 50.0, "ok": ok[True]},
                                                               "t": {"acc": 0.0, "ok": ok[False]}}},
                                    {"name": "m", "cells": {"y": {"acc": 0.0, "delta": -50.0, "ok": ok[False]},
                                                            "t": {"acc": 50.0, "delta": -60.0, "ok": ok[True]}}}]}
                          ).splitlines()[-1].endswith("| -50.0 |")  # the new text's cell does not count
