"""crnn-eval: word accuracy, CER and 1-NED of a trained CRNN on labelled datasets (one process or torchrun)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from typing import TextIO

PROG = "crnn-eval"
EPILOG = """examples:
  crnn-eval --weights runs/synth_cpu/best.pt --data path/to/iiit5k_train --data data/val.lmdb
  crnn-eval --weights best.pt --data lmdbs/ --protocol exact --worst 20 --json
  crnn-eval --weights zh --data my_lines/ --protocol unicode   (the shipped Chinese line model)
  torchrun --standalone --nproc_per_node=2 -m crnn.cli.evaluate --weights best.pt --data data/val.lmdb
  crnn-eval --data svt_train/ --data data/val.lmdb --report report/   # then open report/index.html

--data takes an LMDB, a folder of LMDBs (concatenated) or a folder with gt.txt (PATH<TAB>label lines).
Images are resized and read as crnn-predict does it: a keep-ratio model reads each line at its own width (up to
4096 px), batched with lines of the same width, never padded to the widest line of its batch.
Metrics: word_acc = exact matches / samples after the protocol's normalisation (line accuracy for text
lines); CER = edit distance / label characters (listed first for every alphabet but alnum36);
1-NED = 1 - mean(edit distance / max(len(pred), len(label))) (ICDAR 2019, higher is better); --json key
ned_similarity (the old key "ned" holds the same number and is deprecated: it goes in the next release).
The overall line pools the counts of all datasets (sum of correct / sum of samples), it is not a mean of
per-dataset accuracies. Under torchrun each rank evaluates a disjoint shard and the counts are summed.
A protocol that deletes more than 10 % of the label characters (alnum-insensitive on Chinese labels, say)
is reported with a warning: its scores ignore those characters.
--report DIR writes DIR/index.html (open it from disk; crops in DIR/img/): per dataset the summary, accuracy by
label length, image width and aspect ratio, confidence calibration, the most frequent character confusions with
an example each, characters never read right, and the errors worst first (--report-errors of them, paged).
"""


class UsageError(ValueError):
    """Bad command line input (exit code 2)."""


@dataclass
class DatasetReport:
    """One dataset's summed result and the wall time it took."""

    path: str
    result: object  # crnn.engine.evaluate.EvalResult
    seconds: float


def build_parser() -> argparse.ArgumentParser:
    """Argument parser of crnn-eval."""
    from crnn.infer import AMP_MODES
    from crnn.metrics import PROTOCOL_CHOICES

    p = argparse.ArgumentParser(prog=PROG, description=__doc__, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", help="checkpoint (any crnn layout) or a shipped model's name: en (English words, "
                        "the default) or zh (Chinese text lines); a path that exists wins over a name")
    p.add_argument("--data", action="append", required=True, metavar="PATH",
                   help="LMDB, folder of LMDBs, or folder with gt.txt; repeat for several datasets")
    p.add_argument("--protocol", choices=PROTOCOL_CHOICES, default="auto",
                   help="label/prediction normalisation before comparing: auto (default) = alnum-insensitive for an "
                        "alnum36 model, exact for any other alphabet; unicode = NFKC + whitespace collapsed")
    p.add_argument("--decoder", choices=("greedy", "beam"), default="greedy", help="CTC decoder (default: greedy)")
    p.add_argument("--beam-width", type=int, default=10, help="beam width for --decoder beam (default: 10)")
    p.add_argument("--batch-size", type=int, default=64, help="images per forward pass and process (default: 64)")
    p.add_argument("--workers", type=int, default=1, help="data loader worker processes per rank (default: 1)")
    p.add_argument("--worst", type=int, default=5, help="show the N errors with the largest edit distance (default: 5)")
    p.add_argument("--json", action="store_true", help="print one JSON summary instead of the table")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (under torchrun: cuda:LOCAL_RANK)")
    p.add_argument("--amp", choices=AMP_MODES, default="off", help="autocast: off (default), bf16, fp16 (CUDA)")
    p.add_argument("--report", metavar="DIR", help="also write an HTML report of the errors to DIR/index.html")
    p.add_argument("--report-errors", type=int, default=500, metavar="N",
                   help="errors shown per dataset in the report, worst first, 100 per page (default: 500); "
                        "counts and charts always cover every image")
    p.add_argument("--config", help="YAML config for a bare state dict that stores none")
    p.add_argument("--charset", help="charset for a bare state dict")
    return p


def _setup_device(name: str):
    """Resolve the device; under torchrun also start the process group (gloo on CPU, nccl on CUDA)."""
    import torch

    from crnn.engine.distributed import init_distributed, launched_by_torchrun
    from crnn.infer import resolve_device

    device = resolve_device(name)
    if not launched_by_torchrun():
        return device
    info = init_distributed(device.type)
    return torch.device("cuda", info.local_rank) if device.type == "cuda" else device


