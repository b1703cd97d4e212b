"""Corpus words in traditional forms, for the text lines of an alphabet that has them (``SynthOptions.traditional``).

``crnn/data/zh_s2t.tsv`` holds what the line generator needs of OpenCC's simplified -> traditional conversion (``s2t``:
its STCharacters and STPhrases tables, Apache-2.0), written by ``scripts/traditional_forms.py --write``:

* a row per GB 2312 Hanzi whose preferred traditional form (OpenCC's first candidate) differs from it. A character
  with several forms takes that one where no word says otherwise: 发 -> 發 (not 髮), 干 -> 幹 (not 乾), 里 -> 裏,
  台 -> 臺, 后 -> 後, 复 -> 復, 钟 -> 鍾, 余 -> 餘; 只, 面, 系, 松 stay;
* a row per word of jieba's list (the generator's Chinese text) whose conversion by OpenCC's phrases differs from
  that character by character: 头发 -> 頭髮, 干净 -> 乾淨, 公里 -> 公里, 皇后 -> 皇后, 一只 -> 一隻, 联系 -> 聯繫.

A line is written in one of three **standards** (:data:`STANDARDS`, OpenCC's conversion names): ``s2t``, OpenCC's
standard forms (爲 裏 衆 啓 說); ``s2tw``, Taiwan's, and ``s2hk``, Hong Kong's - ``s2t``, then each character through
OpenCC's TWVariants or HKVariants table (``crnn/data/zh_variants.tsv``, first candidates, character by character as
OpenCC's ``s2tw`` / ``s2hk`` do): 為 裡 眾 啟 說 in Taiwan, 為 裏 眾 啓 説 in Hong Kong. The variants apply to characters
``s2t`` leaves alone too (着 -> 著 in Taiwan's forms, 污 -> 汙).

A word is converted whole - its row, else character by character - and a character whose form is not in the
alphabet stays as it was: a variant outside it keeps OpenCC's form (檐 stays 檐 in Taiwan's, not 簷), a form outside
it the simplified character (the level-2 Hanzi's forms are not in ``zh_gb2312_trad``), so a line keeps only
characters of the alphabet.
"""
from __future__ import annotations

import functools
import os

from crnn.charset import zh_traditional_forms
from crnn.data.words import label_rules

S2T_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zh_s2t.tsv")
VARIANTS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zh_variants.tsv")
# OpenCC's standard forms, Taiwan's, Hong Kong's: a traditional line is written in one, drawn with equal odds
STANDARDS = ("s2t", "s2tw", "s2hk")


class NoTraditionalFormsError(ValueError):
    """Traditional lines were asked for an alphabet without traditional forms."""


@functools.lru_cache(maxsize=1)
def s2t_table() -> tuple[dict[str, str], dict[str, str]]:
    """(character -> its preferred traditional form, word -> its traditional form) from ``zh_s2t.tsv``."""
    chars: dict[str, str] = {}
    words: dict[str, str] = {}
    with open(S2T_PATH, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            simp, trad = line.rstrip("\n").split("\t")
            (chars if len(simp) == 1 else words)[simp] = trad
    return chars, words


@functools.lru_cache(maxsize=1)
def variant_tables() -> dict[str, dict[str, str]]:
    """Standard -> (OpenCC's form -> that standard's form), from ``zh_variants.tsv`` (``s2t``: empty)."""
    tables: dict[str, dict[str, str]] = {standard: {} for standard in STANDARDS}
    with open(VARIANTS_PATH, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            form, tw, hk = line.rstrip("\n").split("\t")
            tables["s2tw"][form], tables["s2hk"][form] = tw, hk
    return tables


def to_traditional(word: str, alphabet: frozenset[str], standard: str = "s2t") -> str:
    """``word`` in the traditional forms of ``standard`` (see :data:`STANDARDS`; its phrase row, else character by
    character, then the standard's variants); a form not in ``alphabet`` falls back to OpenCC's, then to the
    character as it was."""
    chars, words = s2t_table()
    variants = variant_tables()[standard]
    trad = words.get(word) or "".join(chars.get(c, c) for c in word)
    out = []
    for t, s in zip(trad, word):
        v = variants.get(t, t)
        out.append(v if v in alphabet else t if t in alphabet else s)
    return "".join(out)


@functools.lru_cache(maxsize=8)
def has_traditional_forms(charset: str) -> bool:
    """Whether the alphabet ``charset`` has any of the traditional forms of ``zh_gb2312_trad``."""
    return not label_rules(charset)[0].isdisjoint(zh_traditional_forms())


def check_traditional(charset: str, share: float) -> None:
    """NoTraditionalFormsError (one line, naming the fix) when ``share`` > 0 and ``charset`` has no traditional form."""
    if share and not has_traditional_forms(charset):
        shown = charset if len(charset) <= 40 else charset[:37] + "..."
        raise NoTraditionalFormsError(
            f"traditional={share:g} writes lines in traditional forms, which charset {shown!r} has none of: use "
            "zh_gb2312_trad (model.charset=zh_gb2312_trad, crnn-synth --charset zh_gb2312_trad) or set it to 0")
