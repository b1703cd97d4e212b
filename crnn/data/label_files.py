"""Ground-truth label files in the layouts other repositories use: the one place they are parsed.

- ``tab`` (crnn's own ``gt.txt``): ``relative/path<TAB>label``.
- ``space``: ``relative/path label`` - the path ends at the first space, the rest of the line is the label
  (so labels may hold spaces; paths may not).
- ``indices`` (Sierkinhane/CRNN_Chinese_Characters_Rec): ``20455828_2605100732.jpg 263 82 29 56 ...``, each number
  a 0-based line of the alphabet file (line 0 being its ``blank`` placeholder, which no label may use).
- ``mmocr``: mmocr 1.x's ``textrecog_train.json`` (``{"metainfo": ..., "data_list": [{"img_path": ..., "instances":
  [{"text": ...}]}, ...]}``), or mmocr 0.x's JSON lines (``{"filename": ..., "text": ...}`` per line).
- ``doctr``: doctr's ``labels.json`` (``{"img_name.jpg": "label", ...}``, RecognitionDataset's layout).

The JSON layouts are read whole and numbered by entry (``FILE: entry N: reason``), the others by line.

Any text encoding Python knows (``gbk``/``gb18030`` for label files saved on Chinese Windows). Errors are
:class:`~crnn.data.datasets.DatasetError` starting ``FILE:LINE:`` and saying how to fix the line.
"""
from __future__ import annotations

import codecs
import json
import os
from dataclasses import dataclass, field

from crnn.alphabet_file import AlphabetFileError, read_alphabet_file
from crnn.data.datasets import DatasetError, parse_gt_line

GT_FORMATS = ("tab", "space", "indices", "mmocr", "doctr")
JSON_FORMATS = ("mmocr", "doctr")  # read whole, numbered by entry


