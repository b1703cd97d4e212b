"""The data room's entry (crnn.data.feed): prepare and build from a config alone, the line the log prints about the
training stream, the refused rehearsal with rendered batches; and the trainer's start-up lines that use it."""
from __future__ import annotations

import pytest

from crnn.charset import Charset
from crnn.config import load_config
from crnn.data.datasets import DataError
from crnn.data.feed import build, describe_training, prepare
from crnn.engine.runtime import TrainingError
from crnn.engine.trainer import describe_model, fit
from crnn.model import build_model_from
from tests.conftest import REPO

TINY = ["data.batch_size=8", "data.num_workers=0", "train.amp=off", "train.log_every=1", "train.warmup_steps=0",
        "train.tensorboard=false", "train.show_predictions=0"]


def test_build_gives_the_training_stream_the_validation_sets_and_its_line(words_lmdb, val_lmdb):
    cfg = load_config(None, [f"data.train=[{{path: {words_lmdb}}}]", f"data.val=[{val_lmdb}]",
                             f"train.base_val=[{val_lmdb}]", "train.base_val_num=0", *TINY])
    feed = build(cfg, Charset.from_spec("alnum36"), rank=0, world_size=2)
    assert len(feed.train) == 64 // 2 // 8 and list(feed.val) == [str(val_lmdb)] == list(feed.base_val)
    assert feed.loaders() == [feed.train.loader, feed.val[str(val_lmdb)], feed.base_val[str(val_lmdb)]]
    assert feed.description == f"data.train: {words_lmdb}" and feed.fonts is None
    with pytest.raises(DataError, match=r"^data.val: .*missing.lmdb"):
        build(load_config(None, [f"data.train=[{{path: {words_lmdb}}}]", "data.val=[/nonexistent/missing.lmdb]"]),
              Charset.from_spec("alnum36"))


def test_the_line_on_the_training_stream_names_each_share():
    mixed = load_config(None, ["data.train=[{path: a, ratio: 3}, {path: b, ratio: 1}]", "data.rehearsal=r",
                               "data.rehearsal_ratio=0.4"])
    assert describe_training(mixed) == "data.train: a 45 %, b 15 %, rehearsal r 40 % of every batch"
    assert describe_training(load_config(None, ["data.train=[{path: a}, {path: b}]"])) == \
        "data.train: a, b (shuffled together)"
    assert describe_training(load_config(None, ["data.synth_online=true", "data.synth_num=64"])).startswith(
        "data.synth_online: every training batch is rendered on the fly")


def test_rehearsal_with_rendered_batches_is_refused_before_anything_is_made(tmp_path):
    """data.rehearsal was silently left out of a data.synth_online stream: now a one-line error naming the keys
    that mix a stored set into rendered lines, before any set is generated or any folder made."""
    overrides = ["data.synth_online=true", "data.synth_num=64", f"data.rehearsal={tmp_path / 'r.lmdb'}",
                 "data.rehearsal_num=16", "data.rehearsal_ratio=0.3", f"train.output_dir={tmp_path / 'run'}", *TINY]
    message = (f"data.rehearsal={tmp_path / 'r.lmdb'} is not read when data.synth_online renders every batch: set "
               f"data.rehearsal= \\(empty\\), or mix that set into the rendered lines with "
               f"data.synth_real={tmp_path / 'r.lmdb'} data.synth_real_share=0.3")
    with pytest.raises(DataError, match=message):
        prepare(load_config(None, overrides), progress=False)
    with pytest.raises(TrainingError, match=message):
        fit(load_config(None, overrides))
    assert not (tmp_path / "r.lmdb").exists() and not (tmp_path / "run").exists()


