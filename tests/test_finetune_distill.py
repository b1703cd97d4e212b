"""train.distill_base: the starting model as a frozen teacher on the samples it could read (KL per frame, upper case
folded onto lower case), the math by hand and its effect on a real (tiny) fine-tune."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from crnn.charset import Charset
from crnn.config import load_config
from crnn.engine.checkpoint import load_checkpoint, build_from_checkpoint, model_checkpoint, save_checkpoint
from crnn.engine.finetune import BaseTeacher
from crnn.model import build_model
from tests.conftest import make_lmdb, random_words


class _Fixed(nn.Module):
    """A 'model' that returns fixed logits whatever it is given (the teacher of the unit test)."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = logits
        self.seen: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.append(x)
        return self.logits[: x.shape[0]]


def test_distillation_folds_upper_case_onto_lower_case_and_skips_what_the_base_could_not_read():
    base, new = Charset("ab1"), Charset("ab1AB$")  # the base folds case; 'A', 'B' and '$' are new rows
    assert base.lowercase
    torch.manual_seed(0)
    labels = ["aB", "a$", "1b"]  # the second has a character the base never read: not distilled
    student = torch.randn(3, 5, new.num_classes, requires_grad=True)
    teacher_logits = torch.randn(2, 5, base.num_classes)
    steps = torch.tensor([3, 5, 4])
    images = torch.arange(3.0).view(3, 1, 1, 1)
    teacher = _Fixed(teacher_logits)
    loss, n = BaseTeacher(teacher, base, new, alpha=0.5).loss(student, images, labels, steps)
    assert n == 2 and teacher.seen[0].flatten().tolist() == [0.0, 2.0]  # the teacher read samples 0 and 2 only

    p = student.detach().softmax(-1)  # classes: blank a b 1 A B $
    folded = torch.stack([p[..., 0], p[..., 1] + p[..., 4], p[..., 2] + p[..., 5], p[..., 3]], -1)  # '$' is lost
    expected = []
    for row, (i, t) in enumerate(((0, 3), (2, 4))):
        pt = teacher_logits[row, :t].softmax(-1)
        expected.append((pt * (pt.log() - folded[i, :t].log())).sum(-1).mean())  # valid frames only
    assert float(loss.detach()) == pytest.approx(0.5 * float(torch.stack(expected).mean()), rel=1e-5)

    loss.backward()
    assert not student.grad[1].any()  # the sample with '$' gets nothing from the teacher
    assert not student.grad[0, 3:].any() and student.grad[0, :3].any()  # nor frames past its valid length

    # a student that reads exactly as the teacher (upper case folded in, nothing on '$') costs nothing
    same = torch.full((3, 5, new.num_classes), -1e4)
    same[[0, 2], :, : base.num_classes] = teacher_logits
    loss, _ = BaseTeacher(_Fixed(teacher_logits), base, new, 1.0).loss(same, images, labels, steps)
    assert abs(float(loss)) < 1e-5
    assert BaseTeacher(teacher, base, new, 1.0).loss(student, images, ["a$", "", "#"], steps)[1] == 0


def test_distill_new_teaches_labels_with_new_characters_renormalised_over_the_base_classes():
    """train.distill_new: a sample whose label the base could not read ('a$') is taught too, the student's
    distribution renormalised over the base's classes - what it puts on '$' is neither pushed down nor counted."""
    base, new = Charset("ab1"), Charset("ab1AB$")
    torch.manual_seed(1)
    labels = ["aB", "a$", "1b", ""]  # the empty label is never taught
    student = torch.randn(4, 5, new.num_classes, requires_grad=True)
    teacher_logits = torch.randn(3, 5, base.num_classes)
    steps = torch.tensor([3, 5, 4, 5])
    images = torch.arange(4.0).view(4, 1, 1, 1)
    teacher = _Fixed(teacher_logits)
    loss, n = BaseTeacher(teacher, base, new, alpha=0.5, new_alpha=0.25).loss(student, images, labels, steps)
    assert n == 3 and teacher.seen[0].flatten().tolist() == [0.0, 1.0, 2.0]

    p = student.detach().softmax(-1)  # classes: blank a b 1 A B $
    folded = torch.stack([p[..., 0], p[..., 1] + p[..., 4], p[..., 2] + p[..., 5], p[..., 3]], -1)

    def kl(row: int, i: int, t: int, q: torch.Tensor) -> torch.Tensor:
        pt = teacher_logits[row, :t].softmax(-1)
        return (pt * (pt.log() - q[i, :t].log())).sum(-1).mean()

    old = (kl(0, 0, 3, folded) + kl(2, 2, 4, folded)) / 2  # as without distill_new: '$' mass is loss there
    renorm = folded / folded.sum(-1, keepdim=True)
    assert float(loss.detach()) == pytest.approx(float(0.5 * old + 0.25 * kl(1, 1, 5, renorm)), rel=1e-5)
    loss.backward()
    assert student.grad[1].any() and not student.grad[3].any()

    # the '$' sample read as the teacher among the base classes costs nothing, however much it puts on '$'
    same = torch.full((4, 5, new.num_classes), -1e4)
    same[:3, :, : base.num_classes] = teacher_logits
    same[1, :, 6] = 5.0  # most of the mass on '$'
    loss, _ = BaseTeacher(_Fixed(teacher_logits), base, new, 1.0, new_alpha=1.0).loss(same, images, labels, steps)
    assert abs(float(loss)) < 1e-5
    # without distill_new the same batch is taught as before: only the labels the base could read
    _, n = BaseTeacher(_Fixed(teacher_logits), base, new, 1.0).loss(same, images, labels, steps)
    assert n == 2
    # only new-character labels: the readable term is absent, not a mean over nothing
    loss, n = BaseTeacher(_Fixed(teacher_logits[1:2]), base, new, 1.0, new_alpha=1.0).loss(
        same[1:2], images[1:2], ["a$"], steps[1:2])
    assert n == 1 and torch.isfinite(loss) and abs(float(loss)) < 1e-5


