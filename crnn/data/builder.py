"""Build an LMDB from an image folder and a label file (``gt.txt`` or a foreign layout), validating every line."""
from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from crnn.data.datasets import DatasetError, decode_image
from crnn.data.label_files import JSON_FORMATS, LabelFormat
from crnn.data.lmdb_io import write_lmdb
from crnn.progress import track


@dataclass
class BadLine:
    """A ``gt.txt`` line (or a JSON label file's entry) that was not written, and why."""

    lineno: int
    reason: str


@dataclass
class BuildReport:
    """Outcome of :func:`build_lmdb`: good samples, bad lines, and how many were written."""

    gt: str
    good: int = 0
    bad: list[BadLine] = field(default_factory=list)
    written: int = 0
    unit: str = "line"  # what numbers the samples: line, or entry (a JSON label file's list or object)

    def bad_lines(self) -> list[str]:
        """Bad lines as ``gt.txt:LINE: reason`` strings (``labels.json: entry N: reason`` for JSON entries)."""
        if self.unit == "entry":
            return [f"{self.gt}: entry {b.lineno}: {b.reason}" for b in self.bad]
        return [f"{self.gt}:{b.lineno}: {b.reason}" for b in self.bad]

    def summary(self) -> str:
        """One-line summary."""
        out = f", wrote {self.written} samples" if self.written else ", nothing written"
        return f"{self.gt}: {self.good} good, {len(self.bad)} bad{out}"


class BuildAborted(DatasetError):
    """Nothing was written: no line was good, or ``strict`` was set and some were bad."""

    def __init__(self, message: str, report: BuildReport) -> None:
        super().__init__(message)
        self.report = report


def build_lmdb(images: str | os.PathLike, gt: str | os.PathLike, out: str | os.PathLike | None, *,
               overwrite: bool = False, strict: bool = False, progress: bool = False,
               fmt: LabelFormat | None = None) -> BuildReport:
    """Validate ``gt`` lines and their images under ``images``; write the good ones to ``out``.

    ``fmt`` is the label file layout (default: ``path<TAB>label`` in UTF-8). ``out=None`` only validates. Bad lines are recorded in the report, not written. When no line
    is good, or with ``strict`` any is bad, :class:`BuildAborted` is raised and nothing is written.
    """
    images, gt = os.fspath(images), os.fspath(gt)
    if not os.path.isdir(images):
        raise DatasetError(f"{images}: image folder not found; pass the folder that gt.txt paths are relative to")
    if not os.path.isfile(gt):
        raise DatasetError(f"{gt}: gt file not found; pass a file with 'relative/path<TAB>label' lines")
    if out is not None and os.path.lexists(out) and not overwrite:
        raise FileExistsError(f"{out} already exists; choose another output path or pass --overwrite")
    report = BuildReport(gt)
    samples = _valid_samples(images, gt, report, strict, progress, fmt or LabelFormat())
    if out is None:
        for _ in samples:
            pass
    else:
        report.written = write_lmdb(samples, out, overwrite=overwrite)
    return report


def _valid_samples(images: str, gt: str, report: BuildReport, strict: bool, progress: bool,
                   fmt: LabelFormat) -> Iterator[tuple[bytes, str]]:
    """Yield ``(image bytes, label)`` for good lines; record bad ones in ``report``."""
    if fmt.kind in JSON_FORMATS:
        report.unit, entries = fmt.entries(gt)
        checked = ((n, _check_sample(rel, label, images) if rel is not None else (None, label))
                   for n, rel, label in track(entries, desc="validate", unit=report.unit, enabled=progress))
    else:
        with open(gt, "rb") as f:
            lines = f.readlines()
        checked = ((lineno, _check_raw(raw, lineno, gt, images, fmt))
                   for lineno, raw in enumerate(track(lines, desc="validate", unit="line", enabled=progress), 1))
    for lineno, (sample, reason) in checked:
        if sample is not None:
            report.good += 1
            yield sample
        elif reason:
            report.bad.append(BadLine(lineno, reason))
    if strict and report.bad:
        raise BuildAborted(f"{gt}: {len(report.bad)} bad {report.unit}(s) and --strict given; nothing written",
                           report)
    if report.good == 0:
        raise BuildAborted(f"{gt}: no valid samples ({len(report.bad)} bad {report.unit}(s)); nothing written", report)


def _check_raw(raw: bytes, lineno: int, gt: str, images: str,
               fmt: LabelFormat) -> tuple[tuple[bytes, str] | None, str]:
    """Check one line: ``(sample, "")`` when good, ``(None, reason)`` when bad, ``(None, "")`` when blank."""
    try:
        rel, label = fmt.parse(raw, lineno, gt)
    except DatasetError as e:
        return None, str(e).split(f"{gt}:{lineno}: ", 1)[-1]
    return (None, "") if rel is None else _check_sample(rel, label, images)


def _check_sample(rel: str, label: str, images: str) -> tuple[tuple[bytes, str] | None, str]:
    """Check one labelled image: ``(sample, "")`` when good, ``(None, reason)`` when bad."""
    if not label:
        return None, f"empty label for {rel!r}"
    path = os.path.join(images, rel)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return None, f"cannot read image {rel!r} ({e.strerror or e})"
    if decode_image(data) is None:
        return None, f"image {rel!r} cannot be decoded (corrupt or not an image)"
    return (data, label), ""
