"""The English real development set (issue 44): 1,257 photographed word crops, fixed before any English model of
printable ASCII is trained, and never trained on.

    python -m crnn.data.en_dev                       # writes data/en_dev/ (gt.txt + the crops) from the shared crops
    python -m crnn.data.en_dev --out DIR --force     # elsewhere / rebuild
    python -m crnn.data.en_dev --trainable data/en_real_train   # the crops that may be trained on (below)
    crnn-eval --weights en --data data/en_dev        # then read it like any folder with gt.txt (data.val too)

Which crops: all 257 of ``svt_train`` and ``iiit5k_train`` ``IMG/1001.jpg`` .. ``IMG/2000.jpg`` (1,000: a contiguous
block, so words cut from one photograph rarely straddle the split). ``iiit5k_train`` ``IMG/1.jpg`` .. ``IMG/1000.jpg``
may be trained on; the test splits of IIIT5K, SVT, SVTP and CUTE80 stay the held-out yardstick and are not here.
The list, with each crop's case-sensitive label and the first 16 hex digits of the SHA-256 of its file, is
``crnn/data/en_dev.tsv`` (columns ``folder``, ``image``, ``label``, ``sha256``). The crops themselves are not
redistributed: the builder copies them from the shared folder (:mod:`crnn.shared_data`, ``$CRNN_SHARED_DATA``) and
refuses, naming every difference, when a label or a file there is not the listed one.
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
DEFAULT_OUT = Path("data") / "en_dev"
TRAINABLE_OUT = Path("data") / "en_real_train"
FOLDERS = ("svt_train", "iiit5k_train")
IIIT5K_DEV = range(1001, 2001)  # iiit5k_train IMG/N.jpg with N in here is development; below 1001 may be trained on
EXPECTED = {"svt_train": 257, "iiit5k_train": len(IIIT5K_DEV)}
HASH_HEX = 16  # digits of the SHA-256 kept in the list


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
    return folder == "iiit5k_train" and stem.isdigit() and int(stem) in IIIT5K_DEV


def file_hash(path: str | os.PathLike) -> str:
    """The first HASH_HEX hex digits of a file's SHA-256."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:HASH_HEX]


def dev_crops(list_file: str | os.PathLike = LIST_FILE) -> list[Crop]:
    """The listed crops, in the list's order (svt_train, then iiit5k_train by number)."""
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
    missing = [f for f in FOLDERS if not (shared / f / "gt.txt").is_file()]
    if missing:
        raise DevSetError(f"the real crops are not in {shared} (no {', '.join(f + '/gt.txt' for f in missing)}): set "
                          f"CRNN_SHARED_DATA to the folder that holds svt_train/ and iiit5k_train/")
    gts = {f: read_gt(shared / f) for f in FOLDERS}
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
    """Write the development set to ``out`` (a folder: gt.txt, the crops under svt_train/ and iiit5k_train/, and
    manifest.json) from the shared crops (default: :func:`crnn.shared_data.shared_data_dir`); an ``out`` built from
    the same list is kept unless ``force``. DevSetError when the crops are absent or differ from the list."""
    from crnn.shared_data import shared_data_dir

    out = Path(out)
    crops = dev_crops(list_file)
    manifest = {"set": "en_dev", "list_sha256": file_hash(list_file), "crops": len(crops)}
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
                    list_file: str | os.PathLike = LIST_FILE) -> Path:
    """Write the real crops that may be trained on - every crop of the shared folders that :func:`is_dev` leaves out
    (``iiit5k_train`` ``IMG/1.jpg`` .. ``IMG/1000.jpg``) - to ``out`` (gt.txt and the crops; rebuilt each call,
    atomically). The development set's own check runs first, so a changed shared folder is refused here too."""
    from crnn.shared_data import shared_data_dir

    src = Path(shared) if shared is not None else shared_data_dir()
    check_shared(src, dev_crops(list_file))
    keep = [(f, image, label) for f in FOLDERS for image, label in read_gt(src / f).items() if not is_dev(f, image)]
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
    """Build the development set; one line on stderr and exit 1 when the shared crops are absent or differ."""
    p = argparse.ArgumentParser(prog="python -m crnn.data.en_dev", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(DEFAULT_OUT), help=f"the folder to write (default {DEFAULT_OUT})")
    p.add_argument("--shared", default=None, help="the folder holding svt_train/ and iiit5k_train/ (default: "
                   "$CRNN_SHARED_DATA, else ../shared/data beside the repository)")
    p.add_argument("--force", action="store_true", help="rebuild even when OUT was built from the same list")
    p.add_argument("--trainable", metavar="DIR", help="write the crops that may be trained on (iiit5k_train "
                   "IMG/1-1000) to DIR instead, for data.synth_real")
    args = p.parse_args(argv)
    try:
        if args.trainable:
            out = build_trainable(args.trainable, args.shared)
            print(f"{out}: {sum(1 for _ in open(out / 'gt.txt', encoding='utf-8'))} crops that may be trained on")
            return 0
        out = build_en_dev(args.out, args.shared, args.force)
    except DevSetError as e:
        print(f"en_dev: error: {e}", file=sys.stderr)
        return 1
    print(f"{out}: {len(dev_crops())} crops (gt.txt)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
