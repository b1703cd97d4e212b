"""crnn.Recognizer(width_step=, width_scale=): the reading geometry as a public option, what the yardstick's ours()
used to set on the engine by hand."""
from __future__ import annotations

import pytest
import torch
from PIL import Image, ImageDraw

import crnn
from crnn.charset import Charset
from crnn.config import Config
from crnn.engine.checkpoint import model_checkpoint, save_checkpoint
from crnn.infer import InferenceError
from crnn.model import build_model
from crnn.yardstick.readers import ours


def _checkpoint(path, keep_ratio: bool):
    cfg = Config()
    cfg.model.hidden, cfg.data.keep_ratio, cfg.data.width = 16, keep_ratio, 48
    cs = Charset.from_spec("alnum36")
    torch.manual_seed(0)
    save_checkpoint(model_checkpoint(build_model("vgg_small", 1, cs.num_classes, 16).eval(), cfg, cs, step=1), path)
    return path


@pytest.fixture(scope="module")
def keep_ratio(tmp_path_factory):
    """A tiny untrained keep-ratio checkpoint (width_step 1, read_width_scale 1 stored)."""
    return _checkpoint(tmp_path_factory.mktemp("w") / "kr.pt", True)


def _crops() -> list[Image.Image]:
    out = []
    for i, word in enumerate(["apple", "tree", "river stone", "x7", "cloudy moon"]):
        img = Image.new("L", (37 + 23 * i, 21 + 3 * i), 255)
        ImageDraw.Draw(img).text((2, 3), word, fill=0)
        out.append(img)
    return out


def _poked(weights, width_step: int, width_scale: float) -> crnn.Recognizer:
    """What ours() did before the option: the geometry set on the engine after loading."""
    rec = crnn.Recognizer(weights, device="cpu")
    engine = rec._engine
    engine.config.data.width_step = engine.transform.width_step = width_step
    engine.config.data.read_width_scale = engine.transform.width_scale = width_scale
    return rec


def test_the_options_read_as_the_old_poke_did(keep_ratio):
    crops = _crops()
    plain = crnn.Recognizer(keep_ratio, device="cpu")
    new = crnn.Recognizer(keep_ratio, device="cpu", width_step=8, width_scale=1.3)
    old = _poked(keep_ratio, 8, 1.3)
    widths = lambda rec: [rec._engine.preprocess(c).shape[-1] for c in crops]  # noqa: E731
    assert widths(new) == widths(old) != widths(plain)  # the option changes the widths, as the poke did
    assert all(w % 8 == 0 for w in widths(new))
    assert new.read(crops) == old.read(crops)
    assert [new.read(c) for c in crops] == [old.read(c) for c in crops]
    assert (new.width_step, new.width_scale) == (8, 1.3) and (plain.width_step, plain.width_scale) == (1, 1.0)
    cfg = new._engine.config.data
    assert (cfg.width_step, cfg.read_width_scale) == (8, 1.3)


def test_ours_reads_and_names_the_geometry_as_before(keep_ratio):
    crops = _crops()
    reader = ours(str(keep_ratio), width_step=4, width_scale=1.15)
    old = _poked(keep_ratio, 4, 1.15)
    assert [reader.read(c) for c in crops] == [old.read(c).text for c in crops]
    assert reader.read_many(crops) == [r.text for r in old.read(crops)]
    assert reader.name == f"{keep_ratio} (width_step 4, width_scale 1.15)"
    assert reader.how.endswith("one crop per call (width_step 4, widths x 1.15)")
    assert ours(str(keep_ratio)).how.endswith("(width_step 1, widths x 1)")


STEP = "width_step must be a whole number of pixels from 1 (off) to the model's data.max_width (400), got "
SCALE = "width_scale must be a number within 0.5..2 (1: the trained widths), got "


@pytest.mark.parametrize("kw, message", [
    ({"width_step": 0}, STEP + "0"),
    ({"width_step": 2.5}, STEP + "2.5"),
    ({"width_step": True}, STEP + "True"),
    ({"width_step": 401}, STEP + "401"),  # wider than any trained line: every crop stretched to the widest
    ({"width_scale": 0}, SCALE + "0"),
    ({"width_scale": -1.5}, SCALE + "-1.5"),
    ({"width_scale": "1.2"}, SCALE + "'1.2'"),
    ({"width_scale": 10}, SCALE + "10"),  # what a checkpoint's data.read_width_scale may not be either
])
def test_bad_geometry_is_a_one_line_value_error(keep_ratio, kw, message):
    with pytest.raises(ValueError) as e:
        crnn.Recognizer(keep_ratio, device="cpu", **kw)
    assert isinstance(e.value, InferenceError) and str(e.value) == message


def test_a_fixed_width_model_refuses_a_width_change(tmp_path):
    fixed = _checkpoint(tmp_path / "fixed.pt", False)
    with pytest.raises(InferenceError, match="^width_step and width_scale change keep-ratio widths; this model reads "
                                             "every crop at 48 px"):
        crnn.Recognizer(fixed, device="cpu", width_scale=1.2)
    rec = crnn.Recognizer(fixed, device="cpu", width_step=1, width_scale=1)  # its own geometry: nothing changes
    assert (rec.width_step, rec.width_scale) == (1, 1.0)


def test_a_48px_checkpoint_is_read_at_48px(tmp_path):
    """A file trained on 48 px lines (issue 57's h48 candidate) stores its height: the reader scales every crop to it,
    keeping the ratio, so a crop is read 1.5x as wide as by a 32 px file, with T to match."""
    cfg = Config()
    cfg.model.hidden, cfg.data.keep_ratio, cfg.data.height, cfg.data.width = 16, True, 48, 72
    cs = Charset.from_spec("alnum36")
    torch.manual_seed(0)
    path = tmp_path / "h48.pt"
    save_checkpoint(model_checkpoint(build_model("vgg_small", 1, cs.num_classes, 16).eval(), cfg, cs, step=1), path)
    tall, low = crnn.Recognizer(path, device="cpu"), crnn.Recognizer(_checkpoint(tmp_path / "h32.pt", True),
                                                                         device="cpu")
    for crop in _crops():
        x, y = tall._engine.preprocess(crop), low._engine.preprocess(crop)
        assert x.shape[-2:] == (48, round(crop.width * 48 / crop.height)) and y.shape[-2] == 32
        assert abs(x.shape[-1] - 1.5 * y.shape[-1]) <= 1
    assert len(tall.read(_crops())) == len(_crops())
