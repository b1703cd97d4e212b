import pytest
import torch

from crnn.model import MIN_WIDTH, VARIANTS, build_model, count_parameters


def test_paper_model_size_and_length():
    model = build_model("vgg", 1, 37)
    n = count_parameters(model)
    T = model(torch.zeros(1, 1, 32, 100)).shape[1]
    print(f"paper CRNN: {n / 1e6:.2f} M parameters, T = {T} for 1x32x100 input")
    assert 8.2e6 < n < 8.4e6
    assert T == 26 == model.output_length(100)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("channels", [1, 3])
def test_shapes_batch_first(variant, channels):
    model = build_model(variant, channels, 11).eval()
    for B, W in [(1, 100), (3, 64), (2, 8), (4, 173)]:
        with torch.no_grad():
            y = model(torch.randn(B, channels, 32, W))
        assert y.shape == (B, model.output_length(W), 11)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_output_length_matches_forward(variant):
    model = build_model(variant, 1, 5).eval()
    for W in range(MIN_WIDTH, 70, 3):
        with torch.no_grad():
            assert model(torch.zeros(1, 1, 32, W)).shape[1] == model.output_length(W)
    assert model.output_length(torch.tensor([100]))[0] == model.output_length(100)


def test_too_narrow_input_is_a_clear_error():
    model = build_model("vgg_small", 1, 5)
    with pytest.raises(ValueError, match="minimum"):
        model(torch.zeros(1, 1, 32, MIN_WIDTH - 1))


@pytest.mark.parametrize("variant", ["vgg_small", "resnet18"])
def test_dataparallel_contract_split_concat(variant):
    """DP gathers along dim 0: running two halves and concatenating must equal the full batch."""
    torch.manual_seed(0)
    model = build_model(variant, 1, 13).eval()
    x = torch.randn(6, 1, 32, 100)
    with torch.no_grad():
        full = model(x)
        halves = torch.cat([model(x[:3]), model(x[3:])], dim=0)
    assert full.shape == (6, model.output_length(100), 13)
    torch.testing.assert_close(halves, full, rtol=1e-4, atol=1e-5)


def test_batch_norm_free_variant_has_no_bn():
    model = build_model("vgg_small", 1, 7, batch_norm=False)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())
    assert any(isinstance(m, torch.nn.BatchNorm2d) for m in build_model("vgg_small", 1, 7).modules())


def test_unknown_variant_and_channels():
    with pytest.raises(ValueError, match="unknown model variant"):
        build_model("vgg_huge", 1, 5)
    with pytest.raises(ValueError, match="in_channels"):
        build_model("vgg", 2, 5)


def test_model_parallel_place_hops_the_sequence_to_the_second_device():
    """place(a, b) puts the CNN on a and the rest on b, and forward() moves the features across. Off CUDA the second
    device is "meta" (shapes only): a cpu/cpu placement would make the hop a no-op that nothing can see.
    tests/test_cuda.py runs the same with real tensors on cuda and cpu."""
    model = build_model("vgg_small", 1, 7).eval()
    x = torch.randn(2, 1, 32, 48)
    with torch.no_grad():
        ref = model(x)
        model.place("cpu", "cpu")
        torch.testing.assert_close(model(x), ref)
        model.place("cpu", "meta")
        assert {p.device.type for p in model.cnn.parameters()} == {"cpu"}
        assert {p.device.type for m in (model.rnn1, model.rnn2, model.head) for p in m.parameters()} == {"meta"}
        y = model(x)  # (B, T, K) on the sequence model's device
    assert y.device.type == "meta" and y.shape == ref.shape


@pytest.mark.parametrize("variant", [v for v in sorted(VARIANTS) if VARIANTS[v].vgg])
def test_48px_lines_average_the_height_left_and_keep_t(variant):
    """48 px high lines (the height PaddleOCR reads Chinese at; issue 57's h48 probe): the CNN leaves more than one row
    of features, which features() averages, so T still follows the width alone and is what output_length() says."""
    torch.manual_seed(0)
    model = build_model(variant, 1, 9).eval()
    x = torch.randn(2, 1, 48, 120)
    with torch.no_grad():
        rows = model.cnn(x)  # (B, C, H', T)
        seq = model.features(x)
        y = model(x)
    assert rows.shape[2] == 48 // 16 - 1  # the shape comments of vgg_backbone: H/16 - 1 rows left
    torch.testing.assert_close(seq, rows.mean(dim=2).transpose(1, 2))
    assert y.shape == (2, model.output_length(120), 9)
