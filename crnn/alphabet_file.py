"""Alphabet files as other CRNN repositories ship them: the one place they are read.

Accepted: one character per line or the whole alphabet on one line; UTF-8 with or without BOM, UTF-16 with BOM,
GB18030 / GBK (detected when the bytes are not UTF-8, or named explicitly); CRLF line ends; trailing whitespace;
a first line ``blank`` (the CTC blank placeholder of Sierkinhane/CRNN_Chinese_Characters_Rec and YCG09/chinese_ocr,
e.g. their GB18030 ``char_std_5990.txt``); a line holding exactly one whitespace character means that character
(one space = the space). Errors are :class:`AlphabetFileError` naming the file and, where it helps, the line.
"""
from __future__ import annotations

import codecs
import logging
import os
import re
from dataclasses import dataclass

log = logging.getLogger("crnn")

BLANK_PLACEHOLDERS = ("blank", "<blank>", "[blank]")
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_PATH_SUFFIX = re.compile(r"\.(txt|text|csv|tsv|dict|dic|list|lst|chars|charset|alphabet|keys|vocab)$", re.I)
_PATH_PREFIXES = ("/", "./", "../", "~", ".\\", "..\\")


class AlphabetFileError(ValueError):
    """An alphabet file that cannot be read (the message names the file)."""


@dataclass
class AlphabetFile:
    """A parsed alphabet file.

    ``lines``: every line of the file after decoding and whitespace rules, index = 0-based line number (line 0 is the
    placeholder ``blank`` when the file has one; empty lines stay as ``""``) - the numbering that index label files and
    other repositories' output layers use. ``chars``: the alphabet, in file order, placeholder and empty lines left out.
    """

    path: str
    encoding: str
    lines: list[str]
    chars: str
    has_blank: bool


def looks_like_path(spec: str) -> bool:
    """True when a charset spec is meant as a file name (so a missing file is an error, not a literal alphabet)."""
    if _PATH_SUFFIX.search(spec) or spec.startswith(_PATH_PREFIXES) or re.match(r"^[A-Za-z]:[\\/]", spec):
        return True
    has_sep = "/" in spec or "\\" in spec
    return has_sep and len(set(spec)) < len(spec)  # a literal alphabet never repeats a character


def decode_bytes(data: bytes, path: str, encoding: str = "auto") -> tuple[str, str]:
    """(text, encoding used): a BOM wins, then UTF-8, then GB18030; an explicit ``encoding`` is used as given."""
    if encoding != "auto":
        try:
            codecs.lookup(encoding)
        except LookupError:
            raise AlphabetFileError(f"{path}: unknown encoding {encoding!r} (e.g. auto, utf-8, gb18030, gbk, utf-16)")
        try:
            return data.decode(encoding).lstrip("\ufeff"), encoding
        except UnicodeDecodeError as e:
            raise AlphabetFileError(f"{path}: not valid {encoding} at byte {e.start} ({e.reason}); "
                                    f"try encoding auto") from None
    for bom, name in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(name).lstrip("\ufeff"), name
            except UnicodeDecodeError as e:
                raise AlphabetFileError(f"{path}: starts with a {name} byte-order mark but is not valid {name} "
                                        f"at byte {e.start}") from None
    if b"\x00" in data:
        raise AlphabetFileError(f"{path}: contains NUL bytes (UTF-16/32 without a byte-order mark?); "
                                f"name the encoding explicitly, e.g. utf-16-le")
    for name in ("utf-8", "gb18030"):
        try:
            return data.decode(name), name
        except UnicodeDecodeError:
            continue
    raise AlphabetFileError(f"{path}: neither UTF-8 nor GB18030/GBK text; name its encoding explicitly")


def _clean_line(raw: str) -> str:
    """Apply the whitespace rules to one line: trailing whitespace goes, a lone whitespace character stays."""
    if len(raw) == 1:
        return raw  # one space (or U+3000, or a tab) on a line is that character
    return raw.rstrip()


def parse_alphabet_text(text: str, path: str, encoding: str = "") -> AlphabetFile:
    """Parse decoded alphabet text (see the module docstring for the rules)."""
    pieces = re.split(r"\r\n|\r|\n", text)
    if pieces and pieces[-1] == "":
        pieces.pop()  # the final line end
    lines = [_clean_line(ln) for ln in pieces]
    has_blank = bool(lines) and lines[0].strip().lower() in BLANK_PLACEHOLDERS
    body = [(i, ln) for i, ln in enumerate(lines) if ln != "" and not (i == 0 and has_blank)]
    if not body:
        raise AlphabetFileError(f"{path}: the alphabet file holds no characters")
    if len(body) == 1 and not has_blank:  # the whole alphabet on one line (a space inside it is the space)
        chars = body[0][1]
    else:
        long = [(i, ln) for i, ln in body if len(ln) != 1]
        if long:
            i, ln = long[0]
            raise AlphabetFileError(f"{path}: line {i + 1} holds {ln!r} ({len(ln)} characters; {len(long)} such "
                                    f"lines); expected one character per line or the whole alphabet on one line")
        chars = "".join(ln for _, ln in body)
    _check_duplicates(chars, body, path)
    if has_blank:
        log.info("alphabet %s: first line %r is the CTC blank placeholder; skipped (%d characters)",
                 path, lines[0], len(chars))
    return AlphabetFile(path=path, encoding=encoding, lines=lines, chars=chars, has_blank=has_blank)


def _check_duplicates(chars: str, body: list[tuple[int, str]], path: str) -> None:
    """Raise naming every repeated character and its (1-based) lines."""
    if len(set(chars)) == len(chars):
        return
    where: dict[str, list[int]] = {}
    if len(body) == 1:  # single-line alphabet: report positions in the line
        for pos, c in enumerate(chars):
            where.setdefault(c, []).append(pos + 1)
        unit = "positions"
    else:
        for i, ln in body:
            where.setdefault(ln, []).append(i + 1)
        unit = "lines"
    dupes = [f"{c!r} ({unit} {', '.join(map(str, n))})" for c, n in where.items() if len(n) > 1]
    more = f" and {len(dupes) - 10} more" if len(dupes) > 10 else ""
    raise AlphabetFileError(f"{path}: the alphabet repeats {len(dupes)} character(s): {'; '.join(dupes[:10])}{more}")


def read_alphabet_file(path: str | os.PathLike, encoding: str = "auto") -> AlphabetFile:
    """Read and parse an alphabet file; ``encoding`` = auto (BOM, UTF-8, then GB18030) or a codec name."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise AlphabetFileError(f"{path}: is a directory, not an alphabet file")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise AlphabetFileError(f"alphabet file {path} not found") from None
    except OSError as e:
        raise AlphabetFileError(f"{path}: cannot read the alphabet file: {e.strerror or e}") from None
    text, used = decode_bytes(data, path, encoding)
    af = parse_alphabet_text(text, path, used)
    if used not in ("utf-8", "utf-8-sig", "ascii"):
        log.info("alphabet %s: read as %s", path, used)
    return af


def alphabet_lines(path: str | os.PathLike, encoding: str = "auto") -> list[str]:
    """The file's lines with index semantics: ``lines[i]`` is 0-based line ``i`` (line 0 = ``blank`` when present)."""
    return read_alphabet_file(path, encoding).lines
