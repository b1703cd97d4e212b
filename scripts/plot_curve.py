"""Learning curves as a picture: validation CER against CPU-hours and against lines seen, one line per run.

    python scripts/plot_curve.py weights/crnn_zh_lines_curve.tsv=CPU_recipe \\
        benchmarks/zh_curves/baseline_w4.tsv=today --out weights/crnn_zh_lines_curve.png
    python scripts/plot_curve.py runs/zh/curve.tsv --set data/zh_bench/heldout --target 0.03
    python scripts/plot_curve.py runs/zh/curve.tsv@heldout=damaged runs/zh/curve.tsv@unseen_print=print --target 0.01
    python scripts/plot_curve.py runs/en/curve.tsv@data/en_dev=exact \\
        runs/en/curve.tsv@data/en_dev@alnum-insensitive=36-class runs/en/curve.tsv@data/ic15_dev=ic15_dev \\
        --skip-missing   # a set the curve has no rows for yet (ic15_dev in an older curve): left out

Each argument is a curve.tsv that crnn-train writes beside its checkpoints (crnn/engine/curve.py), optionally
``@SET`` for the validation set of that line and ``=NAME`` for the legend. ``--set`` picks the validation set of the
lines without ``@SET`` (default: each file's first); a set is its path in the curve or the folder's name. A set the
curve lacks is an error, unless ``--skip-missing``: then those lines are left out with one note on stderr (an error
only when no line is left). Each set of each file has a colour of its own; a ``SET@PROTOCOL`` row (the same readings
under another protocol, ``train.extra_protocols``) is drawn dashed in its set's colour. The CER axis is logarithmic;
``--target`` draws a dashed grey line at a goal. Drawn with Pillow, no plotting library.
"""
from __future__ import annotations

import argparse
import math
import sys
from typing import NamedTuple
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crnn.engine.curve import read_curve  # noqa: E402

COLOURS = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (148, 103, 189), (255, 127, 14)]
PANEL_W, PANEL_H, MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 520, 360, 64, 16, 40, 56
DASH = (10, 6)  # a protocol row's dashes: px drawn, px left out


class MissingSet(ValueError):
    """A curve has no rows for the set a line asks for."""

    def __init__(self, path: str, use: str, sets: list[str]) -> None:
        super().__init__(f"{path}: no rows for set {use!r} (sets: {sets})")
        self.path, self.set = path, use


class Line(NamedTuple):  # not a dataclass: tests load this script without registering it in sys.modules
    """One line of the picture: its legend name, points (cpu_hours, million lines seen, cer), the curve's set they
    are of, and its style."""

    name: str
    pts: list[tuple[float, float, float]]
    set: str
    colour: tuple[int, int, int] = COLOURS[0]
    dashed: bool = False


def split_spec(spec: str) -> tuple[str, str | None, str]:
    """``PATH[@SET][=NAME]`` -> (path, set or None, name or ""); an existing file named with an @ stays whole, and a
    set may hold an @ itself (``curve.tsv@data/en_dev@alnum-insensitive``: a train.extra_protocols row)."""
    path, _, name = spec.partition("=")
    if "@" in path and not Path(path).is_file():
        for i in (i for i, c in enumerate(path) if c == "@"):
            if Path(path[:i]).is_file():
                return path[:i], path[i + 1:], name
        path, _, own = path.rpartition("@")
        return path, own, name
    return path, None, name


def _points(spec: str, wanted: str | None) -> tuple[str, str, str, list[tuple[float, float, float]]]:
    """(path, set, legend name, points) of one ``PATH[@SET][=NAME]``; MissingSet when the file lacks the set."""
    path, own, name = split_spec(spec)
    rows = read_curve(path)
    if not rows:
        raise ValueError(f"{path}: no rows")
    use = own or wanted or rows[0]["set"]
    pts = [(float(r["cpu_seconds"]) / 3600, int(r["lines_seen"]) / 1e6, float(r["cer"])) for r in rows
           if r["set"] == use or Path(r["set"]).name == use]
    if not pts:
        raise MissingSet(path, use, sorted({r["set"] for r in rows}))
    return path, use, name or Path(path).parent.name, sorted(pts)


