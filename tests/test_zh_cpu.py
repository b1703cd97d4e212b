"""The Chinese line recipe built for CPU training across sittings: T = W/8 variants, batches rendered on the fly with
one line length each, rare characters drawn more often, the learning curve (lines seen, CPU-seconds, CPU) and the
sitting pack a run resumes from on another machine."""
from __future__ import annotations

import csv
import multiprocessing
import logging
import os
import random
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import torch

from crnn.charset import BUILTIN_CHARSETS, Charset
from crnn.cli.convert_ckpt import main as convert_main
from crnn.cli.train import main as train_main
from crnn.config import ConfigError, load_config
from crnn.data.collate import Collate
from crnn.data.lines import is_han, no_space_between, sample_line
from crnn.data.online import OnlineBatchSampler, SynthBatches
from crnn.data.synth import SynthOptions, mixed_runs
from crnn.data.transforms import ResizeNormalize
from crnn.engine.curve import COLUMNS, CostClock, append_curve, cpu_name, process_cpu_seconds, read_curve
from crnn.engine.optim import rewarm_factor
from crnn.engine.state import TrainState
from crnn.engine.trainer import fit
from crnn.model import build_model
from tests.conftest import REPO

CJK_FONT = "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"
LATIN_FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
CHARS = "0123456789的一是国人中大在有了不和"  # a small alphabet beyond ASCII: text lines, fast to train on
needs_fonts = pytest.mark.skipif(not (os.path.isfile(CJK_FONT) and os.path.isfile(LATIN_FONT)),
                                 reason="CJK font missing: apt-get install fonts-wqy-microhei fonts-dejavu-core "
                                        "(scripts/setup.sh does)")


# ---------------------------------------------------------------------------------------------- T = W/8
@pytest.mark.parametrize("variant, base", [("vgg_small_w8", "vgg_small"), ("vgg_w8", "vgg")])
def test_w8_variants_have_w_over_8_steps_and_the_weights_of_their_base(variant, base):
    model, ref = build_model(variant, 1, 40).eval(), build_model(base, 1, 40).eval()
    for w in (8, 15, 16, 17, 100, 280, 281, 400):
        with torch.no_grad():
            t = model(torch.zeros(1, 1, 32, w)).shape[1]
        assert t == model.output_length(w) == w // 8
        assert ref.output_length(w) == w // 4 + 1  # the base keeps ~8 steps per square character
    assert {k: v.shape for k, v in model.state_dict().items()} == {k: v.shape for k, v in ref.state_dict().items()}
    model.load_state_dict(ref.state_dict(), strict=True)  # the English model is a starting point as it is
    widths = torch.tensor([16, 99, 400])
    assert model.output_length(widths).tolist() == [2, 12, 50]


# ---------------------------------------------------------------------------------------------- rare characters
def test_uniform_share_decides_how_often_rare_characters_appear():
    def han(share: float) -> list[str]:
        opts = SynthOptions(charset="zh_gb2312", text="lines", max_len=12, uniform_share=share)
        rng = random.Random(0)
        return [c for _ in range(300) for c in sample_line(rng, opts) if is_han(c)]

    common, balanced = han(0.0), han(0.5)
    # corpus words by frequency repeat a few thousand characters; uniform draws spread over all 6,763
    assert len(set(balanced)) / len(balanced) > 1.3 * len(set(common)) / len(common)
    default = SynthOptions(charset="zh_gb2312", text="lines")
    assert default.uniform_share == pytest.approx(0.10)  # unchanged default: old seeds give the old lines
    with pytest.raises(ValueError, match="uniform_share"):
        SynthOptions(charset="zh_gb2312", uniform_share=1.5)


# ---------------------------------------------------------------------------------------------- spaces
def test_chinese_lines_set_spaces_only_where_chinese_print_does():
    """No space next to full-width punctuation or between two full-width characters (the model read such gaps as
    stray spaces after a comma); spaces around Latin words stay, and lines of space-separated words keep theirs."""
    assert no_space_between("，", "P") and no_space_between("的", "一") and no_space_between("a", "。")
    assert not no_space_between("用", "P") and not no_space_between("n", "编") and not no_space_between("a", "b")
    rng, opts = random.Random(0), SynthOptions(charset="zh_gb2312", text="lines", max_len=20)
    lines = [sample_line(rng, opts) for _ in range(2000)]
    around = [(t[i - 1], t[i + 1]) for t in lines for i, c in enumerate(t) if c == " "]
    assert [p for p in around if no_space_between(*p)] == []
    assert sum(is_han(a) and b.isascii() and b.isalpha() for a, b in around) > 50  # 使用 Python
    latin = SynthOptions(charset=BUILTIN_CHARSETS["printable94"] + " ", text="lines", max_len=20)
    assert sum(sample_line(rng, latin).count(" ") for _ in range(100)) > 100  # word list joined by spaces


# ---------------------------------------------------------------------------------------------- mixed faces
def test_mixed_runs_put_ascii_runs_in_the_western_face():
    cjk, latin = object(), object()
    runs = mixed_runs("2009年Python版 v2，好", cjk, latin)  # type: ignore[arg-type]
    assert [(t, f is latin) for t, f in runs] == [("2009", True), ("年", False), ("Python", True), ("版 ", False),
                                                  ("v2", True), ("，好", False)]
    assert mixed_runs("的一是", cjk, latin) == [("的一是", cjk)]  # type: ignore[arg-type]


