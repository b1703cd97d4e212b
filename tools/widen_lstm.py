"""Grow a trained CRNN's LSTMs to a larger hidden size without changing what it reads (issue 44's capacity probe).

    python tools/widen_lstm.py weights/crnn_en.pt /tmp/en_h192.pt --hidden 192
    python tools/widen_lstm.py weights/crnn_en.pt /tmp/en_h192.pt --hidden 192 --seed 1

The new hidden units start with small random incoming weights (the LSTM's own uniform(+-1/sqrt(hidden)) range) and
zero outgoing weights, so the grown model's logits equal the trained model's (checked before saving: the file is not
written when they differ by more than 1e-5), and training from it grows the new units out of the old model's answers
instead of starting over: a short lever probe from the grown file against one from the trained file says whether the
capacity pays (``train.init_weights=OUT model.hidden=N``; ``scripts/lever_probe.sh`` with ``PACK=OUT``), and
``benchmarks/bench_read.py --against OUT`` what it costs in reading speed.

Variants whose second BiLSTM ends in the plain ``nn.LSTM`` and a ``Linear(2 * hidden, classes)`` head (``vgg``,
``vgg_small``, ``vgg_w8``, ``vgg_small_w8``, ``resnet18``) only. The output is a weights-only checkpoint with the
trained file's config (``model.hidden`` set) and alphabet, and whatever else it carried: a sitting pack (fp16
weights and the run's counters) stays one, so a run that resumes from the grown pack goes on counting its steps,
lines seen and CPU-hours where the narrower run stopped (``scripts/sitting.sh``, ``train.steps`` raised).
"""
from __future__ import annotations

import argparse
import copy
import math
import sys
from pathlib import Path

import torch
from torch import nn

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from crnn.engine.checkpoint import (  # noqa: E402
    CheckpointError, build_from_checkpoint, load_checkpoint, model_checkpoint, save_checkpoint, weights_only_checkpoint,
)
from crnn.model import CRNN, VARIANTS, build_model, count_parameters  # noqa: E402

GATES = 4  # nn.LSTM stacks the input, forget, cell and output gates' rows


def _grow_lstm(old: nn.LSTM, new: nn.LSTM, in_map: list[tuple[int, int, int]], gen: torch.Generator) -> None:
    """``new`` (hidden h_new, inputs grown as ``in_map`` says) computes ``old``'s hidden units first, unchanged.

    ``in_map``: (old start, new start, count) runs of input columns that carry the old inputs. The old units' rows
    hold their old weights on those columns and on the old units' recurrent columns, zero elsewhere; the new units'
    rows are random on every column."""
    h_old, h_new = old.hidden_size, new.hidden_size
    bound = 1.0 / math.sqrt(h_new)
    for name, p_new in new.named_parameters():
        p_old = getattr(old, name).detach()
        fresh = torch.empty(p_new.shape).uniform_(-bound, bound, generator=gen)
        for g in range(GATES):  # each gate's block of rows: the old units first
            rows, old_rows = slice(g * h_new, g * h_new + h_old), slice(g * h_old, (g + 1) * h_old)
            if name.startswith("bias"):
                fresh[rows] = p_old[old_rows]
                continue
            fresh[rows] = 0.0
            for o, n, c in in_map if name.startswith("weight_ih") else [(0, 0, h_old)]:
                fresh[rows, n:n + c] = p_old[old_rows, o:o + c]
        with torch.no_grad():
            p_new.copy_(fresh)


def _grow_linear(old: nn.Linear, new: nn.Linear, in_map: list[tuple[int, int, int]], out_old: int,
                 gen: torch.Generator) -> None:
    """``new``'s first ``out_old`` outputs equal ``old``'s (old inputs mapped by ``in_map``, new inputs weighed 0);
    outputs beyond them (when the output grows) have random weights and zero bias (the next layer reads them with
    weight 0)."""
    w = torch.zeros(new.weight.shape)
    for o, n, c in in_map:
        w[:out_old, n:n + c] = old.weight.detach()[:, o:o + c]
    bound = 1.0 / math.sqrt(new.in_features)
    w[out_old:] = torch.empty(new.out_features - out_old, new.in_features).uniform_(-bound, bound, generator=gen)
    b = torch.zeros(new.out_features)
    b[:out_old] = old.bias.detach()
    with torch.no_grad():
        new.weight.copy_(w)
        new.bias.copy_(b)


