"""Training health in words: data-wait share, collapsed outputs, non-finite steps and labels too long for T."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
import torch

import crnn
import crnn.engine.health as H
from crnn.charset import Charset
from crnn.config import load_config
from crnn.data.collate import Collate
from crnn.engine.runtime import Runtime
from crnn.engine.trainer import fit
from crnn.model import build_model
from tests.conftest import REPO, make_lmdb

TINY = ["train.threads=1", "data.batch_size=8", "data.num_workers=0", "train.amp=off", "train.log_every=1",
        "train.warmup_steps=0", "train.tensorboard=false", "train.show_predictions=0", "train.save_every=0",
        "train.val_every=0"]


def _overrides(tmp_path, train, val=None, *extra):
    return [f"data.train=[{{path: {train}}}]", f"data.val=[{val}]" if val else "data.val=[]",
            f"train.output_dir={tmp_path / 'run'}", *TINY, *extra]


def _log(capsys) -> list[str]:
    """The trainer's log lines (it logs to stderr through its own handler, so caplog sees nothing)."""
    return [line[len("[crnn] "):] for line in capsys.readouterr().err.splitlines() if line.startswith("[crnn] ")]


# ------------------------------------------------------------------------------------------- waiting for data
class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_data_wait_counts_fetches_against_whole_steps_not_the_time_between_them():
    clock = FakeClock()
    wait = H.DataWait(clock)

    def batches():
        for i in range(4):
            clock.now += 3.0  # blocked 3 s on each batch
            yield i

    for _ in wait.batches(batches):
        clock.now += 1.0  # forward, backward, optimizer
        wait.step_done()
        clock.now += 10.0  # validation / saving between steps: neither waiting nor stepping
    assert wait.window() == pytest.approx(0.75)
    assert wait.window() == 0.0  # nothing in the next window yet
    assert wait.run_share() == pytest.approx(0.75)


def test_highest_share_over_ranks_names_the_starved_rank(monkeypatch):
    rt = Runtime(torch.device("cpu"), "ddp", rank=0, world_size=2)
    monkeypatch.setattr(H.D, "all_reduce_sum", lambda v: v + torch.tensor([0.0, 0.7]))  # rank 1 waited 70 %
    share, rank = H.highest_share(0.1, rt)
    assert (round(share, 3), rank) == (0.7, 1)
    monkeypatch.setattr(H, "cpu_cores", lambda: 4)
    assert H.data_wait_message(share, rank, 2, 11, 20, 1) == \
        "rank 1's step waited for data 70 % of the time (steps 11-20): raise data.num_workers (now 1; 4 CPU cores " \
        "per process)"
    assert H.data_wait_message(0.63, 0, 1, 1, 5, 4).startswith(
        "the step waited for data 63 % of the time (steps 1-5): data.num_workers=4 already matches the 4 CPU cores")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
