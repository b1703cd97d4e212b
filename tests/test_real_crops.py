"""Issue 60, step 2: real crops from several sources, each with its share of the rendered batches
(data.synth_real / data.synth_real_share as lists), and effects for the real crops alone (data.real_*): one path and
one share draw what they drew before, every mistake is refused in one line, each effect changes the real crops only,
keeps the loader's image sizes and follows the seed."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from PIL import Image

from crnn.charset import Charset
from crnn.config import ConfigError, load_config
from crnn.data.collate import Collate
from crnn.data.datasets import DataError, open_dataset
from crnn.data.feed import build, describe_training, prepare
from crnn.data.online import RealMix, SynthBatches
from crnn.data.real_augment import EFFECTS, LOOSEN_X, LOOSEN_Y, TIGHTEN_X, TIGHTEN_Y, RealAugment, loosen, tighten
from crnn.data.synth import SynthOptions, synth_options
from crnn.data.transforms import ResizeNormalize
from tests.conftest import REPO

ONLINE = ["data.synth_online=true", "data.synth_num=64"]
CS = Charset.from_spec("printable95")


def _folder(root, prefix: str, n: int):
    """``n`` crops of text-like bars on a noisy ground, labelled ``{prefix}{i}``: a folder with gt.txt."""
    (root / "IMG").mkdir(parents=True)
    rng = np.random.default_rng(len(prefix) + n)
    lines = []
    for i in range(n):
        arr = rng.integers(150, 230, (24, 60 + 6 * i, 3), dtype=np.uint8)
        arr[6:18, 4:-4:5] = 30  # strokes
        Image.fromarray(arr).save(root / "IMG" / f"{i}.png")
        lines.append(f"IMG/{i}.png\t{prefix}{i}")
    (root / "gt.txt").write_text("\n".join(lines) + "\n")
    return str(root)


@pytest.fixture()
def two(tmp_path):
    return _folder(tmp_path / "a", "Aa", 6), _folder(tmp_path / "b", "Bb", 4)


# ------------------------------------------------------------------------------------------------ the config keys
def test_one_path_and_one_share_read_as_before_and_lists_as_sources():
    shipped = load_config(REPO / "configs" / "shipped_en.yaml")
    assert shipped.data.real_sources() == [("data/en_real_train", 0.05), ("data/ic15_real_train", 0.1)]
    assert not RealAugment.from_data(shipped.data) and RealAugment.from_data(shipped.data).describe() == ""
    one = load_config(None, [*ONLINE, "data.synth_real=data/en_real_train", "data.synth_real_share=0.05"])
    assert (one.data.synth_real, one.data.synth_real_share) == ("data/en_real_train", 0.05)
    assert one.data.real_sources() == [("data/en_real_train", 0.05)]
    cfg = load_config(None, [*ONLINE, "data.synth_real=[r/a, r/b]", "data.synth_real_share=[0.05, 0.1]",
                             "data.real_blur=0.3", "data.real_tighten=0.2"])
    assert cfg.data.real_sources() == [("r/a", 0.05), ("r/b", 0.1)]
    assert RealAugment.from_data(cfg.data).describe() == "tighten 0.2, blur 0.3"
    assert load_config(None, [*ONLINE, "data.synth_real=2024", "data.synth_real_share=0.1"]).data.synth_real == "2024"
    assert load_config(None, [*ONLINE, "data.synth_real=[r/a, r/b]", "data.synth_real_share=[0, 0.1]"]
                       ).data.real_sources() == [("r/b", 0.1)]
    assert load_config(None, [*ONLINE, "data.synth_real=[]"]).data.real_sources() == []


@pytest.mark.parametrize("overrides,message", [
    (["data.synth_real=r/a", "data.synth_real_share=1.5"], "data.synth_real_share: must be within 0..1, got 1.5"),
    (["data.synth_real=[r/a,r/b]", "data.synth_real_share=[0.1,-0.1]"],
     "data.synth_real_share: must be within 0..1, got -0.1 for r/b"),
    (["data.synth_real=[r/a,r/b]", "data.synth_real_share=[0.5,0.5]"],
     "data.synth_real_share: the shares add up to 1; several sources must leave rendered words in every batch "
     "(less than 1 in all)"),
    (["data.synth_real=[r/a,r/b]", "data.synth_real_share=0.1"],
     "data.synth_real_share: give one share per data.synth_real path (2 path(s), 1 share(s)), e.g. "
     "data.synth_real=[a,b] data.synth_real_share=[0.05,0.1]"),
    (["data.synth_real=[r/a,r/a]", "data.synth_real_share=[0.1,0.1]"],
     "data.synth_real: every path once and none empty, got ['r/a', 'r/a']"),
    (["data.real_blur=0.2"], "data.real_blur: changes the real crops of data.synth_real; set data.synth_real and "
                             "data.synth_real_share too (with data.synth_online=true)"),
    (["data.synth_real=r/a", "data.synth_real_share=0.1", "data.real_curve=2"],
     "data.real_curve: must be within 0..1, got 2.0"),
])
def test_each_mistake_is_refused_in_one_line(overrides, message):
    with pytest.raises(ConfigError) as e:
        load_config(None, [*ONLINE, *overrides])
    assert str(e.value) == message


def test_a_missing_real_folder_is_refused_before_anything_is_made(tmp_path, two):
    missing = tmp_path / "ic15_real_train"
    cfg = load_config(None, [*ONLINE, f"data.synth_real=[{two[0]},{missing}]", "data.synth_real_share=[0.1,0.2]",
                             "data.synth_val_num=16", f"data.val=[{tmp_path / 'val.lmdb'}]"])
    with pytest.raises(DataError) as e:
        prepare(cfg, progress=False)
    assert str(e.value) == (f"data.synth_real: {missing}: no such file or directory; build the English recipe's real "
                            f"crops there (python -m crnn.data.en_dev --trainable {missing} --source ic15_train) or "
                            "correct the path")
    assert not (tmp_path / "val.lmdb").exists()
    mine = tmp_path / "my_crops"  # not the English recipe's: no word on building its crops there
    cfg = load_config(None, [*ONLINE, f"data.synth_real={mine}", "data.synth_real_share=0.1"])
    with pytest.raises(DataError) as e:
        prepare(cfg, progress=False)
    assert str(e.value) == (f"data.synth_real: {mine}: no such file or directory; correct the path: an LMDB, or a "
                            "folder with a gt.txt of relative/path<TAB>label lines")


# ------------------------------------------------------------------------------------------------------- the mix
def _sets(paths, transform=None):
    return [open_dataset(p, CS, transform=transform) for p in paths]


def test_one_source_draws_exactly_what_a_single_share_drew(two):
    """Today's rule, written out: sample i's Random(f"{seed}/real/{i}") gives one number against the share, then
    the crop; a RealMix of one source makes the very same picks."""
    (ds,) = _sets(two[:1])
    mix = RealMix([ds], [0.3], seed=5)
    for i in range(300):
        pick = random.Random(f"5/real/{i}")
        want = ds[pick.randrange(len(ds))][1] if pick.random() < 0.3 else None
        got = mix.draw(i)
        assert (got[1] if got is not None else None) == want


def test_several_sources_take_their_shares_in_seeded_places(two):
    a, b = _sets(two)
    mix = RealMix([a, b], [0.2, 0.3], seed=3)
    labels = [(d[1] if (d := mix.draw(i)) is not None else None) for i in range(4000)]
    from_a = sum(1 for x in labels if x and x.startswith("Aa"))
    from_b = sum(1 for x in labels if x and x.startswith("Bb"))
    assert abs(from_a / 4000 - 0.2) < 0.03 and abs(from_b / 4000 - 0.3) < 0.03, (from_a, from_b)
    assert {x for x in labels if x} == {f"Aa{i}" for i in range(6)} | {f"Bb{i}" for i in range(4)}
    again = RealMix(_sets(two), [0.2, 0.3], seed=3)
    assert labels == [(d[1] if (d := again.draw(i)) is not None else None) for i in range(4000)]
    # the first source's places are those of a single share of 0.2: adding a source takes only rendered places
    alone = RealMix(_sets(two[:1]), [0.2], seed=3)
    assert [x if x and x.startswith("Aa") else None for x in labels] == \
        [(d[1] if (d := alone.draw(i)) is not None else None) for i in range(4000)]
    assert mix.counts() == [6, 4]
    with pytest.raises(ValueError, match="one share within 0..1 per real source"):
        RealMix([a, b], [0.6, 0.6], seed=3)


def test_the_line_names_each_source_its_share_and_count_and_the_effects(two):
    cfg = load_config(None, [*ONLINE, f"data.synth_real=[{two[0]},{two[1]}]", "data.synth_real_share=[0.05,0.1]",
                             "data.real_perspective=0.25"])
    mix = RealMix(_sets(two), [0.05, 0.1], seed=0)
    assert describe_training(cfg, mix) == (
        "data.synth_online: every training batch is rendered on the fly; data.train is not read; real crops in 15 % "
        f"of samples: {two[0]} 5 % (6 crops), {two[1]} 10 % (4 crops), changed by perspective 0.25")
    one = load_config(None, [*ONLINE, f"data.synth_real={two[0]}", "data.synth_real_share=0.05"])
    assert describe_training(one).endswith(f"; real crops in 5 % of samples: {two[0]} 5 %")
    assert describe_training(load_config(None, ONLINE)) == \
        "data.synth_online: every training batch is rendered on the fly; data.train is not read"
    forgot = load_config(None, [*ONLINE, f"data.synth_real={two[0]}"])  # a path, its share left at 0
    assert describe_training(forgot).endswith(f"data.train is not read; no real crops from {two[0]} "
                                              "(data.synth_real_share 0)")
    off = load_config(None, [*ONLINE, f"data.synth_real=[{two[0]},{two[1]}]", "data.synth_real_share=[0.05,0]"])
    assert describe_training(off).endswith(f": {two[0]} 5 %; no real crops from {two[1]} (data.synth_real_share 0)")


def test_the_run_mixes_both_folders_into_its_batches(two, tmp_path):
    cfg = load_config(None, [*ONLINE, "model.charset=printable95", f"data.synth_real=[{two[0]},{two[1]}]",
                             "data.synth_real_share=[0.3,0.3]", "data.real_blur=0.5", "data.keep_ratio=true",
                             "data.batch_size=32", "data.num_workers=0"])
    feed = build(cfg, CS)
    assert feed.description.endswith(f"real crops in 60 % of samples: {two[0]} 30 % (6 crops), {two[1]} 30 % "
                                     "(4 crops), changed by blur 0.5")
    labels = next(iter(feed.train)).labels
    assert any(x.startswith("Aa") for x in labels) and any(x.startswith("Bb") for x in labels)


def test_a_source_with_no_usable_crop_or_no_labels_is_refused_under_its_own_key(two, tmp_path):
    """data.synth_real's sources are named by data.synth_real (not data.synth_online), with what to do."""
    foreign = _folder(tmp_path / "zh", "中文", 3)  # labels printable95 cannot write
    bare = tmp_path / "bare"
    bare.mkdir()
    base = [*ONLINE, "model.charset=printable95", "data.synth_real_share=[0.1,0.2]", "data.num_workers=0"]
    cfg = load_config(None, [*base, f"data.synth_real=[{two[0]},{foreign}]"])
    longest = synth_options(cfg, cfg.data.synth_style).max_len  # what the rendered lines may hold
    with pytest.raises(DataError) as e:
        build(cfg, CS)
    assert str(e.value) == (f"data.synth_real: {foreign}: none of its 3 crops has a label the model's alphabet "
                            f"writes in at most {longest} characters (dropped: unknown_char=3); fix its labels or "
                            "leave it out")
    with pytest.raises(DataError) as e:
        build(load_config(None, [*base, f"data.synth_real=[{two[0]},{bare}]"]), CS)
    assert str(e.value).startswith(f"data.synth_real: {bare}: no LMDB (data.mdb) or gt.txt found")


