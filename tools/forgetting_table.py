"""Forgetting table: a base model and fine-tuned ones, scored on the same held-out sets, with paired differences.

    python tools/forgetting_table.py --sets data/forgetting --weights base=weights/crnn_vgg_small.pt \\
        --weights recipe=runs/finetune/last.pt --extra codes=data/codes/heldout.lmdb:exact --out runs/forgetting.json

The first ``--weights`` is the base: every other model's cell shows its word accuracy and its difference from the
base in points, and the JSON keeps how many crops each lost and gained against it (paired: same images, so a loss of
3 points on 128 crops is 4 crops net, however the rest moved). Each model reads as ``crnn-eval`` reads it (its own
stored geometry); ``NAME=PATH@keep`` reads it at its own width instead (keep-ratio), as a reference.
``--sets``: a folder from ``tools/forgetting_sets.py`` (its sets.json); sets marked locked are skipped unless
``--unlock`` (score them once the choice is committed). ``--extra NAME=PATH[:PROTOCOL]`` adds any LMDB / gt.txt folder
(protocol alnum-insensitive unless given, e.g. ``:exact`` for the new kind of text). ``--protocol`` (repeatable;
default alnum-insensitive) scores the sets of ``--sets`` under each protocol given, and ``:exact,alnum-insensitive``
an extra under both: one set read once, a column per protocol, named ``NAME@PROTOCOL`` where a set has more than one
(a case-sensitive base such as crnn_en is judged exact and by the benchmarks' protocol alike). The last column, worst
vs base, is the lowest difference over the sets of ``--sets`` and the extras read with the default protocol (not the
new kind of text). Greedy decoding. Predictions are cached per model file and set in ``--cache`` (a model that changes
on disk is read again).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from crnn.data.datasets import DatasetError, open_dataset  # noqa: E402
from crnn.metrics import normalize_text  # noqa: E402

PROTOCOL = "alnum-insensitive"


def parse_named(spec: str, what: str) -> tuple[str, str]:
    """``NAME=VALUE`` -> (NAME, VALUE)."""
    name, sep, value = spec.partition("=")
    if not sep or not name or not value:
        raise SystemExit(f"forgetting_table: {what} {spec!r} must look like NAME=PATH")
    return name, value


def parse_protocols(text: str, where: str) -> list[str]:
    """``exact,alnum-insensitive`` -> the protocols, each checked."""
    protocols = [p.strip() for p in text.split(",") if p.strip()]
    for p in protocols:
        try:
            normalize_text("", p)
        except ValueError as e:
            raise SystemExit(f"forgetting_table: {where}: {e}") from None
    if len(set(protocols)) != len(protocols):
        raise SystemExit(f"forgetting_table: {where}: a protocol is named twice in {text!r}")
    return protocols


def _per_protocol(entry: dict, protocols: list[str]) -> list[dict]:
    """One set entry per protocol (``NAME@PROTOCOL`` when there are several)."""
    return [entry | {"name": entry["name"] if len(protocols) == 1 else f"{entry['name']}@{p}", "protocol": p}
            for p in protocols]


def load_sets(folder: str | None, unlock: bool, extras: list[str], protocols: list[str] | None = None) -> list[dict]:
    """The sets to score: those of ``folder/sets.json`` (locked ones only with ``unlock``) under each of
    ``protocols`` (default: alnum-insensitive), then the extras. ``yardstick``: counted in the worst-vs-base column."""
    protocols = protocols or [PROTOCOL]
    sets = []
    if folder:
        manifest = Path(folder) / "sets.json"
        if not manifest.is_file():
            raise SystemExit(f"forgetting_table: {manifest} not found; make the sets with tools/forgetting_sets.py")
        for s in json.loads(manifest.read_text())["sets"]:
            if s["locked"] and not unlock:
                continue
            sets += _per_protocol({"name": s["name"], "path": str(Path(folder) / s["path"]),
                                   "seen_by_base": s["seen_by_base"], "locked": s["locked"], "yardstick": True},
                                  protocols)
    for spec in extras:
        name, value = parse_named(spec, "--extra")
        path, _, given = value.rpartition(":") if not os.path.exists(value) and ":" in value else (value, "", "")
        sets += _per_protocol({"name": name, "path": path, "seen_by_base": None, "locked": False,
                               "yardstick": not given}, parse_protocols(given, f"--extra {spec}") if given
                              else [PROTOCOL])
    return sets


def read_set(path: str) -> tuple[list, list[str]]:
    """Images (RGB) and raw labels of one set."""
    ds = open_dataset(path)
    images, labels = [], []
    for i in range(len(ds)):
        img, label = ds[i]
        if img is None:
            raise DatasetError(f"{path}: sample {i + 1} cannot be decoded")
        images.append(img.convert("RGB"))
        labels.append(label)
    return images, labels


def recognizer(path: str):
    """The model of ``path`` (``PATH@keep``: read keep-ratio at its own width)."""
    from crnn.infer import Recognizer

    keep = path.endswith("@keep")
    rec = Recognizer.from_checkpoint(path[:-5] if keep else path, device="cpu")
    if keep:
        cfg = copy.deepcopy(rec.config)
        cfg.data.keep_ratio = True
        rec = Recognizer(rec.model, rec.charset, cfg, "cpu")
    return rec


def predictions(path: str, sets: list[dict], cache: dict) -> dict[str, list[str]]:
    """Greedy predictions of one model on every set (from the cache where the model file has not changed)."""
    file = path[:-5] if path.endswith("@keep") else path
    stamp = f"{path}|{os.path.getmtime(file):.0f}|{os.path.getsize(file)}"
    mine = cache.setdefault(stamp, {})
    rec = None
    for s in sets:
        if s["path"] not in mine:
            rec = rec or recognizer(path)
            images, _ = read_set(s["path"])
            mine[s["path"]] = [text for text, _ in rec.predict_images(images)]
            print(f"  {path}: {s['name']} read", file=sys.stderr)
    return {s["path"]: mine[s["path"]] for s in sets}


def score(preds: list[str], labels: list[str], protocol: str) -> list[bool]:
    """Per-sample exact match under ``protocol``."""
    return [normalize_text(p, protocol) == normalize_text(t, protocol) for p, t in zip(preds, labels)]


def table(models: list[tuple[str, str]], sets: list[dict], cache: dict) -> dict:
    """Accuracy per model and set, and against the first model: difference, crops lost and gained."""
    labels = {s["path"]: read_set(s["path"])[1] for s in sets}
    rows = []
    base_ok = None
    for name, path in models:
        preds = predictions(path, sets, cache)
        cells = {}
        for s in sets:
            ok = score(preds[s["path"]], labels[s["path"]], s["protocol"])
            cell = {"acc": 100 * sum(ok) / len(ok), "samples": len(ok)}
            if base_ok is not None:
                b = base_ok[s["name"]]
                cell.update(delta=cell["acc"] - 100 * sum(b) / len(b),
                            lost=sum(x and not y for x, y in zip(b, ok)), gained=sum(y and not x for x, y in zip(b, ok)))
            cells[s["name"]] = cell | {"ok": ok}
        if base_ok is None:
            base_ok = {k: v["ok"] for k, v in cells.items()}
        rows.append({"name": name, "weights": path, "cells": cells})
    return {"sets": sets, "rows": rows}


def markdown(res: dict) -> str:
    """The table as Markdown: one row per model, accuracy (difference from the first row) per set."""
    sets = res["sets"]
    head = "| model | " + " | ".join(f"{s['name']} ({len(res['rows'][0]['cells'][s['name']]['ok'])})"
                                    for s in sets) + " | worst vs base |"
    lines = [head, "|" + " --- |" * (len(sets) + 2)]
    for r in res["rows"]:
        cells, worst = [], None
        for s in sets:
            c = r["cells"][s["name"]]
            if "delta" in c:
                cells.append(f"{c['acc']:.1f} ({c['delta']:+.1f})")
                if s.get("yardstick", s["protocol"] == PROTOCOL):
                    worst = c["delta"] if worst is None else min(worst, c["delta"])
            else:
                cells.append(f"{c['acc']:.1f}")
        lines.append(f"| {r['name']} | " + " | ".join(cells) + f" | {'' if worst is None else f'{worst:+.1f}'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--weights", action="append", required=True, metavar="NAME=PATH",
                   help="a model; the first is the base (PATH@keep: read keep-ratio)")
    p.add_argument("--sets", help="folder made by tools/forgetting_sets.py")
    p.add_argument("--extra", action="append", default=[], metavar="NAME=PATH[:PROTOCOL[,PROTOCOL]]")
    p.add_argument("--protocol", action="append", default=None, metavar="PROTOCOL",
                   help=f"the sets of --sets under this protocol (repeatable: a column each; default {PROTOCOL})")
    p.add_argument("--unlock", action="store_true", help="also score the locked sets")
    p.add_argument("--cache", default="runs/forgetting_cache.json")
    p.add_argument("--out", help="JSON with every cell (per-sample results included)")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    models = [parse_named(w, "--weights") for w in args.weights]
    protocols = parse_protocols(",".join(args.protocol), "--protocol") if args.protocol else None
    sets = load_sets(args.sets, args.unlock, args.extra, protocols)
    cache_path = Path(args.cache)
    cache = json.loads(cache_path.read_text()) if cache_path.is_file() else {}
    try:
        res = table(models, sets, cache)
    except (DatasetError, OSError) as e:
        print(f"forgetting_table: error: {e}", file=sys.stderr)
        return 1
    finally:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        cache_path.write_text(json.dumps(cache))
    print(markdown(res))
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