def test_the_run_writes_its_config_and_logs_one_line_where(tmp_path, words_lmdb, capsys):
    fit(load_config(None, [f"data.train=[{{path: {words_lmdb}}}]", "data.val=[]", "train.steps=1",
                           f"train.output_dir={tmp_path / 'run'}", *TINY]))
    err = capsys.readouterr().err
    config = tmp_path / "run" / "config.yaml"
    assert f"resolved config: {config} (crnn-train --print-config [overrides] prints it)" in err
    assert "warmup_steps: 0" in config.read_text() and "warmup_steps" not in err  # the YAML is not in the log


def test_the_model_line_counts_every_parameter_and_says_what_is_frozen():
    from crnn.engine.finetune import set_cnn_frozen

    cfg = load_config(REPO / "configs" / "finetune.yaml", ["train.freeze_cnn_steps=1200"])
    bare = build_model_from(cfg.model, 96)
    set_cnn_frozen(bare, True, 0, False)
    total = sum(p.numel() for p in bare.parameters())
    trained = sum(p.numel() for p in bare.parameters() if p.requires_grad)
    assert describe_model(cfg, bare, 96) == (
        f"model vgg_small: {total / 1e6:.2f} M parameters, {trained / 1e6:.2f} M of them trained now (the CNN "
        "frozen: train.freeze_cnn_steps=1200), 96 classes; T = 26 per 100 px of width, each crop read at its own "
        "width (7 at data.min_width 24, 151 at data.max_width 600)")
    set_cnn_frozen(bare, False, 0, False)
    fixed = load_config(None, ["data.width=160"])
    assert describe_model(fixed, bare, 96) == (f"model vgg_small: {total / 1e6:.2f} M parameters, 96 classes; "
                                               "T = 41 for its fixed width 160 (data.width)")


def test_rendered_batches_say_which_faces_they_draw_from_and_warn_of_missing_web_faces(tmp_path, monkeypatch,
                                                                                         caplog):
    """Two probes trained on the system fonts alone, their recipe's 421 Latin web families never fetched, and no line
    of their logs said so: now the faces are counted, and the missing ones named with the command that fetches them.
    A fake font cache and system font folder (one copy of DejaVu Sans) make the count the test's own."""
    import logging
    import os
    import shutil

    from crnn.data import fonts as F
    from crnn.data.latin_faces import load_latin_manifest

    dejavu = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
    if not os.path.isfile(dejavu):
        pytest.skip("needs the DejaVu fonts (scripts/setup.sh installs fonts-dejavu-core)")
    (tmp_path / "system").mkdir()
    shutil.copy(dejavu, tmp_path / "system" / "DejaVuSans.ttf")
    monkeypatch.setattr(F, "SYSTEM_FONT_DIRS", (str(tmp_path / "system"),))
    monkeypatch.setenv("CRNN_FONT_CACHE", str(tmp_path / "cache"))
    cfg = load_config(None, ["data.synth_online=true", "data.synth_num=16", "data.val=[]", *TINY])
    listed = sum(f.role == "train" for f in load_latin_manifest())
    with caplog.at_level(logging.INFO, logger="crnn"):
        feed = build(cfg, Charset.from_spec(cfg.model.charset), rank=0, world_size=1)
    assert feed.fonts == (str(tmp_path / "system" / "DejaVuSans.ttf"),)
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.getMessage().startswith("faces: ")]
    assert said == [("INFO", f"faces: 1 font file from the system font folders and the web-font cache "
                             f"({tmp_path / 'cache'}); Latin web faces: 0 of the {listed} training files of "
                             "crnn/data/latin_faces.tsv"),
                    ("WARNING", f"faces: none of the {listed} training files of crnn/data/latin_faces.tsv (Latin web "
                                "faces) is here, so the text is drawn without them; to train as the recipe says, "
                                "fetch them: python scripts/latin_faces.py --fetch")]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="crnn"):
        build(cfg, Charset.from_spec(cfg.model.charset), rank=1, world_size=2)
    assert not [r for r in caplog.records if r.getMessage().startswith("faces: ")]  # once per run, not per rank
