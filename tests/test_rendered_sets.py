"""Rendered sets say what they were rendered as: a run renders again a set crnn rendered otherwise (another height,
number, seed or lever; the shipped models moved from 32 to 48 px and fine-tuning's rehearsal sets outlive them),
and never renders over a set of the user's own."""
from __future__ import annotations

import io
import logging
from pathlib import Path

import lmdb
import pytest
import torch
from PIL import Image

from tests.conftest import REPO, make_lmdb
from crnn.charset import Charset
from crnn.cli.synth import main as synth_main
from crnn.config import load_config
from crnn.data.lmdb_io import read_key, write_lmdb
from crnn.data.synth import (RENDERED_KEY, SynthOptions, generate_lmdb, kept_height, rendered_stamp,
                             stale_rendering)
from crnn.engine.checkpoint import model_checkpoint, save_checkpoint
from crnn.model import build_model


def _heights(path: Path) -> set[int]:
    env = lmdb.open(str(path), readonly=True, lock=False)
    with env.begin() as txn:
        n = int(txn.get(b"num-samples"))
        heights = {Image.open(io.BytesIO(txn.get(b"image-%09d" % i))).height for i in range(1, n + 1)}
    env.close()
    return heights


def _fonts_or_skip() -> None:
    from crnn.data.fonts import NoFontsError, find_fonts

    try:
        find_fonts(None)
    except NoFontsError:
        pytest.skip("no fonts installed to render words (scripts/setup.sh installs them)")


def test_an_lmdb_carries_keys_of_its_writer_beside_the_layout(tmp_path):
    out = tmp_path / "s.lmdb"
    write_lmdb([(b"png", "a"), (b"png", "b")], out, meta={b"made-by": b"me"})
    assert read_key(out, b"made-by") == b"me" and read_key(out, b"num-samples") == b"2"
    assert read_key(out, b"other") is None
    for key in (b"num-samples", b"image-000000001", b"label-000000003"):
        with pytest.raises(ValueError, match="meta keys may not be the layout's own"):
            write_lmdb([(b"png", "a")], tmp_path / "t.lmdb", meta={key: b"x"})
    assert not (tmp_path / "t.lmdb").exists()


def test_a_rendered_set_says_what_it_was_rendered_as(tmp_path, dejavu_fonts):
    """A set a run rendered for itself is judged by its stamp; crnn-synth's (asked for by someone) never is."""
    fonts_dir = str(Path(dejavu_fonts[0]).parent)
    out, asked = tmp_path / "r.lmdb", tmp_path / "asked.lmdb"
    opts = SynthOptions(height=32, charset="alnum36")
    generate_lmdb(str(out), 3, seed=5, workers=1, fonts_dir=fonts_dir, opts=opts, progress=False, for_run=True)
    stamp = rendered_stamp(3, 5, opts, for_run=True)
    assert (stamp["for"], stamp["num"], stamp["seed"], stamp["height"], stamp["charset"]) == ("run", 3, 5, 32,
                                                                                            "alnum36")
    assert stale_rendering(out, 3, 5, opts) is None
    assert stale_rendering(out, 3, 5, SynthOptions(height=48, charset="alnum36")) == "height 32 -> 48"
    assert stale_rendering(out, 4, 6, SynthOptions(height=32, charset="alnum36", street=0.5)) == \
        "num 3 -> 4, seed 5 -> 6, street 0.0 -> 0.5"
    assert kept_height(out, 48) is None  # a run's own: judged by its stamp, and rendered again
    assert stale_rendering(tmp_path / "absent.lmdb", 3, 5, opts) is None
    assert synth_main(["--out", str(asked), "--num", "2", "--height", "32", "--fonts", fonts_dir, "--workers", "1",
                       "--quiet"]) == 0
    assert rendered_stamp(2, 0, SynthOptions())["for"] == "user" and b'"for": "user"' in read_key(asked, RENDERED_KEY)
    assert stale_rendering(asked, 3, 5, SynthOptions(height=48)) is None  # crnn-synth's: the user's, kept
    assert kept_height(asked, 48) == 32 and kept_height(asked, 32) is None  # ... with its height told


def test_a_set_without_the_stamp_is_never_judged_stale_but_its_height_is_told(tmp_path):
    own = make_lmdb(tmp_path / "own.lmdb", ["word", "other", "third"])  # 32 px high, no stamp: the user's own
    assert read_key(own, RENDERED_KEY) is None
    assert stale_rendering(own, 3, 0, SynthOptions(height=48)) is None
    assert kept_height(own, 48) == 32 and kept_height(own, 32) is None


def _cfg(tmp_path: Path, *overrides: str):
    return load_config(REPO / "configs" / "finetune_alnum36.yaml", [
        f"data.rehearsal={tmp_path / 'rehearsal.lmdb'}", "data.rehearsal_style=default", "data.rehearsal_num=3",
        "train.base_val=[]", "data.synth_workers=1", *overrides])