@needs_fonts
def test_mixed_fonts_draw_numbers_of_a_cjk_line_in_a_western_face(monkeypatch):
    import crnn.data.synth as S

    drawn: list[list[tuple[str, str]]] = []
    real = S._text_masks

    def spy(text, font, spacing, stroke, runs=()):
        drawn.append([(t, f.path) for t, f in runs] or [(text, font.path)])
        return real(text, font, spacing, stroke, runs)

    monkeypatch.setattr(S, "_text_masks", spy)
    fonts = [CJK_FONT, LATIN_FONT]
    mixed = SynthOptions(charset=CHARS, text="lines", max_len=8, mixed_fonts=1.0)
    S.render_word("12的一 3", random.Random(0), fonts, mixed)
    assert drawn[-1] == [("12", LATIN_FONT), ("的一 ", CJK_FONT), ("3", LATIN_FONT)]
    S.render_word("的一是", random.Random(0), fonts, mixed)  # nothing to mix: one face
    assert drawn[-1] == [("的一是", CJK_FONT)]
    S.render_word("12的一", random.Random(0), fonts, SynthOptions(charset=CHARS, text="lines", max_len=8))
    assert drawn[-1] == [("12的一", CJK_FONT)]  # off by default
    with pytest.raises(ValueError, match="mixed_fonts"):
        SynthOptions(charset=CHARS, mixed_fonts=-0.1)


@needs_fonts
def test_mixed_fonts_off_gives_the_old_lines_of_a_seed():
    from crnn.data.synth import make_sample

    fonts = [CJK_FONT, LATIN_FONT]
    old = SynthOptions(charset=CHARS, text="lines", max_len=8)
    off = SynthOptions(charset=CHARS, text="lines", max_len=8, mixed_fonts=0.0)
    on = SynthOptions(charset=CHARS, text="lines", max_len=8, mixed_fonts=1.0)
    samples = [(make_sample(i, 4, fonts, old), make_sample(i, 4, fonts, off), make_sample(i, 4, fonts, on))
               for i in range(12)]
    assert all(a == b for a, b, _ in samples)
    # a line with digits and Hanzi is drawn otherwise when mixed; its label never changes
    assert any(a[0] != c[0] for a, _, c in samples if any(ch.isdigit() for ch in a[1]))
    assert [a[1] for a, _, _ in samples] == [c[1] for _, _, c in samples]


@needs_fonts
def test_data_engine_levers_off_give_the_old_lines_and_on_keep_every_label():
    """Issue 43's levers (squeeze, weight, jitter) at 0 draw the very bytes of before; at 1 every line changes, never
    its label."""
    from crnn.data.synth import make_sample

    fonts = [CJK_FONT, LATIN_FONT]
    old = SynthOptions(charset=CHARS, text="lines", max_len=8)
    off = SynthOptions(charset=CHARS, text="lines", max_len=8, squeeze=0.0, weight=0.0, jitter=0.0, elastic=0.0)
    for lever in ("squeeze", "weight", "jitter", "elastic"):
        on = SynthOptions(charset=CHARS, text="lines", max_len=8, **{lever: 1.0})
        samples = [(make_sample(i, 5, fonts, old), make_sample(i, 5, fonts, off), make_sample(i, 5, fonts, on))
                   for i in range(8)]
        assert all(a == b for a, b, _ in samples), lever
        assert sum(a[0] != c[0] for a, _, c in samples) >= 7, lever
        assert [a[1] for a, _, _ in samples] == [c[1] for _, _, c in samples], lever
    for lever in ("squeeze", "weight", "jitter", "elastic"):
        with pytest.raises(ValueError, match=f"{lever} must be within 0..1"):
            SynthOptions(charset=CHARS, **{lever: 1.5})


def test_elastic_bends_strokes_a_few_pixels_and_keeps_the_ink():
    """data.synth_elastic: every mask layer moved by a smooth field no farther than 7 % of the font size (+1 px of
    interpolation), the same shape, about the same ink, and a different picture for every seed."""
    import numpy as np

    from crnn.data.synth import _elastic

    fs = 40
    stack = np.zeros((48, 160, 3), np.uint8)
    stack[10:38, 20:24, :2] = 255  # a vertical stroke in the fill and outline layers
    stack[22:26, 30:140, :2] = 255  # a horizontal one
    outs = [_elastic(stack, random.Random(seed), fs) for seed in range(12)]
    assert all(o.shape == stack.shape and o.dtype == stack.dtype for o in outs)
    assert all(abs(int(o[..., 0].sum()) - int(stack[..., 0].sum())) < 0.15 * int(stack[..., 0].sum()) for o in outs)
    assert all((o[..., 2] == 0).all() for o in outs)  # an empty layer stays empty
    reach = int(0.07 * fs) + 2
    for o in outs:
        cols = np.nonzero(o[5:43, :, 0].max(axis=0) > 127)[0]  # the vertical stroke's ink stays near its columns
        assert cols.min() >= 20 - reach and o[:, : 20 - reach, 0].max() == 0
    assert len({o.tobytes() for o in outs}) == 12 and all((o != stack).any() for o in outs)


def test_squeeze_scales_the_width_only_within_half_to_one_and_a_half():
    import numpy as np

    from crnn.data.synth import _squeeze

    stack = np.zeros((30, 200, 3), np.uint8)
    stack[5:25, 10:190] = 255
    widths = [_squeeze(stack, random.Random(seed)).shape for seed in range(40)]
    assert all(h == 30 and c == 3 for h, _, c in widths)
    assert min(w for _, w, _ in widths) < 130 and max(w for _, w, _ in widths) > 260  # both ways, most of the range
    assert all(100 <= w <= 300 for _, w, _ in widths)


