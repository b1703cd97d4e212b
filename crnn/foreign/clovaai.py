"""clovaai/deep-text-recognition-benchmark ``None-VGG-BiLSTM-CTC`` checkpoints -> crnn's ``vgg_clova`` variant.

Their layer table: ``FeatureExtraction.ConvNet`` = conv0-3 with bias (64, 128, 256, 256), conv4/5 without bias +
BatchNorm (512), conv6 2x2 pad 0 with bias (512), pools 2x2, 2x2, then (2,1) stride (2,1) twice: T = W/4 - 1. Its
module indices are those of our ``vgg_clova`` backbone, key for key. Then ``SequenceModeling.{0,1}`` =
BiLSTM(.., h) + ``linear`` Linear(2h, h) each, and ``Prediction`` = Linear(h, classes). The last ``linear`` and
``Prediction`` have nothing between them, so they are fused into our head (``W = P @ L``, ``b = P @ b_L + b_P``):
the same function, exact at inference up to float rounding. Input: bicubic resize to 32x100, ``[-1, 1]``; with
``--PAD`` the ratio is kept and the image right-padded by repeating its last column (our ``data.pad: edge``).
"""
from __future__ import annotations

import torch

from crnn.foreign.common import (ForeignFormatError, Imported, check_fits, clova_dims, clova_problem,
                                 fill_batches_tracked, need, rename)
from crnn.model import build_model

__all__ = ["to_ours", "CLOVA_WIDTHS"]

CLOVA_WIDTHS = ("clovaai's VGG with --output_channel 512 (widths 64-128-256-256-512-512-512) is the one crnn imports "
                "(a 256-wide one is EasyOCR's generation-2 network: --from easyocr)")
PREFIXES = [("FeatureExtraction.ConvNet.", "cnn."), ("SequenceModeling.0.rnn.", "rnn1.lstm."),
            ("SequenceModeling.0.linear.", "rnn1.proj."), ("SequenceModeling.1.rnn.", "rnn2.")]
FUSED = ("SequenceModeling.1.linear.weight", "SequenceModeling.1.linear.bias", "Prediction.weight", "Prediction.bias")


def fuse_head(state: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Linear(2h, h) then Linear(h, K) -> one Linear(2h, K), computed in float64: (weight [K, 2h], bias [K])."""
    lw, lb, pw, pb = (need(state, k, "clovaai") for k in FUSED)
    if pw.shape[1] != lw.shape[0]:
        raise ForeignFormatError(f"Prediction.weight takes {pw.shape[1]} inputs but SequenceModeling.1.linear gives "
                                 f"{lw.shape[0]}: not a None-VGG-BiLSTM-CTC checkpoint")
    weight = pw.double() @ lw.double()  # (K, 2h)
    bias = pw.double() @ lb.double() + pb.double()  # (K,)
    return weight.to(pw.dtype), bias.to(pb.dtype)


def to_ours(state: dict[str, torch.Tensor], pad: bool = False, width: int = 100) -> Imported:
    """Map a plain-keyed clovaai None-VGG-BiLSTM-CTC state dict onto crnn's ``vgg_clova``."""
    problem = clova_problem(list(state))
    if problem:
        raise ForeignFormatError(f"not a None-VGG-BiLSTM-CTC checkpoint: {problem}")
    in_channels, hidden, num_classes = clova_dims(state, "clovaai")
    head_w, head_b = fuse_head(state)
    rest = {k: v for k, v in state.items() if k not in FUSED}
    mapped, origin = rename(rest, PREFIXES, "clovaai")
    mapped["head.weight"], mapped["head.bias"] = head_w, head_b
    origin["head.weight"], origin["head.bias"] = "Prediction.weight", "Prediction.bias"
    expected = build_model("vgg_clova", in_channels, num_classes, hidden).state_dict()
    notes = ["fused SequenceModeling.1.linear and Prediction into one head Linear (exact at inference)"]
    if fill_batches_tracked(mapped, expected):
        notes.append("the file has no num_batches_tracked: set to 0")
    check_fits(mapped, expected, origin, "clovaai", CLOVA_WIDTHS)
    data = {"width": width, "interpolation": "bicubic", "mean": 0.5, "std": 0.5, "keep_ratio": pad}
    if pad:
        data.update(pad="edge", max_width=width)
    return Imported(mapped, "vgg_clova", in_channels, hidden, num_classes, data, notes)