def widen_lstm(model: CRNN, hidden: int, seed: int = 0) -> CRNN:
    """A copy of ``model`` with LSTM hidden size ``hidden`` (> its own) that computes the same logits."""
    spec = VARIANTS[model.variant]
    if spec.head_proj:
        raise ValueError(f"variant {model.variant!r} ends in a projected BiLSTM (EasyOCR's layout): not supported")
    h = model.hidden
    if hidden <= h:
        raise ValueError(f"hidden size {hidden} must exceed the model's own, {h}")
    gen = torch.Generator().manual_seed(seed)
    grown = build_model(model.variant, model.in_channels, model.num_classes, hidden, model.batch_norm, model.cnn_width,
                        model.res_blocks)
    grown.cnn.load_state_dict(model.cnn.state_dict())
    bi = [(0, 0, h), (h, hidden, h)]  # a BiLSTM's output: forward units then backward units
    _grow_lstm(model.rnn1.lstm, grown.rnn1.lstm, [(0, 0, model.rnn1.lstm.input_size)], gen)
    # rnn1's projection: its old outputs unchanged; its new outputs (rnn2's new inputs) random, read with weight 0
    _grow_linear(model.rnn1.proj, grown.rnn1.proj, bi, h, gen)
    _grow_lstm(model.rnn2, grown.rnn2, [(0, 0, h)], gen)
    _grow_linear(model.head, grown.head, bi, model.num_classes, gen)
    return grown.eval()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("src", help="a crnn checkpoint (e.g. weights/crnn_en.pt)")
    p.add_argument("out", help="where to write the grown weights")
    p.add_argument("--hidden", type=int, required=True, help="the new LSTM hidden size (above the model's)")
    p.add_argument("--seed", type=int, default=0, help="seed of the new units' random weights (default 0)")
    args = p.parse_args(argv)
    try:
        ckpt = load_checkpoint(args.src)
        model, charset, cfg = build_from_checkpoint(ckpt)
        grown = widen_lstm(model, args.hidden, args.seed)
    except (CheckpointError, ValueError) as e:
        sys.exit(f"widen_lstm: error: {e}")
    cfg.model.hidden = args.hidden
    try:
        said = save_grown(ckpt, model, grown, cfg, charset, args.out)
    except ValueError as e:
        sys.exit(f"widen_lstm: error: {e}")
    print(f"{args.out}: hidden {model.hidden} -> {args.hidden}, {said}")
    return 0


def logits_difference(model: CRNN, grown: CRNN, height: int = 32) -> float:
    """The largest difference between two models' logits on the same random batch, in eval and in train mode
    (batch statistics; the models themselves are left as they were: copies are put in train mode)."""
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(4, model.in_channels, height, 100, generator=gen)
    diff = 0.0
    with torch.no_grad():
        for a, b in ((model.eval(), grown.eval()), (copy.deepcopy(model).train(), copy.deepcopy(grown).train())):
            diff = max(diff, (b(x) - a(x)).abs().max().item())
    return diff


def save_grown(ckpt, model: CRNN, grown: CRNN, cfg, charset, out: str | Path) -> str:
    """Write ``grown`` (with ``cfg``, the trained file's config as grown) where ``out`` says, after checking that its
    logits equal ``model``'s in eval and train mode (ValueError, nothing written, when they differ by more than
    1e-5). A sitting pack stays one (fp16 weights, the run's counters). Returns what to say about it."""
    diff = logits_difference(model, grown)
    if diff > 1e-5:
        raise ValueError(f"the grown model's logits differ from {ckpt.path}'s by {diff:.2e}; nothing written")
    # a sitting pack's weights are fp16 (the trained ones were fp16 already): the grown pack's too
    raw = weights_only_checkpoint(model_checkpoint(grown, cfg, charset), half=ckpt.raw.get("dtype") == "float16")
    raw.update({k: v for k, v in ckpt.raw.items() if k not in raw})  # counters, step, "resumable", ...
    save_checkpoint(raw, out)
    state = ckpt.raw.get("state") if ckpt.raw.get("resumable") else None
    counters = (f"; a sitting pack at step {state['step']:,} ({state['images_seen']:,} lines seen): a run resumed from "
                f"it counts on from there" if isinstance(state, dict) and "step" in state else "")
    return (f"{count_parameters(model):,} -> {count_parameters(grown):,} parameters, logits equal in eval and train "
            f"mode (max difference {diff:.1e}){counters}")


if __name__ == "__main__":
    raise SystemExit(main())
