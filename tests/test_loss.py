import torch

from crnn.charset import Charset
from crnn.loss import ctc_fits, ctc_loss
from crnn.model import build_model


def test_ctc_matches_reference_and_accepts_bf16():
    torch.manual_seed(0)
    logits = torch.randn(3, 10, 6)
    targets = torch.tensor([1, 2, 3, 4, 4, 5])
    lengths = torch.tensor([2, 1, 3])
    ref = torch.nn.functional.ctc_loss(logits.log_softmax(-1).permute(1, 0, 2), targets, torch.full((3,), 10),
                                       lengths, zero_infinity=True)
    out = ctc_loss(logits, targets, lengths)
    torch.testing.assert_close(out.loss, ref)
    assert out.loss.dtype == torch.float32
    assert ctc_loss(logits.bfloat16(), targets, lengths).loss.dtype == torch.float32


def test_unfit_labels_counted_with_repeats():
    # T = 3: "ab" fits (2), "aa" needs a blank between repeats (3) fits, "aaa" needs 5: does not fit
    targets = torch.tensor([1, 2, 1, 1, 1, 1, 1])
    lengths = torch.tensor([2, 2, 3])
    fits = ctc_fits(targets, lengths, torch.tensor([3, 3, 3]))
    assert fits.tolist() == [True, True, False]
    res = ctc_loss(torch.randn(3, 3, 4), targets, lengths)
    assert res.num_unfit == 1
    assert torch.isfinite(res.loss)


def test_repeat_across_sample_boundary_is_not_a_repeat():
    targets = torch.tensor([1, 1])  # sample 0 = "a", sample 1 = "a"
    assert ctc_fits(targets, torch.tensor([1, 1]), torch.tensor([1, 1])).tolist() == [True, True]


def test_one_optimizer_step_reduces_loss():
    torch.manual_seed(0)
    cs = Charset.from_spec("alnum36")
    model = build_model("vgg_small", 1, cs.num_classes)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(4, 1, 32, 100)
    targets, lengths = cs.encode(["hello", "world", "crnn", "42"])
    losses = []
    for _ in range(2):
        loss = ctc_loss(model(x), targets, lengths).loss
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert losses[1] < losses[0]
