"""Issue 44's English data engine: printable95, sign-like texts (phrases, camel case, codes), a street-style share,
and the levers reaching scene-text words; every one off draws the very bytes of before."""
from __future__ import annotations

import random
import string

import pytest

from crnn.charset import BUILTIN_CHARSETS, Charset
from crnn.cli.synth import main as synth_main
from crnn.config import ConfigError, load_config
from crnn.data.synth import SynthOptions, make_sample, synth_options
from crnn.data.words import RENDERABLE, sample_word, sign_text, text_label

WORDS = ("open", "market", "tea", "coffee", "street", "house", "parking", "free", "store", "books")


@pytest.fixture(scope="module")
def fonts(dejavu_fonts: list[str]) -> list[str]:
    return dejavu_fonts


def test_printable95_is_printable_ascii_with_the_space_and_keeps_case():
    cs = Charset.from_spec("printable95")
    assert len(cs) == 95 and set(cs.chars) == set(string.printable[:95]) and " " in cs.chars
    targets, lengths = cs.encode(["No Parking 24h"])
    assert not cs.lowercase and targets.tolist() == [cs.index[c] for c in "No Parking 24h"] and lengths.tolist() == [14]
    assert BUILTIN_CHARSETS["printable95"].startswith(BUILTIN_CHARSETS["printable94"])  # the 94 keep their indices


def test_sign_texts_hold_spaces_camel_case_and_codes():
    rng = random.Random(3)
    texts = [sign_text(rng, WORDS) for _ in range(400)]
    assert all(set(t) <= RENDERABLE | {" "} for t in texts)
    spaced = [t for t in texts if " " in t]
    camel = [t for t in texts if " " not in t and any(a.islower() and b.isupper() for a, b in zip(t, t[1:]))]
    coded = [t for t in texts if any(c.isdigit() for c in t) and any(c.isalpha() for c in t)]
    assert len(spaced) > 100 and len(camel) > 60 and len(coded) > 60, (len(spaced), len(camel), len(coded))
    # words set letter by letter are labelled with their gaps, as iiit5k and svt label them (T H E, M A R K E T)
    tracked = [t for t in texts if len(t) >= 3 and t[1::2].strip() == "" and " " not in t[::2]]
    assert 20 < len(tracked) < 70 and all(t.replace(" ", "").isalpha() for t in tracked), tracked
    # the label keeps what printable95 has, and the benchmarks' alphabet folds it as before
    assert text_label("No Parking", "printable95") == "No Parking"
    assert text_label("iPhone 15", "alnum36") == "iphone15"


def _opts(**kw) -> SynthOptions:
    return SynthOptions(text="words", **kw)


def test_signs_share_draws_that_share_of_sign_texts_and_zero_draws_as_before():
    before = [sample_word(random.Random(i), _opts()) for i in range(300)]
    assert before == [sample_word(random.Random(i), _opts(signs=0.0)) for i in range(300)]
    half = [sample_word(random.Random(i), _opts(charset="printable95", signs=0.5, max_len=25)) for i in range(300)]
    assert sum(a != b for a, b in zip(before, half)) > 100
    share = sum(" " in t for t in half) / len(half)
    assert 0.05 < share < 0.4, share  # about half of the sign texts are phrases; single words have no space
    assert all(len(t) <= 25 for t in half)


def test_levers_off_give_the_same_word_images_and_on_keep_every_label(fonts):
    old = [make_sample(i, 7, fonts, _opts()) for i in range(8)]
    off = _opts(squeeze=0.0, weight=0.0, jitter=0.0, photos=0.0, signs=0.0, street=0.0)
    assert old == [make_sample(i, 7, fonts, off) for i in range(8)]
    for lever in ("street", "squeeze", "weight"):
        on = [make_sample(i, 7, fonts, _opts(**{lever: 1.0})) for i in range(8)]
        assert [label for _, label in on] == [label for _, label in old], lever
        assert sum(a != b for (a, _), (b, _) in zip(old, on)) >= 7, lever


def test_phrases_render_and_keep_their_spaces_in_printable95_labels(fonts):
    opts = _opts(charset="printable95", signs=1.0, max_len=25)
    labels = [make_sample(i, 9, fonts, opts)[1] for i in range(30)]
    assert any(" " in label for label in labels) and all(label == label.strip() for label in labels)


