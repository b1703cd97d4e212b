"""Fine-tuning: output rows matched by character when the alphabet changes (every variant, converted peers), rehearsal
data mixed into batches, and the base domain scored before and after (log, summary)."""
from __future__ import annotations

import copy
import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from crnn.charset import Charset
from crnn.cli.convert_ckpt import main as convert_main
from crnn.config import Config, load_config
from crnn.engine.alphabet_change import adapt_head, fit_alphabet, output_layer_keys
from crnn.engine.checkpoint import (Checkpoint, CheckpointError, load_checkpoint, model_checkpoint,
                                    save_checkpoint)
from crnn.data.rehearsal import training_sources
from crnn.engine.finetune import forgetting_report
from crnn.model import build_model
from tests.conftest import REPO, make_lmdb, random_words
from tests.peers import ClovaModel, MeijieruCRNN

OLD = Charset("abc123")
NEW = Charset("c1xyzab")  # reordered, 'x', 'y', 'z' new, '2' and '3' dropped


def _logits(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.eval()(x)  # (B, T, K)


def _head_input(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """What the output layer sees (found by output_layer_keys, as adapt_head finds it)."""
    name = output_layer_keys(model)[0].rsplit(".", 1)[0]
    seen = []
    handle = model.get_submodule(name).register_forward_hook(lambda m, inp, out: seen.append(inp[0]))
    _logits(model, x)
    handle.remove()
    return seen[0]  # (B, T, F)


def _check_shared_rows(old_model, new_model, old: Charset, new: Charset, x: torch.Tensor) -> None:
    """Blank and every shared character: the same logits at their own rows. Exact: the output layer sees the same
    features and the rows are bit-identical, so each shared logit is computed from identical numbers; the full
    matrix products differ only in summation order (BLAS blocks by the number of rows), hence 1e-5 there."""
    h_old, h_new = _head_input(old_model, x), _head_input(new_model, x)
    assert torch.equal(h_old, h_new)
    w_key, b_key = output_layer_keys(new_model)
    so, sn = old_model.state_dict(), new_model.state_dict()
    a, b = _logits(old_model, x), _logits(new_model, x)
    assert b.shape[-1] == new.num_classes
    for c in ["", *(set(old.chars) & set(new.chars))]:
        i, j = (old.index[c], new.index[c]) if c else (0, 0)  # "" = the blank, row 0
        assert torch.equal(so[w_key][i], sn[w_key][j]) and torch.equal(so[b_key][i], sn[b_key][j]), c
        assert torch.equal(h_old @ so[w_key][i] + so[b_key][i], h_new @ sn[w_key][j] + sn[b_key][j])
        torch.testing.assert_close(a[..., i], b[..., j], rtol=0, atol=1e-5)


@pytest.mark.parametrize("variant", ["vgg_small", "vgg", "resnet18", "vgg_clova"])
def test_shared_characters_keep_their_logits_in_every_variant(variant):
    torch.manual_seed(0)
    old_model = build_model(variant, 1, OLD.num_classes, 16)
    new_model = build_model(variant, 1, NEW.num_classes, 16)
    state, change = adapt_head(old_model.state_dict(), OLD, NEW, new_model)
    new_model.load_state_dict(state, strict=True)
    _check_shared_rows(old_model, new_model, OLD, NEW, torch.rand(2, 1, 32, 40) * 2 - 1)
    assert (sorted(change.kept), change.new, change.dropped) == (["1", "a", "b", "c"], ["x", "y", "z"], ["2", "3"])
    assert change.reordered and not change.unchanged
    assert change.describe().startswith("alphabet change: 4 kept (moved to their new rows), 3 new ('xyz'), 2 dropped")
    w_key, b_key = output_layer_keys(new_model)
    fresh = [NEW.index[c] for c in "xyz"]
    assert state[w_key].shape[0] == NEW.num_classes and state[b_key].shape == (NEW.num_classes,)
    assert all(state[w_key][j].abs().max() <= 1 / state[w_key].shape[1] ** 0.5 for j in fresh)  # nn.Linear's range
    assert not any(torch.equal(state[w_key][j], state[w_key][k]) for j in fresh for k in fresh if j < k)


def test_unchanged_alphabet_is_a_no_op():
    model = build_model("vgg_small", 1, OLD.num_classes, 16)
    sd = model.state_dict()
    state, change = adapt_head(sd, OLD, Charset("abc123", lowercase=False), model)
    assert state is sd and change.unchanged


def test_upper_case_starts_from_the_lower_case_row_of_a_case_folding_base():
    old, new = Charset.from_spec("alnum36"), Charset("0123456789abcdefghijklmnopqrstuvwxyzAB$€")
    assert old.lowercase and not new.lowercase
    torch.manual_seed(1)
    old_model, new_model = build_model("vgg_small", 1, old.num_classes, 16), build_model("vgg_small", 1, 41, 16)
    state, change = adapt_head(old_model.state_dict(), old, new, new_model)
    new_model.load_state_dict(state)
    x = torch.rand(1, 1, 32, 48) * 2 - 1
    _check_shared_rows(old_model, new_model, old, new, x)
    a, b = _logits(old_model, x), _logits(new_model, x)
    torch.testing.assert_close(b[..., new.index["A"]], a[..., old.index["a"]], rtol=0, atol=1e-5)  # 'A' was 'a'
    assert (len(change.kept), change.folded, change.new, change.dropped) == (36, ["A", "B"], ["$", "€"], [])
    assert "36 kept, 2 upper-case letters start from their lower-case rows" in change.describe()
    # a case-sensitive base has no such fold: 'A' would be new
    _, strict = adapt_head(build_model("vgg_small", 1, 4, 16).state_dict(), Charset("abC"), Charset("aA"),
                           build_model("vgg_small", 1, 3, 16))
    assert strict.new == ["A"] and strict.dropped == ["b", "C"]


def test_fp16_weights_stay_fp16_and_exact():
    model = build_model("vgg_small", 1, OLD.num_classes, 16)
    sd = {k: v.half() if v.is_floating_point() else v for k, v in model.state_dict().items()}
    state, _ = adapt_head(sd, OLD, NEW, build_model("vgg_small", 1, NEW.num_classes, 16))
    w = output_layer_keys(model)[0]
    assert state[w].dtype == torch.float16
    assert torch.equal(state[w][NEW.index["a"]], sd[w][OLD.index["a"]])


def test_a_bare_state_dict_of_another_alphabet_says_how_to_convert_it():
    model = build_model("vgg_small", 1, NEW.num_classes, 16)
    bare = Checkpoint(path="their.pth", model_state=build_model("vgg_small", 1, 11, 16).state_dict())
    with pytest.raises(CheckpointError, match=r"crnn-convert-ckpt their.pth OUT --from SOURCE --charset"):
        fit_alphabet(bare, NEW, model)
    same = Checkpoint(path="their.pth", model_state=model.state_dict())
    state, change, base = fit_alphabet(same, NEW, model)  # as many classes: loads as it always did
    assert state is same.model_state and change is None and base is None


def _convert(args: list[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        assert convert_main(args) == 0, err.getvalue()


@pytest.mark.parametrize("peer", ["meijieru", "clovaai"])
def test_converted_peer_checkpoints_take_a_new_alphabet(tmp_path, peer):
    """crnn-convert-ckpt --from PEER gives a checkpoint with a charset (alnum36 for 37 classes): it remaps like ours."""
    torch.manual_seed(3)
    net = MeijieruCRNN(1, 37, 256) if peer == "meijieru" else ClovaModel(1, 37)
    theirs, ours = tmp_path / "theirs.pth", tmp_path / "ours.pt"
    torch.save(net.state_dict(), theirs)
    _convert([str(theirs), str(ours), "--from", peer])
    ck = load_checkpoint(ours)
    base = Charset.from_dict(ck.charset)
    variant = "vgg" if peer == "meijieru" else "vgg_clova"
    old_model = build_model(variant, 1, base.num_classes)
    old_model.load_state_dict(ck.model_state)
    new = Charset("0123456789abcdefghijklmnopqrstuvwxyzXYZ-#")
    new_model = build_model(variant, 1, new.num_classes)
    state, change, got = fit_alphabet(ck, new, new_model)
    new_model.load_state_dict(state, strict=True)
    assert got == base and len(change.kept) == 36 and change.folded == ["X", "Y", "Z"] and change.new == ["-", "#"]
    _check_shared_rows(old_model, new_model, base, new, torch.rand(1, 1, 32, 48) * 2 - 1)


def test_rehearsal_share_of_each_batch():
    cfg = load_config(None, ["data.train=[{path: a, ratio: 3}, {path: b, ratio: 1}]", "data.rehearsal=r",
                             "data.rehearsal_ratio=0.4"])
    assert training_sources(cfg) == [{"path": "a", "ratio": pytest.approx(0.45)},
                                     {"path": "b", "ratio": pytest.approx(0.15)}, {"path": "r", "ratio": 0.4}]
    plain = load_config(None, ["data.train=crops/", "data.val=val/"])  # one dataset as a plain path
    assert training_sources(plain) == [{"path": "crops/"}] and plain.data.val == ["val/"]
    with pytest.raises(ValueError, match="data.rehearsal_ratio"):
        load_config(None, ["data.rehearsal_ratio=1.5"])


def test_forgetting_report_lines():
    before = {"b": {"word_acc": 0.634}, "v": {"word_acc": 0.0}}
    after = {"b": {"word_acc": 0.62}, "v": {"word_acc": 0.95}}
    assert forgetting_report(before, after, ["b"], ["v"]) == [
        "base b: 63.4 % -> 62.0 % (-1.4 points)", "your data v: 0.0 % -> 95.0 % (+95.0 points)"]


def test_train_from_another_alphabet_with_rehearsal_reports_before_and_after(tmp_path, words_lmdb, capsys):
    """crnn.train from alnum36 weights to a cased alphabet with '-': rows remapped (logged), rehearsal mixed in,
    data.val and train.base_val scored at step 0 and at the end; the summary carries both."""
    import crnn

    base_cs = Charset.from_spec("alnum36")
    torch.manual_seed(0)
    base_model = build_model("vgg_small", 1, base_cs.num_classes, 16)
    init = tmp_path / "base.pt"
    save_checkpoint(model_checkpoint(base_model, Config(), base_cs), init)
    codes = make_lmdb(tmp_path / "codes.lmdb", [w.upper() + "-" + w[:2] for w in random_words(24, seed=5)])
    codes_val = make_lmdb(tmp_path / "codes_val.lmdb", [w.upper() + "-7" for w in random_words(8, seed=6)])
    base_val = make_lmdb(tmp_path / "base_val.lmdb", random_words(8, seed=7))
    charset = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-"
    run = crnn.train("configs/finetune_alnum36.yaml", [
            f"model.charset={charset}", f"data.train={codes}", f"data.val={codes_val}", f"train.init_weights={init}",
        "model.hidden=16", f"data.rehearsal={words_lmdb}", "data.rehearsal_num=0", "data.rehearsal_ratio=0.5",
        f"train.base_val={base_val}", "train.base_val_num=0", "data.batch_size=8", "data.num_workers=0",
        "train.steps=2", "train.warmup_steps=0", "train.amp=off", "train.val_every=0", "train.tensorboard=false",
        "train.freeze_cnn_steps=-1", f"train.output_dir={tmp_path / 'run'}"])
    text = capsys.readouterr().err
    assert "alphabet change: 36 kept, 26 upper-case letters start from their lower-case rows" in text
    assert "1 new ('-'), 0 dropped" in text
    assert (f"train.init_weights {init} was trained reading crops otherwise than this run reads them: "
            "data.keep_ratio false -> true, data.min_width 8 -> 100, data.max_width 400 -> 320") in text  # its 32x100
    assert "train data: 88 samples from 2 source(s)" in text  # the user's crops and the rehearsal set
    assert f"base {base_val} @ 0:" in text and f"base {base_val} @ 2:" in text
    after = "before -> after (interpolated.pt)"  # the recipe's train.interpolate_base: the model to read is scored
    assert f"{after}: base {base_val}:" in text and f"{after}: your data {codes_val}:" in text
    assert set(run.before) == {str(codes_val), str(base_val)} and set(run.base_metrics) == {str(base_val)}
    assert run.base_metrics[str(base_val)]["samples"] == 8 and 0 <= run.before[str(base_val)]["word_acc"] <= 1
    ck = torch.load(run.last, weights_only=True)
    assert ck["charset"]["chars"] == charset and ck["num_classes"] == len(charset) + 1
    assert ck["state"]["before"][str(base_val)]["samples"] == 8  # a resumed run still knows its starting point
    start = base_model.state_dict()
    cnn_keys = [k for k in start if k.startswith("cnn.") and not k.endswith("num_batches_tracked")]
    assert any(k.endswith("running_mean") for k in cnn_keys)  # vgg_small has BatchNorm: its statistics are checked
    assert all(torch.equal(ck["model"][k], start[k]) for k in cnn_keys)  # frozen: weights and BN statistics
    assert not torch.equal(ck["model"]["rnn2.weight_ih_l0"], start["rnn2.weight_ih_l0"])  # trained
    assert "step 0: CNN frozen (train.freeze_cnn_steps)" in text


def test_freeze_then_unfreeze_and_ddp_refuses_unfreezing():
    from crnn.engine.finetune import check_freeze, cnn_frozen, set_cnn_frozen
    from crnn.engine.runtime import TrainingError

    cfg = load_config(None, ["train.freeze_cnn_steps=3"])
    assert [cnn_frozen(cfg, s) for s in (0, 2, 3, 10)] == [True, True, False, False]
    assert cnn_frozen(load_config(None, ["train.freeze_cnn_steps=-1"]), 10 ** 6)
    model = build_model("vgg_small", 1, 5, 16)
    set_cnn_frozen(model, True, 0, main=False)
    assert not any(p.requires_grad for p in model.cnn.parameters()) and model.head.weight.requires_grad
    bns = [m for m in model.cnn.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert bns and all(m.momentum == 0.0 for m in bns)  # frozen BN statistics
    stats = [m.running_mean.clone() for m in bns]
    model.train()(torch.rand(2, 1, 32, 64))
    assert all(torch.equal(m.running_mean, s) for m, s in zip(bns, stats))
    set_cnn_frozen(model, False, 3, main=False)
    assert all(p.requires_grad for p in model.parameters()) and all(m.momentum == 0.1 for m in bns)
    model(torch.rand(2, 1, 32, 64))
    assert not torch.equal(bns[0].running_mean, stats[0])  # they follow the data again
    with pytest.raises(TrainingError, match="not possible under DDP"):
        check_freeze(cfg, "ddp")
    check_freeze(load_config(None, ["train.freeze_cnn_steps=-1"]), "ddp")  # frozen throughout: fine


def _pull_setup():
    """A base model on alnum-like 'abc123', a new model on 'c1xyzab' started from it (rows by character)."""
    from crnn.engine.alphabet_change import adapt_head
    from crnn.engine.finetune import BasePull, base_rows

    torch.manual_seed(0)
    old_model = build_model("vgg_small", 1, OLD.num_classes, 16)
    model = build_model("vgg_small", 1, NEW.num_classes, 16)
    state, change = adapt_head(old_model.state_dict(), OLD, NEW, model)
    model.load_state_dict(state, strict=True)
    return model, BasePull(model, 0.5, base_rows(model, NEW, change)), change


def test_base_pull_is_zero_at_the_base_and_its_gradient_points_back():
    model, pull, change = _pull_setup()
    rows = [0] + [NEW.index[c] for c in change.kept]  # blank and 'c', '1', 'a', 'b'
    assert sorted(rows) == [0, 1, 2, 6, 7]
    pen = pull.penalty()
    pen.backward()
    assert float(pen.detach()) == 0.0 and all(p.grad is None or not p.grad.any() for p in model.parameters())
    start = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    model.zero_grad()
    pull.penalty().backward()
    w = model.head.weight
    diff = (w.detach() - start["head.weight"])
    torch.testing.assert_close(w.grad[rows], 0.5 * diff[rows])  # alpha * (w - w_base): back toward the base
    fresh = [NEW.index[c] for c in "xyz"]
    assert not w.grad[fresh].any() and not model.head.bias.grad[fresh].any()  # new characters are free
    conv = next(model.cnn.parameters())
    assert conv.grad is not None and conv.grad.any()
    before = pull.distance()
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p.sub_(0.1 * p.grad)  # a gradient step on the penalty alone shortens the distance by 5 %
    assert pull.distance() == pytest.approx(0.95 * before, rel=1e-4)


def test_base_pull_keeps_a_fine_tune_closer_to_its_start_and_needs_init_weights(tmp_path, words_lmdb):
    """crnn.train with a strong train.base_pull ends nearer the starting weights than without (same data, seed and
    steps), and the distance is measured from train.init_weights; without init weights it is a one-line error."""
    import crnn
    from crnn.engine.runtime import TrainingError

    torch.manual_seed(0)
    base_cs = Charset.from_spec("alnum36")
    init = tmp_path / "base.pt"
    save_checkpoint(model_checkpoint(build_model("vgg_small", 1, base_cs.num_classes, 16), Config(), base_cs), init)
    start = torch.load(init, weights_only=True)["model"]
    codes = make_lmdb(tmp_path / "codes.lmdb", [w.upper() + "-" + w[:2] for w in random_words(24, seed=5)])
    common = [f"model.charset={base_cs.chars}-", f"data.train={codes}", "data.val=[]", f"train.init_weights={init}",
              "model.hidden=16", "data.rehearsal=", "train.base_val=[]", "data.batch_size=8", "data.num_workers=0",
              "train.steps=6", "train.warmup_steps=0", "train.amp=off", "train.val_every=0", "train.tensorboard=false",
              "train.freeze_cnn_steps=0", "train.lr=3e-3"]

    def distance(pull: float) -> float:
        run = crnn.train("configs/finetune_alnum36.yaml", [*common, f"train.base_pull={pull}",
                                                   f"train.output_dir={tmp_path / f'run{pull}'}"])
        end = torch.load(run.last, weights_only=True)["model"]
        keys = [k for k in start if "head" not in k and start[k].is_floating_point() and "running" not in k]
        return sum(float((end[k].float() - start[k].float()).pow(2).sum()) for k in keys) ** 0.5

    free, pulled = distance(0.0), distance(1e4)
    assert 0 < pulled < 0.5 * free
    with pytest.raises(TrainingError, match="train.base_pull=1.0 pulls toward the starting weights"):
        crnn.train(None, [f"data.train={words_lmdb}", "train.base_pull=1", "train.steps=1", "data.num_workers=0",
                          f"train.output_dir={tmp_path / 'none'}"])
    with pytest.raises(ValueError, match="train.base_pull: must be 0"):
        load_config(None, ["train.base_pull=-1"])


def test_min_width_stretches_narrow_crops_everywhere_a_model_is_read(tmp_path):
    """data.min_width: a keep-ratio crop narrower than it is stretched to it (wider ones keep their width) in the
    training and evaluation loaders, in crnn.Recognizer (from the checkpoint's config) and in the export metadata;
    the default (8) changes nothing; a floor above data.max_width is a config error."""
    from PIL import Image

    from crnn.data.loader import build_eval_loader, make_transform, preprocess_options
    from crnn.export import export_metadata
    from crnn.infer import Recognizer

    cfg = load_config(None, ["data.keep_ratio=true", "data.max_width=320", "data.min_width=100", "model.hidden=16"])
    t = make_transform(height=32, width=100, keep_ratio=True, max_width=320, channels=1, **preprocess_options(cfg.data))
    narrow, wide = Image.new("L", (40, 32), 200), Image.new("L", (200, 32), 200)
    assert t(narrow).shape == (1, 32, 100) and t(wide).shape == (1, 32, 200)
    default = load_config(None, ["data.keep_ratio=true"])
    assert make_transform(height=32, width=100, keep_ratio=True, max_width=320, channels=1,
                          **preprocess_options(default.data))(narrow).shape == (1, 32, 40)
    lm = make_lmdb(tmp_path / "short.lmdb", ["ab", "c"])  # rendered narrower than 100 px at height 32
    loader = build_eval_loader(str(lm), height=32, width=100, keep_ratio=True, max_width=320, channels=1,
                               batch_size=2, num_workers=0, **preprocess_options(cfg.data))
    assert next(iter(loader)).images.shape[-1] == 100
    cs = Charset.from_spec("alnum36")
    model = build_model("vgg_small", 1, cs.num_classes, 16)
    path = tmp_path / "m.pt"
    save_checkpoint(model_checkpoint(model, cfg, cs), path)
    rec = Recognizer.from_checkpoint(path, device="cpu")
    assert rec.preprocess(narrow).shape == (1, 32, 100) and rec.preprocess(wide).shape == (1, 32, 200)
    assert export_metadata(model, cs, cfg)["min_width"] == 100
    with pytest.raises(ValueError, match=r"data.min_width: must be between 1 and data.max_width \(320\)"):
        load_config(None, ["data.max_width=320", "data.min_width=400"])


def test_freeze_bn_normalises_with_the_starting_statistics_in_training_too():
    from crnn.engine.finetune import freeze_bn_statistics

    torch.manual_seed(0)
    model = build_model("vgg_small", 1, 5, 16)
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    with torch.no_grad():  # starting statistics unlike those of the batch below
        for m in bns:
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
    stats = [(m.running_mean.clone(), m.running_var.clone()) for m in bns]
    x = torch.rand(4, 1, 32, 64)
    reference = model.eval()(x)  # (B, T, K) read with the running statistics
    assert not torch.allclose(copy.deepcopy(model).train()(x), reference)  # plain training mode: batch statistics
    assert freeze_bn_statistics(model, main=False) == len(bns) == 3
    model.train()
    out = model(x)
    torch.testing.assert_close(out, reference)  # training computes what evaluation computes
    assert all(torch.equal(m.running_mean, a) and torch.equal(m.running_var, b) for m, (a, b) in zip(bns, stats))
    out.sum().backward()
    assert all(m.weight.grad is not None and m.weight.grad.any() for m in bns)  # scale and shift still learn
    assert model.training and all(m.training is False for m in bns)


def test_rehearsal_words_in_the_street_style():
    from crnn.data.rehearsal import base_style_options, synth_jobs

    cfg = load_config("configs/finetune_alnum36.yaml", ["data.rehearsal=/nonexistent/r.lmdb",
                                                        "data.rehearsal_style=street",
                                                        "train.base_val=[/nonexistent/v.lmdb]"])
    jobs = synth_jobs(cfg)
    assert [(p, s) for p, _, _, s in jobs] == [("/nonexistent/r.lmdb", "street"), ("/nonexistent/v.lmdb", "default")]
    assert base_style_options(cfg, "street").style == "street" and base_style_options(cfg).style == "default"
    with pytest.raises(ValueError, match="data.rehearsal_style: 'photo' is not one of default, street, base"):
        load_config(None, ["data.rehearsal_style=photo"])


def _tools(name: str):
    """Import tools/<name>.py as a module (tools/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_default_recipe_starts_from_crnn_en_and_reads_as_it_was_trained():
    """configs/finetune.yaml starts from the default `en` with crnn_en's own reading geometry (its recipe, and the
    shipped file's stored config where the checkout has it); the alnum36 recipe, as measured, still loads."""
    from crnn.config import config_to_dict
    from crnn.data.loader import reading_changes
    from crnn.infer import WEIGHTS_BY_NAME

    cfg = load_config(REPO / "configs" / "finetune.yaml")
    assert cfg.train.init_weights == f"weights/{WEIGHTS_BY_NAME['en']}" == "weights/crnn_en.pt"
    assert (cfg.model.variant, cfg.model.charset, cfg.data.rehearsal_style) == ("vgg_small", "printable95", "base")
    assert (cfg.train.distill_base, cfg.train.interpolate_base, cfg.train.freeze_cnn_steps) == (1.0, 0.8, 1200)
    en = config_to_dict(load_config(REPO / "configs" / "shipped_en.yaml"))
    assert reading_changes(en, cfg) == []
    shipped = REPO / "weights" / "crnn_en.pt"
    if shipped.is_file():
        assert reading_changes(load_checkpoint(shipped).config, cfg) == []
    old = load_config(REPO / "configs" / "finetune_alnum36.yaml")
    assert (old.train.init_weights, old.model.charset) == ("weights/crnn_vgg_small.pt", "alnum36")
    assert (old.data.min_width, old.data.max_width, old.data.width_step, old.data.rehearsal_style) == (100, 320, 1,
                                                                                                      "street")
    assert (old.train.distill_base, old.train.interpolate_base, old.train.freeze_cnn_steps) == (1.0, 0.8, 1200)
    assert old.data.rehearsal != cfg.data.rehearsal and old.train.base_val != cfg.train.base_val  # no set is shared
    # what the log warns: the alnum36 recipe read from crnn_en, and from the fixed 32x100 model it was made for
    assert reading_changes(en, old) == ["data.height 48 -> 32", "data.min_width 24 -> 100", "data.max_width 600 -> 320",
                                        "data.width_step 4 -> 1", "data.read_width_scale 1.1 -> 1.0"]
    assert reading_changes(config_to_dict(Config()), old) == ["data.keep_ratio false -> true",
                                                              "data.min_width 8 -> 100", "data.max_width 400 -> 320"]
    assert reading_changes(None, cfg) == [] and reading_changes({"model": {}}, cfg) == []


def _en_start(tmp_path: Path, *overrides: str) -> Path:
    """A tiny printable95 start whose stored config is crnn_en's recipe (its data engine's levers)."""
    cfg = load_config(REPO / "configs" / "shipped_en.yaml", ["model.hidden=16", *overrides])
    cs = Charset.from_spec("printable95")
    torch.manual_seed(0)
    path = tmp_path / "en_start.pt"
    save_checkpoint(model_checkpoint(build_model("vgg_small", 1, cs.num_classes, 16), cfg, cs), path)
    return path


def test_rehearsal_in_the_starts_own_style(tmp_path):
    """data.rehearsal_style=base: the rehearsal and base_val words are rendered with the synth options stored in
    train.init_weights; a start trained on stored LMDBs, or none, is a one-line error."""
    from crnn.data.datasets import DataError
    from crnn.data.rehearsal import needs_start_config, start_synth_options, synth_jobs
    from crnn.engine.finetune import start_config
    from crnn.engine.runtime import TrainingError

    start = _en_start(tmp_path)
    cfg = load_config(REPO / "configs" / "finetune.yaml", [f"train.init_weights={start}",
                                                           "data.rehearsal=/nonexistent/r.lmdb",
                                                           "train.base_val=[/nonexistent/v.lmdb]"])
    assert [(p, s) for p, _, _, s in synth_jobs(cfg)] == [("/nonexistent/r.lmdb", "base"), ("/nonexistent/v.lmdb",
                                                                                             "base")]
    assert needs_start_config(cfg) and not needs_start_config(load_config(REPO / "configs" / "finetune.yaml", [
        "data.rehearsal_style=default", "data.rehearsal=/nonexistent/r.lmdb", "train.base_val=[/nonexistent/v.lmdb]"]))
    stored = start_config(cfg)
    opts = start_synth_options(cfg, stored)
    assert (opts.charset, opts.text, opts.style, opts.max_len) == ("printable95", "words", "default", 25)
    assert (opts.signs, opts.street, opts.squeeze, opts.weight, opts.jitter, opts.photos) == (0.25, 0.35, 0.2, 0.2,
                                                                                              0.1, 0.2)
    assert stored.data.synth_real_share == [0.05, 0.1]  # not rendered: the log says so
    alnum = tmp_path / "alnum36.pt"
    save_checkpoint(model_checkpoint(build_model("vgg_small", 1, 37, 16), Config(), Charset.from_spec("alnum36")),
                    alnum)
    converted = load_config(REPO / "configs" / "finetune.yaml", [f"train.init_weights={alnum}"])
    with pytest.raises(DataError, match=r"names no rendered training data in its config \(no data.synth_online "
                                        r"or data.synth_num: stored sets, or converted\), so its style is "
                                        r"unknown; use data.rehearsal_style=default or street"):
        start_synth_options(converted, start_config(converted))
    with pytest.raises(DataError, match=f"data.rehearsal_style=base: {start} stores no config"):
        start_synth_options(cfg, None)
    with pytest.raises(TrainingError, match="data.rehearsal_style=base renders words as train.init_weights was "
                                            "trained: set it"):
        start_config(load_config(None, ["data.rehearsal_style=base"]))


def test_fine_tune_from_a_printable95_start_with_its_own_rehearsal(tmp_path, capsys):
    """configs/finetune.yaml end to end from a tiny crnn_en-like start to printable95 + '€' (make_codes' alphabet
    file): rehearsal and base_val rendered in the start's style, 95 rows kept and '€' new, a teacher that folds no
    case, and no warning about the geometry (the recipe reads as the start was trained)."""
    import crnn
    from crnn.data.fonts import NoFontsError, find_fonts

    try:
        find_fonts(None)
    except NoFontsError:
        pytest.skip("no fonts installed to render the rehearsal words (scripts/setup.sh installs them)")
    start = _en_start(tmp_path, "data.synth_photos=0")  # photos need the wallpapers; the rest renders anywhere
    alphabet = _tools("make_codes").write_charset_en(tmp_path / "codes")
    assert Charset.from_spec(str(alphabet)).chars == Charset.from_spec("printable95").chars + "€"
    codes = make_lmdb(tmp_path / "codes.lmdb", [f"€{w.upper()},{len(w)}" for w in random_words(16, seed=5)])
    val = make_lmdb(tmp_path / "val.lmdb", [f"SKU#{w.upper()}" for w in random_words(8, seed=6)])
    rehearsal, base_val = tmp_path / "rehearsal.lmdb", tmp_path / "base_val.lmdb"
    run = crnn.train(str(REPO / "configs" / "finetune.yaml"), [
        f"model.charset={alphabet}", f"data.train={codes}", f"data.val={val}", f"train.init_weights={start}",
        "model.hidden=16", f"data.rehearsal={rehearsal}", "data.rehearsal_num=16", f"train.base_val=[{base_val}]",
        "train.base_val_num=8", "data.synth_workers=1", "data.batch_size=8", "data.num_workers=0", "train.steps=2",
        "train.freeze_cnn_steps=1", "train.warmup_steps=0", "train.amp=off", "train.tensorboard=false",
        f"train.output_dir={tmp_path / 'run'}"])
    text = capsys.readouterr().err
    engine = f"as {start} was trained: printable95 words, style default, signs 0.25, street 0.35, squeeze 0.2"
    assert f"generating 16 synthetic samples into {rehearsal} (seed 7) {engine}" in text
    assert f"generating 8 synthetic samples into {base_val} (seed 1000010) {engine}" in text
    assert "(not the real crops it also trained on: 5% from data/en_real_train, 10% from data/ic15_real_train)" in text
    assert "alphabet change: 95 kept, 1 new ('€'), 0 dropped" in text
    assert "teaches every sample whose label it could read (KL per frame, the same characters, case kept)" in text
    assert "was trained reading crops otherwise" not in text
    assert f"before -> after (interpolated.pt): base {base_val}:" in text and "8 samples, exact)" in text
    assert load_checkpoint(run.last).charset["chars"].endswith(" €")


def test_the_chinese_recipe_reads_as_the_chinese_model_was_trained():
    """configs/finetune_zh.yaml starts from `zh` with its variant, alphabet, geometry (48 px, T = W/8, min_width 12,
    reading at 1.15x) and protocol; read with the English recipe's geometry the log would name every difference."""
    from crnn.config import config_to_dict
    from crnn.data.loader import reading_changes
    from crnn.infer import WEIGHTS_BY_NAME

    cfg = load_config(REPO / "configs" / "finetune_zh.yaml")
    assert cfg.train.init_weights == f"weights/{WEIGHTS_BY_NAME['zh']}"
    assert (cfg.model.variant, cfg.model.charset, cfg.data.rehearsal_style) == ("vgg_small_w8", "zh_gb2312", "base")
    assert (cfg.train.protocol, cfg.train.base_protocol) == ("unicode", "unicode")
    zh = config_to_dict(load_config(REPO / "configs" / "shipped_zh.yaml"))
    assert reading_changes(zh, cfg) == []
    shipped = REPO / "weights" / WEIGHTS_BY_NAME["zh"]
    if shipped.is_file():
        assert reading_changes(load_checkpoint(shipped).config, cfg) == []
    en = load_config(REPO / "configs" / "finetune.yaml")
    assert reading_changes(zh, en) == ["data.min_width 12 -> 24", "data.width_step 8 -> 4",
                                       "data.read_width_scale 1.15 -> 1.1"]  # both 48 px high since issue 60
    assert {cfg.data.rehearsal, *cfg.train.base_val}.isdisjoint({en.data.rehearsal, *en.train.base_val})
