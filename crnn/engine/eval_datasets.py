"""Evaluate a checkpoint on labelled datasets: the work behind ``crnn-eval`` and ``crnn.evaluate``.

Weights -> Recognizer -> one loader per dataset -> :func:`crnn.engine.evaluate.evaluate` -> a plain summary (what
``crnn-eval --json`` prints), optionally the HTML report, and the table ``crnn-eval`` prints. Works in one process or
under torchrun (each rank reads a shard; counts are summed). The caller tears the process group down
(:func:`crnn.engine.distributed.cleanup_distributed`) once it has used :func:`is_main_process`.
"""
from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TextIO

from crnn.data.vertical import is_vertical, vertical_line
from crnn.decode import DECODE_METHODS
from crnn.infer import AMP_MODES, VerticalCandidates
from crnn.metrics import PROTOCOL_CHOICES

PROGRESS_NAME = "crnn-eval"  # the progress lines name the tool, as they always have
# crops at least VERTICAL_RATIO times taller than wide: warn = read as they are (crnn-eval gives no warning), or as
# crnn.Recognizer(vertical=...) reads them (crnn.data.vertical)
VERTICAL_CHOICES = ("warn", "stack", "rotate", "auto")


class EvalUsageError(ValueError):
    """Settings that do not make sense (crnn-eval exits with code 2; crnn.evaluate raises it)."""


@dataclass
class DatasetReport:
    """One dataset's summed result and the wall time it took."""

    path: str
    result: object  # crnn.engine.evaluate.EvalResult
    seconds: float
    vertical: dict | None = None  # with a vertical mode: {"tall": crops, "read": crops read as lines}, all ranks


@dataclass
class EvalSettings:
    """How to read and score: crnn-eval's options, with its defaults."""

    protocol: str = "auto"
    decoder: str = "greedy"
    beam_width: int = 10
    batch_size: int = 64
    workers: int = 1
    worst: int = 5
    device: str = "auto"
    amp: str = "off"
    report_errors: int = 500
    vertical: str = "warn"
    words: str | None = None  # the word list of decoder "word" (a file, one word or "word count" per line)


def check_choice(option: str, value: str, choices: Sequence[str]) -> None:
    """Refuse ``value`` outside ``choices`` with the message argparse gives the command line for it."""
    if value in choices:
        return
    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    parser.add_argument(option, choices=choices)
    try:
        parser.parse_args([f"{option}={value}"])
    except argparse.ArgumentError as e:  # "argument --protocol: invalid choice: 'x' (choose from ...)"
        raise EvalUsageError(str(e)) from None


def check_settings(s: EvalSettings) -> None:
    """Raise EvalUsageError for counts out of range (the numbers first, as crnn-eval checks them)."""
    if min(s.batch_size, s.beam_width) < 1 or min(s.workers, s.worst, s.report_errors) < 0:
        raise EvalUsageError("--batch-size/--beam-width must be >= 1 and --workers/--worst/--report-errors >= 0")


def check_choices(s: EvalSettings) -> None:
    """Raise EvalUsageError for a setting outside its few names (argparse checks them on the command line)."""
    check_choice("--protocol", s.protocol, PROTOCOL_CHOICES)
    check_choice("--decoder", s.decoder, DECODE_METHODS)
    check_choice("--amp", s.amp, AMP_MODES)
    check_choice("--vertical", s.vertical, VERTICAL_CHOICES)
    if s.decoder == "word" and s.words is None:
        raise EvalUsageError("--decoder word needs --words FILE (one word per line)")
    if s.decoder != "word" and s.words is not None:
        raise EvalUsageError(f"--words is read by --decoder word only, not --decoder {s.decoder}")


def other_readers(against: Sequence, weights: Sequence[str | os.PathLike] = (), amp: str = "off", threads: int = 2,
                  device: str = "cpu", vertical: str = "warn") -> list:
    """The readers scored beside the model (crnn-eval's further ``--weights`` and ``--against``): each checkpoint of
    ``weights``, read one crop per call with the same ``amp`` and ``vertical`` mode (warn: as they are, without a
    warning, as crnn-eval reads the model), then each item of ``against``
    in order: a peer's name (a skipped :class:`crnn.yardstick.against.Against` where its package is missing) or a
    :class:`crnn.yardstick.readers.Reader` as it is. EvalUsageError for a name that is no peer's."""
    from crnn.yardstick.against import make_readers
    from crnn.yardstick.readers import PEERS, ours

    for name in against:
        if isinstance(name, str):
            check_choice("--against", name, tuple(PEERS))
    mode = "off" if vertical == "warn" else vertical  # crnn-eval reads tall crops as they are and says nothing
    out = [ours(os.fspath(w), amp, device=device, vertical=mode) for w in weights]
    return out + [make_readers([a], [], amp, threads, device)[0] if isinstance(a, str) else a for a in against]