def test_config_levers_reach_the_words_and_no_lever_keeps_the_old_options():
    assert synth_options(load_config(None, [])) == SynthOptions(text="words")  # the English recipes of before
    cfg = load_config(None, ["model.charset=printable95", "data.synth_signs=0.25", "data.synth_street=0.35",
                             "data.synth_squeeze=0.2", "data.max_label_length=25"])
    opts = synth_options(cfg)
    assert (opts.text, opts.charset, opts.signs, opts.street, opts.squeeze, opts.max_len) == \
        ("words", "printable95", 0.25, 0.35, 0.2, 25)
    with pytest.raises(ConfigError, match="data.synth_street: must be within 0..1, got 2"):
        load_config(None, ["data.synth_street=2"])


def test_the_english_recipe_loads_and_reads_printable95_at_its_own_width():
    cfg = load_config("configs/shipped_en.yaml", [])
    assert cfg.model.charset == "printable95" and cfg.data.keep_ratio and cfg.data.synth_online
    assert cfg.data.val == ["data/en_dev", "data/ic15_dev"] and cfg.train.protocol == "exact"
    assert synth_options(cfg).signs > 0


@pytest.mark.parametrize("flag", ["--signs", "--street"])
def test_crnn_synth_refuses_a_share_outside_zero_to_one(flag, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        synth_main(["--out", str(tmp_path / "x.lmdb"), flag, "1.5"])
    assert e.value.code == 2 and f"{flag} must be within 0..1" in capsys.readouterr().err
    assert not (tmp_path / "x.lmdb").exists()


# ---------------------------------------------------------------------------------------------- real crops mixed in
def _real_folder(tmp_path, n: int = 5):
    from PIL import Image

    root = tmp_path / "real"
    (root / "IMG").mkdir(parents=True)
    lines = []
    for i in range(n):  # each crop one flat grey level: recognisable in the batch after the transform
        Image.new("RGB", (40 + 8 * i, 20), (10 + 40 * i,) * 3).save(root / "IMG" / f"{i}.png")
        lines.append(f"IMG/{i}.png\tReal{i}")
    (root / "gt.txt").write_text("\n".join(lines) + "\n")
    return str(root)


def _batches(fonts, real=None, share=0.0):
    from crnn.data.collate import Collate
    from crnn.data.online import SynthBatches
    from crnn.data.transforms import ResizeNormalize

    cs = Charset.from_spec("printable95")
    return SynthBatches(_opts(), 16, 5, ResizeNormalize(32, 100, keep_ratio=True, max_width=200),
                        Collate(cs), 4, fonts=fonts, real=real, real_share=share)


def test_online_batches_mix_in_that_share_of_real_crops_the_same_way_every_time(fonts, tmp_path):
    from crnn.data.datasets import open_dataset
    from crnn.data.transforms import ResizeNormalize

    real = open_dataset(_real_folder(tmp_path), Charset.from_spec("printable95"),
                        transform=ResizeNormalize(32, 100, keep_ratio=True, max_width=200))
    plain, mixed = _batches(fonts), _batches(fonts, real, 0.25)
    assert [label for _, label in plain.lines(1)] == [label for _, label in _batches(fonts, real, 0.0).lines(1)]
    labels = [label for b in range(4) for _, label in mixed.lines(b)]
    reals = [label for label in labels if label.startswith("Real")]
    assert 6 <= len(reals) <= 26, reals  # a quarter of 64, give or take
    assert labels == [label for b in range(4) for _, label in _batches(fonts, real, 0.25).lines(b)]  # seeded
    # the samples not replaced are the very samples of the plain batches
    kept = [(i, label) for i, label in enumerate(labels) if not label.startswith("Real")]
    flat = [label for b in range(4) for _, label in plain.lines(b)]
    assert all(flat[i] == label for i, label in kept)
    with pytest.raises(ValueError, match="real_share must be within 0..1"):
        _batches(fonts, None, 0.5)


def test_real_share_needs_the_online_generator_and_a_path():
    with pytest.raises(ConfigError, match="data.synth_real_share: needs data.synth_online=true and data.synth_real"):
        load_config(None, ["data.synth_real_share=0.1"])
    with pytest.raises(ConfigError, match="data.synth_real_share: must be within 0..1, got 1.5"):
        load_config(None, ["data.synth_real_share=1.5"])
