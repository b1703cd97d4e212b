"""scripts/word_frequencies.py: the frequency list the word prior reads, written from wordfreq (a stand-in module
here: crnn does not depend on wordfreq), and its refusals."""
from __future__ import annotations

import importlib.util
import sys
import types

import pytest

from crnn.infer import read_word_list
from tests.conftest import REPO


@pytest.fixture()
def script():
    spec = importlib.util.spec_from_file_location("word_frequencies", REPO / "scripts" / "word_frequencies.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def fake_wordfreq(monkeypatch, freqs: dict[str, float]) -> None:
    mod = types.ModuleType("wordfreq")

    def top_n_list(lang, n, wordlist="best"):
        if lang != "en":
            raise LookupError(f"No wordlist {wordlist!r} available for language {lang!r}")
        return sorted(freqs, key=freqs.get, reverse=True)[:n]

    mod.top_n_list = top_n_list
    mod.word_frequency = lambda word, lang, wordlist="best": freqs[word]
    monkeypatch.setitem(sys.modules, "wordfreq", mod)


def test_writes_a_to_z_words_with_counts_per_billion_that_the_word_prior_reads(script, monkeypatch, tmp_path):
    fake_wordfreq(monkeypatch, {"the": 0.05, "The": 0.001, "café": 0.01, "don't": 0.002, "2nd": 0.001,
                                "zyzzyva": 1e-12, "cat": 1e-5})
    out = tmp_path / "sub" / "freq.tsv"
    assert script.main([str(out)]) == 0
    assert out.read_text() == "the\t51000000\ncat\t10000\nzyzzyva\t1\n"  # forms add up; a count is at least 1
    words = read_word_list(out)
    assert words.entries == {"the", "cat", "zyzzyva"} and words.log10_counts is not None
    assert script.main([str(tmp_path / "two.tsv"), "--top", "2"]) == 0
    assert (tmp_path / "two.tsv").read_text() == "the\t50000000\n"  # of the two most frequent, one is a-z


def test_refusals_write_nothing(script, monkeypatch, tmp_path, capsys):
    out = tmp_path / "freq.tsv"
    monkeypatch.setitem(sys.modules, "wordfreq", None)  # not installed
    assert script.main([str(out)]) == 1
    assert "needs wordfreq, which crnn does not depend on: pip install wordfreq" in capsys.readouterr().err
    fake_wordfreq(monkeypatch, {"the": 0.05, "2nd": 0.01})
    assert script.main([str(out), "--lang", "xx"]) == 1
    assert "wordfreq has no large list for 'xx'" in capsys.readouterr().err
    assert not out.exists()
    fake_wordfreq(monkeypatch, {"2nd": 0.01, "l'eau": 0.01})
    assert script.main([str(out)]) == 1
    assert "lists no a-z words for 'en'; nothing written" in capsys.readouterr().err
    assert not out.exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(SystemExit):
        script.main([str(out), "--top", "0"])
