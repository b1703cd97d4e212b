"""The python steps of scripts/demo.sh: a starting point, crnn-eval's score, a few held-out images vs predictions.

    python scripts/demo_heldout.py init weights/crnn_vgg_small.pt --charset digits --out data/demo/init.pt
    python scripts/demo_heldout.py report runs/demo/heldout_eval.json     # crnn-eval --json output -> table + line
    python scripts/demo_heldout.py report runs/demo/init_eval.json --before
    python scripts/demo_heldout.py export data/demo/heldout.lmdb data/demo/heldout_png --num 6
    crnn-predict --format json DIR/*.png | python scripts/demo_heldout.py compare DIR

``init`` writes a weights file for a new alphabet (train.init_weights takes it): every layer of the given model
except the output layer, which starts from random because its classes are new. ``report`` prints crnn-eval's own
table and then the line ``demo: the model trained here reads N of M held-out images (P%)``.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TRUTH = "truth.tsv"


def init(weights: Path, charset_spec: str, out: Path) -> str:
    """A weights file for ``charset_spec``: the layers of ``weights`` whose shapes fit, a fresh output layer."""
    import torch

    from crnn.charset import Charset
    from crnn.config import config_from_dict
    from crnn.engine.checkpoint import load_checkpoint, model_checkpoint, save_checkpoint
    from crnn.model import build_model_from

    ck = load_checkpoint(weights)
    cfg = config_from_dict(ck.config)
    cfg.model.charset = charset_spec
    charset = Charset.from_spec(charset_spec)
    m = cfg.model
    torch.manual_seed(12345)  # not the trainer's seed: a head drawn like the shipped model's first one would fit it
    model = build_model_from(m, charset.num_classes)
    state = model.state_dict()
    kept = {k: v.float() for k, v in ck.model_state.items() if k in state and v.shape == state[k].shape}
    model.load_state_dict({**state, **kept}, strict=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(model_checkpoint(model, cfg, charset), out)
    fresh = sorted(set(state) - set(kept))
    return (f"wrote {out}: {len(kept)} tensors from {weights}, "
            f"fresh for {charset.num_classes} classes: {', '.join(fresh)}")


def _reads(summary: dict) -> tuple[int, int, float]:
    """(correct, samples, percent) of a crnn-eval --json summary, pooled over its datasets."""
    overall = summary["overall"]
    m = int(overall["samples"])
    n = round(overall["word_acc"] * m)
    return n, m, 100 * n / max(m, 1)


def report(eval_json: Path, before: bool = False) -> str:
    """crnn-eval's table for its --json summary, then the demo line; ``before``: only a line for the starting point."""
    from crnn.engine.eval_datasets import print_table

    summary = json.loads(eval_json.read_text(encoding="utf-8"))
    n, m, pct = _reads(summary)
    if before:
        return f"before training, the starting point reads {n} of {m} held-out images ({pct:.1f}%)"
    print_table(summary, sys.stdout)
    return f"demo: the model trained here reads {n} of {m} held-out images ({pct:.1f}%)"


def export(lmdb: Path, out: Path, num: int) -> str:
    """The first ``num`` images of ``lmdb`` as PNG files in ``out``, their labels in ``out/truth.tsv``."""
    from crnn.data.datasets import open_dataset

    ds = open_dataset(str(lmdb))
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(min(num, len(ds))):
        img, label = ds[i]
        name = f"heldout_{i}.png"
        img.save(out / name)
        lines.append(f"{name}\t{label}")
    (out / TRUTH).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return f"wrote {len(lines)} held-out images to {out}"


def compare(folder: Path, predictions: list[str]) -> str:
    """A table of truth next to crnn-predict's JSON lines (one per image)."""
    truth = dict(line.split("\t", 1) for line in (folder / TRUTH).read_text(encoding="utf-8").splitlines() if line)
    rows = [f"{'image':<16}  {'truth':<12}  {'read':<12}  conf"]
    for line in predictions:
        p = json.loads(line)
        name = Path(p["path"]).name
        text = p.get("text") or ""
        mark = "ok" if text == truth.get(name) else "WRONG"
        rows.append(f"{name:<16}  {truth.get(name, '?'):<12}  {text:<12}  {p.get('confidence', 0.0):.2f}  {mark}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Entry point: one of report / export / compare."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("init")
    i.add_argument("weights", type=Path)
    i.add_argument("--charset", required=True)
    i.add_argument("--out", type=Path, required=True)
    r = sub.add_parser("report")
    r.add_argument("eval_json", type=Path)
    r.add_argument("--before", action="store_true", help="one line for the model before training, no table")
    e = sub.add_parser("export")
    e.add_argument("lmdb", type=Path)
    e.add_argument("out", type=Path)
    e.add_argument("--num", type=int, default=6)
    sub.add_parser("compare").add_argument("folder", type=Path)
    args = p.parse_args(argv)
    try:
        if args.cmd == "init":
            print(init(args.weights, args.charset, args.out))
        elif args.cmd == "report":
            print(report(args.eval_json, args.before))
        elif args.cmd == "export":
            print(export(args.lmdb, args.out, args.num))
        else:
            print(compare(args.folder, [ln for ln in sys.stdin.read().splitlines() if ln.strip()]))
    except (OSError, ValueError, KeyError) as e:
        print(f"demo_heldout: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
