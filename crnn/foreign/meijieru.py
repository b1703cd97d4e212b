"""meijieru/crnn.pytorch checkpoints <-> crnn's ``vgg`` variant (the same network, exactly).

Their layer table: ``cnn.conv{0..6}`` (64, 128, 256, 256, 512, 512, 512 channels; 3x3 pad 1, conv6 2x2 pad 0, every
conv with a bias), ``cnn.batchnorm{2,4,6}`` after conv 2/4/6, the same pools as ours (T = W/4 + 1); then
``rnn.0`` = BiLSTM(512, nh) + ``embedding`` Linear(2nh, nh) and ``rnn.1`` = BiLSTM(nh, nh) + ``embedding``
Linear(2nh, nclass), time-major output ``[T, B, nclass]``. Our conv 2/4/6 have no bias (a bias before BatchNorm
only shifts the mean), so theirs is folded into the BN running mean: ``running_mean -= bias``, exact at inference.
The ``leakyRelu`` option of their CRNN is invisible in the weights; crnn always uses ReLU.
"""
from __future__ import annotations

from collections import OrderedDict

import torch

from crnn.foreign.common import (
    ForeignFormatError,
    Imported,
    check_fits,
    conv_bn_layers,
    fill_batches_tracked,
    need,
    rename,
)
from crnn.model import build_model

__all__ = ["to_ours", "from_ours", "key_prefixes", "fold_biases", "PAPER_WIDTHS", "meijieru_constructor"]

PAPER_WIDTHS = "meijieru's channel widths 64-128-256-256-512-512-512 (crnn's vgg) are the only ones crnn imports"
RNN_PREFIXES = [("rnn.0.rnn.", "rnn1.lstm."), ("rnn.0.embedding.", "rnn1.proj."), ("rnn.1.rnn.", "rnn2."),
                ("rnn.1.embedding.", "head.")]


def key_prefixes(template_cnn) -> list[tuple[str, str]]:
    """(their prefix, ours): ``cnn.conv{i}.`` / ``cnn.batchnorm{i}.`` -> ``cnn.{index}.``, then the recurrent part."""
    pairs = []
    for i, conv, bn in conv_bn_layers(template_cnn):
        pairs.append((f"cnn.conv{i}.", f"cnn.{conv}."))
        if bn is not None:
            pairs.append((f"cnn.batchnorm{i}.", f"cnn.{bn}."))
    return pairs + RNN_PREFIXES


def fold_biases(state: dict[str, torch.Tensor], template_cnn, source: str) -> list[int]:
    """Fold ``cnn.conv{i}.bias`` into ``cnn.batchnorm{i}.running_mean`` for each conv followed by BN (in place)."""
    folded = []
    for i, _, bn in conv_bn_layers(template_cnn):
        bias_key, mean_key = f"cnn.conv{i}.bias", f"cnn.batchnorm{i}.running_mean"
        if bn is None or bias_key not in state:
            continue
        mean = need(state, mean_key, source)
        state[mean_key] = (mean.double() - state.pop(bias_key).double()).to(mean.dtype)
        folded.append(i)
    return folded


def to_ours(state: dict[str, torch.Tensor], source: str = "meijieru", width: int = 100) -> Imported:
    """Map a plain-keyed meijieru (or Sierkinhane) state dict onto crnn's ``vgg``; shapes give nc, nh and nclass."""
    in_channels = int(need(state, "cnn.conv0.weight", source).shape[1])
    hidden = int(need(state, "rnn.0.rnn.weight_hh_l0", source).shape[1])
    num_classes = int(need(state, "rnn.1.embedding.weight", source).shape[0])
    if in_channels not in (1, 3):
        raise ForeignFormatError(f"cnn.conv0.weight takes {in_channels} input channels; crnn supports 1 or 3")
    template = build_model("vgg", in_channels, num_classes, hidden)
    state = dict(state)
    folded = fold_biases(state, template.cnn, source)
    mapped, origin = rename(state, key_prefixes(template.cnn), source)
    expected = template.state_dict()
    notes = [f"folded the biases of conv{', conv'.join(map(str, folded))} into their BatchNorm running means"]
    if fill_batches_tracked(mapped, expected):
        notes.append("the file has no num_batches_tracked (torch < 0.4.1): set to 0")
    check_fits(mapped, expected, origin, source, PAPER_WIDTHS)
    data = {"width": width, "interpolation": "bilinear", "mean": 0.5, "std": 0.5, "keep_ratio": False}
    return Imported(mapped, "vgg", in_channels, hidden, num_classes, data, notes)


def from_ours(state: dict[str, torch.Tensor], variant: str, batch_norm: bool = True) -> OrderedDict:
    """crnn ``vgg`` weights (plain keys) -> a bare state dict that meijieru's ``CRNN(32, nc, nclass, nh)`` loads."""
    if variant != "vgg" or not batch_norm:
        what = f"variant {variant}" + ("" if batch_norm else " without batch norm")
        raise ForeignFormatError(f"only variant vgg with batch norm is meijieru's network; this model is {what}")
    template = build_model("vgg", int(state["cnn.0.weight"].shape[1]), int(state["head.weight"].shape[0]),
                           int(state["rnn1.lstm.weight_hh_l0"].shape[1]))
    check_fits(state, template.state_dict(), {}, "meijieru", PAPER_WIDTHS)
    back = {ours: theirs for theirs, ours in key_prefixes(template.cnn)}
    out: OrderedDict[str, torch.Tensor] = OrderedDict()
    for key, value in state.items():
        prefix = next(p for p in back if key.startswith(p))
        out[back[prefix] + key[len(prefix):]] = value
    for i, conv, bn in conv_bn_layers(template.cnn):
        if bn is not None:  # conv 2/4/6: zero bias, the BN running mean already holds the shift
            weight = state[f"cnn.{conv}.weight"]
            out[f"cnn.conv{i}.bias"] = torch.zeros(weight.shape[0], dtype=weight.dtype)
    return out


def meijieru_constructor(state: dict[str, torch.Tensor]) -> str:
    """The line that builds the matching network in meijieru's code, e.g. ``CRNN(32, 1, 37, 256)``."""
    nc, nclass = state["cnn.conv0.weight"].shape[1], state["rnn.1.embedding.weight"].shape[0]
    return f"CRNN(32, {nc}, {nclass}, {state['rnn.0.rnn.weight_hh_l0'].shape[1]})"
