"""zh_gb2312_trad: zh_gb2312 with the traditional forms of its level-1 Hanzi after it - OpenCC's, then Taiwan's and
Hong Kong's (issue 43, signs)."""
import json
import random
from pathlib import Path

import pytest
import torch

import crnn

from crnn.charset import BUILTIN_CHARSETS, Charset, gb2312_hanzi, zh_traditional_forms, zh_traditional_rows
from crnn.engine.alphabet_change import adapt_head, output_layer_keys
from crnn.model import build_model
from tests.conftest import REPO


def test_size_and_prefix():
    gb, trad = BUILTIN_CHARSETS["zh_gb2312"], BUILTIN_CHARSETS["zh_gb2312_trad"]
    forms = zh_traditional_forms()
    assert len(forms) == 1481 and len(set(forms)) == 1481  # OpenCC's 1,458, then 23 Taiwan / Hong Kong forms
    assert Charset.from_spec("zh_gb2312_trad").num_classes == 8376  # 6,895 + 1,458 + 23
    assert trad.startswith(gb) and trad[len(gb):] == forms  # zh_gb2312's rows keep their meaning
    assert not set(forms) & set(gb)
    rows = zh_traditional_rows()
    assert [std for _, _, std in rows[:1458]] == [""] * 1458  # OpenCC's forms keep their places (appended only)
    assert all(std in ("tw", "hk", "tw hk") for _, _, std in rows[1458:])


def test_forms_are_of_level1_hanzi():
    level1 = set(gb2312_hanzi()[:3755])
    tsv = Path(crnn.__file__).parent / "data" / "zh_trad.tsv"
    rows = [tuple(line.rstrip("\n").split("\t")) for line in open(tsv, encoding="utf-8") if not line.startswith("#")]
    assert [r[0] for r in rows] == list(zh_traditional_forms())
    assert all(r[1] in level1 for r in rows)
    assert ("鴨", "鸭") in rows and ("說", "说") in rows and ("爲", "为") in rows
    assert ("為", "为", "tw hk") in rows and ("裡", "里", "tw") in rows and ("啟", "启", "tw") in rows
    assert ("説", "说", "hk") in rows and ("衞", "卫", "hk") in rows


def test_variants_are_opencc_tw_and_hk_tables_over_the_alphabet():
    from crnn.data.traditional import STANDARDS, variant_tables

    tables = variant_tables()
    assert STANDARDS == ("s2t", "s2tw", "s2hk") and tables["s2t"] == {}
    assert (tables["s2tw"]["爲"], tables["s2tw"]["裏"], tables["s2tw"]["啓"], tables["s2tw"]["着"]) == ("為", "裡", "啟", "著")
    assert (tables["s2hk"]["爲"], tables["s2hk"]["裏"], tables["s2hk"]["啓"], tables["s2hk"]["說"]) == ("為", "裏", "啓", "説")
    alphabet, forms = TRAD, set(zh_traditional_forms())
    added = {f for f, _, std in zh_traditional_rows() if std}
    for standard, tag in (("s2tw", "tw"), ("s2hk", "hk")):
        # every variant of a form the generator writes is in the alphabet, or left out with its form (the level-2
        # Hanzi's: 嫺 -> 嫻; of 檐, itself level 2: 簷)
        reached = {v for k, v in tables[standard].items() if k in forms or k in set(gb2312_hanzi()[:3755])}
        assert reached <= alphabet
        assert {f for f, _, std in zh_traditional_rows() if tag in std.split()} <= set(tables[standard].values())
    assert "嫻" not in alphabet and "簷" not in alphabet and len(added) == 23


def test_sign_characters_encode_and_decode():
    cs = Charset.from_spec("zh_gb2312_trad")
    gb = Charset.from_spec("zh_gb2312")
    ids, lengths = cs.encode(["燒鴨飯", "蝦餃", "鸭虾", "為民服務", "裡面", "啟德", "爲裏啓"])
    assert lengths.tolist() == [3, 2, 2, 4, 2, 2, 3]
    assert cs.decode(ids.tolist()) == "燒鴨飯蝦餃鸭虾為民服務裡面啟德爲裏啓"
    assert cs.index["鴨"] > len(gb) and cs.index["鸭"] == gb.index["鸭"]
    assert min(cs.index[c] for c in "為裡啟眾説") > cs.index["爲"] > len(gb)  # the variants come last
    assert gb.normalize("燒鴨飯") is None  # what zh_gb2312 cannot write


