import pytest
import torch

from crnn.charset import BUILTIN_CHARSETS, Charset, CharsetError


def test_builtins_and_blank():
    assert len(Charset.from_spec("digits")) == 10
    assert len(Charset.from_spec("alnum36")) == 36
    assert len(Charset.from_spec("printable94")) == 94
    cs = Charset.from_spec("alnum36")
    assert cs.num_classes == 37
    assert cs.index["0"] == 1  # blank is 0
    assert set(BUILTIN_CHARSETS) == {"digits", "alnum36", "printable94", "printable95", "zh_gb2312", "zh_gb2312_trad"}


def test_encode_decode_roundtrip():
    cs = Charset("abc")
    targets, lengths = cs.encode(["ab", "cab", ""])
    assert targets.tolist() == [1, 2, 3, 1, 2]
    assert lengths.tolist() == [2, 3, 0]
    assert targets.dtype == lengths.dtype == torch.long
    assert cs.decode([1, 0, 2, 99, 3]) == "abc"


def test_lowercase_auto_and_explicit():
    assert Charset.from_spec("alnum36").normalize("HeLLo") == "hello"
    cs = Charset.from_spec("printable94")
    assert not cs.lowercase and cs.normalize("HeLLo") == "HeLLo"
    assert Charset.from_spec("printable94", lowercase=True).normalize("AB") == "ab"


def test_unknown_policies_are_counted_never_keyerror():
    reject = Charset("abc", unknown="reject")
    assert reject.normalize("abz") is None
    assert reject.stats["rejected_unknown"] == 1
    with pytest.raises(ValueError, match="outside the alphabet"):
        reject.encode(["az"])
    drop = Charset("abc", unknown="drop")
    assert drop.normalize("a-b!c") == "abc"
    assert drop.stats["dropped_chars"] == 2
    assert drop.encode(["azb"])[0].tolist() == [1, 2]


def test_from_file_one_per_line_and_one_line(tmp_path):
    f1 = tmp_path / "a.txt"
    f1.write_text("x\ny\nz\n", encoding="utf-8")
    assert Charset.from_spec(str(f1)).chars == "xyz"
    f2 = tmp_path / "b.txt"
    f2.write_text("0123456789\n", encoding="utf-8")
    assert Charset.from_spec(str(f2)).chars == "0123456789"


def test_invalid_alphabets():
    with pytest.raises(CharsetError, match="empty"):
        Charset("")
    with pytest.raises(CharsetError, match="repeats"):
        Charset("abca")
    with pytest.raises(CharsetError, match="policy"):
        Charset("abc", unknown="ignore")


def test_dict_roundtrip():
    cs = Charset.from_spec("printable94", unknown="drop")
    assert Charset.from_dict(cs.to_dict()) == cs


def test_full_width_forms_fold_to_the_alphabets_half_width_ones():
    cs = Charset("中文 ,AB")
    assert cs.normalize("中文\u3000ＡＢ，") == "中文 AB,"
    assert cs.normalize("中文！") is None  # '!' is not in the alphabet either: still rejected
    zh = Charset.from_spec("zh_gb2312")
    assert zh.normalize("模型，训练　ＯＣＲ") == "模型，训练 OCR"  # '，' is in zh_gb2312 itself and stays
    assert Charset.from_spec("alnum36").normalize("ＡＢ１") == "ab1"