def setup_device(name: str):
    """Resolve the device; under torchrun also start the process group (gloo on CPU, nccl on CUDA)."""
    import torch

    from crnn.engine.distributed import init_distributed, launched_by_torchrun
    from crnn.infer import resolve_device

    device = resolve_device(name)
    if not launched_by_torchrun():
        return device
    info = init_distributed(device.type)
    return torch.device("cuda", info.local_rank) if device.type == "cuda" else device


def evaluate_datasets(data: str | os.PathLike | Sequence[str | os.PathLike], weights: str | os.PathLike | None = None,
                      settings: EvalSettings | None = None, *, config: str | os.PathLike | None = None,
                      charset: str | None = None, report: str | os.PathLike | None = None,
                      against: Sequence = ()) -> dict:
    """Evaluate ``weights`` (None = the shipped model) on every dataset; return the summary (same on every rank).

    ``data``: an LMDB, a folder of LMDBs or a folder with gt.txt, or a list of them. ``config``/``charset``: for a
    bare state dict that stores none. ``report``: also write the HTML report there (its index.html under "report").
    ``against``: other readers (:func:`other_readers`) scored beside the model on the same images, one column each
    ("against" in the summary, the report's comparison); one process only. ``settings.vertical`` other than warn:
    tall crops read as the Recognizer reads them (:class:`TallCrops`; "vertical" in the summary).
    Raises EvalUsageError for bad settings, and the loading errors of checkpoints, datasets and configs.
    """
    s = settings or EvalSettings()
    paths = [data] if isinstance(data, (str, os.PathLike)) else list(data)
    check_settings(s)
    if not paths:
        raise EvalUsageError("no data given; pass at least one dataset")
    check_choices(s)
    return _run([os.fspath(p) for p in paths], None if weights is None else os.fspath(weights), s,
                None if config is None else os.fspath(config), charset,
                None if report is None else os.fspath(report), list(against))


def _run(paths: list[str], weights: str | None, s: EvalSettings, config: str | None, charset: str | None,
         report: str | None, against: list) -> dict:
    """Load the model, evaluate each dataset, summarise (and write the report on rank 0)."""
    from crnn.data.loader import build_eval_loader, read_options
    from crnn.engine.checkpoint import load_checkpoint
    from crnn.engine.distributed import get_rank, get_world_size
    from crnn.engine.evaluate import evaluate
    from crnn.infer import Recognizer, fallback_spec, read_word_list, resolve_weights
    from crnn.progress import track
    from crnn.report.collect import SampleRecorder, build_report_loader

    device = setup_device(s.device)
    if against and get_world_size() > 1:
        raise EvalUsageError("other readers (--against, a second --weights) read in one process: run without torchrun")
    weights = str(resolve_weights(weights))
    ckpt = load_checkpoint(weights)
    fallback_config, fallback_charset = fallback_spec(config, charset)
    rec = Recognizer.from_checkpoint(ckpt, str(device), s.amp, config=fallback_config, charset=fallback_charset,
                                     decoder=s.decoder, beam_width=s.beam_width, vertical=s.vertical,
                                     words=read_word_list(s.words) if s.words is not None else None)
    d, channels = rec.config.data, rec.config.model.in_channels
    reports, recorded = [], []
    for path in paths:
        recorder = SampleRecorder() if report else None
        tall = TallCrops(rec, path) if s.vertical != "warn" else None
        build = build_report_loader if recorder or tall else build_eval_loader  # the report's knows sizes
        loader = build(path, height=d.height, width=d.width, keep_ratio=d.keep_ratio,
                       max_width=rec.transform.max_width, channels=channels, batch_size=s.batch_size,
                       num_workers=s.workers, rank=get_rank(), world_size=get_world_size(),
                       **read_options(d))
        batches = track(loader, len(loader.sampler), desc=f"{PROGRESS_NAME} {path}", unit="img",
                        enabled=get_rank() == 0, size=lambda b: len(b.labels) + getattr(b, "num_skipped", 0))
        t0 = time.perf_counter()
        res = evaluate(rec.model, tall(batches) if tall else batches, rec.charset, device, protocol=s.protocol,
                       decoder=s.decoder, amp=rec.amp, keep_errors=s.worst, max_examples=0,
                       beam_width=s.beam_width, on_batch=recorder, words=rec.words)
        reports.append(DatasetReport(path, res, time.perf_counter() - t0, tall.counts(device) if tall else None))
        recorded.append(recorder.gathered() if recorder else None)  # collective under torchrun
    summary = summarize(reports, weights, ckpt, rec, s.protocol, s.decoder, get_world_size(), str(device))
    others = []
    if against:
        from crnn.yardstick.against import compare

        others = compare(paths, against, summary["protocol"])
        summary["against"] = [o.as_dict() for o in others]
    if report and get_rank() == 0:
        summary["report"] = str(write_html(report, summary, recorded, s.report_errors, others))
    return summary