@dataclass
class LabelFormat:
    """How to read one label file: ``kind`` (tab | space | indices), its ``encoding``, and for ``indices`` the
    alphabet file's lines (index = 0-based line number)."""

    kind: str = "tab"
    encoding: str = "utf-8"
    alphabet: list[str] = field(default_factory=list)

    def parse(self, raw: bytes, lineno: int, gt: str) -> tuple[str | None, str]:
        """``(relative path, label)`` of one raw line; ``(None, "")`` for a blank line; raises DatasetError."""
        text = self._decode(raw, lineno, gt)
        if self.kind == "tab":
            return parse_gt_line(text.encode("utf-8"), lineno, gt)
        line = text.rstrip("\r\n")
        if not line.strip():
            return None, ""
        rel, sep, rest = line.partition(" ")
        if not sep or not rel:
            raise DatasetError(f"{gt}:{lineno}: expected 'relative/path label' separated by a space; fix the line")
        if self.kind == "space":
            return rel, rest
        return rel, self._indices_to_text(rest, lineno, gt)

    def entries(self, gt: str) -> tuple[str, list[tuple[int, str | None, str]]]:
        """A JSON layout's entries: what numbers them ("entry", or "line" for JSON lines) and, numbered from 1,
        ``(n, relative path, label)``, or ``(n, None, reason)`` for one that holds no usable path and label. A file
        that is not that layout raises DatasetError."""
        with open(gt, "rb") as f:
            raw = f.read()
        try:
            text = raw.decode(self.encoding).lstrip("\ufeff")
        except UnicodeDecodeError:
            raise DatasetError(f"{gt}: not valid {self.encoding}; check --encoding") from None
        what = {"mmocr": "mmocr's textrecog JSON ({\"data_list\": [{\"img_path\", \"instances\": [{\"text\"}]}]}) "
                         "or its JSON lines ({\"filename\", \"text\"} per line)",
                "doctr": "doctr's labels.json ({\"img_name.jpg\": \"label\", ...})"}[self.kind]
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            if self.kind == "mmocr" and e.msg == "Extra data":  # mmocr 0.x: one JSON object per line
                return "line", self._json_lines(text)
            raise DatasetError(f"{gt}: not JSON ({e.msg} at line {e.lineno} column {e.colno}); --gt-format "
                               f"{self.kind} reads {what}") from None
        if self.kind == "doctr":
            if not isinstance(doc, dict):
                raise DatasetError(f"{gt}: a JSON {type(doc).__name__}, not an object; --gt-format doctr reads {what}")
            return "entry", [(n, rel, label) if isinstance(label, str) else
                             (n, None, f"the label of {rel!r} is {type(label).__name__}, not text")
                             for n, (rel, label) in enumerate(doc.items(), 1)]
        if isinstance(doc, dict) and isinstance(doc.get("data_list"), list):
            return "entry", [self._mmocr_entry(n, item) for n, item in enumerate(doc["data_list"], 1)]
        if isinstance(doc, dict) and {"filename", "text"} <= doc.keys():  # mmocr 0.x JSON lines, one line
            return "line", self._json_lines(text)
        raise DatasetError(f"{gt}: no \"data_list\" list; --gt-format mmocr reads {what}")

    @staticmethod
    def _mmocr_entry(n: int, item: object) -> tuple[int, str | None, str]:
        """One ``data_list`` item of mmocr 1.x: one instance with its text."""
        if not isinstance(item, dict) or not isinstance(item.get("img_path"), str):
            return n, None, "no \"img_path\" text in the entry"
        inst = item.get("instances")
        if not isinstance(inst, list) or len(inst) != 1 or not isinstance(inst[0], dict) \
                or not isinstance(inst[0].get("text"), str):
            count = len(inst) if isinstance(inst, list) else 0
            why = f"{count} instances" if count != 1 else "an instance without a \"text\""
            return n, None, f"{item['img_path']!r} has {why}; a recognition entry holds one instance with its text"
        return n, item["img_path"], inst[0]["text"]

    @staticmethod
    def _json_lines(text: str) -> list[tuple[int, str | None, str]]:
        """mmocr 0.x: ``{"filename": ..., "text": ...}`` on each line (blank lines skipped), numbered by line."""
        out: list[tuple[int, str | None, str]] = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                out.append((n, None, f"not JSON ({e.msg}); each line holds one {{\"filename\", \"text\"}} object"))
                continue
            if not isinstance(obj, dict) or not isinstance(obj.get("filename"), str) \
                    or not isinstance(obj.get("text"), str):
                out.append((n, None, "expected {\"filename\": ..., \"text\": ...} with text values"))
                continue
            out.append((n, obj["filename"], obj["text"]))
        return out

    def _decode(self, raw: bytes, lineno: int, gt: str) -> str:
        """One line as text (a UTF-8 BOM on line 1 removed)."""
        try:
            text = raw.decode(self.encoding)
        except UnicodeDecodeError:
            hint = "pass --encoding gbk (or gb18030)" if self.encoding.startswith("utf") else "check --encoding"
            raise DatasetError(f"{gt}:{lineno}: line is not valid {self.encoding}; {hint}") from None
        return text.lstrip("\ufeff") if lineno == 1 else text

    def _indices_to_text(self, rest: str, lineno: int, gt: str) -> str:
        """Map space-separated 0-based alphabet line numbers to the label text."""
        chars = []
        for tok in rest.split():
            if not tok.isdigit():
                raise DatasetError(f"{gt}:{lineno}: {tok!r} is not a character index (0-based alphabet line number)")
            i = int(tok)
            if i >= len(self.alphabet):
                raise DatasetError(f"{gt}:{lineno}: index {i} is past the alphabet's last line "
                                   f"({len(self.alphabet) - 1}); is --alphabet the file these labels were made with?")
            ch = self.alphabet[i]
            if len(ch) != 1:
                what = "the blank placeholder" if i == 0 and ch.strip().lower() == "blank" else f"{ch!r}"
                raise DatasetError(f"{gt}:{lineno}: index {i} is alphabet line {i}, {what}, not one character")
            chars.append(ch)
        return "".join(chars)


def label_format(kind: str = "tab", encoding: str = "utf-8", alphabet: str | os.PathLike | None = None,
                 alphabet_encoding: str = "auto") -> LabelFormat:
    """Validate the options and build a :class:`LabelFormat` (reading the alphabet file for ``indices``)."""
    if kind not in GT_FORMATS:
        raise DatasetError(f"unknown label format {kind!r}; choose one of {', '.join(GT_FORMATS)}")
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise DatasetError(f"unknown label file encoding {encoding!r} (e.g. utf-8, gbk, gb18030)") from None
    if kind != "indices":
        if alphabet is not None:
            raise DatasetError("--alphabet is only used with --gt-format indices")
        return LabelFormat(kind, encoding)
    if alphabet is None:
        raise DatasetError("--gt-format indices needs --alphabet FILE (the alphabet file the indices refer to)")
    try:
        lines = read_alphabet_file(alphabet, alphabet_encoding).lines
    except AlphabetFileError as e:
        raise DatasetError(f"--alphabet: {e}") from None
    return LabelFormat(kind, encoding, lines)