def test_distill_base_keeps_a_fine_tune_reading_as_its_start_and_needs_init_weights(tmp_path, capsys):
    """crnn.train with a strong train.distill_base ends with the base's words read closer to how the base read them
    (KL measured on them) than the same run without it; the option is checked when the config loads."""
    import crnn

    torch.manual_seed(0)
    base_cs = Charset.from_spec("alnum36")
    init = tmp_path / "base.pt"
    small = load_config(None, ["model.hidden=16"])
    save_checkpoint(model_checkpoint(build_model("vgg_small", 1, base_cs.num_classes, 16), small, base_cs), init)
    words = make_lmdb(tmp_path / "words.lmdb", random_words(24, seed=3))
    codes = make_lmdb(tmp_path / "codes.lmdb", [w.upper() + "-" + w[:2] for w in random_words(24, seed=5)])
    common = [f"model.charset={base_cs.chars}ABCDEFGHIJKLMNOPQRSTUVWXYZ-", f"data.train={codes}", "data.val=[]",
              f"train.init_weights={init}", "model.hidden=16", f"data.rehearsal={words}", "data.rehearsal_num=0",
              "train.base_val=[]", "data.batch_size=8", "data.num_workers=0", "train.steps=16", "train.warmup_steps=0",
              "train.amp=off", "train.val_every=0", "train.tensorboard=false", "train.freeze_cnn_steps=0",
              "train.lr=3e-3", "data.augment=false"]
    teacher_model, _, _ = build_from_checkpoint(load_checkpoint(init))

    def drift(alpha: float) -> float:
        run = crnn.train("configs/finetune_alnum36.yaml", [*common, f"train.distill_base={alpha}",
                                                   f"train.output_dir={tmp_path / f'run{alpha}'}"])
        model, cs, cfg = build_from_checkpoint(load_checkpoint(run.last))
        from crnn.data.loader import build_eval_loader

        loader = build_eval_loader(str(words), height=32, width=100, keep_ratio=True, max_width=320, channels=1,
                                   batch_size=24, num_workers=0, min_width=100)
        batch = next(iter(loader))
        with torch.no_grad():
            logits = model(batch.images)
            steps = model.output_length(batch.widths.long()).clamp(max=logits.shape[1])
            kl, n = BaseTeacher(teacher_model, base_cs, cs, 1.0).loss(logits, batch.images, batch.labels, steps)
        assert n == 24
        return float(kl)

    free = drift(0.0)
    assert "train.distill_base" not in capsys.readouterr().err
    taught = drift(50.0)
    assert "train.distill_base=50: the starting model" in capsys.readouterr().err
    assert 0 <= taught < 0.5 * free
    with pytest.raises(ValueError, match="train.distill_base=1.0 distils the starting model: set train.init_weights"):
        load_config(None, ["train.distill_base=1"])
    with pytest.raises(ValueError, match="train.distill_base: must be 0"):
        load_config(None, ["train.distill_base=-1"])
    with pytest.raises(ValueError, match=r"train.distill_new=0.5 weighs .* set train.distill_base > 0 too"):
        load_config(None, ["train.distill_new=0.5"])
    with pytest.raises(ValueError, match="train.distill_new: must be 0"):
        load_config(None, ["train.distill_new=-1", "train.distill_base=1", "train.init_weights=x.pt"])


