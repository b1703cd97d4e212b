"""Distributed-aware evaluation: each rank decodes its shard, counts are summed with all_reduce."""
from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import torch

from crnn.charset import Charset
from crnn.data.collate import read_at_own_width
from crnn.decode import WordList, decode, decoder_options
from crnn.engine.distributed import all_gather_object, all_reduce_sum, broadcast_object, get_world_size
from crnn.metrics import RecognitionMetrics, cer_first, normalize_text, resolve_protocol


@dataclass
class EvalResult:
    """Summed metrics of one dataset plus a few examples from rank 0."""

    metrics: dict
    images_per_s: float
    examples: list[tuple[str, str]] = field(default_factory=list)  # (label, prediction)
    errors: list = field(default_factory=list)  # worst (label, pred, distance), gathered from every rank
    sample_images: torch.Tensor | None = None  # [N, C, H, W] of the first batch, for TensorBoard
    state: torch.Tensor | None = None  # summed counts (RecognitionMetrics.state_tensor) for pooling datasets
    skipped: int = 0  # images that could not be decoded (not counted in the metrics), summed over ranks
    protocol: str = ""  # the protocol used ("auto" resolved for the charset)
    removed_share: float = 0.0  # share of label characters the protocol deleted before comparing
    cer_first: bool = False  # reports lead with CER (every alphabet but alnum36)
    empty_predictions: int = 0  # predictions that are empty (all blanks), summed over ranks
    top_predictions: list = field(default_factory=list)  # [(text, times predicted, times right)], most frequent first
    extra: dict = field(default_factory=dict)  # {protocol: metrics} of the same readings under extra_protocols


def autocast_context(device: torch.device, amp: str) -> contextlib.AbstractContextManager:
    """Autocast for ``amp`` in {off, bf16, fp16}; fp16 only on CUDA."""
    if amp == "off" or (amp == "fp16" and device.type != "cuda"):
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if amp == "bf16" else torch.float16
    return torch.autocast(device.type, dtype=dtype)


def reading_context(model: torch.nn.Module, device: torch.device, amp: str) -> contextlib.AbstractContextManager:
    """:func:`autocast_context` for reading with ``model``, except for a model that holds its weights in a low
    precision already (``CRNN.hold_weights_in``, the CPU's amp=bf16 for reading): none, as casts would only cost."""
    if getattr(model, "weights_dtype", None) is not None:
        return contextlib.nullcontext()
    return autocast_context(device, amp)


