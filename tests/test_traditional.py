"""zh_gb2312_trad: zh_gb2312 with the traditional forms of its level-1 Hanzi after it (issue 43, signs)."""
from pathlib import Path

import torch

import crnn

from crnn.charset import BUILTIN_CHARSETS, Charset, gb2312_hanzi, zh_traditional_forms
from crnn.engine.alphabet_change import adapt_head, output_layer_keys
from crnn.model import build_model


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