def test_reweigh_makes_strokes_bolder_or_thinner_and_leaves_the_shadow():
    import numpy as np

    from crnn.data.synth import _reweigh

    stack = np.zeros((40, 60, 3), np.uint8)
    stack[10:30, 20:26, :2] = 255  # a vertical stroke, 6 px wide, in fill and outline
    stack[0:5, 0:5, 2] = 255  # a shadow patch
    inks = {}
    for seed in range(20):
        out = _reweigh(stack, random.Random(seed), fs=30)
        inks.setdefault(int(out[..., 0].sum() > stack[..., 0].sum()), []).append(out)
        assert (out[..., 2] == stack[..., 2]).all() and (out[..., 0] == out[..., 1]).all()
    bold, thin = inks[1][0], inks[0][0]
    assert (bold[20, 19:27, 0] == 255).all() and bold[20, 18, 0] == 0 == bold[20, 27, 0]  # 1 px wider each side
    assert (thin[20, 21:25, 0] == 255).all() and thin[20, 20, 0] == 0 and thin[20, 25, 0] == 0
    small = _reweigh(stack, random.Random(0), fs=12)  # small text is never thinned
    assert small[..., 0].sum() > stack[..., 0].sum()


@needs_fonts
def test_jitter_draws_each_glyph_at_its_own_size_and_baseline(monkeypatch):
    import crnn.data.synth as S

    drawn: list = []
    real = S._text_masks

    def spy(text, font, spacing, stroke, runs=()):
        drawn.append((font.size, list(runs)))
        return real(text, font, spacing, stroke, runs)

    monkeypatch.setattr(S, "_text_masks", spy)
    S.render_word("的一是国人", random.Random(1), [CJK_FONT], SynthOptions(charset=CHARS, text="lines", max_len=8,
                                                                           jitter=1.0))
    size, runs = drawn[-1]
    assert "".join(t for t, _, _ in runs) == "的一是国人" and all(len(t) == 1 for t, _, _ in runs)
    assert all(0.87 * size <= f.size <= 1.13 * size and abs(dy) <= 0.07 * size for _, f, dy in runs)
    assert len({f.size for _, f, _ in runs}) > 1 and len({round(dy, 3) for _, _, dy in runs}) > 1


def test_data_engine_levers_are_checked_in_config_and_cli(tmp_path, capsys):
    from crnn.cli.synth import main as synth_main
    from crnn.data.synth import synth_options

    cfg = load_config(None, [f"model.charset={CHARS}", "data.synth_squeeze=0.3", "data.synth_weight=0.2",
                             "data.synth_jitter=0.1"])
    opts = synth_options(cfg)
    assert (opts.squeeze, opts.weight, opts.jitter) == (0.3, 0.2, 0.1)
    with pytest.raises(ConfigError, match="data.synth_weight: must be within 0..1, got 2"):
        load_config(None, [f"model.charset={CHARS}", "data.synth_weight=2"])
    with pytest.raises(SystemExit) as e:
        synth_main(["--out", str(tmp_path / "x.lmdb"), "--squeeze", "-1"])
    assert e.value.code == 2 and "--squeeze must be within 0..1" in capsys.readouterr().err
    assert not (tmp_path / "x.lmdb").exists()


# ---------------------------------------------------------------------------------------------- online batches
def _batches(batch_size: int = 6, seed: int = 3, pool: int = 1) -> SynthBatches:
    cs = Charset.from_spec(CHARS)
    opts = SynthOptions(charset=CHARS, text="lines", max_len=8)
    return SynthBatches(opts, batch_size, seed, ResizeNormalize(32, 100, keep_ratio=True, max_width=200),
                        Collate(cs), batches_per_epoch=8, fonts=[CJK_FONT, LATIN_FONT], pool=pool)


@needs_fonts
def test_online_batches_are_reproducible_and_share_one_line_length():
    ds = _batches()
    lengths = set()
    for b in range(6):
        (first,), (again,) = ds[b], ds[b]
        assert first.labels == again.labels and torch.equal(first.images, again.images)
        assert len(first) == 6 and len({len(label) for label in first.labels}) == 1  # one length per batch
        assert len(first.labels[0]) == ds.length_of(b)
        lengths.add(ds.length_of(b))
    assert len(lengths) > 1  # lengths vary from batch to batch
    assert _batches(seed=4)[0][0].labels != ds[0][0].labels
    assert ds[0][0].labels != ds[1][0].labels


@needs_fonts
def test_a_pool_regroups_its_lines_by_width():
    plain, pooled = _batches(), _batches(pool=4)
    assert len(plain) == 8 and len(pooled) == 2
    for g in range(2):
        groups = pooled[g]
        singles = [plain[b][0] for b in range(4 * g, 4 * g + 4)]
        assert len(groups) == 4 and all(len(b) == 6 for b in groups)
        assert sorted(x for b in groups for x in b.labels) == sorted(x for b in singles for x in b.labels)

        def padded(batches):
            return sum(b.images.shape[0] * b.images.shape[-1] for b in batches)
        assert padded(groups) <= padded(singles)  # the same lines, padded less
        spans = [(int(b.widths.min()), int(b.widths.max())) for b in groups]
        ordered = sorted(spans)
        assert all(hi <= nxt_lo + 4 for (_, hi), (nxt_lo, _) in zip(ordered, ordered[1:]))  # width bands
        assert [b.labels for b in pooled[g]] == [b.labels for b in groups]  # reproducible


