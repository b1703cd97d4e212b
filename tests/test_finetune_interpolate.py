"""Weight-space interpolation of a fine-tuned model with its start (crnn/engine/interpolate.py): the library function,
crnn-convert-ckpt --interpolate and train.interpolate_base."""
from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout

import pytest
import torch

from crnn.charset import Charset
from crnn.cli.convert_ckpt import main as convert_main
from crnn.config import Config, load_config
from crnn.engine.alphabet_change import adapt_head, output_layer_keys
from crnn.engine.checkpoint import Checkpoint, CheckpointError, load_checkpoint, model_checkpoint, save_checkpoint
from crnn.engine.interpolate import interpolate_checkpoints, soup_checkpoints
from crnn.model import build_model
from tests.conftest import make_lmdb, random_words
from tests.test_finetune import _check_shared_rows

BASE = Charset.from_spec("alnum36")  # folds case: 'A' started from 'a' and has no row of its own in the base
TUNED = Charset("0123456789abcdefghijklmnopqrstuvwxyzAB$-")


def _pair(seed: int = 0):
    """A tiny base model and a 'fine-tuned' one: the base's rows fitted to TUNED, then every tensor perturbed
    (BatchNorm statistics included), as training would move them."""
    torch.manual_seed(seed)
    base = build_model("vgg_small", 1, BASE.num_classes, 16)
    tuned = build_model("vgg_small", 1, TUNED.num_classes, 16)
    state, _ = adapt_head(base.state_dict(), BASE, TUNED, tuned)
    moved = {k: v + 0.05 * torch.randn_like(v) if v.is_floating_point() else v + 3 for k, v in state.items()}
    moved = {k: v.abs() if k.endswith("running_var") else v for k, v in moved.items()}
    tuned.load_state_dict(moved)
    return base.eval(), tuned.eval()


def _ck(model, charset: Charset, name: str) -> Checkpoint:
    return Checkpoint(name, model.state_dict(), charset=charset.to_dict())


def test_alpha_zero_reads_every_base_character_as_the_base_did():
    base, tuned = _pair()
    mixed = build_model("vgg_small", 1, TUNED.num_classes, 16)
    mixed.load_state_dict(interpolate_checkpoints(_ck(base, BASE, "b"), _ck(tuned, TUNED, "t"), tuned, 0.0))
    _check_shared_rows(base, mixed.eval(), BASE, TUNED, torch.randn(2, 1, 32, 48))


def test_alpha_one_is_the_fine_tuned_model_exactly():
    base, tuned = _pair()
    out = interpolate_checkpoints(_ck(base, BASE, "b"), _ck(tuned, TUNED, "t"), tuned, 1.0)
    ref = tuned.state_dict()
    assert list(out) == list(ref) and all(torch.equal(out[k], ref[k]) for k in ref)


def test_shared_rows_and_statistics_interpolate_new_rows_are_the_fine_tuned_ones():
    base, tuned = _pair()
    out = interpolate_checkpoints(_ck(base, BASE, "b"), _ck(tuned, TUNED, "t"), tuned, 0.25)
    s, t = base.state_dict(), tuned.state_dict()
    w, b = output_layer_keys(tuned)
    for key in (w, b):
        for c in "AB$-":  # new characters and upper case the base folded: the fine-tuned rows
            assert torch.equal(out[key][TUNED.index[c]], t[key][TUNED.index[c]]), c
        for c in ["", "a", "7"]:  # the blank and shared characters: a quarter of the way to the fine-tuned row
            i, j = (BASE.index[c], TUNED.index[c]) if c else (0, 0)
            torch.testing.assert_close(out[key][j], 0.75 * s[key][i] + 0.25 * t[key][j])
    bn = next(k for k in t if k.endswith("running_mean"))
    torch.testing.assert_close(out[bn], 0.75 * s[bn] + 0.25 * t[bn])
    count = next(k for k in t if k.endswith("num_batches_tracked"))
    assert torch.equal(out[count], t[count])  # an integer count is not interpolated: the fine-tuned one