def test_fine_tunings_rehearsal_set_is_rendered_again_for_another_height(tmp_path, caplog):
    """A rehearsal set rendered at 32 px is rendered again, with a warning, by a 48 px recipe; a set of the user's
    own at the same path is kept as it is, with a warning naming its height."""
    from crnn.data.rehearsal import generate_base_style, synth_jobs

    _fonts_or_skip()
    path = tmp_path / "rehearsal.lmdb"
    cfg32, cfg48 = _cfg(tmp_path, "data.height=32"), _cfg(tmp_path, "data.height=48")
    generate_base_style(cfg32, progress=False)
    assert _heights(path) == {32} and synth_jobs(cfg32) == []
    assert synth_jobs(cfg48) == [(str(path), 3, cfg48.data.rehearsal_seed, "default")]
    with caplog.at_level(logging.WARNING, logger="crnn"):
        generate_base_style(cfg48, progress=False)
    assert f"{path} was rendered otherwise than this run renders it (height 32 -> 48): rendering it again" \
        in caplog.text
    assert _heights(path) == {48} and synth_jobs(cfg48) == []

    own = make_lmdb(tmp_path / "own.lmdb", ["word", "other", "third"])
    before = (own / "data.mdb").read_bytes()
    cfg = _cfg(tmp_path, "data.height=48", f"data.rehearsal={own}")
    assert synth_jobs(cfg) == []
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="crnn"):
        generate_base_style(cfg, progress=False)
    assert f"{own}: kept as it is (no run rendered it for itself), though its images are 32 px high where this run " \
        "renders such a set 48 px high" in caplog.text
    assert (own / "data.mdb").read_bytes() == before


def test_the_starts_own_style_is_judged_against_the_start(tmp_path):
    """data.rehearsal_style=base: whether a rendered set is still the start's is known only from the start's config,
    so a stamped set makes the run read it; a 48 px start finds the 32 px start's set stale."""
    from crnn.data.rehearsal import generate_base_style, needs_start_config, synth_jobs
    from crnn.engine.finetune import start_config

    _fonts_or_skip()

    def start(height: int) -> Path:
        cfg = load_config(REPO / "configs" / "shipped_en.yaml", ["model.hidden=16", "data.synth_photos=0",
                                                                 f"data.height={height}"])
        cs = Charset.from_spec("printable95")
        torch.manual_seed(0)
        path = tmp_path / f"start{height}.pt"
        save_checkpoint(model_checkpoint(build_model("vgg_small", 1, cs.num_classes, 16), cfg, cs), path)
        return path

    rehearsal = tmp_path / "rehearsal.lmdb"
    cfgs = {h: load_config(REPO / "configs" / "finetune.yaml", [
        f"train.init_weights={start(h)}", f"data.rehearsal={rehearsal}", "data.rehearsal_num=2", "train.base_val=[]",
        "data.synth_workers=1", f"data.height={h}"]) for h in (32, 48)}
    assert needs_start_config(cfgs[32])
    generate_base_style(cfgs[32], progress=False, start=start_config(cfgs[32]))
    assert _heights(rehearsal) == {32}
    assert needs_start_config(cfgs[48])  # the set is there, but whose it is needs the start
    assert synth_jobs(cfgs[32], start_config(cfgs[32])) == []
    assert [p for p, *_ in synth_jobs(cfgs[48], start_config(cfgs[48]))] == [str(rehearsal)]
    assert synth_jobs(cfgs[48]) == []  # without the start it cannot tell, and renders nothing over it


def test_a_recipes_synthetic_training_set_follows_its_height(tmp_path, caplog):
    from crnn.data.feed import prepare

    _fonts_or_skip()
    train = tmp_path / "train.lmdb"
    base = [f"data.train={train}", "data.synth_num=3", "data.synth_online=false", "data.synth_workers=1",
            "data.val=[]", "model.charset=alnum36"]
    prepare(load_config(None, [*base, "data.height=32"]), progress=False)
    assert _heights(train) == {32}
    stamp = (train / "data.mdb").stat().st_mtime_ns
    prepare(load_config(None, [*base, "data.height=32"]), progress=False)
    assert (train / "data.mdb").stat().st_mtime_ns == stamp  # the same set: kept
    with caplog.at_level(logging.WARNING, logger="crnn"):
        prepare(load_config(None, [*base, "data.height=48"]), progress=False)
    assert "was rendered otherwise than this run renders it (height 32 -> 48): rendering it again" in caplog.text
    assert _heights(train) == {48}


def _rendering_recipes() -> list[str]:
    """The recipes that render what they train on, or generate the sets they name."""
    cfgs = {p.name: load_config(p) for p in sorted((REPO / "configs").glob("*.yaml"))}
    return [name for name, c in cfgs.items() if c.data.synth_online or c.data.synth_num or c.data.synth_val_num]


@pytest.mark.parametrize("recipe", _rendering_recipes())
def test_every_recipe_renders_as_high_as_it_reads(recipe):
    """What a recipe renders (its training stream, or the sets it generates) is data.height high: a 48 px English
    recipe rendered its words 32 px high and had them scaled up, silently, until words followed data.height."""
    from crnn.data.synth import synth_options

    cfg = load_config(REPO / "configs" / recipe)
    assert synth_options(cfg, cfg.data.synth_style).height == cfg.data.height
    assert synth_options(load_config(REPO / "configs" / recipe, ["data.height=40"])).height == 40


def test_the_rendering_recipes_include_both_families_at_48_px():
    assert {"shipped_en.yaml", "shipped_en_h32.yaml", "shipped_zh.yaml"} <= set(_rendering_recipes())
