"""Alphabet files as Chinese CRNN repositories ship them (crnn/alphabet_file.py via Charset.from_spec)."""
import logging

import pytest

from crnn.alphabet_file import alphabet_lines, looks_like_path, read_alphabet_file
from crnn.charset import BUILTIN_CHARSETS, Charset, CharsetError
from crnn.config import ConfigError, load_config

ZH = "中文识别模型训练数据集"  # 11 distinct characters


def write(path, text, encoding="utf-8", newline="\n"):
    path.write_bytes(text.replace("\n", newline).encode(encoding))
    return str(path)


def one_per_line(chars):
    return "".join(c + "\n" for c in chars)


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "gb18030", "gbk"])
def test_encodings_are_detected(tmp_path, encoding):
    path = write(tmp_path / "zh.txt", one_per_line(ZH), encoding)
    af = read_alphabet_file(path)
    assert af.chars == ZH
    assert Charset.from_spec(path).chars == ZH


def test_explicit_encoding_and_wrong_encoding(tmp_path):
    path = write(tmp_path / "zh.txt", one_per_line(ZH), "gbk")
    assert Charset.from_spec(path, encoding="gbk").chars == ZH
    with pytest.raises(CharsetError, match=r"model.charset: .*zh.txt: not valid utf-8"):
        Charset.from_spec(path, encoding="utf-8", key="model.charset")
    with pytest.raises(CharsetError, match="unknown encoding 'klingon'"):
        Charset.from_spec(path, encoding="klingon")


def test_crlf_trailing_whitespace_and_space_line(tmp_path):
    text = "中 \n文\t\n \n识\n\n别\u3000\n"  # trailing space/tab/ideographic space, a lone space, an empty line
    path = write(tmp_path / "crlf.txt", text, newline="\r\n")
    assert Charset.from_spec(path).chars == "中文 识别"
    lone_wide = write(tmp_path / "wide.txt", "中\n\u3000\n文\n")
    assert Charset.from_spec(lone_wide).chars == "中\u3000文"


def test_sierkinhane_layout_gb18030_with_blank_line(tmp_path, caplog):
    hanzi = BUILTIN_CHARSETS["zh_gb2312"][-5989:]  # a char_std_5990.txt-like file: 'blank', then 5,989 characters
    path = write(tmp_path / "char_std_5990.txt", "blank\n" + one_per_line(hanzi), "gb18030", "\r\n")
    with caplog.at_level(logging.INFO, logger="crnn"):
        cs = Charset.from_spec(path)
    assert cs.chars == hanzi and cs.num_classes == 5990
    assert "blank placeholder" in caplog.text and "gb18030" in caplog.text
    lines = alphabet_lines(path)
    assert lines[0] == "blank" and lines[1] == hanzi[0] and lines[5989] == hanzi[-1] and len(lines) == 5990


def test_single_line_alphabet_still_supported(tmp_path):
    assert Charset.from_spec(write(tmp_path / "one.txt", ZH + "\n")).chars == ZH
    assert Charset.from_spec(write(tmp_path / "sp.txt", "中 文  \r\n")).chars == "中 文"  # inner space kept


def test_duplicates_name_characters_and_lines(tmp_path):
    path = write(tmp_path / "dup.txt", "blank\n中\n文\n中\n文\n字\n")
    with pytest.raises(CharsetError, match=r"dup.txt: the alphabet repeats 2 .*'中' \(lines 2, 4\); '文' \(lines 3, 5\)"):
        Charset.from_spec(path)


def test_multi_character_line_is_an_error_naming_the_line(tmp_path):
    path = write(tmp_path / "bad.txt", "中\n文字\n识\n")
    with pytest.raises(CharsetError, match=r"bad.txt: line 2 holds '文字'"):
        Charset.from_spec(path)


def test_missing_path_is_file_not_found_not_a_literal_alphabet(tmp_path):
    for spec in [str(tmp_path / "nope.txt"), "data/char_std_5990.txt", "/t", "alphabet.TXT", "./abc"]:
        assert looks_like_path(spec)
        with pytest.raises(CharsetError, match=r"model.charset: alphabet file .* not found"):
            Charset.from_spec(spec, key="model.charset")
    for literal in ["0123456789", "0123/abc", ZH, "abc.", "+-*/"]:
        assert not looks_like_path(literal)
        assert Charset.from_spec(literal).chars == literal


def test_config_key_and_encoding_reach_the_charset(tmp_path):
    path = write(tmp_path / "zh.txt", "blank\n" + one_per_line(ZH), "gbk")
    cfg = load_config(None, [f"model.charset={path}", "model.charset_encoding=gbk"])
    assert Charset.from_config(cfg.model).chars == ZH
    with pytest.raises(ConfigError, match="model.charset_encoding: unknown encoding"):
        load_config(None, ["model.charset_encoding=nope"])
    cfg = load_config(None, [f"model.charset={tmp_path / 'missing.txt'}"])
    with pytest.raises(CharsetError, match=r"^model.charset: alphabet file .*missing.txt not found"):
        Charset.from_config(cfg.model)


def test_empty_and_undecodable_files(tmp_path):
    with pytest.raises(CharsetError, match="empty.txt: the alphabet file holds no characters"):
        Charset.from_spec(write(tmp_path / "empty.txt", "blank\n\n"))
    (tmp_path / "u16.txt").write_bytes(one_per_line(ZH).encode("utf-16-le"))
    with pytest.raises(CharsetError, match="u16.txt: contains NUL bytes"):
        Charset.from_spec(str(tmp_path / "u16.txt"))
    assert Charset.from_spec(str(tmp_path / "u16.txt"), encoding="utf-16-le").chars == ZH