def test_alphabet_change_keeps_every_zh_gb2312_row():
    old, new = Charset.from_spec("zh_gb2312"), Charset.from_spec("zh_gb2312_trad")
    torch.manual_seed(0)
    old_model, new_model = build_model("vgg_small", 1, old.num_classes), build_model("vgg_small", 1, new.num_classes)
    state, change = adapt_head(old_model.state_dict(), old, new, new_model)
    assert (len(change.kept), len(change.new), change.dropped, change.reordered) == (6894, 1481, [], False)
    w, b = output_layer_keys(new_model)
    assert torch.equal(state[w][:old.num_classes], old_model.state_dict()[w])
    assert torch.equal(state[b][:old.num_classes], old_model.state_dict()[b])
    new_model.load_state_dict(state, strict=True)


# ------------------------------------------------------------------------- traditional lines (data.synth_traditional)
TRAD = frozenset(BUILTIN_CHARSETS["zh_gb2312_trad"])


def test_words_convert_whole_by_phrase_else_by_character():
    from crnn.data.traditional import s2t_table, to_traditional

    assert to_traditional("发展", TRAD) == "發展" and to_traditional("头发", TRAD) == "頭髮"  # 发: 發 or 髮 by word
    assert to_traditional("干部", TRAD) == "幹部" and to_traditional("干净", TRAD) == "乾淨"  # 干: 幹 or 乾
    assert to_traditional("里面", TRAD) == "裏面" and to_traditional("公里", TRAD) == "公里"  # 里: 裏 or 里
    assert to_traditional("一只", TRAD) == "一隻" and to_traditional("只有", TRAD) == "只有"
    assert to_traditional("个", TRAD) == "個" and to_traditional("2019年", TRAD) == "2019年"
    gb = frozenset(BUILTIN_CHARSETS["zh_gb2312"])
    assert to_traditional("头发", gb) == "头发"  # a form outside the alphabet stays as it was
    assert to_traditional("撷取", TRAD) == "撷取"  # 擷 (of a level-2 Hanzi) is not in zh_gb2312_trad
    chars, words = s2t_table()
    assert all(len(s) == 1 for s in chars) and all(len(s) == len(t) > 1 for s, t in words.items())
    assert set(chars) <= set(gb2312_hanzi()) and (chars["发"], chars["干"], chars["里"]) == ("發", "幹", "裏")
    level1 = gb2312_hanzi()[:3755]
    assert all(chars[s] in TRAD for s in level1 if s in chars)  # the level-1 forms are all in the alphabet


def test_the_three_standards():
    from crnn.data.traditional import to_traditional

    def three(word):
        return [to_traditional(word, TRAD, standard) for standard in ("s2t", "s2tw", "s2hk")]

    assert three("为了") == ["爲了", "為了", "為了"] and three("里面") == ["裏面", "裡面", "裏面"]
    assert three("启动") == ["啓動", "啟動", "啓動"] and three("说话") == ["說話", "說話", "説話"]
    assert three("着急") == ["着急", "著急", "着急"]  # the variants change what s2t leaves alone too
    assert three("面条") == ["麪條", "麵條", "麪條"]  # after the phrase row
    assert three("屋檐") == ["屋檐"] * 3  # Taiwan's 簷 is not in the alphabet: the form stays
    assert to_traditional("为了", TRAD) == "爲了"  # OpenCC's forms by default
    gb = frozenset(BUILTIN_CHARSETS["zh_gb2312"])
    assert to_traditional("为了", gb, "s2tw") == "为了"


