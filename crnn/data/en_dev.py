"""The English real development sets: ``en_dev`` (issue 44), 1,257 photographed word crops, fixed before any English
model of printable ASCII was trained, and ``ic15_dev`` (issue 60), 468 incidental-scene crops of ICDAR 2015, fixed
before any training on ICDAR 2015. Neither is ever trained on.

    python -m crnn.data.en_dev                       # writes data/en_dev/ and data/ic15_dev/ (gt.txt + the crops)
    python -m crnn.data.en_dev --set ic15_dev --out DIR --force   # one set, elsewhere / rebuild
    python -m crnn.data.en_dev --trainable data/en_real_train   # the crops that may be trained on (below)
    python -m crnn.data.en_dev --trainable data/ic15_real_train --source ic15_train   # IC15's, IMG/word_1-4000
    crnn-eval --weights en --data data/en_dev        # then read it like any folder with gt.txt (data.val too)

Which crops: all 257 of ``svt_train`` and ``iiit5k_train`` ``IMG/1001.jpg`` .. ``IMG/2000.jpg`` (1,000: a contiguous
block, so words cut from one photograph rarely straddle the split). ``iiit5k_train`` ``IMG/1.jpg`` .. ``IMG/1000.jpg``
may be trained on; the test splits of IIIT5K, SVT, SVTP and CUTE80 stay the held-out yardstick and are not here.
The list, with each crop's case-sensitive label and the first 16 hex digits of the SHA-256 of its file, is
``crnn/data/en_dev.tsv`` (columns ``folder``, ``image``, ``label``, ``sha256``). The crops themselves are not
redistributed: the builder copies them from the shared folder (:mod:`crnn.shared_data`, ``$CRNN_SHARED_DATA``) and
refuses, naming every difference, when a label or a file there is not the listed one.

``ic15_dev``: ``ic15_train`` ``IMG/word_4001.png`` .. ``IMG/word_4468.png`` (the last 468 of its 4,468 crops, numbered
in photograph order, so few words straddle the split), listed the same way in ``crnn/data/ic15_dev.tsv``;
``IMG/word_1.png`` .. ``IMG/word_4000.png`` may be trained on, and the ICDAR 2015 test split stays held out. All its
labels are printable ASCII. Four labels of ``ic15_train`` are not (:data:`IC15_NON_ASCII`: an acute accent standing
for the apostrophe, and a capital E acute); all four are on the trainable side and are written as published: a
printable-ASCII alphabet (``model.unknown: reject``, the default) drops those crops when it opens the folder, counted
as ``unknown_char`` in its log line.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

LIST_FILE = Path(__file__).with_name("en_dev.tsv")
IC15_LIST_FILE = Path(__file__).with_name("ic15_dev.tsv")
DEFAULT_OUT = Path("data") / "en_dev"
IC15_OUT = Path("data") / "ic15_dev"
TRAINABLE_OUT = Path("data") / "en_real_train"
FOLDERS = ("svt_train", "iiit5k_train")
IIIT5K_DEV = range(1001, 2001)  # iiit5k_train IMG/N.jpg with N in here is development; below 1001 may be trained on
IC15_DEV = range(4001, 4469)  # ic15_train IMG/word_N.png with N in here is development; below 4001 may be trained on
EXPECTED = {"svt_train": 257, "iiit5k_train": len(IIIT5K_DEV), "ic15_train": len(IC15_DEV)}
# the ic15_train labels outside printable ASCII, all trainable (N < 4001): kept as published, so that a printable-ASCII
# alphabet drops these crops when it loads them (model.unknown: reject) rather than learn a guessed spelling
IC15_NON_ASCII = {"IMG/word_1115.png": "WE\u00b4RE", "IMG/word_1360.png": "It\u00b4s",
                  "IMG/word_1409.png": "CAF\u00c9", "IMG/word_1550.png": "World\u00b4s"}
HASH_HEX = 16  # digits of the SHA-256 kept in the list


@dataclass(frozen=True)
class DevSet:
    """A development set: its list file, the shared folders it is cut from and the folder it is built into."""

    list_file: Path
    folders: tuple[str, ...]
    out: Path


SETS = {"en_dev": DevSet(LIST_FILE, FOLDERS, DEFAULT_OUT),
        "ic15_dev": DevSet(IC15_LIST_FILE, ("ic15_train",), IC15_OUT)}


class DevSetError(ValueError):
    """The shared crops are absent or are not the listed ones (a one-line message)."""


@dataclass(frozen=True)
class Crop:
    """One crop of the development set: its shared folder, the image's path inside it, its label, its file's hash."""

    folder: str
    image: str
    label: str
    sha256: str

    @property
    def rel(self) -> str:
        """Its path inside the built set (``FOLDER/IMAGE``), as gt.txt names it."""
        return f"{self.folder}/{self.image}"


def is_dev(folder: str, image: str) -> bool:
    """Whether the shared crop ``folder/image`` belongs to the development set (the rule the list was made by)."""
    if folder == "svt_train":
        return True
    stem = Path(image).stem
    if folder == "iiit5k_train":
        return stem.isdigit() and int(stem) in IIIT5K_DEV
    number = stem.removeprefix("word_")
    return folder == "ic15_train" and number != stem and number.isdigit() and int(number) in IC15_DEV


def file_hash(path: str | os.PathLike) -> str:
    """The first HASH_HEX hex digits of a file's SHA-256."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:HASH_HEX]