class TallCrops:
    """crnn-eval ``--vertical``: every tall crop of one dataset read as :class:`crnn.infer.Recognizer` reads it under
    its ``vertical`` mode. Such a crop is decoded again from the dataset and preprocessed by the Recognizer (its
    candidate horizontal lines, crnn.data.vertical); the candidates are read, and the batch carries the one whose
    reading was kept in the crop's place, which evaluate() then reads and scores. Batches must know each image's
    dataset index and stored size (the report's loader)."""

    def __init__(self, rec, path: str) -> None:
        from crnn.report.collect import image_reader

        self.rec, self.image = rec, image_reader(path)
        self.tall = self.read = 0  # on this rank

    def __call__(self, batches: Iterable) -> Iterator:
        for batch in batches:
            yield self.swap(batch)

    def swap(self, batch):
        """``batch`` with each tall crop that makes candidate lines replaced by the one read most confidently."""
        found: dict[int, VerticalCandidates] = {}
        for k, (index, size) in enumerate(zip(batch.indices, batch.sizes)):
            if is_vertical(*size):
                self.tall += 1
                item = self.rec.preprocess(self.image(index), f"image {index}")
                if isinstance(item, VerticalCandidates):  # else read as it is (stack found no two characters)
                    found[k] = item
        if not found:
            return batch
        self.read += len(found)
        chosen = [tensor for tensor, _ in self.rec.predict_chosen(list(found.values()))]
        return with_images(batch, dict(zip(found, chosen)))

    def counts(self, device) -> dict:
        """{"tall", "read"} summed over ranks (collective under torchrun: every rank calls it)."""
        import torch

        from crnn.engine.distributed import all_reduce_sum

        t = all_reduce_sum(torch.tensor([self.tall, self.read], dtype=torch.float64, device=device)).cpu()
        return {"tall": int(t[0]), "read": int(t[1])}


def with_images(batch, swapped: dict):
    """``batch`` with the images at the keys of ``swapped`` (``[C, H, w]`` tensors) in place of its own, each at its
    own width (``widths``), right-padded with zeros to the widest (the padding is never read: read_at_own_width)."""
    import torch

    own = [swapped.get(k, batch.images[k, ..., :int(w)]) for k, w in enumerate(batch.widths)]
    widths = [t.shape[-1] for t in own]
    images = batch.images.new_zeros((len(own), *batch.images.shape[1:3], max(widths)))  # (B, C, H, W)
    for k, t in enumerate(own):
        images[k, ..., :t.shape[-1]] = t
    return replace(batch, images=images, widths=torch.tensor(widths, dtype=torch.long))


def write_html(out: str, summary: dict, recorded: list, max_errors: int, others: Sequence = ()):
    """The HTML report of every dataset in ``summary`` from its recorded samples (``others``: the readers read
    beside the model, :class:`crnn.yardstick.against.Against`, a column each); returns index.html's path."""
    from crnn.metrics import protocol_warning
    from crnn.report.collect import image_reader
    from crnn.report.render import DatasetInput, readable_names, write_report

    names = readable_names([row["path"] for row in summary["datasets"]])  # not this machine's absolute paths
    ran = [o for o in others if not o.skipped]
    inputs = [DatasetInput(name, row, samples, image_reader(row["path"]),
                           [(o.name, o.rows[k], o.readings[k]) for o in ran])
              for k, (name, row, samples) in enumerate(zip(names, summary["datasets"], recorded))]
    warned = (protocol_warning(summary["protocol"], row["removed_share"], name)
              for name, row in zip(names, summary["datasets"]))
    meta = dict(summary, warnings=[w for w in warned if w])  # the page names the datasets as its headings do
    try:
        return write_report(out, inputs, meta, max_errors=max_errors)
    except OSError as e:
        raise EvalUsageError(f"{out}: cannot write the report ({e.strerror or e}); pass a writable --report "
                             "folder") from e


def _row(path: str, metrics: dict, samples: int, seconds: float, removed_share: float) -> dict:
    """One dataset (or the pooled total) as plain data."""
    return {"path": path, "samples": samples, "word_acc": metrics["word_acc"], "cer": metrics["cer"],
            "ned_similarity": metrics["ned_similarity"], "ned": metrics["ned_similarity"],  # ned: deprecated
            "seconds": round(seconds, 3), "images_per_s": samples / max(seconds, 1e-9),
            "removed_share": removed_share}