def test_a_start_that_keeps_case_teaches_through_an_identity_fold():
    """From a printable95 start (crnn_en) to printable95 + '€': the folding matrix is the identity on the start's 96
    classes ('A' is 'A', not 'a'), '€' counts for nothing, and a label is readable when it has no '€'."""
    base = Charset.from_spec("printable95")
    new = Charset(base.chars + "€")
    assert not base.lowercase and not new.lowercase
    torch.manual_seed(2)
    teacher_logits = torch.randn(2, 6, base.num_classes)
    teacher = BaseTeacher(_Fixed(teacher_logits), base, new, 1.0)
    k = base.num_classes
    assert teacher.kept is None and teacher.num_cols == k  # each start class read by its own row, '€' by none
    assert teacher.rows.tolist() == list(range(k)) and teacher.cols.tolist() == list(range(k))
    probe = torch.randn(2, 3, new.num_classes).log_softmax(-1)
    assert torch.allclose(teacher.fold(probe), probe[..., :k])
    assert teacher.reads("Hello World!") and teacher.reads("SKU#A7-3321") and teacher.reads("$1,299.00")
    assert not teacher.reads("€4,50") and not teacher.reads("")
    images, steps = torch.zeros(2, 1, 1, 1), torch.tensor([6, 4])
    same = torch.full((2, 6, new.num_classes), -1e4)
    same[..., :k] = teacher_logits
    loss, n = teacher.loss(same, images, ["Open 24h", "KNIGHT"], steps)
    assert n == 2 and abs(float(loss)) < 1e-5  # reading as the start costs nothing
    swapped = same.clone()  # every 'A' frame's mass moved to 'a': a case-folding teacher would not see it, this does
    a, upper_a = base.index["a"], base.index["A"]
    swapped[..., [a, upper_a]] = same[..., [upper_a, a]]
    assert float(teacher.loss(swapped, images, ["Open 24h", "KNIGHT"], steps)[0]) > 1e-3


def test_characters_the_new_alphabet_drops_leave_the_teacher_finite():
    """A fine-tune alphabet without some of the start's characters (digits and capitals from printable95): the
    teacher's distribution is renormalised over the start's classes the new alphabet keeps, the student's is read
    there; before, the dropped classes made log q = -inf and the loss infinite."""
    base, new = Charset.from_spec("printable95"), Charset("0123456789ABC")
    torch.manual_seed(3)
    teacher_logits = torch.randn(2, 5, base.num_classes)
    student = torch.randn(2, 5, new.num_classes, requires_grad=True)
    steps, images = torch.tensor([5, 3]), torch.zeros(2, 1, 1, 1)
    teacher = BaseTeacher(_Fixed(teacher_logits), base, new, 1.0)
    loss, n = teacher.loss(student, images, ["AB1", "C2"], steps)
    assert n == 2 and torch.isfinite(loss)
    kept = [0] + [base.index[c] for c in new.chars]  # blank, then the kept characters in the student's order
    assert teacher.kept.tolist() == sorted(kept)
    cols = sorted(kept)
    pt = teacher_logits[..., cols].softmax(-1)
    q = student.detach().softmax(-1)[..., [kept.index(c) for c in cols]]  # student classes in the start's order
    kl = (pt * (pt.log() - q.log())).sum(-1)
    want = torch.stack([kl[0, :5].mean(), kl[1, :3].mean()]).mean()
    assert float(loss.detach()) == pytest.approx(float(want), rel=1e-5)
    loss.backward()
    assert torch.isfinite(student.grad).all()


def test_a_large_alphabet_teacher_holds_no_class_by_class_matrix():
    """A Chinese start (zh_gb2312, 6,895 classes) fine-tuned to its own alphabet minus a few characters: the fold is
    two index vectors, and a batch's loss is computed without a [B, T, K, K_base] tensor (hundreds of GB before)."""
    base = Charset.from_spec("zh_gb2312")
    new = Charset(base.chars.replace("的", "").replace("A", ""))
    torch.manual_seed(4)
    teacher_logits = torch.randn(4, 30, base.num_classes)
    teacher = BaseTeacher(_Fixed(teacher_logits), base, new, 1.0)
    assert teacher.rows.numel() == new.num_classes and teacher.num_cols == new.num_classes
    student = torch.randn(4, 30, new.num_classes, requires_grad=True)
    loss, n = teacher.loss(student, torch.zeros(4, 1, 1, 1), ["上海", "北京", "1号", "路"], torch.full((4,), 30))
    assert n == 4 and torch.isfinite(loss)
    kept = teacher.kept.tolist()  # the teacher over the kept classes, renormalised; the student in the same order
    student_cols = [0] + [new.index[base.chars[c - 1]] for c in kept[1:]]
    pt = teacher_logits[..., kept].softmax(-1)
    q = student.detach().softmax(-1)[..., student_cols]
    want = (pt * (pt.log() - q.log())).sum(-1).mean()
    assert float(loss.detach()) == pytest.approx(float(want), rel=1e-4)
    loss.backward()
    assert torch.isfinite(student.grad).all()
