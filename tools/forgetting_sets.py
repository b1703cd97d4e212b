"""Held-out real-crop sets that measure what fine-tuning makes a model forget (README "Fine-tune on your own crops").

    python tools/forgetting_sets.py --out data/forgetting      # real crops from $(python -m crnn.shared_data)
    python tools/forgetting_table.py --sets data/forgetting --weights base=weights/crnn_vgg_small.pt \\
        --weights tuned=runs/finetune/last.pt

From the two real training splits (``--data``: a folder holding ``svt_train/`` and ``iiit5k_train/``, each with a
gt.txt) it writes, into ``--out``, one LMDB per set and ``sets.json`` (what each set is, its size, whether the shipped
model trained on its crops, whether it is locked):

* ``svt_dev`` / ``svt_lock``: Street View crops split in two by a seeded shuffle (``--seed``). The shipped model never
  trained on any of them. ``svt_lock`` is the slice decided up front never to look at while choosing a recipe: it is
  scored only once a choice is committed, and then reported as it comes out.
* ``<set>_perspective`` / ``<set>_curve``: the same crops warped by ``tools/warp_crops.py`` (one end farther away, or
  the baseline bent onto an arc) with ``--seed``, a geometry no recipe was tuned on; one per svt half and for iiit5k.
  ``--draws N`` (default 3) warps every crop N times (seeds ``--seed``, ``--seed`` + 1, ...; draw 0 is the set one
  draw makes): one draw of a 129-crop set moved a model's difference from the base by up to 5 points from seed to
  seed (README "Forgetting, measured on real crops"), more than the 3 points the recipe is held to.
* ``iiit5k``: the IIIT5K training crops. The shipped model's last stage trained on them (README "Shipped model"), so
  their loss measures forgetting of trained-on crops, not of unseen ones; their warps are new images of those crops.

``--folder DIR`` (a gt.txt folder or an LMDB the base never trained on; ``--name``, default the folder's name) writes
that set and its two warps instead, nothing locked: the yardstick of the default English model, which trained on
IIIT5K ``IMG/1-1000`` and never on its development set::

    python tools/forgetting_sets.py --folder data/en_dev --out data/forgetting_en   # en_dev, en_dev_perspective, ...

Same data and seed, same bytes (PNG, lossless; labels unchanged). A set that exists is kept.
"""
from __future__ import annotations

import argparse
import io
import json
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))

from crnn.data.datasets import DatasetError, open_dataset  # noqa: E402
from crnn.data.lmdb_io import write_lmdb  # noqa: E402
from warp_crops import MODES  # noqa: E402

SEED = 33  # issue 33; the model card's warps use seed 0, so these are other images
SOURCES = {"svt": "svt_train", "iiit5k": "iiit5k_train"}
DRAWS = 3  # warps of every crop in a warped set