def run(args: argparse.Namespace) -> dict:
    """Evaluate on every dataset; return the summary (identical on every rank)."""
    from crnn.data.loader import build_eval_loader, read_options
    from crnn.engine.checkpoint import load_checkpoint
    from crnn.engine.distributed import get_rank, get_world_size
    from crnn.engine.evaluate import evaluate
    from crnn.infer import Recognizer, fallback_spec, resolve_weights
    from crnn.progress import track
    from crnn.report.collect import SampleRecorder, build_report_loader

    device = _setup_device(args.device)
    weights = str(resolve_weights(args.weights))
    ckpt = load_checkpoint(weights)
    config, charset = fallback_spec(args.config, args.charset)
    rec = Recognizer.from_checkpoint(ckpt, str(device), args.amp, config=config, charset=charset)
    model = rec.model
    d, channels = rec.config.data, rec.config.model.in_channels
    reports, recorded = [], []
    for path in args.data:
        recorder = SampleRecorder() if args.report else None
        build = build_report_loader if recorder else build_eval_loader
        loader = build(path, height=d.height, width=d.width, keep_ratio=d.keep_ratio,
                       max_width=rec.transform.max_width, channels=channels, batch_size=args.batch_size,
                       num_workers=args.workers, rank=get_rank(), world_size=get_world_size(),
                       **read_options(d))
        batches = track(loader, len(loader.sampler), desc=f"{PROG} {path}", unit="img", enabled=get_rank() == 0,
                        size=lambda b: len(b.labels) + getattr(b, "num_skipped", 0))
        t0 = time.perf_counter()
        res = evaluate(model, batches, rec.charset, device, protocol=args.protocol,
                       decoder=args.decoder, amp=args.amp, keep_errors=args.worst, max_examples=0,
                       beam_width=args.beam_width, on_batch=recorder)
        reports.append(DatasetReport(path, res, time.perf_counter() - t0))
        recorded.append(recorder.gathered() if recorder else None)  # collective under torchrun
    summary = summarize(reports, weights, ckpt, rec, args, get_world_size(), str(device))
    if args.report and get_rank() == 0:
        summary["report"] = str(write_html(args.report, summary, recorded, args.report_errors))
    return summary


def write_html(out: str, summary: dict, recorded: list, max_errors: int):
    """The HTML report of every dataset in ``summary`` from its recorded samples; returns index.html's path."""
    from crnn.report.collect import image_reader
    from crnn.report.render import DatasetInput, readable_names, write_report

    from crnn.metrics import protocol_warning

    names = readable_names([row["path"] for row in summary["datasets"]])  # not this machine's absolute paths
    inputs = [DatasetInput(name, row, samples, image_reader(row["path"]))
              for name, row, samples in zip(names, summary["datasets"], recorded)]
    warned = (protocol_warning(summary["protocol"], row["removed_share"], name)
              for name, row in zip(names, summary["datasets"]))
    meta = dict(summary, warnings=[w for w in warned if w])  # the page names the datasets as its headings do
    try:
        return write_report(out, inputs, meta, max_errors=max_errors)
    except OSError as e:
        raise UsageError(f"{out}: cannot write the report ({e.strerror or e}); pass a writable --report folder") from e


def _row(path: str, metrics: dict, samples: int, seconds: float, removed_share: float) -> dict:
    """One dataset (or the pooled total) as plain data."""
    return {"path": path, "samples": samples, "word_acc": metrics["word_acc"], "cer": metrics["cer"],
            "ned_similarity": metrics["ned_similarity"], "ned": metrics["ned_similarity"],  # ned: deprecated
            "seconds": round(seconds, 3), "images_per_s": samples / max(seconds, 1e-9),
            "removed_share": removed_share}


def summarize(reports: list[DatasetReport], weights: str, ckpt, rec, args, world: int, device: str) -> dict:
    """The machine-readable summary: per dataset, pooled overall, settings."""
    import torch

    from crnn.metrics import RecognitionMetrics, cer_first, protocol_warning, resolve_protocol

    protocol = resolve_protocol(args.protocol, rec.charset.chars)
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
    return {"weights": weights, "variant": rec.config.model.variant, "step": ckpt.step,
            "num_classes": rec.charset.num_classes, "protocol": protocol, "protocol_requested": args.protocol,
            "cer_first": cer_first(rec.charset.chars), "warnings": warnings, "decoder": args.decoder,
            "processes": world, "device": device, "datasets": datasets, "overall": overall}


def print_table(s: dict, out: TextIO) -> None:
    """Human-readable report: settings, one row per dataset, the pooled row, then the worst errors."""
    from crnn.metrics import describe_protocol, ljust_display

    step = f", step {s['step']}" if s["step"] is not None else ""
    out.write(f"weights {s['weights']} ({s['variant']}, {s['num_classes'] - 1} chars{step})\n"
              f"protocol {s['protocol']}, decoder {s['decoder']}, {s['processes']} process(es) on {s['device']}\n")
    if s["protocol_requested"] == "auto":
        out.write(f"({describe_protocol('auto', s['protocol'])})\n")
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


def main(argv: list[str] | None = None) -> int:
    """Entry point of crnn-eval."""
    args = build_parser().parse_args(argv)
    from crnn.charset import CharsetError
    from crnn.config import ConfigError
    from crnn.data.datasets import DatasetError
    from crnn.engine.checkpoint import CheckpointError
    from crnn.engine.distributed import cleanup_distributed, is_main_process
    from crnn.infer import InferenceError

    try:
        if min(args.batch_size, args.beam_width) < 1 or min(args.workers, args.worst, args.report_errors) < 0:
            raise UsageError("--batch-size/--beam-width must be >= 1 and --workers/--worst/--report-errors >= 0")
        summary = run(args)
        if is_main_process():  # decided before the process group is torn down
            print(json.dumps(summary, ensure_ascii=False)) if args.json else print_table(summary, sys.stdout)
            for w in summary["warnings"]:  # loud: on stderr as well as in the table / JSON
                print(f"{PROG}: {w}", file=sys.stderr)
            if "report" in summary:
                print(f"{PROG}: report written to {summary['report']}", file=sys.stderr)
    except (UsageError, CheckpointError, DatasetError, InferenceError, ConfigError, CharsetError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    finally:
        cleanup_distributed()
    return 0


if __name__ == "__main__":
    sys.exit(main())