@needs_fonts
def test_pooled_loader_skips_in_batches():
    from crnn.data.loader import PooledTrainLoader
    from crnn.data.online import identity
    from crnn.data.samplers import SkippableSampler
    from torch.utils.data import DataLoader

    ds = _batches(pool=4)

    def loader():
        sampler = SkippableSampler(OnlineBatchSampler(len(ds)))
        return PooledTrainLoader(DataLoader(ds, batch_size=None, sampler=sampler, collate_fn=identity), sampler, 4)

    whole = [b.labels for b in loader()]
    assert len(whole) == len(loader()) == 8
    for n in (0, 3, 4, 6):
        assert [b.labels for b in loader().skip_batches(n)] == whole[n:]


def test_online_sampler_gives_ranks_disjoint_batches_and_every_epoch_new_ones():
    seen = []
    for epoch in range(3):
        per_rank = []
        for rank in range(2):
            s = OnlineBatchSampler(5, rank, 2)
            s.set_epoch(epoch)
            per_rank.append(list(s))
            assert len(s) == 5 == len(per_rank[-1])
        assert not set(per_rank[0]) & set(per_rank[1])
        seen += per_rank[0] + per_rank[1]
    assert sorted(seen) == list(range(30))  # no batch twice, none skipped
    with pytest.raises(ValueError):
        OnlineBatchSampler(5, 2, 2)


def test_online_config_is_checked():
    with pytest.raises(ConfigError, match="data.synth_num"):
        load_config(None, ["data.synth_online=true", "data.synth_num=0"])
    with pytest.raises(ConfigError, match="data.synth_pool"):
        load_config(None, ["data.synth_pool=0"])
    with pytest.raises(ConfigError, match="data.synth_uniform_share"):
        load_config(None, ["data.synth_uniform_share=2"])
    with pytest.raises(ConfigError, match="data.synth_mixed_fonts"):
        load_config(None, ["data.synth_mixed_fonts=1.5"])
    with pytest.raises(ConfigError, match="model.variant"):
        load_config(None, ["model.variant=vgg_w16"])


# ---------------------------------------------------------------------------------------------- training
def _tiny(tmp_path: Path, out: str, *extra: str) -> list[str]:
    return [f"model.charset={CHARS}", "model.variant=vgg_small_w8", "model.hidden=16", "data.synth_online=true",
            "data.synth_num=64", "data.max_label_length=6", "data.keep_ratio=true", "data.width=96",
            "data.max_width=128", "data.batch_size=4", "data.num_workers=0", "train.amp=off", "train.threads=1",
            "train.log_every=1", "train.warmup_steps=2", "train.tensorboard=false", "train.show_predictions=0",
            "train.lr=3e-3", "train.steps=6", "train.save_every=2", "train.val_every=0",
            f"train.output_dir={tmp_path / out}", *extra]


@pytest.fixture(scope="module")
def zh_val(tmp_path_factory) -> Path:
    """A folder of 8 lines of the small alphabet with gt.txt (validation)."""
    from PIL import Image

    folder = tmp_path_factory.mktemp("zhval")
    ds = SynthBatches(SynthOptions(charset=CHARS, text="lines", max_len=6, split="all"), 8, 99,
                      lambda img: img, lambda items: items, 1, fonts=[CJK_FONT, LATIN_FONT])
    lines = []
    for i, (img, label) in enumerate(ds.lines(0)):
        assert isinstance(img, Image.Image)
        img.save(folder / f"{i}.png")
        lines.append(f"{i}.png\t{label}\n")
    (folder / "gt.txt").write_text("".join(lines), encoding="utf-8")
    return folder


@needs_fonts
@pytest.mark.parametrize("pool", [1, 2])
def test_online_training_resumes_to_the_same_weights(tmp_path, pool):
    p = f"data.synth_pool={pool}"
    straight = fit(load_config(None, _tiny(tmp_path, "a", p)))
    assert straight["step"] == 6 and straight["images_seen"] == 24
    first = fit(load_config(None, _tiny(tmp_path, "b", p, "train.stop_after=3")))  # mid-pool with pool 2
    assert first["ended"] == "stop_after"
    fit(load_config(None, _tiny(tmp_path, "b", p, "train.resume=auto")))
    a = torch.load(tmp_path / "a/last.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "b/last.pt", weights_only=True)["model"]
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=0, atol=1e-6, msg=k)