def load(spec: str, wanted: str | None) -> tuple[str, list[tuple[float, float, float]]]:
    """(name, [(cpu_hours, million lines seen, cer)]) of one ``PATH[@SET][=NAME]``; ``wanted``: the set when the
    spec names none (None: the file's first)."""
    _, _, name, pts = _points(spec, wanted)
    return name, pts


def set_and_protocol(use: str) -> tuple[str, str]:
    """A curve's set as (folder name, protocol or ""): ``data/en_dev@alnum-insensitive`` -> ("en_dev",
    "alnum-insensitive")."""
    base, _, protocol = Path(use).name.partition("@")
    return base, protocol


def plan(specs: list[str], wanted: str | None = None, skip_missing: bool = False
         ) -> tuple[list[Line], list[MissingSet]]:
    """The lines to draw, styled (a colour per set of a file, dashed for a ``SET@PROTOCOL`` row), and the lines left
    out because their curve lacks the set (``skip_missing``; else MissingSet). MissingSet when none is left."""
    lines, left_out, colours = [], [], {}
    for spec in specs:
        try:
            path, use, name, pts = _points(spec, wanted)
        except MissingSet as e:
            if not skip_missing:
                raise
            left_out.append(e)
            continue
        base, protocol = set_and_protocol(use)
        colour = colours.setdefault((str(Path(path).resolve()), base), COLOURS[len(colours) % len(COLOURS)])
        lines.append(Line(name, pts, use, colour, bool(protocol)))
    if not lines:
        raise left_out[0]
    return lines, left_out


def _font(size: int) -> ImageFont.ImageFont:
    for f in ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",):
        if Path(f).is_file():
            return ImageFont.truetype(f, size)
    return ImageFont.load_default()


def _nice_ticks(hi: float) -> list[float]:
    step = 10 ** math.floor(math.log10(hi / 4)) if hi > 0 else 1
    for m in (1, 2, 5, 10):
        if hi / (step * m) <= 6:
            step *= m
            break
    return [i * step for i in range(int(hi / step) + 1)]


def dashed(draw: ImageDraw.ImageDraw, pts: list[tuple[float, float]], fill, width: int,
           pattern: tuple[int, int] = DASH) -> None:
    """A polyline in dashes (``pattern``: px drawn, px left out), the pattern carried on across its corners."""
    on, off = pattern
    walked = 0.0  # along the whole polyline
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        seg = math.hypot(x1 - x0, y1 - y0)
        d = 0.0
        while d < seg:
            into = walked % (on + off)
            step = min((on if into < on else on + off) - into, seg - d)
            if into < on:
                a, b = d / seg, (d + step) / seg
                draw.line([(x0 + (x1 - x0) * a, y0 + (y1 - y0) * a), (x0 + (x1 - x0) * b, y0 + (y1 - y0) * b)],
                          fill=fill, width=width)
            d += step
            walked += step


def stroke(draw: ImageDraw.ImageDraw, line: Line, pts: list[tuple[float, float]], width: int = 2) -> None:
    """``pts`` in the line's colour, dashed or solid."""
    if len(pts) < 2:
        return
    if line.dashed:
        dashed(draw, pts, line.colour, width)
    else:
        draw.line(pts, fill=line.colour, width=width)