def summarize(reports: list[DatasetReport], weights: str, ckpt, rec, protocol_requested: str, decoder: str,
              world: int, device: str) -> dict:
    """The machine-readable summary: per dataset, pooled overall, settings."""
    import torch

    from crnn.metrics import RecognitionMetrics, cer_first, protocol_warning, resolve_protocol

    protocol = resolve_protocol(protocol_requested, rec.charset.chars)
    datasets = []
    for r in reports:
        row = _row(r.path, r.result.metrics, int(r.result.metrics["samples"]), r.seconds, r.result.removed_share)
        row["undecodable_images"] = r.result.skipped
        row["worst"] = [{"label": lab, "pred": pred, "distance": dist} for lab, pred, dist in r.result.errors]
        datasets.append(row)
    pooled_state = torch.stack([r.result.state for r in reports]).sum(0)  # [5] counts summed over datasets
    acc = RecognitionMetrics.from_state_tensor(pooled_state, protocol=protocol)
    pooled = acc.compute()
    overall = _row("overall", pooled, int(pooled["samples"]), sum(r.seconds for r in reports), acc.removed_share())
    overall["pooling"] = "counts summed over all datasets (sum of correct / sum of samples)"
    warnings = [w for w in (protocol_warning(protocol, r["removed_share"], r["path"]) for r in datasets) if w]
    summary = {"weights": weights, "variant": rec.config.model.variant, "step": ckpt.step,
               "num_classes": rec.charset.num_classes, "protocol": protocol, "protocol_requested": protocol_requested,
               "cer_first": cer_first(rec.charset.chars), "warnings": warnings, "decoder": decoder,
               "processes": world, "device": device, "amp": rec.amp, "datasets": datasets, "overall": overall}
    if decoder == "word":  # say it: a word prior's figures are not lexicon-free ones
        summary["words"] = {"path": rec.words.source, "entries": len(rec.words),
                            "counts": rec.words.log10_counts is not None}
    if rec.vertical != "warn":  # warn: the summary as it always was
        _add_vertical(summary, rec.vertical, [r.vertical for r in reports])
    return summary


def _add_vertical(summary: dict, mode: str, counts: list[dict]) -> None:
    """The vertical mode, and per dataset and pooled how many crops were tall and how many were read as lines."""
    summary["vertical"] = mode
    for row, c in zip(summary["datasets"], counts):
        row["vertical"] = dict(c)
    summary["overall"]["vertical"] = {k: sum(c[k] for c in counts) for k in ("tall", "read")}


def print_table(s: dict, out: TextIO) -> None:
    """Human-readable report: settings, one row per dataset, the pooled row, then the worst errors."""
    from crnn.metrics import describe_protocol, ljust_display

    step = f", step {s['step']}" if s["step"] is not None else ""
    out.write(f"weights {s['weights']} ({s['variant']}, {s['num_classes'] - 1} chars{step})\n"
              f"protocol {s['protocol']}, decoder {s['decoder']}, {s['processes']} process(es) on {s['device']}\n")
    if "words" in s:
        kind = "words with counts" if s["words"].get("counts") else "words"
        out.write(f"(decoder word: a word prior, {s['words']['entries']:,} {kind} of {s['words']['path']}; not "
                  "lexicon-free figures)\n")
    if s["protocol_requested"] == "auto":
        out.write(f"({describe_protocol('auto', s['protocol'])})\n")
    if "vertical" in s:
        out.write(vertical_line(s["vertical"], s["overall"]["vertical"]) + "\n")
    out.write("\n")
    rows = s["datasets"] + [dict(s["overall"], path="overall (pooled: sum over datasets)")]
    width = max(len(r["path"]) for r in rows)
    acc_cer = ["word_acc", "cer"][::-1 if s["cer_first"] else 1]
    heads = {"word_acc": f"{'word_acc':>8}", "cer": f"{'CER':>7}"}
    out.write(f"{'dataset':<{width}}  {'samples':>8}  {heads[acc_cer[0]]}  {heads[acc_cer[1]]}  {'1-NED':>7}  "
              f"{'img/s':>8}\n")
    for r in rows:
        cells = {"word_acc": f"{r['word_acc']:>8.4f}", "cer": f"{r['cer']:>7.4f}"}
        out.write(f"{r['path']:<{width}}  {r['samples']:>8d}  {cells[acc_cer[0]]}  {cells[acc_cer[1]]}  "
                  f"{r['ned_similarity']:>7.4f}  {r['images_per_s']:>8.1f}\n")
    for w in s["warnings"]:
        out.write(f"\n{w}\n")
    for r in s["datasets"]:
        if r["undecodable_images"]:
            out.write(f"\n{r['path']}: {r['undecodable_images']} undecodable image(s) were skipped\n")
        if r["worst"]:
            out.write(f"\nworst {len(r['worst'])} errors in {r['path']} (label -> prediction, edit distance):\n")
            for e in r["worst"]:
                out.write(f"  {ljust_display(repr(e['label']), 28)} -> {e['pred']!r}  ({e['distance']})\n")