@needs_fonts
def test_curve_rows_count_lines_and_cpu_and_a_sitting_pack_continues_them(tmp_path, zh_val, capsys):
    args = _tiny(tmp_path, "run", f"data.val=[{zh_val}]", "train.val_every=2", "train.steps=4")
    assert train_main(args) == 0
    rows = read_curve(tmp_path / "run/curve.tsv")
    assert list(rows[0]) == list(COLUMNS)
    assert [int(r["step"]) for r in rows] == [2, 4] and [int(r["lines_seen"]) for r in rows] == [8, 16]
    assert all(r["set"] == str(zh_val) and r["cpu"] == cpu_name() and r["world_size"] == "1" for r in rows)
    assert 0 <= float(rows[0]["cpu_seconds"]) <= float(rows[1]["cpu_seconds"])
    assert 0.0 <= float(rows[1]["cer"]) and float(rows[1]["wall_seconds"]) > 0

    pack = tmp_path / "pack.pt"
    assert convert_main([str(tmp_path / "run/last.pt"), str(pack), "--pack"]) == 0
    assert "a sitting pack at step 4 (16 lines seen" in capsys.readouterr().out
    obj = torch.load(pack, weights_only=True)
    assert obj["kind"] == "weights" and obj["resumable"] is True and "optimizer" not in obj
    assert all(v.dtype == torch.float16 for v in obj["model"].values() if v.is_floating_point())
    assert obj["state"]["step"] == 4 and obj["state"]["images_seen"] == 16
    assert pack.stat().st_size < 0.6 * (tmp_path / "run/last.pt").stat().st_size
    wide = tmp_path / "wide.pt"  # the shipped pack of the Chinese model is read at 1.15x the trained widths
    assert convert_main([str(tmp_path / "run/last.pt"), str(wide), "--pack", "--read-width-scale", "1.15"]) == 0
    assert torch.load(wide, weights_only=True)["config"]["data"]["read_width_scale"] == 1.15
    assert obj["config"]["data"]["read_width_scale"] == 1.0
    fonts = obj["state"]["synth_fonts"]  # the names of the files the lines were drawn from
    assert os.path.basename(CJK_FONT) in fonts and fonts == sorted(fonts)
    obj["state"]["synth_fonts"] = [f for f in fonts if f != os.path.basename(CJK_FONT)] + ["Gone-Regular.ttf"]
    torch.save(obj, pack)  # as if the sitting before had other fonts installed

    # another machine: a fresh output folder with the pack and the committed curve
    (tmp_path / "next").mkdir()
    shutil.copy(pack, tmp_path / "next/last.pt")
    shutil.copy(tmp_path / "run/curve.tsv", tmp_path / "next/curve.tsv")
    more = _tiny(tmp_path, "next", f"data.val=[{zh_val}]", "train.val_every=2", "train.steps=6",
                 "train.resume=auto")
    capsys.readouterr()
    assert train_main(more) == 0
    err = capsys.readouterr().err
    assert f"(new: {os.path.basename(CJK_FONT)}; gone: Gone-Regular.ttf): the training data changes" in err, err
    rows = read_curve(tmp_path / "next/curve.tsv")
    assert [int(r["step"]) for r in rows] == [2, 4, 6] and int(rows[-1]["lines_seen"]) == 24
    assert float(rows[-1]["cpu_seconds"]) >= float(rows[1]["cpu_seconds"])
    last = torch.load(tmp_path / "next/last.pt", weights_only=True)
    assert last["kind"] == "training" and last["state"]["optimizer_restart"] == 4
    assert last["state"]["synth_fonts"] == fonts  # this sitting's own fonts from now on


def test_pack_needs_a_training_checkpoint(tmp_path, capsys):
    from crnn.engine.checkpoint import model_checkpoint, save_checkpoint

    cfg = load_config(None, ["model.hidden=8"])
    cs = Charset.from_spec("digits")
    w = tmp_path / "w.pt"
    save_checkpoint(model_checkpoint(build_model("vgg_small", 1, cs.num_classes, 8), cfg, cs), w)
    assert convert_main([str(w), str(tmp_path / "p.pt"), "--pack"]) == 2
    err = capsys.readouterr().err
    assert "--pack needs a training checkpoint" in err and str(w) in err and err.count("\n") == 1
    assert not (tmp_path / "p.pt").exists()


def test_sitting_report_refuses_while_training_runs(tmp_path):
    """zh_sitting.sh report measures lines/s: never beside the training it reports on."""
    (tmp_path / "scripts").mkdir()
    for script in ("zh_sitting.sh", "sitting.sh"):
        shutil.copy(REPO / "scripts" / script, tmp_path / "scripts")
    (tmp_path / "runs" / "zh").mkdir(parents=True)
    busy = subprocess.Popen(["sleep", "60"])
    try:
        (tmp_path / "runs" / "zh" / "train.pid").write_text(str(busy.pid))
        r = subprocess.run(["bash", str(tmp_path / "scripts" / "zh_sitting.sh"), "report"], capture_output=True,
                           text=True, timeout=60)
    finally:
        busy.kill()
        busy.wait()
    assert r.returncode == 1 and "training is running; stop it first" in r.stderr and r.stdout == ""
    usage = subprocess.run(["bash", str(tmp_path / "scripts" / "zh_sitting.sh")], capture_output=True, text=True)
    assert usage.returncode == 2 and "zh_sitting.sh report" in usage.stdout