def panel(draw: ImageDraw.ImageDraw, x0: int, curves: list[Line], axis: int, title: str, xlabel: str, lo: float,
          hi: float, target: float | None) -> None:
    """One panel: CER (log) against column ``axis`` of the points."""
    f, small = _font(15), _font(12)
    pw, ph = PANEL_W - MARGIN_L - MARGIN_R, PANEL_H - MARGIN_T - MARGIN_B
    left, top = x0 + MARGIN_L, MARGIN_T
    xmax = max(p[axis] for c in curves for p in c.pts) * 1.05 or 1.0

    def xy(x: float, cer: float) -> tuple[float, float]:
        c = min(max(cer, lo), hi)
        return left + pw * x / xmax, top + ph * (math.log10(hi) - math.log10(c)) / (math.log10(hi) - math.log10(lo))

    draw.text((left + pw / 2, 12), title, fill="black", font=f, anchor="mt")
    decade = 10 ** math.floor(math.log10(lo))
    while decade <= hi:
        for m in (1, 2, 5):
            v = decade * m
            if lo <= v <= hi:
                y = xy(0, v)[1]
                draw.line([(left, y), (left + pw, y)], fill=(225, 225, 225) if m > 1 else (190, 190, 190))
                draw.text((left - 6, y), f"{v * 100:g} %", fill="black", font=small, anchor="rm")
        decade *= 10
    for t in _nice_ticks(xmax):
        x = xy(t, hi)[0]
        draw.line([(x, top + ph), (x, top + ph + 4)], fill="black")
        draw.text((x, top + ph + 6), f"{t:g}", fill="black", font=small, anchor="mt")
    draw.rectangle([left, top, left + pw, top + ph], outline="black")
    draw.text((left + pw / 2, top + ph + 26), xlabel, fill="black", font=small, anchor="mt")
    if target is not None and lo <= target <= hi:
        y = xy(0, target)[1]
        dashed(draw, [(left, y), (left + pw, y)], (90, 90, 90), 2, (6, 6))
        draw.text((left + pw - 4, y + 3), f"goal {target * 100:g} %", fill=(90, 90, 90), font=small, anchor="rt")
    for c in curves:
        line = [xy(p[axis], p[2]) for p in c.pts]
        stroke(draw, c, line)
        for x, y in line if not c.dashed or len(line) == 1 else []:  # dots would hide the dashes of a dense curve
            draw.ellipse([x - 2, y - 2, x + 2, y + 2], fill=c.colour)


def title_of(curves: list[Line]) -> str:
    """What the panels' titles say was read: the one set (folder name) all lines share, else "validation sets"."""
    bases = {set_and_protocol(c.set)[0] for c in curves}
    return bases.pop() if len(bases) == 1 else "validation sets"


def plot(curves: list[Line], out: Path, target: float | None, set_name: str) -> Path:
    """Two panels side by side (CPU-hours, lines seen) with a legend underneath; PNG at ``out``."""
    cers = [p[2] for c in curves for p in c.pts if p[2] > 0]
    # a decade below the lowest point or goal once it comes within 2x of a decade line, so neither sits on the frame
    lo = 10 ** math.floor(math.log10(min(cers + ([target] if target else [])) / 2 or 1e-3))
    hi = 1.0
    legend_h = 22 * len(curves) + 12
    img = Image.new("RGB", (2 * PANEL_W, PANEL_H + legend_h), "white")
    draw = ImageDraw.Draw(img)
    panel(draw, 0, curves, 0, f"CER on {set_name} vs cost", "CPU-hours (all processes)", lo, hi, target)
    panel(draw, PANEL_W, curves, 1, f"CER on {set_name} vs data", "million lines seen", lo, hi, target)
    f = _font(13)
    for i, c in enumerate(curves):
        y = PANEL_H + 8 + 22 * i
        stroke(draw, c, [(MARGIN_L, y + 8), (MARGIN_L + 30, y + 8)], width=3)
        last = c.pts[-1]
        draw.text((MARGIN_L + 38, y), f"{c.name}: CER {last[2] * 100:.2f} % after {last[1]:.2f} M lines, "
                  f"{last[0]:.2f} CPU-hours", fill="black", font=f)
    out.parent.mkdir(parents=True, exist_ok=True)
    img.save(out)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("curves", nargs="+", metavar="CURVE_TSV[@SET][=NAME]")
    p.add_argument("--set", help="validation set (its path in the curve, or the folder's name)")
    p.add_argument("--target", type=float, help="a goal CER to draw (e.g. 0.03)")
    p.add_argument("--skip-missing", action="store_true",
                   help="leave out, with one note, the lines whose set the curve has no rows for (e.g. a set added "
                        "to data.val since the curve began); an error only when no line is left")
    p.add_argument("--out", default="curve.png")
    args = p.parse_args(argv)
    try:
        curves, left_out = plan(args.curves, args.set, args.skip_missing)
    except (OSError, ValueError, KeyError) as e:
        print(f"plot_curve: error: {e}", file=sys.stderr)
        return 1
    if left_out:
        print(f"plot_curve: note: no rows yet for {'; '.join(f'{m.set} in {m.path}' for m in left_out)}: "
              f"{len(left_out)} line(s) left out", file=sys.stderr)
    print(f"wrote {plot(curves, Path(args.out), args.target, title_of(curves))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