def dev_crops(list_file: str | os.PathLike = LIST_FILE) -> list[Crop]:
    """The listed crops, in the list's order (en_dev: svt_train, then iiit5k_train by number; ic15_dev by number)."""
    lines = Path(list_file).read_text(encoding="utf-8").split("\n")
    if lines[0] != "folder\timage\tlabel\tsha256":
        raise DevSetError(f"{list_file}: expected the header 'folder<TAB>image<TAB>label<TAB>sha256'")
    return [Crop(*ln.split("\t")) for ln in lines[1:] if ln]


def read_gt(folder: Path) -> dict[str, str]:
    """image -> label of a shared folder's gt.txt (``IMG/N.jpg<TAB>label`` lines)."""
    out = {}
    for ln in (folder / "gt.txt").read_text(encoding="utf-8").splitlines():
        if ln:
            image, _, label = ln.partition("\t")
            out[image] = label
    return out


def check_shared(shared: Path, crops: list[Crop]) -> None:
    """DevSetError unless every listed crop is in ``shared`` with the listed label and file (all differences named,
    the first five in full)."""
    folders = list(dict.fromkeys(c.folder for c in crops))
    missing = [f for f in folders if not (shared / f / "gt.txt").is_file()]
    if missing:
        raise DevSetError(f"the real crops are not in {shared} (no {', '.join(f + '/gt.txt' for f in missing)}): set "
                          f"CRNN_SHARED_DATA to the folder that holds {' and '.join(f + '/' for f in folders)}")
    gts = {f: read_gt(shared / f) for f in folders}
    wrong = []
    for c in crops:
        path = shared / c.folder / c.image
        if c.image not in gts[c.folder]:
            wrong.append(f"{c.rel}: not in its gt.txt")
        elif gts[c.folder][c.image] != c.label:
            wrong.append(f"{c.rel}: label {gts[c.folder][c.image]!r}, listed {c.label!r}")
        elif not path.is_file():
            wrong.append(f"{c.rel}: no such file")
        elif file_hash(path) != c.sha256:
            wrong.append(f"{c.rel}: the file is not the listed one (sha256 {file_hash(path)}, listed {c.sha256})")
    if wrong:
        raise DevSetError(f"{shared} is not the shared folder the development set was listed from: {len(wrong)} of "
                          f"{len(crops)} crops differ ({'; '.join(wrong[:5])}{'; ...' if len(wrong) > 5 else ''})")