def test_sitting_start_refuses_a_run_at_the_end_of_its_schedule(tmp_path):
    """sitting.sh start on a pack whose step is the recipe's train.steps: one line saying how to go on, no training
    started (it would start, find nothing to do and stop); a bad override is a one-line error too."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "sitting.sh", tmp_path / "scripts")
    (tmp_path / "scripts" / "setup.sh").write_text("exit 0\n")  # the real one builds a venv: here it is linked
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    shutil.copytree(REPO / "configs", tmp_path / "configs")
    (tmp_path / "runs" / "zh").mkdir(parents=True)
    from crnn.model import CRNN

    torch.save({"step": 20_000, "model": CRNN("vgg_small", 1, 10).state_dict()}, tmp_path / "runs" / "zh" / "last.pt")
    if not (REPO / ".venv" / "bin" / "python").exists():
        pytest.skip("needs the project's .venv (scripts/setup.sh)")
    run = lambda *a: subprocess.run(["bash", str(tmp_path / "scripts" / "sitting.sh"), "zh", "start", *a],
                                    cwd=tmp_path, capture_output=True, text=True, timeout=120)
    r = run()
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "sitting: the run stands at step 20,000, the end of its schedule (configs/shipped_zh.yaml: train.steps "
        "20,000); to train on, raise train.steps in configs/shipped_zh.yaml (or give train.steps=N): the cosine "
        "then runs over the longer schedule")
    assert not (tmp_path / "runs" / "zh" / "train.pid").exists()
    bad = run("train.steps=many")
    assert bad.returncode == 1 and bad.stderr.strip().splitlines()[-1].startswith("sitting: error: ")
    assert "train.steps" in bad.stderr and not (tmp_path / "runs" / "zh" / "train.pid").exists()


def test_rewarm_after_an_optimizer_restart():
    assert rewarm_factor(100, -1, 10) == 1.0  # no restart
    assert rewarm_factor(100, 100, 10) == pytest.approx(0.1)
    assert rewarm_factor(104, 100, 10) == pytest.approx(0.5)
    assert rewarm_factor(109, 100, 10) == 1.0 and rewarm_factor(500, 100, 10) == 1.0


# ---------------------------------------------------------------------------------------------- CPU-seconds
def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_cost_clock_counts_live_and_finished_children():
    st = TrainState()
    clock = CostClock(torch.device("cpu"))
    ctx = multiprocessing.get_context("fork")
    live = ctx.Process(target=_burn, args=(0.6,))
    live.start()
    while live.is_alive() and process_cpu_seconds() - clock.cpu0 < 0.5:
        time.sleep(0.05)
    clock.advance(st)  # the child still runs: read from /proc
    assert st.cpu_seconds >= 0.4
    live.join()
    done = ctx.Process(target=_burn, args=(0.4,))
    done.start()
    done.join()  # reaped: counted by RUSAGE_CHILDREN
    clock.advance(st)
    assert st.cpu_seconds >= 0.9 and st.wall_seconds > 0


def test_append_curve_writes_the_header_once(tmp_path):
    st = TrainState(step=10, images_seen=640, cpu_seconds=12.5, wall_seconds=7)
    for _ in range(2):
        append_curve(tmp_path, st, {"heldout": {"cer": 0.25, "word_acc": 0.5, "ned_similarity": 0.8}}, "cpu", 2,
                     "bf16")
    with open(tmp_path / "curve.tsv", encoding="utf-8") as f:
        lines = list(csv.reader(f, delimiter="\t"))
    assert lines[0] == list(COLUMNS) and len(lines) == 3
    row = dict(zip(COLUMNS, lines[1]))
    assert row["lines_seen"] == "640" and row["cer"] == "0.25000" and row["amp"] == "bf16"
    assert row["cpu_seconds"] == "12.50" and row["wall_seconds"] == "7.00"


def test_shipped_recipe_is_the_cpu_one():
    cfg = load_config(REPO / "configs/shipped_zh.yaml")
    assert cfg.model.variant == "vgg_small_w8" and cfg.model.charset == "zh_gb2312"
    assert cfg.data.synth_online and cfg.data.val[0] == "data/zh_bench/heldout"  # the curve's and best.pt's set
    assert cfg.data.val[1:] == ["data/zh_bench/unseen_clean", "data/zh_bench/unseen_print",
                                "data/zh_bench/dev_print"]  # issue 43's development faces; never the final ones
    assert cfg.train.protocol == "unicode"
    assert 0 < cfg.data.synth_squeeze <= 1 and 0 < cfg.data.synth_weight <= 1 and 0 < cfg.data.synth_jitter <= 1
    assert cfg.data.synth_elastic == 0.3  # the lever measured alone (lever_probe.sh), kept from step 122,511


def test_plot_curve_draws_both_panels_and_names_a_missing_set(tmp_path, capsys):
    import importlib.util

    from PIL import Image

    spec = importlib.util.spec_from_file_location("plot_curve", REPO / "scripts/plot_curve.py")
    plot_curve = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot_curve)
    for name, cers in (("a", (0.6, 0.3, 0.1)), ("b", (0.7, 0.5, 0.4))):
        (tmp_path / name).mkdir()
        for i, cer in enumerate(cers, 1):
            st = TrainState(step=500 * i, images_seen=32000 * i, cpu_seconds=600.0 * i)
            metrics = {"data/heldout": {"cer": cer, "word_acc": 0.1, "ned_similarity": 0.5}}
            append_curve(tmp_path / name, st, metrics, "cpu", 2, "bf16")
    out = tmp_path / "curve.png"
    args = [f"{tmp_path / 'a' / 'curve.tsv'}=new", f"{tmp_path / 'b' / 'curve.tsv'}=old", "--target", "0.03"]
    assert plot_curve.main([*args, "--out", str(out)]) == 0
    img = Image.open(out)
    assert img.width == 2 * plot_curve.PANEL_W and img.height > plot_curve.PANEL_H
    assert plot_curve.load(args[0], "heldout")[1][-1] == pytest.approx((0.5, 0.096, 0.1))
    assert plot_curve.main([args[0], "--set", "nope", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "no rows for set 'nope'" in err and err.count("\n") == 1
    # one file, two of its validation sets as two lines (PATH@SET=NAME); a set named per line wins over --set
    st = TrainState(step=2000, images_seen=128000, cpu_seconds=2400.0)
    append_curve(tmp_path / "a", st, {"data/heldout": {"cer": 0.08, "word_acc": 0.5, "ned_similarity": 0.9},
                                       "data/print": {"cer": 0.02, "word_acc": 0.8, "ned_similarity": 0.98}},
                 "cpu", 2, "bf16")
    tsv = tmp_path / "a" / "curve.tsv"
    assert plot_curve.load(f"{tsv}@print=p", "heldout") == ("p", [pytest.approx((2400 / 3600, 0.128, 0.02))])
    assert plot_curve.load(f"{tsv}@data/heldout", None)[1][-1] == pytest.approx((2400 / 3600, 0.128, 0.08))
    assert plot_curve.main([f"{tsv}@heldout=damaged", f"{tsv}@print=print", "--out", str(out)]) == 0
    assert plot_curve.main([f"{tsv}@nope", "--out", str(out)]) == 1
    assert "no rows for set 'nope'" in capsys.readouterr().err


@needs_fonts
def test_online_batches_keep_data_min_width():
    """Lines rendered on the fly are stretched to data.min_width like stored crops (one short line is ~20 px)."""
    from crnn.data.loader import build_online_loader

    opts = SynthOptions(charset=CHARS, text="lines", max_len=1, split="all")
    common = dict(height=32, width=96, keep_ratio=True, max_width=128, channels=1, batch_size=4, num_workers=0,
                  augment=False, seed=3, batches_per_epoch=2)
    narrow = next(iter(build_online_loader(opts, Charset.from_spec(CHARS), **common)))
    wide = next(iter(build_online_loader(opts, Charset.from_spec(CHARS), **common, min_width=120)))
    assert narrow.images.shape[-1] < 120 <= wide.images.shape[-1]
    assert narrow.labels == wide.labels


def _read_shapes(cfg, tmp_path: Path, widths) -> tuple[torch.nn.Module, Charset, list[tuple]]:
    """A tiny model saved with ``cfg`` and read by crnn.Recognizer from that file: (model, alphabet, the input shape of
    every forward pass for blank images ``widths`` px wide)."""
    from PIL import Image

    from crnn.engine.checkpoint import model_checkpoint, save_checkpoint
    from crnn.infer import Recognizer

    cs = Charset.from_spec(CHARS)
    model = build_model("vgg_small_w8", 1, cs.num_classes, 16)
    save_checkpoint(model_checkpoint(model, cfg, cs), tmp_path / "m.pt")
    rec = Recognizer.from_checkpoint(tmp_path / "m.pt", device="cpu")
    calls: list[tuple] = []
    rec.model.register_forward_pre_hook(lambda m, args: calls.append(tuple(args[0].shape)))
    rec.predict_images([Image.new("L", (w, 32), 200) for w in widths])
    return model, cs, calls


def test_width_step_rounds_keep_ratio_widths_everywhere_a_model_is_read(tmp_path):
    """data.width_step: keep-ratio widths rounded to a multiple of it in the transform, the evaluation and online
    training loaders, crnn.Recognizer (from the checkpoint's config, where lines of nearly equal width then share one
    forward pass) and the export metadata; the default (1) changes nothing; impossible settings are config errors."""
    from PIL import Image

    from crnn.data.loader import build_eval_loader, build_online_loader, make_transform, preprocess_options
    from crnn.export import export_metadata

    cfg = load_config(None, ["data.keep_ratio=true", "data.max_width=320", "data.width_step=8", "model.hidden=16",
                             "model.variant=vgg_small_w8", f"model.charset={CHARS}"])
    geom = dict(height=32, width=100, keep_ratio=True, max_width=320, channels=1)
    t = make_transform(**geom, **preprocess_options(cfg.data))
    assert [t(Image.new("L", (w, 32), 200)).shape[-1] for w in (61, 67, 69, 3, 330)] == [64, 64, 72, 8, 320]
    default = make_transform(**geom, **preprocess_options(load_config(None, ["data.keep_ratio=true"]).data))
    assert [default(Image.new("L", (w, 32), 200)).shape[-1] for w in (61, 67, 3)] == [61, 67, 8]

    folder = tmp_path / "val"
    folder.mkdir()
    for i, w in enumerate((61, 67, 90)):
        Image.new("L", (w, 32), 200).save(folder / f"{i}.png")
    (folder / "gt.txt").write_text("0.png\t的\n1.png\t一\n2.png\t是\n", encoding="utf-8")
    batch = next(iter(build_eval_loader(str(folder), **geom, batch_size=3, num_workers=0,
                                        **preprocess_options(cfg.data))))
    assert batch.widths.tolist() == [64, 64, 88]
    opts = SynthOptions(charset=CHARS, text="lines", max_len=4, split="all")
    online = next(iter(build_online_loader(opts, Charset.from_spec(CHARS), **geom, batch_size=4, num_workers=0,
                                           augment=False, seed=3, batches_per_epoch=2,
                                           **preprocess_options(cfg.data))))
    assert online.widths.tolist() and all(w % 8 == 0 for w in online.widths.tolist())

    model, cs, calls = _read_shapes(cfg, tmp_path, (61, 63, 66, 90))
    assert sorted(calls) == [(1, 1, 32, 88), (3, 1, 32, 64)]  # 61, 63 and 66 px share one batch at 64
    assert export_metadata(model, cs, cfg)["width_step"] == 8

    with pytest.raises(ConfigError, match=r"data.width_step: must be between 1 \(off\) and data.max_width"):
        load_config(None, ["data.keep_ratio=true", "data.width_step=0"])
    with pytest.raises(ConfigError, match="data.width_step: rounds keep-ratio widths"):
        load_config(None, ["data.width_step=8"])


def test_read_width_scale_widens_reading_but_not_training(tmp_path, capsys):
    """data.read_width_scale: keep-ratio widths x S wherever a model is read (the eval loaders, the trainer's
    validation, crnn.Recognizer from the checkpoint's config, the export metadata), never in training batches;
    crnn-convert-ckpt --read-width-scale stores it in a checkpoint (a sitting pack too); bad values are refused."""
    from PIL import Image

    from crnn.data.loader import build_eval_loader, make_transform, preprocess_options, read_options
    from crnn.engine.checkpoint import model_checkpoint, save_checkpoint
    from crnn.data.feed import build
    from crnn.export import export_metadata
    from crnn.infer import Recognizer

    base = ["data.keep_ratio=true", "data.max_width=320", "model.hidden=16", "model.variant=vgg_small_w8",
            f"model.charset={CHARS}"]
    cfg = load_config(None, [*base, "data.read_width_scale=1.25"])
    geom = dict(height=32, width=100, keep_ratio=True, max_width=320, channels=1)
    widths = (60, 100, 3, 300)
    read = make_transform(**geom, **read_options(cfg.data))
    assert [read(Image.new("L", (w, 32), 200)).shape[-1] for w in widths] == [75, 125, 8, 320]
    train = make_transform(**geom, **preprocess_options(cfg.data))  # what the training loaders get
    assert [train(Image.new("L", (w, 32), 200)).shape[-1] for w in widths] == [60, 100, 8, 300]
    plain = make_transform(**geom, **read_options(load_config(None, base).data))  # default 1: as before
    assert [plain(Image.new("L", (w, 32), 200)).shape[-1] for w in widths] == [60, 100, 8, 300]

    folder = tmp_path / "val"
    folder.mkdir()
    for i, w in enumerate((60, 100)):
        Image.new("L", (w, 32), 200).save(folder / f"{i}.png")
    (folder / "gt.txt").write_text("0.png\t的\n1.png\t一\n", encoding="utf-8")
    batch = next(iter(build_eval_loader(str(folder), **geom, batch_size=2, num_workers=0,
                                        **read_options(cfg.data))))
    assert batch.widths.tolist() == [75, 125]
    run = load_config(None, [*base, "data.read_width_scale=1.25", f"data.val=[{folder}]", "data.train=[]",
                             "data.synth_online=true", "data.synth_num=8", "data.batch_size=2", "data.num_workers=0",
                             "data.max_label_length=4", f"train.output_dir={tmp_path / 'run'}"])
    if os.path.isfile(CJK_FONT):
        feed = build(run, Charset.from_spec(CHARS))
        assert next(iter(feed.val[str(folder)])).widths.tolist() == [75, 125]  # validation reads as crnn-eval does
        assert feed.train.loader.dataset.transform.width_scale == 1.0  # training lines keep their own widths

    model, cs, calls = _read_shapes(cfg, tmp_path, (60,))
    assert calls == [(1, 1, 32, 75)]
    assert export_metadata(model, cs, cfg)["width_scale"] == 1.25

    unscaled = load_config(None, base)
    save_checkpoint(model_checkpoint(model, unscaled, cs), tmp_path / "u.pt")
    assert convert_main([str(tmp_path / "u.pt"), str(tmp_path / "s.pt"), "--read-width-scale", "1.15"]) == 0
    assert "read with data.read_width_scale 1.15" in capsys.readouterr().out
    assert Recognizer.from_checkpoint(tmp_path / "s.pt", device="cpu").transform.width_scale == 1.15
    assert torch.load(tmp_path / "u.pt", weights_only=True)["config"]["data"].get("read_width_scale", 1.0) == 1.0
    for bad, msg in (("3", "--read-width-scale must be within 0.5..2"), ("0", "within 0.5..2")):
        assert convert_main([str(tmp_path / "u.pt"), str(tmp_path / "x.pt"), "--read-width-scale", bad]) == 2
        assert msg in capsys.readouterr().err and not (tmp_path / "x.pt").exists()
    fixed = load_config(None, ["model.hidden=16", "model.variant=vgg_small_w8", f"model.charset={CHARS}"])
    save_checkpoint(model_checkpoint(model, fixed, cs), tmp_path / "f.pt")
    assert convert_main([str(tmp_path / "f.pt"), str(tmp_path / "x.pt"), "--read-width-scale", "1.2"]) == 2
    assert "scales keep-ratio widths only" in capsys.readouterr().err and not (tmp_path / "x.pt").exists()
    torch.save(model.state_dict(), tmp_path / "bare.pt")
    assert convert_main([str(tmp_path / "bare.pt"), str(tmp_path / "x.pt"), "--read-width-scale", "1.2"]) == 2
    assert "stores no config (a bare state dict)" in capsys.readouterr().err

    with pytest.raises(ConfigError, match="data.read_width_scale: must be within 0.5..2"):
        load_config(None, ["data.keep_ratio=true", "data.read_width_scale=0.2"])
    with pytest.raises(ConfigError, match="data.read_width_scale: scales keep-ratio widths"):
        load_config(None, ["data.read_width_scale=1.2"])


def test_record_synth_fonts_says_when_a_sitting_draws_from_other_fonts(caplog):
    from crnn.engine.state import record_synth_fonts

    st = TrainState()
    with caplog.at_level(logging.INFO, logger="crnn"):
        record_synth_fonts(st, ["/f/b.ttf", "/g/a.ttc", "/h/b.ttf"], main=True)  # a new run: nothing to compare
        assert st.synth_fonts == ["a.ttc", "b.ttf"] and not caplog.records
        record_synth_fonts(st, ["/x/a.ttc", "/y/b.ttf"], main=True)  # the same files elsewhere: the same fonts
        assert not caplog.records
        record_synth_fonts(st, ["/x/a.ttc"] + [f"/n/{i:02d}.ttf" for i in range(10)], main=True)
        (rec,) = caplog.records
        assert rec.levelno == logging.WARNING and "from 11 font files, the sitting before from 2" in rec.message
        assert "(new: 00.ttf, 01.ttf, 02.ttf, 03.ttf, 04.ttf, 05.ttf, 06.ttf, 07.ttf and 2 more; gone: b.ttf)" \
            in rec.message
        caplog.clear()
        old = TrainState(step=500)  # a checkpoint from before fonts were recorded
        record_synth_fonts(old, ["/x/a.ttc"], main=True)
        assert "did not name its fonts" in caplog.records[0].message and old.synth_fonts == ["a.ttc"]