def test_a_line_of_traditional_words_keeps_the_draws_and_the_alphabet():
    import functools
    import itertools

    from crnn.data.lines import Corpus, compose_line
    from crnn.data.traditional import to_traditional

    corpus = Corpus(("头发", "发展", "公里"), tuple(itertools.accumulate((1.0, 1.0, 1.0))), "")
    convert = functools.partial(to_traditional, alphabet=TRAD)
    simp = [compose_line(random.Random(i), "zh_gb2312_trad", 10, corpus, 0.0) for i in range(30)]
    trad = [compose_line(random.Random(i), "zh_gb2312_trad", 10, corpus, 0.0, convert) for i in range(30)]
    forms = set(zh_traditional_forms())
    assert [len(t) for t in trad] == [len(s) for s in simp]  # the same draws, words (and number units) converted
    assert all(a == b or b in forms for s, t in zip(simp, trad) for a, b in zip(s, t))
    joined = "".join(trad)
    assert "頭髮" in joined and "發展" in joined and "头发" not in joined and set(joined) <= TRAD


def test_the_share_of_traditional_lines_is_seeded_and_off_draws_nothing():
    pytest.importorskip("jieba")
    from crnn.data.lines import sample_line
    from crnn.data.synth import SynthOptions

    forms = set(zh_traditional_forms())
    old = SynthOptions(charset="zh_gb2312_trad", text="lines", max_len=12)
    off = SynthOptions(charset="zh_gb2312_trad", text="lines", max_len=12, traditional=0.0)
    half = SynthOptions(charset="zh_gb2312_trad", text="lines", max_len=12, traditional=0.5)
    assert [sample_line(random.Random(i), old) for i in range(200)] == \
        [sample_line(random.Random(i), off) for i in range(200)]
    lines = [sample_line(random.Random(i), half) for i in range(400)]
    assert lines == [sample_line(random.Random(i), half) for i in range(400)]  # every rank and resume alike
    assert all(set(t) <= TRAD for t in lines)
    with_forms = sum(not forms.isdisjoint(t) for t in lines) / len(lines)
    plain = sum(not forms.isdisjoint(sample_line(random.Random(i), old)) for i in range(400)) / 400
    assert with_forms > plain + 0.2  # (uniform draws alone put a form into a few lines)


def test_each_traditional_line_is_in_one_standard_a_third_each(tmp_path):
    from collections import Counter

    from crnn.data.lines import sample_line
    from crnn.data.synth import SynthOptions

    words = tmp_path / "words.txt"  # one word whose three standards differ: 爲/為, 裏/裡, 說/説
    words.write_text("里面说为 1\n", encoding="utf-8")
    spelled = {"simplified": "里面说为", "s2t": "裏面說爲", "s2tw": "裡面說為", "s2hk": "裏面説為"}
    half = SynthOptions(charset="zh_gb2312_trad", text="lines", max_len=12, words=str(words), traditional=0.5)
    lines = [sample_line(random.Random(i), half) for i in range(900)]
    assert lines == [sample_line(random.Random(i), half) for i in range(900)]  # every rank and resume alike
    kinds = [{k for k, w in spelled.items() if w in line} for line in lines]
    assert all(len(k) <= 1 for k in kinds)  # a line is written in one standard
    count = Counter(k.pop() for k in kinds if k)
    seen = sum(count.values())
    assert seen > 500 and 0.42 < count["simplified"] / seen < 0.58  # half the lines traditional
    assert all(0.12 < count[std] / seen < 0.22 for std in ("s2t", "s2tw", "s2hk"))  # a third of those each
    off = SynthOptions(charset="zh_gb2312_trad", text="lines", max_len=12, words=str(words), traditional=0.0)
    assert not any(w in sample_line(random.Random(i), off) for i in range(200) for w in list(spelled.values())[1:])


