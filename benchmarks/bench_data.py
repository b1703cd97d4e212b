"""Data-loader throughput (images/s) with 0, 1, 2 workers next to the model's training-step throughput.

Builds an LMDB of 32x100 JPEG word crops (the IIIT5K train crops of the shared data folder resized, or, when
they are absent, word crops from the product's synthetic generator; see crnn/shared_data.py), times full epochs
of ``build_train_loader`` (worker start-up excluded), then times training steps of ``vgg_small`` (AdamW + CTC) on
the same batch size in the same run.

    python benchmarks/bench_data.py --out bench_data.json       # full run
    python benchmarks/bench_data.py --quick                     # CI-sized, a few seconds
"""
from __future__ import annotations

import argparse
import io
import json
import os
import platform
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
from PIL import Image

from crnn.charset import Charset
from crnn.data.lmdb_io import write_lmdb
from crnn.data.loader import build_train_loader
from crnn.shared_data import shared_dataset

SIZE = dict(height=32, width=100, keep_ratio=False, max_width=100, channels=1)


def crop_samples(n: int, seed: int = 0) -> list[tuple[bytes, str]]:
    """``n`` JPEG-encoded 32x100 crops with alnum labels: real IIIT5K crops when available, else synthetic ones."""
    crops = shared_dataset("iiit5k_train")
    real = _real_crops(str(crops), n) if crops is not None else _synthetic_crops(min(n, 512), seed)
    out = []
    for i in range(n):
        img, label = real[i % len(real)]
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=90)
        out.append((buf.getvalue(), label))
    return out


def _real_crops(folder: str, limit: int) -> list[tuple[Image.Image, str]]:
    """Up to ``limit`` crops of a gt.txt folder resized to 100x32, alnum labels only."""
    crops: list[tuple[Image.Image, str]] = []
    with open(os.path.join(folder, "gt.txt"), encoding="utf-8") as f:
        for line in f:
            if len(crops) >= limit:
                break
            rel, label = line.rstrip("\n").split("\t", 1)
            if label.isalnum() and label.isascii():
                crops.append((Image.open(os.path.join(folder, rel)).convert("RGB").resize((100, 32)), label))
    return crops


def _synthetic_crops(num: int, seed: int) -> list[tuple[Image.Image, str]]:
    """``num`` crops from the synthetic generator (alnum36 labels) resized to 100x32."""
    from crnn.data.synth import SynthOptions, find_fonts, iter_samples

    samples = iter_samples(num, seed, find_fonts(), SynthOptions(charset="alnum36"), workers=os.cpu_count() or 1)
    return [(Image.open(io.BytesIO(data)).convert("RGB").resize((100, 32)), label) for data, label in samples]


def time_loader(path: str, workers: int, batch_size: int, epochs: int, augment: bool) -> dict:
    """Images/s over ``epochs`` full epochs after a warm-up epoch (worker start-up not counted)."""
    loader = build_train_loader([{"path": path}], Charset.from_spec("alnum36"), **SIZE, batch_size=batch_size,
                                num_workers=workers, max_label_length=25, augment=augment, seed=0)
    t0 = time.perf_counter()
    loader.set_epoch(0)
    next(iter(loader))  # starts the (persistent) workers
    startup = time.perf_counter() - t0
    images, t0 = 0, time.perf_counter()
    for epoch in range(1, epochs + 1):
        loader.set_epoch(epoch)
        images += sum(len(batch) for batch in loader)
    elapsed = time.perf_counter() - t0
    return {"workers": workers, "augment": augment, "images": images, "seconds": round(elapsed, 3),
            "images_per_s": round(images / elapsed, 1), "startup_s": round(startup, 3)}


def time_train_step(batch_size: int, steps: int, device: torch.device, warmup: int = 2) -> dict:
    """Images/s of forward + CTC loss + backward + AdamW step of vgg_small on 1x32x100 inputs."""
    from crnn.model import build_model

    model = build_model("vgg_small", in_channels=1, num_classes=37).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    images = torch.rand(batch_size, 1, 32, 100, device=device) * 2 - 1  # (B, 1, 32, 100)
    lengths = torch.randint(3, 10, (batch_size,), device=device)
    targets = torch.randint(1, 37, (int(lengths.sum()),), device=device)
    t_len = model.output_length(100)
    input_lengths = torch.full((batch_size,), t_len, dtype=torch.long, device=device)

    def step() -> None:
        logits = model(images)  # (B, T, 37)
        log_probs = logits.float().log_softmax(-1).permute(1, 0, 2)  # (T, B, 37)
        loss = F.ctc_loss(log_probs, targets, input_lengths, lengths, blank=0, zero_infinity=True)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    _sync(device)
    elapsed = time.perf_counter() - t0
    return {"device": str(device), "steps": steps, "seconds": round(elapsed, 3),
            "images_per_s": round(steps * batch_size / elapsed, 1)}


def _sync(device: torch.device) -> None:
    """Wait for queued GPU work so timings are honest."""
    if device.type == "cuda":
        torch.cuda.synchronize()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options; ``--quick`` shrinks every size."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-images", type=int, default=4096)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--epochs", type=int, default=2, help="timed epochs per loader setting")
    p.add_argument("--steps", type=int, default=10, help="timed model training steps (after 2 warm-up steps)")
    p.add_argument("--workers", default="0,1,2")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, help="torch intra-op threads in the main process (default: torch's)")
    p.add_argument("--quick", action="store_true", help="CI-sized run (a few seconds)")
    p.add_argument("--out", help="write results as JSON here")
    args = p.parse_args(argv)
    if args.quick:
        args.num_images, args.batch_size, args.epochs, args.steps = 128, 16, 1, 1
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the loader and model timings, print the table, optionally write JSON."""
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    workers = [int(w) for w in args.workers.split(",")]
    results: dict = {"config": {k: v for k, v in vars(args).items() if k != "out"},
                     "host": {"cpus": os.cpu_count(), "torch": torch.__version__, "python": platform.python_version(),
                              "torch_threads": torch.get_num_threads()}}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "crops.lmdb")
        write_lmdb(crop_samples(args.num_images), path)
        results["loader"] = [time_loader(path, w, args.batch_size, args.epochs, aug)
                             for aug in (False, True) for w in workers]
    results["train_step"] = time_train_step(args.batch_size, args.steps, torch.device(args.device),
                                            warmup=1 if args.quick else 2)
    print_table(results)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    return 0


def print_table(results: dict) -> None:
    """Loader rows, then the model row, with the loader/model ratio."""
    model_ips = results["train_step"]["images_per_s"]
    print(f"{'what':<34}{'images/s':>12}{'x model':>10}")
    for r in results["loader"]:
        name = f"loader workers={r['workers']} augment={'on' if r['augment'] else 'off'}"
        print(f"{name:<34}{r['images_per_s']:>12.0f}{r['images_per_s'] / model_ips:>10.2f}")
    name = f"train step vgg_small ({results['train_step']['device']})"
    print(f"{name:<34}{model_ips:>12.0f}{1.0:>10.2f}")


if __name__ == "__main__":
    sys.exit(main())