# ------------------------------------------------------------------------------------------------- the effects
def _batches(fonts, mix):
    opts = SynthOptions(text="words", charset="printable95", max_len=25)
    return SynthBatches(opts, 16, 5, ResizeNormalize(32, 100, keep_ratio=True, max_width=200, min_width=16,
                                                     width_step=4), Collate(CS, width_multiple=4), 4,
                        fonts=fonts, real=mix)


def _mix(paths, augment=None, seed=5):
    tf = ResizeNormalize(32, 100, keep_ratio=True, max_width=200, min_width=16, width_step=4)
    return RealMix(_sets(paths), [0.25, 0.25], seed, transform=tf, augment=augment)


def _items(fonts, mix, batches=range(3)):
    return [it for b in batches for it in _batches(fonts, mix).lines(b)]


@pytest.mark.parametrize("effect", list(EFFECTS))
def test_each_effect_changes_the_real_crops_only_keeps_sizes_and_follows_the_seed(effect, dejavu_fonts, two):
    plain = _items(dejavu_fonts, _mix(two))
    changed = _items(dejavu_fonts, _mix(two, RealAugment(**{effect: 1.0})))
    assert [label for _, label in plain] == [label for _, label in changed]
    real = [k for k, (_, label) in enumerate(plain) if label[:2] in ("Aa", "Bb")]
    assert len(real) >= 4
    rendered = [k for k in range(len(plain)) if k not in real]
    assert all(torch.equal(plain[k][0], changed[k][0]) for k in rendered)
    assert all(not torch.equal(plain[k][0], changed[k][0]) for k in real), effect
    for x, _ in changed:  # the loader's contract: 32 high, 16..200 wide, whole multiples of 4
        assert x.shape[:2] == (1, 32) and 16 <= x.shape[-1] <= 200 and x.shape[-1] % 4 == 0
    again = _items(dejavu_fonts, _mix(two, RealAugment(**{effect: 1.0})))
    assert all(torch.equal(x, y) for (x, _), (y, _) in zip(changed, again))
    other = _items(dejavu_fonts, _mix(two, RealAugment(**{effect: 1.0}), seed=6))
    assert any(not torch.equal(x, y) for (x, _), (y, _) in zip(changed, other) if x.shape == y.shape)