def test_traditional_lines_need_an_alphabet_with_the_forms(tmp_path, capsys):
    from crnn.cli.synth import main as synth_main
    from crnn.config import ConfigError, load_config
    from crnn.data.synth import SynthOptions
    from crnn.data.synth import synth_options

    with pytest.raises(ValueError, match="zh_gb2312_trad"):
        SynthOptions(charset="zh_gb2312", text="lines", traditional=0.2)
    with pytest.raises(ValueError, match="traditional must be within 0..1"):
        SynthOptions(charset="zh_gb2312_trad", traditional=1.5)
    SynthOptions(charset="zh_gb2312", text="lines", traditional=0.0)  # off: any alphabet
    assert synth_main(["--charset", "zh_gb2312", "--traditional", "0.2", "--num", "2",
                       "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "crnn-synth: error:" in err and "zh_gb2312_trad" in err
    assert not (tmp_path / "x").exists()
    with pytest.raises(SystemExit):
        synth_main(["--charset", "zh_gb2312_trad", "--traditional", "2", "--num", "2", "--out", str(tmp_path / "y")])
    cfg = load_config(None, ["model.charset=zh_gb2312_trad", "data.synth_traditional=0.2"])
    assert synth_options(cfg).traditional == 0.2 and synth_options(cfg).charset == "zh_gb2312_trad"
    with pytest.raises(ValueError, match="model.charset=zh_gb2312_trad"):
        synth_options(load_config(None, ["model.charset=zh_gb2312", "data.synth_traditional=0.2"]))
    with pytest.raises(ConfigError, match="data.synth_traditional"):
        load_config(None, ["model.charset=zh_gb2312_trad", "data.synth_traditional=2"])
    assert synth_options(load_config(None, ["model.charset=zh_gb2312_trad"])).traditional == 0.0


# ------------------------------------------------------------------------- the traditional yardstick
@pytest.fixture(scope="module")
def bench(zh_bench):
    return zh_bench


def test_trad_print_is_held_out_words_in_traditional_forms_in_development_faces(bench, tmp_path):
    pytest.importorskip("jieba")
    try:
        faces = bench.trad_faces()
    except FileNotFoundError as e:
        pytest.skip(f"needs the development faces ({e})")
    dev = bench.face_files("dev_print")
    assert faces and set(faces) <= set(dev) and bench.face_files("trad_print") == faces
    assert "trad_print" in bench.FACE_SETS and bench.SEEDS["trad_print"] not in {
        v for k, v in bench.SEEDS.items() if k != "trad_print"}
    folder = bench.build_set("trad_print", tmp_path, 3)
    paths, labels = bench.read_set(folder)
    forms = set(zh_traditional_forms())
    assert len(labels) == 3 and all(4 <= len(t) <= 12 and set(t) <= TRAD and forms & set(t) for t in labels)
    assert json.loads((folder / "manifest.json").read_text())["charset"] == "zh_gb2312_trad"
    assert bench.sample("trad_print", 0, tuple(faces))[2] == labels[0]  # the same in every run
    assert json.loads((folder / "manifest.json").read_text())["standards"] == ["s2t", "s2tw", "s2hk"]


def test_trad_print_mixes_the_three_standards_in_faces_that_draw_them(bench):
    from collections import Counter

    from crnn.data.fonts import glyph_coverage
    from crnn.data.synth import sample_rng
    from crnn.data.traditional import STANDARDS

    assert bench.TRAD_STANDARDS == STANDARDS
    opencc, variants = bench.trad_form_groups()
    assert (len(opencc), len(variants)) == (1458, 23) and "為" in variants and "爲" in opencc
    # each line's standard is the first draw of its own seeded generator: a third each, the same in every run
    drawn = Counter(sample_rng(bench.SEEDS["trad_print"], i).choice(STANDARDS) for i in range(600))
    assert all(160 < drawn[std] < 240 for std in STANDARDS)
    assert bench.traditional("s2tw")[0]("为了里面") == "為了裡面" and bench.traditional("s2hk")[0]("说明") == "説明"
    try:
        faces = bench.trad_faces()
    except FileNotFoundError as e:
        pytest.skip(f"needs the development faces ({e})")
    for face in faces:  # the faces draw the Taiwan and Hong Kong forms the lines use, not OpenCC's alone
        drawn_forms = glyph_coverage(face, "".join(sorted(opencc + variants)))
        assert set("為裡眾啟説衞") <= drawn_forms and len(set(variants) & drawn_forms) >= 0.9 * len(variants)
