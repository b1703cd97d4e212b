"""A crnn checkpoint written back with ``crnn-convert-ckpt CKPT DIR/NAME.pth --to easyocr``, read by EasyOCR's own
Reader (single pass, float model) and by crnn on the same crops: same text, word accuracy (alnum-insensitive).

    nice -n 5 .venv/bin/python tools/easyocr_back_check.py CKPT DIR/NAME.pth \
        [svt_train]
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crnn.infer import Recognizer, load_image  # noqa: E402
from crnn.metrics import normalize_text  # noqa: E402
from crnn.shared_data import shared_dataset  # noqa: E402


def main(argv: list[str]) -> int:
    ckpt, pth, name = argv[0], Path(argv[1]), argv[2] if len(argv) > 2 else "svt_train"
    data = shared_dataset(name)
    if data is None:
        print(f"easyocr_back_check: skipped (no shared {name}; CRNN_SHARED_DATA names the folder)")
        return 0
    import easyocr

    rows = [line.split("\t", 1) for line in (data / "gt.txt").read_text(encoding="utf-8").splitlines() if "\t" in line]
    rec = Recognizer.from_checkpoint(ckpt, "cpu")
    ours = [p.text or "" for p in rec.predict_paths([str(data / n) for n, _ in rows])]
    reader = easyocr.Reader(["en"], gpu=False, detector=False, quantize=False, verbose=False, download_enabled=False,
                            recog_network=pth.stem, user_network_directory=str(pth.parent),
                            model_storage_directory=str(pth.parent))
    theirs = [reader.recognize(np.asarray(load_image(str(data / n)).convert("L")), contrast_ths=0, detail=0)[0]
              for n, _ in rows]

    def acc(texts: list[str]) -> float:
        return sum(normalize_text(t, "alnum-insensitive") == normalize_text(g, "alnum-insensitive")
                   for t, (_, g) in zip(texts, rows)) / len(rows)

    print(f"{name}: same text {sum(a == b for a, b in zip(ours, theirs))}/{len(rows)}; word accuracy crnn "
          f"{acc(ours):.1%}, EasyOCR reading {pth.name} {acc(theirs):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