def split_indices(n: int, seed: int) -> tuple[list[int], list[int]]:
    """(dev, lock) indices of ``n`` samples: a seeded shuffle, the first half (rounded down) locked; both sorted."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return sorted(order[n // 2:]), sorted(order[:n // 2])


def png(img) -> bytes:
    """PNG bytes of a PIL image."""
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def read_crops(path: Path) -> list[tuple[object, str]]:
    """(RGB image, label) of every sample of a gt.txt folder or LMDB, in order; an undecodable one is an error."""
    ds = open_dataset(path)
    out = []
    for i in range(len(ds)):
        img, label = ds[i]
        if img is None:
            raise DatasetError(f"{path}: sample {i + 1} cannot be decoded; fix or remove it")
        out.append((img.convert("RGB"), label))
    return out


def set_plan(data: Path, seed: int, draws: int = 1) -> list[dict]:
    """Every set to write: name, source, indices into it, warp mode (None = straight), warp draws, seen by the base,
    locked."""
    plan = []
    for short, folder in SOURCES.items():
        n = len(open_dataset(data / folder))
        if short == "svt":
            dev, lock = split_indices(n, seed)
            halves = [("svt_dev", dev, False), ("svt_lock", lock, True)]
        else:
            halves = [("iiit5k", list(range(n)), False)]
        for name, idx, locked in halves:
            for mode in (None, *MODES):
                plan.append({"name": name if mode is None else f"{name}_{mode}", "source": folder, "indices": idx,
                             "warp": mode, "draws": 1 if mode is None else draws, "seen_by_base": short == "iiit5k",
                             "locked": locked})
    return plan


def folder_plan(folder: Path, name: str, draws: int = 1) -> list[dict]:
    """The sets of one folder the base never trained on: the crops as they are and their warps, none locked."""
    idx = list(range(len(open_dataset(folder))))
    return [{"name": name if mode is None else f"{name}_{mode}", "source": folder.name, "indices": idx, "warp": mode,
             "draws": 1 if mode is None else draws, "seen_by_base": False, "locked": False} for mode in (None, *MODES)]


def samples(crops: list, entry: dict, seed: int):
    """(PNG bytes, label) of one planned set, draw after draw; a warp's random numbers depend on the seed, the draw
    and the source index only (draw d uses seed + d)."""
    for d in range(entry["draws"]):
        for i in entry["indices"]:
            img, label = crops[i]
            if entry["warp"] is not None:
                img = MODES[entry["warp"]](img, random.Random((seed + d) * 1_000_003 + i))
            yield png(img), label


def build(data: Path, out: Path, seed: int = SEED, draws: int = DRAWS, plan: list[dict] | None = None) -> list[dict]:
    """Write every missing set into ``out`` and ``sets.json``; return the manifest entries. ``plan``: the sets
    (sources are folders in ``data``); default: those of the svt and iiit5k training crops (:func:`set_plan`)."""
    plan = set_plan(data, seed, draws) if plan is None else plan
    old = out / "sets.json"
    if old.is_file():
        had = json.loads(old.read_text())
        if (had.get("seed"), had.get("draws", 1)) != (seed, draws):
            raise ValueError(f"{out} holds sets of seed {had.get('seed')} with {had.get('draws', 1)} draw(s); "
                             f"write seed {seed} with {draws} draw(s) into another --out")
        other = sorted({s["name"] for s in had.get("sets", [])} - {e["name"] for e in plan})
        if other:
            raise ValueError(f"{out} holds other sets ({', '.join(other[:3])}{', ...' if len(other) > 3 else ''}); "
                             "write these into another --out")
    cache: dict[str, list] = {}
    manifest = []
    for entry in plan:
        path = out / f"{entry['name']}.lmdb"
        n = len(entry["indices"]) * entry["draws"]
        if not path.exists():
            crops = cache.setdefault(entry["source"], read_crops(data / entry["source"]))
            write_lmdb(samples(crops, entry, seed), str(path), total=n)
            print(f"wrote {n} crops to {path}")
        manifest.append({k: v for k, v in entry.items() if k != "indices"} | {"samples": n, "path": path.name})
    (out / "sets.json").write_text(json.dumps({"seed": seed, "draws": draws, "sets": manifest}, indent=1) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    from crnn.shared_data import shared_data_dir

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=None, help="folder with svt_train/ and iiit5k_train/ (default: the real "
                   "crops crnn.shared_data finds: $CRNN_SHARED_DATA, else the data folder shared beside the checkout)")
    p.add_argument("--out", default="data/forgetting", help="folder for the LMDBs and sets.json")
    p.add_argument("--seed", type=int, default=SEED, help=f"split and warp seed (default {SEED})")
    p.add_argument("--draws", type=int, default=DRAWS, help=f"warps of every crop in a warped set, seeds SEED, "
                   f"SEED + 1, ... (default {DRAWS}; 1: the sets before draws existed)")
    p.add_argument("--folder", help="instead of svt/iiit5k: one gt.txt folder or LMDB the base never trained on "
                   "(e.g. data/en_dev), written with its warps, nothing locked")
    p.add_argument("--name", help="--folder's set name (default: the folder's name)")
    args = p.parse_args(argv)
    if args.draws < 1:
        p.error(f"--draws must be at least 1, got {args.draws}")
    if args.name and not args.folder:
        p.error("--name names the set of --folder")
    plan = None
    try:
        if args.folder:
            folder = Path(args.folder).absolute()
            data = folder.parent
            plan = folder_plan(folder, args.name or folder.name, args.draws)
        else:
            data = Path(args.data) if args.data else shared_data_dir()
            missing = [f for f in SOURCES.values() if not (data / f / "gt.txt").is_file()]
            if missing:
                raise DatasetError(f"{data / missing[0]}/gt.txt not found; pass --data FOLDER holding "
                                   f"{' and '.join(SOURCES.values())}")
    except (DatasetError, OSError) as e:
        print(f"forgetting_sets: error: {e}", file=sys.stderr)
        return 1
    Path(args.out).mkdir(parents=True, exist_ok=True)
    try:
        manifest = build(data, Path(args.out), args.seed, args.draws, plan)
    except (DatasetError, OSError, ValueError) as e:
        print(f"forgetting_sets: error: {e}", file=sys.stderr)
        return 1
    print(f"{len(manifest)} sets in {args.out} (seed {args.seed}, {args.draws} warp draw(s)); list: "
          f"{Path(args.out) / 'sets.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