def test_other_architectures_and_bad_alpha_are_one_line_errors():
    base, tuned = _pair()
    other = build_model("vgg", 1, BASE.num_classes, 16)
    with pytest.raises(CheckpointError, match=r"cannot interpolate b\.pt and t\.pt: not the same architecture") as e:
        interpolate_checkpoints(_ck(other, BASE, "b.pt"), _ck(tuned, TUNED, "t.pt"), tuned, 0.5)
    assert "\n" not in str(e.value)
    wider = build_model("vgg_small", 1, BASE.num_classes, 32)
    with pytest.raises(CheckpointError, match=r"rnn1\..* is \[.*\] in the fine-tuned model, \[.*\] in the start"):
        interpolate_checkpoints(_ck(wider, BASE, "b.pt"), _ck(tuned, TUNED, "t.pt"), tuned, 0.5)
    with pytest.raises(CheckpointError, match="within 0..1, got 1.5"):
        interpolate_checkpoints(_ck(base, BASE, "b"), _ck(tuned, TUNED, "t"), tuned, 1.5)


def _run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(out):
        rc = convert_main(argv)
    return rc, out.getvalue()


def test_convert_ckpt_interpolate(tmp_path):
    base, tuned = _pair()
    cfg = load_config(None, ["model.hidden=16"])
    save_checkpoint(model_checkpoint(base, cfg, BASE), tmp_path / "base.pt")
    save_checkpoint(model_checkpoint(tuned, cfg, TUNED), tmp_path / "tuned.pt")
    rc, text = _run([str(tmp_path / "tuned.pt"), str(tmp_path / "mix.pt"), "--interpolate",
                     str(tmp_path / "base.pt"), "--alpha", "0.6"])
    assert rc == 0 and "0.4 x" in text and "0.6 x" in text
    got = load_checkpoint(tmp_path / "mix.pt")
    want = interpolate_checkpoints(_ck(base, BASE, "b"), _ck(tuned, TUNED, "t"), tuned, 0.6)
    assert got.charset["chars"] == TUNED.chars and all(torch.equal(got.model_state[k], want[k]) for k in want)
    assert got.raw["interpolated"]["alpha"] == 0.6
    rc, text = _run([str(tmp_path / "tuned.pt"), str(tmp_path / "x.pt"), "--interpolate", str(tmp_path / "base.pt")])
    assert rc == 2 and "--interpolate START and --alpha A go together" in text
    rc, text = _run([str(tmp_path / "tuned.pt"), str(tmp_path / "x.pt"), "--interpolate", str(tmp_path / "base.pt"),
                     "--alpha", "2"])
    assert rc == 1 and text.strip().endswith("--alpha: the share of the fine-tuned weights must be within 0..1, "
                                             "got 2.0")


def test_cnn_alpha_moves_the_convolutional_layers_alone():
    base, tuned = _pair()
    one = interpolate_checkpoints(_ck(base, BASE, "b"), _ck(tuned, TUNED, "t"), tuned, 0.8)
    two = interpolate_checkpoints(_ck(base, BASE, "b"), _ck(tuned, TUNED, "t"), tuned, 0.8, cnn_alpha=0.5)
    cnn_only = interpolate_checkpoints(_ck(base, BASE, "b"), _ck(tuned, TUNED, "t"), tuned, 0.5)
    s, t = base.state_dict(), tuned.state_dict()
    float_keys = [k for k in t if t[k].is_floating_point()]
    assert any(k.startswith("cnn.") for k in float_keys) and any(not k.startswith("cnn.") for k in float_keys)
    for k in float_keys:
        assert torch.equal(two[k], (cnn_only if k.startswith("cnn.") else one)[k]), k
    bn = next(k for k in t if k.startswith("cnn.") and k.endswith("running_var"))
    torch.testing.assert_close(two[bn], 0.5 * s[bn] + 0.5 * t[bn])  # BatchNorm statistics of the CNN too
    with pytest.raises(CheckpointError, match="cnn_alpha: the share .* got -0.1"):
        interpolate_checkpoints(_ck(base, BASE, "b"), _ck(tuned, TUNED, "t"), tuned, 0.8, cnn_alpha=-0.1)