def test_effects_off_leave_the_batches_as_they_were(dejavu_fonts, two):
    plain = _items(dejavu_fonts, _mix(two))
    off = _items(dejavu_fonts, _mix(two, RealAugment()))
    assert all(torch.equal(x, y) and a == b for (x, a), (y, b) in zip(plain, off))


def test_one_effect_on_leaves_the_others_draws_alone(two):
    """blur's draws do not move when tighten joins: each effect draws from its own seeded generator."""
    img = Image.open(f"{two[0]}/IMG/3.png").convert("RGB")
    alone = RealAugment(blur=1.0)(RealAugment(tighten=1.0)(img, "Aa3", "k"), "Aa3", "k")
    both = RealAugment(tighten=1.0, blur=1.0)(img, "Aa3", "k")
    assert np.array_equal(np.asarray(alone), np.asarray(both))


def test_tighten_cuts_at_most_a_sliver_of_the_end_characters():
    """Columns and rows numbered by colour: what is left says exactly how much went at each edge."""
    w, h, label = 120, 30, "abcd"  # a character is about 30 px wide
    arr = np.zeros((h, w, 3), np.uint8)
    arr[..., 0], arr[..., 1] = np.arange(w)[None, :], np.arange(h)[:, None]
    cuts = []
    for seed in range(200):
        out = np.asarray(tighten(Image.fromarray(arr), label, random.Random(seed)))
        left, right = int(out[0, 0, 0]), w - 1 - int(out[0, -1, 0])
        top, bottom = int(out[0, 0, 1]), h - 1 - int(out[-1, 0, 1])
        cuts.append((left, right, top, bottom))
    assert max(max(c[0], c[1]) for c in cuts) <= round(TIGHTEN_X * w / len(label)) == 4
    assert max(max(c[2], c[3]) for c in cuts) <= round(TIGHTEN_Y * h) == 2
    assert sum(c[0] > 0 for c in cuts) > 100  # it does cut
    tiny = Image.new("RGB", (2, 2))
    assert tighten(tiny, "a", random.Random(0)).size == (2, 2)


def test_loosen_keeps_the_crop_whole_inside_a_margin_of_its_border():
    arr = np.full((20, 50, 3), 200, np.uint8)
    arr[5:15, 3:47] = 10  # dark text, touching no edge
    for seed in range(50):
        out = np.asarray(loosen(Image.fromarray(arr), "word", random.Random(seed)))
        extra_h, extra_w = out.shape[0] - 20, out.shape[1] - 50
        assert 0 <= extra_h <= 2 * round(LOOSEN_Y * 20) and 0 <= extra_w <= 2 * round(LOOSEN_X * 20)
        found = [(y, x) for y in range(extra_h + 1) for x in range(extra_w + 1)
                 if np.array_equal(out[y:y + 20, x:x + 50], arr)]
        assert found, seed
        margin = out.astype(int).copy()
        y, x = found[0]
        margin[y:y + 20, x:x + 50] = 200
        assert np.abs(margin - 200).max() <= 40  # the border's colour (its grain), never the text's
