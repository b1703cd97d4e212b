"""Other readers beside the evaluated model on crnn-eval's own datasets (``crnn-eval --against``, a second
``--weights``): each reads every image of every dataset one per call and is scored under the evaluation's protocol.

An image the dataset cannot decode is left out, as crnn-eval leaves it out; an image a reader raises on reads as ""
(wrong) and is listed with its index and error.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from crnn.yardstick.readers import PeerMissing, Reader, ours, peer
from crnn.yardstick.run import read_sets, score


@dataclass
class Against:
    """One other reader's results on the evaluated datasets: scores per dataset and pooled, its readings by image
    index (for the report), the images it raised on, or why it did not run."""

    name: str
    how: str = ""
    rows: list[dict] = field(default_factory=list)  # per dataset: path, samples, word_acc, cer, ned_similarity, failed
    overall: dict = field(default_factory=dict)
    readings: list[dict[int, str]] = field(default_factory=list)  # per dataset: image index -> text
    skipped: str = ""

    def as_dict(self) -> dict:
        """What crnn-eval's JSON holds for this reader (no per-image readings)."""
        if self.skipped:
            return {"name": self.name, "skipped": self.skipped}
        return {"name": self.name, "how": self.how, "datasets": self.rows, "overall": self.overall}


def make_readers(peers: Sequence[str], weights: Sequence[str], amp: str = "off", threads: int = 2,
                 device: str = "cpu") -> list[Reader | Against]:
    """A reader per ``--against`` name and per further ``--weights``, in that order after the weights; a peer whose
    package is missing becomes a skipped :class:`Against` (the others still run). ValueError for an unknown name;
    the loading errors of a checkpoint as they come."""
    out: list[Reader | Against] = [ours(w, amp, device=device) for w in weights]
    for name in peers:
        try:
            out.append(peer(name, threads))
        except PeerMissing as e:
            out.append(Against(name, skipped=str(e)))
    return out


def labelled_images(path: str) -> tuple[list[int], list, list[str]]:
    """(indices, PIL images, labels) of the decodable images of a dataset, in dataset order."""
    from crnn.data.datasets import open_dataset

    dataset = open_dataset(path, charset=None)
    indices, images, labels = [], [], []
    for i in range(len(dataset)):
        img, label = dataset[i]
        if img is not None:
            indices.append(i)
            images.append(img)
            labels.append(label)
    return indices, images, labels


def compare(paths: Sequence[str], readers: Sequence[Reader | Against], protocol: str,
            progress: Callable[[str], None] | None = None) -> list[Against]:
    """Every reader on every dataset, scored under ``protocol`` (already resolved: the evaluated model's)."""
    data = {p: labelled_images(p) for p in paths}
    out = []
    for reader in readers:
        if isinstance(reader, Against):  # skipped already
            out.append(reader)
            continue
        if progress:
            progress(f"reading with {reader.name} ...")
        col = read_sets(reader, {p: images for p, (_, images, _) in data.items()})
        res = Against(reader.name, reader.how)
        preds_all, labels_all = [], []
        for p, (indices, _, labels) in data.items():
            preds = col.readings[p]
            row = {"path": p, **_scores(preds, labels, protocol),
                   "failed": [{"index": indices[i], "error": e} for i, e in col.failures[p]]}
            res.rows.append(row)
            res.readings.append(dict(zip(indices, preds)))
            preds_all += preds
            labels_all += labels
        res.overall = {"path": "overall", **_scores(preds_all, labels_all, protocol)}
        out.append(res)
    return out


def _scores(preds: list[str], labels: list[str], protocol: str) -> dict:
    m = score(preds, labels, protocol)
    return {"samples": int(m["samples"]), "word_acc": m["word_acc"], "cer": m["cer"],
            "ned_similarity": m["ned_similarity"]}


def print_against(summary: dict, out: TextIO) -> None:
    """The comparison crnn-eval prints after its table: per dataset (and pooled), one line per system, the
    evaluated model first; then the systems that did not run and the images a reader raised on."""
    from crnn.metrics import ljust_display

    systems = [(summary["weights"], summary["datasets"] + [summary["overall"]])]
    systems += [(a["name"], a["datasets"] + [a["overall"]]) for a in summary["against"] if "skipped" not in a]
    width = max(len(name) for name, _ in systems)
    out.write(f"\nbeside {summary['weights']} on the same images (protocol {summary['protocol']}):\n"
              f"{'dataset':<{max(len(r['path']) for r in systems[0][1])}}  {'system':<{width}}  {'samples':>8}  "
              f"{'word_acc':>8}  {'CER':>7}  {'1-NED':>7}\n")
    pad = max(len(r["path"]) for r in systems[0][1])
    for k in range(len(systems[0][1])):
        for name, rows in systems:
            r = rows[k]
            out.write(f"{r['path'] if name == systems[0][0] else '':<{pad}}  {ljust_display(name, width)}  "
                      f"{r['samples']:>8d}  {r['word_acc']:>8.4f}  {r['cer']:>7.4f}  {r['ned_similarity']:>7.4f}\n")
    for a in summary["against"]:
        if "skipped" in a:
            out.write(f"{a['name']}: not run: {a['skipped']}\n")
            continue
        for r in a["datasets"]:
            for f in r["failed"]:
                out.write(f"{a['name']} could not read image #{f['index']} of {r['path']} (counted wrong): "
                          f"{f['error']}\n")