def test_soup_averages_fine_tunes_of_one_start_and_refuses_others(tmp_path):
    _, one = _pair(seed=0)
    _, two = _pair(seed=1)
    cfg = load_config(None, ["model.hidden=16"])
    for name, m, cs in [("a.pt", one, TUNED), ("b.pt", two, TUNED)]:
        save_checkpoint(model_checkpoint(m, cfg, cs), tmp_path / name)
    soup = soup_checkpoints([load_checkpoint(tmp_path / "a.pt"), load_checkpoint(tmp_path / "b.pt")])
    sa, sb = one.state_dict(), two.state_dict()
    for k, v in soup.model_state.items():
        if v.is_floating_point():
            torch.testing.assert_close(v, (sa[k] + sb[k]) / 2, rtol=0, atol=1e-7)
        else:
            assert torch.equal(v, sa[k])  # num_batches_tracked: the first's
    assert soup.kind == "weights" and soup.raw["soup"] == [str(tmp_path / "a.pt"), str(tmp_path / "b.pt")]
    # the CLI: soup, then interpolation of the soup with the start
    base, _ = _pair()
    save_checkpoint(model_checkpoint(base, cfg, BASE), tmp_path / "base.pt")
    rc, text = _run([str(tmp_path / "a.pt"), str(tmp_path / "mix.pt"), "--soup", str(tmp_path / "b.pt"),
                     "--interpolate", str(tmp_path / "base.pt"), "--alpha", "0.8", "--cnn-alpha", "0.6"])
    assert rc == 0 and f"0.8 x the average of {tmp_path / 'a.pt'}, {tmp_path / 'b.pt'}" in text, text
    got = load_checkpoint(tmp_path / "mix.pt")
    want = interpolate_checkpoints(_ck(base, BASE, "b"), soup, one, 0.8, cnn_alpha=0.6)
    assert all(torch.equal(got.model_state[k], want[k]) for k in want)
    assert got.raw["interpolated"] == {"start": str(tmp_path / "base.pt"), "alpha": 0.8, "cnn_alpha": 0.6}
    rc, text = _run([str(tmp_path / "a.pt"), str(tmp_path / "avg.pt"), "--soup", str(tmp_path / "b.pt")])
    assert rc == 0 and all(torch.equal(load_checkpoint(tmp_path / "avg.pt").model_state[k], v)
                           for k, v in soup.model_state.items())
    # another alphabet (same size, other order) and another architecture: one line each, nothing written
    other = Charset(TUNED.chars[::-1])
    save_checkpoint(model_checkpoint(two, cfg, other), tmp_path / "c.pt")
    rc, text = _run([str(tmp_path / "a.pt"), str(tmp_path / "x.pt"), "--soup", str(tmp_path / "c.pt")])
    assert rc == 1 and "cannot average" in text and "their alphabets differ (40 and 40 characters, in another order)" \
        in text and len(text.strip().splitlines()) == 1 and not (tmp_path / "x.pt").exists()
    wide = build_model("vgg_small", 1, TUNED.num_classes, 32)
    save_checkpoint(model_checkpoint(wide, load_config(None, ["model.hidden=32"]), TUNED), tmp_path / "w.pt")
    rc, text = _run([str(tmp_path / "a.pt"), str(tmp_path / "x.pt"), "--soup", str(tmp_path / "w.pt")])
    assert rc == 1 and "not the same architecture" in text and not (tmp_path / "x.pt").exists()
    rc, text = _run([str(tmp_path / "a.pt"), str(tmp_path / "x.pt"), "--cnn-alpha", "0.5"])
    assert rc == 2 and "--cnn-alpha is a share of --interpolate" in text


