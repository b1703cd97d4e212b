"""Grow a trained CRNN's convolutions - wider, or deeper by residual blocks - without changing what it reads
(issue 57's capacity probes, by Net2Net's rule: new units take random incoming and zero outgoing weights).

    python tools/grow_cnn.py weights/crnn_zh_lines.pt runs/grown/zh_w2.pt --cnn-width 2       # vgg_w8's widths
    python tools/grow_cnn.py weights/crnn_zh_lines.pt runs/grown/zh_w15.pt --cnn-width 1.5
    python tools/grow_cnn.py weights/crnn_zh_lines.pt runs/grown/zh_res1.pt --res-blocks 1    # one block a stage

Wider (``model.cnn_width``): every convolution gets the new width's output channels; the new ones have random
incoming weights (PyTorch's own initial range), zero bias, BatchNorm at its initial state (gamma 1, beta 0, running
mean 0, variance 1), and every later layer reads them with weight 0 - the next convolution's columns for them, or
the first LSTM's input columns after the last convolution. BatchNorm works per channel, so the old channels see the
same numbers in train mode (batch statistics) as in eval mode. Deeper (``model.res_blocks``): residual blocks
(:class:`crnn.model.ResBlock`) after the second, third and fourth pools, which start as exact identities (their last
BatchNorm at zero). Both at once grow the file in one go. The grown model's logits are checked equal to the trained
one's in eval and train mode before anything is written (the file is not written when they differ by more than
1e-5); the output carries the trained file's config with ``model.cnn_width`` / ``model.res_blocks`` set, its
alphabet and (a sitting pack) its counters. Train it with ``train.init_weights=OUT model.cnn_width=W
model.res_blocks=N``, e.g. ``scripts/lever_probe.sh wide2 1h model.cnn_width=2 train.init_weights=OUT``.

VGG variants only (``vgg``, ``vgg_small``, ``vgg_w8``, ``vgg_small_w8``), with BatchNorm.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch
from torch import nn

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))

from crnn.engine.checkpoint import CheckpointError, build_from_checkpoint, load_checkpoint  # noqa: E402
from crnn.model import CRNN, VARIANTS, ResBlock, build_model  # noqa: E402
from widen_lstm import _grow_lstm, save_grown  # noqa: E402


def _grow_conv(old: nn.Conv2d, new: nn.Conv2d, gen: torch.Generator) -> None:
    """``new``'s first outputs equal ``old``'s (new inputs weighed 0); its new outputs read every input at random."""
    o, i = old.out_channels, old.in_channels
    bound = 1.0 / math.sqrt(new.in_channels * new.kernel_size[0] * new.kernel_size[1])
    w = torch.empty(new.weight.shape).uniform_(-bound, bound, generator=gen)  # (out, in, kh, kw)
    w[:o] = 0.0
    w[:o, :i] = old.weight.detach()
    with torch.no_grad():
        new.weight.copy_(w)
        if new.bias is not None:
            new.bias.zero_()
            new.bias[:o] = old.bias.detach()


def _grow_norm(old: nn.BatchNorm2d, new: nn.BatchNorm2d) -> None:
    """The old channels' affine weights and running statistics; new channels stay as BatchNorm starts them."""
    c = old.num_features
    with torch.no_grad():
        for name in ("weight", "bias", "running_mean", "running_var"):
            getattr(new, name)[:c] = getattr(old, name).detach()
        new.num_batches_tracked.copy_(old.num_batches_tracked)


def _grow_block(old: ResBlock, new: ResBlock, gen: torch.Generator) -> None:
    _grow_conv(old.conv1, new.conv1, gen)
    _grow_norm(old.bn1, new.bn1)
    _grow_conv(old.conv2, new.conv2, gen)
    _grow_norm(old.bn2, new.bn2)


def _pairs(old: nn.Sequential, new: nn.Sequential) -> list[tuple[nn.Module | None, nn.Module]]:
    """Each layer of the grown backbone with the trained layer it grows from (None: a new residual block)."""
    rest, out = list(old), []
    for m in new:
        if isinstance(m, ResBlock) and not (rest and isinstance(rest[0], ResBlock)):
            out.append((None, m))
            continue
        if not rest or type(rest[0]) is not type(m):
            raise ValueError(f"the grown backbone's {type(m).__name__} has no counterpart in the trained one")
        out.append((rest.pop(0), m))
    return out


def grow_cnn(model: CRNN, cnn_width: float | None = None, res_blocks: int | None = None, seed: int = 0) -> CRNN:
    """A copy of ``model`` with wider convolutions and/or more residual blocks that computes the same logits."""
    spec = VARIANTS[model.variant]
    if spec.vgg is None or not model.batch_norm:
        raise ValueError(f"variant {model.variant!r}{'' if model.batch_norm else ' without BatchNorm'}: only the "
                         f"VGG variants with BatchNorm grow ({', '.join(k for k, v in VARIANTS.items() if v.vgg)})")
    width = model.cnn_width if cnn_width is None else cnn_width
    blocks = model.res_blocks if res_blocks is None else res_blocks
    if width < model.cnn_width or blocks < model.res_blocks or (width, blocks) == (model.cnn_width,
                                                                                  model.res_blocks):
        raise ValueError(f"cnn_width {width:g} / res_blocks {blocks} must not be below the model's own "
                         f"({model.cnn_width:g} / {model.res_blocks}), and one of them above it")
    gen = torch.Generator().manual_seed(seed)
    grown = build_model(model.variant, model.in_channels, model.num_classes, model.hidden, True, width, blocks)
    for a, b in _pairs(model.cnn, grown.cnn):  # a new block (a is None) stays an identity
        if isinstance(a, nn.Conv2d):
            _grow_conv(a, b, gen)
        elif isinstance(a, nn.BatchNorm2d):
            _grow_norm(a, b)
        elif isinstance(a, ResBlock):
            _grow_block(a, b, gen)
    _grow_lstm(model.rnn1.lstm, grown.rnn1.lstm, [(0, 0, model.rnn1.lstm.input_size)], gen)
    grown.rnn1.proj.load_state_dict(model.rnn1.proj.state_dict())
    grown.rnn2.load_state_dict(model.rnn2.state_dict())
    grown.head.load_state_dict(model.head.state_dict())
    return grown.eval()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("src", help="a crnn checkpoint of a VGG variant (e.g. weights/crnn_zh_lines.pt)")
    p.add_argument("out", help="where to write the grown weights")
    p.add_argument("--cnn-width", type=float, help="the new convolution width factor (model.cnn_width; the "
                   "model's own, 1 for a shipped file, and above)")
    p.add_argument("--res-blocks", type=int, help="residual blocks after each of the 2nd-4th pools (model.res_blocks)")
    p.add_argument("--seed", type=int, default=0, help="seed of the new units' random weights (default 0)")
    args = p.parse_args(argv)
    if args.cnn_width is None and args.res_blocks is None:
        p.error("give --cnn-width, --res-blocks or both")
    try:
        ckpt = load_checkpoint(args.src)
        model, charset, cfg = build_from_checkpoint(ckpt)
        grown = grow_cnn(model, args.cnn_width, args.res_blocks, args.seed)
        cfg.model.cnn_width, cfg.model.res_blocks = grown.cnn_width, grown.res_blocks
        said = save_grown(ckpt, model, grown, cfg, charset, args.out)
    except (CheckpointError, ValueError) as e:
        sys.exit(f"grow_cnn: error: {e}")
    print(f"{args.out}: cnn_width {model.cnn_width:g} -> {grown.cnn_width:g}, res_blocks {model.res_blocks} -> "
          f"{grown.res_blocks}, {said}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
