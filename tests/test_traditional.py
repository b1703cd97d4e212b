"""zh_gb2312_trad: zh_gb2312 with the traditional forms of its level-1 Hanzi after it (issue 43, signs)."""
import importlib.util
import json
import random
import sys
from pathlib import Path

import pytest
import torch

import crnn

from crnn.charset import BUILTIN_CHARSETS, Charset, gb2312_hanzi, zh_traditional_forms
from crnn.engine.alphabet_change import adapt_head, output_layer_keys
from crnn.model import build_model
from tests.conftest import REPO


def test_size_and_prefix():
    gb, trad = BUILTIN_CHARSETS["zh_gb2312"], BUILTIN_CHARSETS["zh_gb2312_trad"]
    assert len(zh_traditional_forms()) == 1458
    assert Charset.from_spec("zh_gb2312_trad").num_classes == 8353  # 6,895 + 1,458
    assert trad.startswith(gb) and trad[len(gb):] == zh_traditional_forms()  # zh_gb2312's rows keep their meaning
    assert not set(zh_traditional_forms()) & set(gb)


def test_forms_are_of_level1_hanzi():
    level1 = set(gb2312_hanzi()[:3755])
    tsv = Path(crnn.__file__).parent / "data" / "zh_trad.tsv"
    rows = [line.split("\t") for line in open(tsv, encoding="utf-8") if not line.startswith("#")]
    assert [t for t, _ in rows] == list(zh_traditional_forms())
    assert all(s.strip() in level1 for _, s in rows)
    assert ("鴨", "鸭\n") in map(tuple, rows) and ("說", "说\n") in map(tuple, rows)


def test_sign_characters_encode_and_decode():
    cs = Charset.from_spec("zh_gb2312_trad")
    gb = Charset.from_spec("zh_gb2312")
    ids, lengths = cs.encode(["燒鴨飯", "蝦餃", "鸭虾"])
    assert lengths.tolist() == [3, 2, 2]
    assert cs.decode(ids.tolist()) == "燒鴨飯蝦餃鸭虾"
    assert cs.index["鴨"] > len(gb) and cs.index["鸭"] == gb.index["鸭"]
    assert gb.normalize("燒鴨飯") is None  # what zh_gb2312 cannot write


def test_alphabet_change_keeps_every_zh_gb2312_row():
    old, new = Charset.from_spec("zh_gb2312"), Charset.from_spec("zh_gb2312_trad")
    torch.manual_seed(0)
    old_model, new_model = build_model("vgg_small", 1, old.num_classes), build_model("vgg_small", 1, new.num_classes)
    state, change = adapt_head(old_model.state_dict(), old, new, new_model)
    assert (len(change.kept), len(change.new), change.dropped, change.reordered) == (6894, 1458, [], False)
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


def test_traditional_lines_need_an_alphabet_with_the_forms(tmp_path, capsys):
    from crnn.cli.synth import main as synth_main
    from crnn.config import ConfigError, load_config
    from crnn.data.synth import SynthOptions
    from crnn.engine.trainer import synth_options

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
def bench():
    spec = importlib.util.spec_from_file_location("zh_benchmark", REPO / "scripts" / "zh_benchmark.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["zh_benchmark"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop("zh_benchmark", None)


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