def test_soup_and_interpolate_refuse_a_bare_state_dict_in_one_line(tmp_path):
    """A plain state_dict (no config, no alphabet) cannot be averaged or interpolated: the message names the file,
    the option and what to give instead; nothing is written."""
    _, one = _pair(seed=0)
    cfg = load_config(None, ["model.hidden=16"])
    save_checkpoint(model_checkpoint(one, cfg, TUNED), tmp_path / "a.pt")
    torch.save(one.state_dict(), tmp_path / "bare.pt")
    for argv, option in [([str(tmp_path / "a.pt"), str(tmp_path / "x.pt"), "--soup", str(tmp_path / "bare.pt")],
                          "--soup"),
                         ([str(tmp_path / "bare.pt"), str(tmp_path / "x.pt"), "--interpolate", str(tmp_path / "a.pt"),
                           "--alpha", "0.8"], "--interpolate")]:
        rc, text = _run(argv)
        assert rc == 1 and len(text.strip().splitlines()) == 1 and not (tmp_path / "x.pt").exists(), text
        assert f"{tmp_path / 'bare.pt'}: {option} needs a crnn checkpoint of a fine-tuned model with its config and " \
               "alphabet, such as a run's last.pt" in text, text


@pytest.mark.parametrize("ema", [0, 0.5])
def test_train_interpolate_base_writes_and_scores_interpolated_pt(tmp_path, words_lmdb, capsys, ema):
    """crnn.train with train.interpolate_base=0.5: last.pt stays the trained model, interpolated.pt is the
    interpolation of train.init_weights and last.pt, scored at the end; the summary names it. With a weight average
    (train.ema_decay) last.pt's model is the average, and so it is the average that is interpolated, not the raw
    weights the optimizer stepped."""
    import crnn

    torch.manual_seed(0)
    init = tmp_path / "base.pt"
    save_checkpoint(model_checkpoint(build_model("vgg_small", 1, BASE.num_classes, 16), Config(), BASE), init)
    codes = make_lmdb(tmp_path / "codes.lmdb", [w.upper() + "-" + w[:2] for w in random_words(24, seed=5)])
    val = make_lmdb(tmp_path / "val.lmdb", [w.upper() + "-7" for w in random_words(8, seed=6)])
    run = crnn.train("configs/finetune_alnum36.yaml", [
        f"model.charset={BASE.chars}ABCDEFGHIJKLMNOPQRSTUVWXYZ-", f"data.train={codes}", f"data.val={val}",
        f"train.init_weights={init}", "model.hidden=16", f"data.rehearsal={words_lmdb}", "data.rehearsal_num=0",
        "train.base_val=[]", "data.batch_size=8", "data.num_workers=0", "train.steps=2", "train.warmup_steps=0",
        "train.amp=off", "train.tensorboard=false", "train.freeze_cnn_steps=0", "train.interpolate_base=0.5",
        f"train.ema_decay={ema}", f"train.output_dir={tmp_path / 'run'}"])
    text = capsys.readouterr().err
    assert run.interpolated == tmp_path / "run" / "interpolated.pt"
    assert f"train.interpolate_base=0.5: {run.interpolated} = 0.5 x {init} + 0.5 x the trained weights" in text
    assert "scoring interpolated.pt" in text and set(run.metrics) == {str(val)}
    last, start = load_checkpoint(run.last), load_checkpoint(init)
    assert ("train_model" in last.raw) == bool(ema)  # with an average, last.pt keeps the raw weights apart
    if ema:
        raw = last.raw["train_model"]
        assert not torch.equal(raw["rnn2.weight_ih_l0"], last.model_state["rnn2.weight_ih_l0"])
    model = build_model("vgg_small", 1, last.num_classes, 16)
    want = interpolate_checkpoints(start, last, model, 0.5)
    got = load_checkpoint(run.interpolated)
    assert got.kind == "weights" and got.raw["interpolated"] == {"start": str(init), "alpha": 0.5}
    assert all(torch.equal(got.model_state[k], want[k]) for k in want)
    assert not torch.equal(got.model_state["rnn2.weight_ih_l0"], last.model_state["rnn2.weight_ih_l0"])
    with pytest.raises(ValueError, match=r"train.interpolate_base: .* within 0..1 \(1 = off\), got 1.5"):
        load_config(None, ["train.interpolate_base=1.5"])
    with pytest.raises(ValueError, match="train.interpolate_base=0.5 interpolates toward the starting weights"):
        load_config(None, ["train.interpolate_base=0.5"])