def test_clock_waits_for_queued_cuda_work(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    Runtime(torch.device("cuda", 0), "single").clock()
    Runtime(torch.device("cpu"), "single").clock()
    assert calls == [torch.device("cuda", 0)]


def test_slow_data_is_reported_in_log_tensorboard_warning_and_summary(tmp_path, words_lmdb, monkeypatch, capsys):
    """On a clock that only reading (1 s an image) and the model (2 s a forward) advance, every step waits 80 %."""
    from crnn.data.datasets import LmdbDataset
    from crnn.model import CRNN

    clock = FakeClock()
    read, forward = LmdbDataset.__getitem__, CRNN.forward

    def slow_read(self, i):
        clock.now += 1.0
        return read(self, i)

    def slow_forward(self, images):
        clock.now += 2.0
        return forward(self, images)

    monkeypatch.setattr(LmdbDataset, "__getitem__", slow_read)
    monkeypatch.setattr(CRNN, "forward", slow_forward)
    monkeypatch.setattr(Runtime, "clock", lambda self: clock())
    monkeypatch.setattr(H, "cpu_cores", lambda: 2)
    summary = crnn.train(load_config(None, _overrides(tmp_path, words_lmdb, None, "train.steps=3", "data.width=32",
                                                      "train.tensorboard=true")))
    log = _log(capsys)
    lines = [m for m in log if m.startswith("step ")]
    assert len(lines) == 3 and all(m.endswith("  unfit 0  data 80%") for m in lines), lines
    warned = [w for w in log if "waited for data" in w]
    # not for the first window (it includes starting the DataLoader workers), then once for the next 10 windows
    assert warned == ["the step waited for data 80 % of the time (steps 2-2): raise data.num_workers (now 0; "
                      "2 CPU cores per process)"]
    assert summary.data_wait_share == pytest.approx(0.8) and summary.health == warned
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ev = EventAccumulator(str(tmp_path / "run" / "tb"))
    ev.Reload()
    assert [round(e.value, 3) for e in ev.Scalars("train/data_wait_share")] == [0.8, 0.8, 0.8]


# ------------------------------------------------------------------------------------------- collapsed outputs
def _cfg(*extra):
    return load_config(None, ["train.lr=0.001", "train.warmup_steps=200", *extra])


def _res(n, empty=0, top=()):
    return SimpleNamespace(metrics={"samples": n}, empty_predictions=empty, top_predictions=list(top))


def test_collapse_to_blanks_is_named_with_its_usual_cause():
    msg = H.collapse_message("val.lmdb", _res(200, empty=200), 400, _cfg(), 37)
    assert msg == ("the model outputs only blanks at step 400 (all 200 validation predictions on val.lmdb are "
                   "empty): usual in the first thousands of steps, longer with a large alphabet (36 characters here); "
                   "if it persists lower train.lr (now 0.001) or check that the labels match the images")


def test_collapse_to_one_string_is_named_but_a_repeated_true_label_is_not():
    msg = H.collapse_message("val.lmdb", _res(200, empty=10, top=[("e", 150, 3)]), 400, _cfg(), 37)
    assert msg == ("the model outputs the same text 'e' for 150 of 200 validation predictions on val.lmdb at step 400 "
                   "(it is their label 3 times): it has collapsed onto one string; brief early in training, if it "
                   "persists lower train.lr (now 0.001), check that the labels match the images and that no single "
                   "text dominates the training data")
    assert H.collapse_message("v", _res(200, top=[("the", 150, 140)]), 400, _cfg(), 37) is None  # right: no collapse
    assert H.collapse_message("v", _res(200, top=[("e", 90, 0)]), 400, _cfg(), 37) is None  # not most of them


def test_no_collapse_alarm_early_in_training_or_on_a_handful_of_samples():
    assert H.collapse_message("v", _res(200, empty=200), 0, _cfg(), 37) is None  # step 0
    assert H.collapse_message("v", _res(200, empty=200), 150, _cfg(), 37) is None  # still warming up (200 steps)
    assert H.collapse_message("v", _res(5, empty=5), 5000, _cfg(), 37) is None  # 5 samples say little


def _constant_forward(monkeypatch, cls: int) -> None:
    """The model outputs class ``cls`` at the first time step and blank everywhere else (still differentiable)."""
    from crnn.model import CRNN

    orig = CRNN.forward

    def forward(self, images):
        out = orig(self, images) * 0.0  # (B, T, K)
        bias = torch.zeros_like(out)
        bias[..., 0] = 10.0
        bias[:, 0, 0], bias[:, 0, cls] = 0.0, 10.0 if cls else 0.0
        return out + bias

    monkeypatch.setattr(CRNN, "forward", forward)


@pytest.mark.parametrize("cls, expect", [(0, "the model outputs only blanks at step 2 (all 16 validation "
                                                "predictions on {val} are empty)"),
                                         (11, "the model outputs the same text 'a' for 16 of 16 validation "
                                              "predictions on {val} at step 2 (it is their label 0 times)")])
def test_trainer_warns_on_collapse_after_the_grace_steps_only(tmp_path, words_lmdb, val_lmdb, monkeypatch, capsys,
                                                            cls, expect):
    _constant_forward(monkeypatch, cls)
    args = _overrides(tmp_path, words_lmdb, val_lmdb, "train.steps=2", "data.width=32")
    fit(load_config(None, args))  # a tiny run: its step 2 is within the grace steps
    assert not [w for w in _log(capsys) if "the model outputs" in w]
    monkeypatch.setattr(H, "COLLAPSE_GRACE_STEPS", 0)
    fit(load_config(None, [*args, f"train.output_dir={tmp_path / 'run2'}"]))
    [w] = [w for w in _log(capsys) if "the model outputs" in w]
    assert w.startswith(expect.format(val=val_lmdb)), w


# ------------------------------------------------------------------------------------------- non-finite steps
def _health(*extra, width=32) -> H.Health:
    cfg = load_config(None, [f"data.width={width}", "train.lr=0.001", *extra])
    bare = build_model("vgg_small", 1, Charset.from_config(cfg.model).num_classes)
    return H.Health(cfg, Runtime(torch.device("cpu"), "single"), bare, 37)


def _batch(labels, width=32):
    ch = Charset.from_spec("alnum36")
    return Collate(ch, width_multiple=1)([(torch.zeros(1, 32, width), t) for t in labels])


def test_nonfinite_after_a_rising_loss_blames_the_learning_rate():
    h = _health()
    ok = _batch(["ab"])
    for loss in [2.0] * 6 + [2.5, 3.5, 5.0, 7.0, 9.0, 12.0]:
        h.micro(ok, loss, 0)
        assert h.step_done(True) is None
    h.micro(ok, float("nan"), 0)
    assert h.step_done(False, None) == (
        "the loss itself was not finite; likely cause: the learning rate: the loss rose from 2 to 7.3 over the last "
        "12 steps; lower train.lr (now 0.001) or raise train.warmup_steps")


def test_nonfinite_after_weights_blew_up_blames_the_learning_rate():
    h = _health()  # the largest weight at the start: 1 (BatchNorm scales)
    with torch.no_grad():
        h.bare.head.weight.fill_(1e6)
    h.micro(_batch(["ab"]), float("nan"), 0)
    assert h.step_done(False, None) == (
        "the loss itself was not finite; likely cause: the learning rate: the largest weight grew from 1 to 1e+06 "
        "since the start; lower train.lr (now 0.001) or raise train.warmup_steps")


def test_nonfinite_gradients_under_fp16_blame_the_overflow():
    h = _health()
    h.micro(_batch(["ab"]), 3.0, 0)
    msg = h.step_done(False, SimpleNamespace(get_scale=lambda: 32768.0))
    assert msg == ("the loss was finite, its gradients were not; likely cause: fp16 overflow: train.amp=fp16's "
                   "GradScaler skips such steps and lowers its scale (now 32768), usual in the first steps; if it "
                   "keeps happening use train.amp=bf16 or off")


def test_nonfinite_with_too_long_or_empty_labels_names_them():
    h = _health()  # vgg_small at width 32: T = 9
    h.micro(_batch(["abcdefghijklmnopqrst", "ab", ""]), float("inf"), 1)
    assert h.step_done(False, None) == (
        "the loss itself was not finite; likely cause: 1 empty label(s) in the batch; or 1 label(s) in the batch too "
        "long for T (CTC needs T >= length + repeated letters), e.g. 'abcdefghijklmnopqrst' needs 20 with T=9")
    h.micro(_batch(["ab"]), float("nan"), 0)
    assert h.step_done(False, None) == (
        "the loss itself was not finite; likely cause: none of the usual ones (the loss was not rising, every label "
        "fits T, no fp16); lower train.lr (now 0.001) or look for broken images")


def test_trainer_puts_the_cause_in_its_nonfinite_warning(tmp_path, words_lmdb, monkeypatch, capsys):
    from crnn.model import CRNN

    orig, calls = CRNN.forward, [0]

    def forward(self, images):
        calls[0] += 1
        out = orig(self, images)
        return out * float("nan") if calls[0] == 2 else out

    monkeypatch.setattr(CRNN, "forward", forward)
    fit(load_config(None, _overrides(tmp_path, words_lmdb, None, "train.steps=3")))
    [w] = [w for w in _log(capsys) if "update skipped" in w]
    assert w == ("step 2: non-finite loss/gradients, update skipped (1 in a row, 1 in total): the loss itself was not "
                 "finite; likely cause: none of the usual ones (the loss was not rising, every label fits T, no fp16); "
                 "lower train.lr (now 0.001) or look for broken images")


# ------------------------------------------------------------------------------------------- labels longer than T
def test_labels_too_long_for_t_say_the_width_that_fits(tmp_path, capsys):
    path = make_lmdb(tmp_path / "long.lmdb", ["abcdefghijklmnopqrst"] * 4 + ["ab"] * 4)  # 20 chars > T=9
    fit(load_config(None, _overrides(tmp_path, path, None, "train.steps=2", "data.width=32")))
    [w] = [w for w in _log(capsys) if "labels so far" in w]  # once: the longest label did not change
    bare = build_model("vgg_small", 1, 37)
    width = 32
    while bare.output_length(width) < 20:
        width += 1
    assert w == (f"4 labels so far need more time steps than the model gives them; the longest needs T >= 20 (T=9 at "
                 f"data.width=32): set data.width >= {width} or data.keep_ratio=true, or lower data.max_label_length "
                 f"(now 25) to drop them")


def test_labels_too_long_under_keep_ratio_say_whether_max_width_cut_them():
    h = _health("data.keep_ratio=true", "data.max_width=32")
    h.micro(_batch(["abcdefghijklmnopqrst", "ab"]), 1.0, 1)
    h.step_done(True)
    w = H.fit_width(h.bare, 20, 8)
    assert h.bare.output_length(w) >= 20 > h.bare.output_length(w - 1)
    assert h.unfit_message() == (f"1 labels so far need more time steps than the model gives them; the longest needs "
                                 f"T >= 20, an image {w} px wide (data.keep_ratio: T follows each image's width): "
                                 f"raise data.max_width (now 32) to >= {w}")


def test_a_clean_tiny_run_gives_no_health_warning(tmp_path, words_lmdb, val_lmdb, capsys):
    summary = crnn.train(load_config(None, _overrides(tmp_path, words_lmdb, val_lmdb, "train.steps=3")))
    log = "\n".join(_log(capsys))
    assert summary.health == []
    assert not any(k in log for k in ("waited for data", "the model outputs", "update skipped", "labels so far"))
    assert summary.data_wait_share is not None and 0.0 <= summary.data_wait_share <= 1.0


@pytest.mark.slow
def test_ddp_reports_the_data_wait_share_and_validates(tmp_path, words_lmdb, val_lmdb):
    """Under DDP the share comes from one all-reduce per log line, and the validation at step 3 pools both ranks'
    halves of the 16 validation images (what the collapse check then counts)."""
    from tests.test_train import _torchrun

    res = _torchrun(["--config", str(REPO / "configs/smoke.yaml"),
                     *_overrides(tmp_path, words_lmdb, val_lmdb, "train.steps=3", "train.val_every=3")])
    assert res.returncode == 0, res.stderr[-3000:]
    log = (res.stderr + res.stdout).splitlines()
    lines = [m for m in log if m.startswith("[crnn] step ")]
    assert len(lines) == 3 and all(re.search(r"  unfit \d+  data \d+%$", m) for m in lines), lines
    vals = [m for m in log if m.startswith("[crnn] val ")]
    assert len(vals) == 1 and re.fullmatch(rf"\[crnn\] val {re.escape(str(val_lmdb))} @ 3: acc [\d.]+  CER [\d.]+  "
                                           r"1-NED [\d.]+  \(16 samples, \d+ img/s\)", vals[0]), vals


def test_under_ddp_only_the_rank_whose_batch_was_non_finite_explains_besides_rank_0():
    h = H.Health(load_config(None, ["data.width=32"]), Runtime(torch.device("cpu"), "ddp", rank=1, world_size=2),
                 build_model("vgg_small", 1, 37), 37)
    h.micro(_batch(["ab"]), 3.0, 0)
    assert h.step_done(False) is None  # finite here: the all-reduced gradients were non-finite because of another rank
    h.micro(_batch(["ab"]), float("nan"), 0)
    assert h.step_done(False).startswith("the loss itself was not finite; likely cause: ")