def build_en_dev(out: str | os.PathLike = DEFAULT_OUT, shared: str | os.PathLike | None = None,
                 force: bool = False, list_file: str | os.PathLike = LIST_FILE) -> Path:
    """Write the development set of ``list_file`` (named by its stem) to ``out`` (a folder: gt.txt, the crops under
    their shared folders' names, and manifest.json) from the shared crops (default:
    :func:`crnn.shared_data.shared_data_dir`); an ``out`` built from the same list is kept unless ``force``.
    DevSetError when the crops are absent or differ from the list."""
    from crnn.shared_data import shared_data_dir

    out = Path(out)
    crops = dev_crops(list_file)
    manifest = {"set": Path(list_file).stem, "list_sha256": file_hash(list_file), "crops": len(crops)}
    done = out / "manifest.json"
    if not force and done.is_file() and json.loads(done.read_text(encoding="utf-8")) == manifest:
        return out
    src = Path(shared) if shared is not None else shared_data_dir()
    check_shared(src, crops)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for c in crops:
        (tmp / c.rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / c.folder / c.image, tmp / c.rel)
    (tmp / "gt.txt").write_text("".join(f"{c.rel}\t{c.label}\n" for c in crops), encoding="utf-8")
    (tmp / "manifest.json").write_text(json.dumps(manifest) + "\n", encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


def build_trainable(out: str | os.PathLike = TRAINABLE_OUT, shared: str | os.PathLike | None = None,
                    list_file: str | os.PathLike | None = None, sources: tuple[str, ...] = FOLDERS) -> Path:
    """Write the real crops that may be trained on - every crop of the ``sources`` shared folders that :func:`is_dev`
    leaves out (by default ``iiit5k_train`` ``IMG/1.jpg`` .. ``IMG/1000.jpg``; ``("ic15_train",)``:
    ``IMG/word_1.png`` .. ``IMG/word_4000.png``) - to ``out`` (gt.txt and the crops; rebuilt each call, atomically).
    The check of each development set cut from those folders runs first (only ``list_file``'s when given), so a
    changed shared folder is refused here too."""
    from crnn.shared_data import shared_data_dir

    unruled = [f for f in sources if f not in EXPECTED]
    if unruled:
        raise DevSetError(f"{', '.join(unruled)}: no development rule for this folder; the sources are "
                          f"{', '.join(EXPECTED)}")
    src = Path(shared) if shared is not None else shared_data_dir()
    cut = [d.list_file for d in SETS.values() if set(d.folders) & set(sources)]
    for listed in [list_file] if list_file is not None else cut:
        check_shared(src, dev_crops(listed))
    keep = [(f, image, label) for f in sources for image, label in read_gt(src / f).items() if not is_dev(f, image)]
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for f, image, _ in keep:
        (tmp / f / image).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / f / image, tmp / f / image)
    (tmp / "gt.txt").write_text("".join(f"{f}/{image}\t{label}\n" for f, image, label in keep), encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


def main(argv: list[str] | None = None) -> int:
    """Build the development sets; one line on stderr and exit 1 when the shared crops are absent or differ."""
    p = argparse.ArgumentParser(prog="python -m crnn.data.en_dev", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--set", choices=[*SETS, "all"], default="all",
                   help="the development set to build (default all: en_dev and ic15_dev, each in its own folder)")
    p.add_argument("--out", default=None, help="the folder to write, with one --set (default "
                   f"{', '.join(f'{d.out} for {name}' for name, d in SETS.items())})")
    p.add_argument("--shared", default=None, help="the folder holding svt_train/, iiit5k_train/ and ic15_train/ "
                   "(default: $CRNN_SHARED_DATA, else ../shared/data beside the repository)")
    p.add_argument("--force", action="store_true", help="rebuild even when OUT was built from the same list")
    p.add_argument("--trainable", metavar="DIR", help="write the crops that may be trained on (iiit5k_train "
                   "IMG/1-1000 unless --source says otherwise) to DIR instead, for data.synth_real")
    p.add_argument("--source", action="append", choices=list(EXPECTED), help="with --trainable: a shared folder to "
                   "take them from, repeatable (default svt_train and iiit5k_train; ic15_train: IMG/word_1-4000)")
    args = p.parse_args(argv)
    if args.out and args.set == "all" and not args.trainable:
        p.error("--out names one set's folder: add --set " + " or --set ".join(SETS))
    try:
        if args.trainable:
            out = build_trainable(args.trainable, args.shared, sources=tuple(args.source or FOLDERS))
            print(f"{out}: {sum(1 for _ in open(out / 'gt.txt', encoding='utf-8'))} crops that may be trained on")
            return 0
        for name, d in SETS.items():
            if args.set in (name, "all"):
                out = build_en_dev(args.out or d.out, args.shared, args.force, d.list_file)
                print(f"{out}: {len(dev_crops(d.list_file))} crops (gt.txt)")
    except DevSetError as e:
        print(f"en_dev: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
