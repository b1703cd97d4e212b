"""Recognition metrics: edit distance, protocols, accumulator and its state tensor."""
import random

import pytest
import torch

from crnn.metrics import RecognitionMetrics, edit_distance, normalize_text


def reference_distance(a, b) -> int:
    """Full-matrix Levenshtein, written independently of the library version."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
    return d[-1][-1]


@pytest.mark.parametrize("a, b, expected", [
    ("kitten", "sitting", 3), ("", "abc", 3), ("abc", "", 3), ("", "", 0), ("same", "same", 0),
    ("flaw", "lawn", 2), ("abcab", "abab", 1), ("aaa", "aaaa", 1), ([1, 2, 3], [1, 3], 1),
])
def test_edit_distance_known_values(a, b, expected):
    assert edit_distance(a, b) == expected
    assert edit_distance(b, a) == expected


def test_edit_distance_matches_reference_on_random_strings():
    rng = random.Random(0)
    for _ in range(300):
        a = "".join(rng.choice("abc") for _ in range(rng.randint(0, 8)))
        b = "".join(rng.choice("abc") for _ in range(rng.randint(0, 8)))
        assert edit_distance(a, b) == reference_distance(a, b) == edit_distance(b, a), (a, b)


def test_normalize_text_protocols():
    assert normalize_text("Hello, World-42!", "exact") == "Hello, World-42!"
    assert normalize_text("Hello, World-42!", "alnum-insensitive") == "helloworld42"
    assert normalize_text("Café", "alnum-insensitive") == "caf"
    with pytest.raises(ValueError, match="exact, alnum-insensitive"):
        normalize_text("x", "case-insensitive")
    with pytest.raises(ValueError, match="alnum-insensitive"):
        RecognitionMetrics("nope")


def test_accumulator_counts_and_rates():
    m = RecognitionMetrics()
    m.update(["hello", "wrld", "", "abc"], ["hello", "world", "", "xyz"])
    assert (m.samples, m.correct, m.edits, m.label_chars) == (4, 2, 4, 13)
    out = m.compute()
    assert set(out) == {"samples", "word_acc", "cer", "ned_similarity"}
    assert out["samples"] == 4
    assert out["word_acc"] == pytest.approx(0.5)
    assert out["cer"] == pytest.approx(4 / 13)
    assert out["ned_similarity"] == pytest.approx(1 - (0 + 1 / 5 + 0 + 3 / 3) / 4)


def test_protocol_applies_before_comparing():
    preds, labels = ["hello", "it's"], ["Hello!", "ITS"]
    assert RecognitionMetrics("exact").compute()["samples"] == 0
    exact = RecognitionMetrics("exact")
    exact.update(preds, labels)
    loose = RecognitionMetrics("alnum-insensitive")
    loose.update(preds, labels)
    assert exact.compute()["word_acc"] == 0.0
    assert loose.compute() == {"samples": 2, "word_acc": 1.0, "cer": 0.0, "ned_similarity": 1.0}
    assert loose.label_chars == 8  # "hello" + "its"


def test_empty_accumulator_and_length_mismatch():
    m = RecognitionMetrics()
    assert m.compute() == {"samples": 0, "word_acc": 0.0, "cer": 0.0, "ned_similarity": 0.0}
    with pytest.raises(ValueError, match="2 predictions for 1 labels"):
        m.update(["a", "b"], ["a"])


def test_state_tensors_merge_like_one_accumulator():
    rng = random.Random(3)
    labels = ["".join(rng.choice("ab1") for _ in range(rng.randint(0, 6))) for _ in range(60)]
    preds = [lab if rng.random() < 0.4 else lab[::-1] + rng.choice(["", "a"]) for lab in labels]
    whole = RecognitionMetrics()
    whole.update(preds, labels)
    left, right = RecognitionMetrics(), RecognitionMetrics()
    left.update(preds[:25], labels[:25])
    right.update(preds[25:], labels[25:])
    state = left.state_tensor() + right.state_tensor()
    assert state.dtype == torch.float64 and state.dim() == 1
    merged = RecognitionMetrics.from_state_tensor(state)
    assert merged.compute() == pytest.approx(whole.compute())
    assert merged.compute()["samples"] == 60
    left.load_state_tensor(state)
    assert left.compute() == pytest.approx(whole.compute())
    with pytest.raises(ValueError, match="state tensor"):
        left.load_state_tensor(torch.zeros(3))


def test_keep_errors_returns_worst_first():
    m = RecognitionMetrics(keep_errors=2)
    m.update(["ok", "ab", "xyzw", "qq", "cd"], ["ok", "ac", "abcd", "ab", "ce"])
    assert m.errors() == [("abcd", "xyzw", 4), ("ab", "qq", 2)]
    assert RecognitionMetrics().errors() == []
    ties = RecognitionMetrics(keep_errors=1)
    ties.update(["x", "y", "z"], ["a", "b", "c"])
    assert ties.errors() == [("a", "x", 1)]  # equal distances: the earliest is kept


def test_merge_adds_counts_and_errors():
    a, b = RecognitionMetrics(keep_errors=3), RecognitionMetrics(keep_errors=3)
    a.update(["x", "abc"], ["y", "abc"])
    b.update(["zzzz", "ab"], ["a", "ab"])
    a.merge(b)
    assert a.compute()["samples"] == 4 and a.correct == 2
    assert a.errors() == [("a", "zzzz", 4), ("y", "x", 1)]
    with pytest.raises(ValueError, match="protocol"):
        a.merge(RecognitionMetrics("alnum-insensitive"))


def test_unicode_protocol_folds_width_and_whitespace():
    assert normalize_text("　ＡＢＣ１２３，中文　 识别 ", "unicode") == "ABC123,中文 识别"
    assert normalize_text("中文识别", "alnum-insensitive") == ""  # why alnum-insensitive is wrong for Chinese
    m = RecognitionMetrics("unicode")
    m.update(["ＡＢ 中文"], ["AB　中文"])
    assert m.compute()["word_acc"] == 1.0


def test_auto_protocol_follows_the_alphabet():
    from crnn.charset import BUILTIN_CHARSETS
    from crnn.metrics import cer_first, resolve_protocol

    assert resolve_protocol("auto", BUILTIN_CHARSETS["alnum36"]) == "alnum-insensitive"
    for name in ("zh_gb2312", "printable94", "digits"):
        assert resolve_protocol("auto", BUILTIN_CHARSETS[name]) == "exact"
        assert cer_first(BUILTIN_CHARSETS[name])
    assert resolve_protocol("unicode", BUILTIN_CHARSETS["alnum36"]) == "unicode"
    assert not cer_first(BUILTIN_CHARSETS["alnum36"])
    with pytest.raises(ValueError, match="unknown metric protocol"):
        resolve_protocol("loose", "abc")


def test_empty_predictions_score_zero_on_chinese_labels_by_default():
    from crnn.charset import BUILTIN_CHARSETS
    from crnn.metrics import protocol_warning, resolve_protocol

    labels = ["中文识别", "训练数据", "模型123"]
    honest = RecognitionMetrics(resolve_protocol("auto", BUILTIN_CHARSETS["zh_gb2312"]))
    honest.update([""] * 3, labels)
    assert honest.compute() == {"samples": 3, "word_acc": 0.0, "cer": 1.0, "ned_similarity": 0.0}
    assert honest.removed_share() == 0.0 and protocol_warning(honest.protocol, honest.removed_share()) is None
    blind = RecognitionMetrics("alnum-insensitive")  # the old default: a dead model looked nearly perfect
    blind.update([""] * 3, labels)
    assert blind.compute()["word_acc"] == pytest.approx(2 / 3)
    assert blind.removed_share() == pytest.approx(10 / 13)  # only "123" survives
    warning = protocol_warning("alnum-insensitive", blind.removed_share(), "zh.lmdb")
    assert "'alnum-insensitive' removed 76.9% of the label characters on zh.lmdb" in warning
    assert protocol_warning("alnum-insensitive", 0.10) is None


def test_removed_share_survives_the_state_tensor():
    m = RecognitionMetrics("alnum-insensitive")
    m.update(["ab"], ["a-b中"])
    again = RecognitionMetrics.from_state_tensor(m.state_tensor(), protocol="alnum-insensitive")
    assert again.removed_share() == m.removed_share() == pytest.approx(0.5)


def test_display_width_pads_wide_characters():
    from crnn.metrics import display_width, ljust_display

    assert display_width("中文ab") == 6 and display_width("ＡＢ") == 4 and display_width("e\u0301") == 1
    assert display_width(ljust_display("中文", 8)) == display_width(ljust_display("abcd", 8)) == 8
    assert ljust_display("中文识别模型", 4) == "中文识别模型"


def test_log_line_names_the_similarity_1_ned():
    """A model that reads nothing logs '1-NED 0.0000' (a similarity), never 'NED 0.0000' (which reads as perfect)."""
    from crnn.metrics import format_rates

    m = RecognitionMetrics()
    m.update(["", ""], ["ab", "c"])
    line = format_rates(m.compute(), lead_with_cer=False)
    assert line == "acc 0.0000  CER 1.0000  1-NED 0.0000"
    assert format_rates(m.compute(), lead_with_cer=True).startswith("CER 1.0000")