@torch.inference_mode()
def evaluate(model: torch.nn.Module, loader: Iterable, charset: Charset, device: torch.device, *,
             protocol: str = "auto", decoder: str = "greedy", amp: str = "off",
             keep_errors: int = 0, max_examples: int = 8, beam_width: int = 10,
             on_batch: Callable[[object, list[tuple[str, float]]], None] | None = None,
             extra_protocols: Sequence[str] = (), words: WordList | None = None) -> EvalResult:
    """Run ``model`` over ``loader`` (batches with .images and .labels) and return metrics summed over ranks.

    ``protocol="auto"`` is alnum-insensitive for the alnum36 charset and exact for every other alphabet.
    ``on_batch(batch, readings)`` sees each batch with its (text, confidence) readings (the evaluation report).
    ``extra_protocols``: the same readings also scored under these protocols (``EvalResult.extra``; one forward pass,
    their counts summed over ranks in the same all_reduce); one equal to the resolved ``protocol`` is left out.
    ``words``: the word list of ``decoder="word"`` (crnn.decode.word_decode).
    """
    protocol = resolve_protocol(protocol, charset.chars)
    was_training = model.training
    model.eval()
    metrics = RecognitionMetrics(protocol=protocol, keep_errors=keep_errors)
    extras = {p: RecognitionMetrics(protocol=p) for p in dict.fromkeys(extra_protocols) if p != protocol}
    examples: list[tuple[str, str]] = []
    first_images = None
    n_skipped, t0 = 0, time.perf_counter()
    predicted, right = Counter(), Counter()  # how often each text was predicted, and was the label
    kw = decoder_options(decoder, beam_width, words=words)  # once, not per batch
    for batch in _own_width(loader):
        n_skipped += getattr(batch, "num_skipped", 0)
        if len(batch.labels) == 0:  # every image of the batch was undecodable
            continue
        images = batch.images.to(device, non_blocking=True)
        with reading_context(model, device, amp):
            logits = model(images)  # (B, T, K)
        readings = decode(logits.float(), charset, method=decoder, **kw)
        preds = [text for text, _ in readings]
        if on_batch is not None:
            on_batch(batch, readings)
        metrics.update(preds, list(batch.labels))
        for m in extras.values():
            m.update(preds, list(batch.labels))
        predicted.update(preds)
        right.update(p for p, t in zip(preds, batch.labels)
                     if normalize_text(p, protocol) == normalize_text(t, protocol))
        if len(examples) < max_examples:
            examples.extend(zip(batch.labels, preds))
            first_images = images[:max_examples].float().cpu() if first_images is None else first_images
    elapsed = time.perf_counter() - t0
    extra = torch.tensor([float(n_skipped), float(predicted[""])], dtype=torch.float64)
    states = [metrics.state_tensor(), *(m.state_tensor() for m in extras.values())]
    counts = all_reduce_sum(torch.cat([*states, extra]).to(device)).cpu()
    n = states[0].numel()  # the 6 metric counts per protocol, then undecodable, ""
    state, skipped, empty = counts[:n], int(counts[-2]), int(counts[-1])
    total = RecognitionMetrics.from_state_tensor(state, protocol=protocol)
    scored = {p: RecognitionMetrics.from_state_tensor(counts[n * k:n * (k + 1)], protocol=p).compute()
              for k, p in enumerate(extras, 1)}
    model.train(was_training)
    errors = gather_errors(metrics.errors(), keep_errors) if keep_errors > 0 else []
    result = total.compute()  # images/s over all ranks: every rank's images in this rank's time
    return EvalResult(result, result["samples"] / max(elapsed, 1e-9), examples[:max_examples],
                      errors, first_images, state, skipped, protocol, total.removed_share(),
                      cer_first(charset.chars), empty, top_predictions(predicted, right), scored)


def _own_width(loader: Iterable) -> Iterable:
    """Right-padded batches as batches of one unpadded width: every image is read at its own width, as crnn-predict
    and crnn-eval read it (padding a line to the widest of its batch changes what the BiLSTM reads: a keep-ratio
    Chinese line model scored 2.5 points of CER worse that way during training). Loader batches are pooled first
    (512 images), so that a forward holds every crop of its width there, not the 2-3 of one batch."""
    return read_at_own_width(loader)


def top_predictions(predicted: Counter, right: Counter, keep: int = 3) -> list[tuple[str, int, int]]:
    """The most frequent non-empty predictions of every rank, merged: [(text, times predicted, times right)]."""
    mine = [(t, n, right[t]) for t, n in predicted.most_common(keep + 1) if t][:keep]
    merged: Counter = Counter()
    hits: Counter = Counter()
    for theirs in all_gather_object(mine):  # every rank takes part
        for t, n, r in theirs:
            merged[t] += n
            hits[t] += r
    return [(t, n, hits[t]) for t, n in merged.most_common(keep)]


def gather_errors(errors: list[tuple[str, str, int]], keep: int) -> list[tuple[str, str, int]]:
    """Every rank's worst errors merged (highest distance first, ties by rank order); collective under DDP."""
    merged: list[tuple[str, str, int]] = []
    for src in range(get_world_size()):
        theirs = broadcast_object(errors, src=src)  # every rank takes part in each broadcast
        merged += theirs if isinstance(theirs, list) else []
    return sorted(merged, key=lambda e: -e[2])[:keep]  # stable: rank order kept on ties
