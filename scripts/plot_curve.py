"""Learning curves as a picture: validation CER against CPU-hours and against lines seen, one line per run.

    python scripts/plot_curve.py weights/crnn_zh_lines_curve.tsv=CPU_recipe \\
        benchmarks/zh_curves/baseline_w4.tsv=today --out weights/crnn_zh_lines_curve.png
    python scripts/plot_curve.py runs/zh/curve.tsv --set data/zh_bench/heldout --target 0.03
    python scripts/plot_curve.py runs/zh/curve.tsv@heldout=damaged runs/zh/curve.tsv@unseen_print=print --target 0.01

Each argument is a curve.tsv that crnn-train writes beside its checkpoints (crnn/engine/curve.py), optionally
``@SET`` for the validation set of that line and ``=NAME`` for the legend. ``--set`` picks the validation set of the
lines without ``@SET`` (default: each file's first); a set is its path in the curve or the folder's name. The CER
axis is logarithmic; ``--target`` draws a dashed line at a goal. Drawn with Pillow, no plotting library.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crnn.engine.curve import read_curve  # noqa: E402

COLOURS = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (148, 103, 189), (255, 127, 14)]
PANEL_W, PANEL_H, MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 520, 360, 64, 16, 40, 56


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


def load(spec: str, wanted: str | None) -> tuple[str, list[tuple[float, float, float]]]:
    """(name, [(cpu_hours, million lines seen, cer)]) of one ``PATH[@SET][=NAME]``; ``wanted``: the set when the
    spec names none (None: the file's first)."""
    path, own, name = split_spec(spec)
    rows = read_curve(path)
    if not rows:
        raise ValueError(f"{path}: no rows")
    use = own or wanted or rows[0]["set"]
    pts = [(float(r["cpu_seconds"]) / 3600, int(r["lines_seen"]) / 1e6, float(r["cer"])) for r in rows
           if r["set"] == use or Path(r["set"]).name == use]
    if not pts:
        raise ValueError(f"{path}: no rows for set {use!r} (sets: {sorted({r['set'] for r in rows})})")
    return name or Path(path).parent.name, sorted(pts)


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


def panel(draw: ImageDraw.ImageDraw, x0: int, curves, axis: int, title: str, xlabel: str, lo: float, hi: float,
          target: float | None) -> None:
    """One panel: CER (log) against column ``axis`` of the points."""
    f, small = _font(15), _font(12)
    pw, ph = PANEL_W - MARGIN_L - MARGIN_R, PANEL_H - MARGIN_T - MARGIN_B
    left, top = x0 + MARGIN_L, MARGIN_T
    xmax = max(p[axis] for _, pts in curves for p in pts) * 1.05 or 1.0

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
        for xs in range(int(left), int(left + pw), 12):
            draw.line([(xs, y), (min(xs + 6, left + pw), y)], fill=(90, 90, 90), width=2)
        draw.text((left + pw - 4, y + 3), f"goal {target * 100:g} %", fill=(90, 90, 90), font=small, anchor="rt")
    for i, (name, pts) in enumerate(curves):
        colour = COLOURS[i % len(COLOURS)]
        line = [xy(p[axis], p[2]) for p in pts]
        if len(line) > 1:
            draw.line(line, fill=colour, width=2)
        for x, y in line:
            draw.ellipse([x - 2, y - 2, x + 2, y + 2], fill=colour)


def plot(curves, out: Path, target: float | None, set_name: str) -> Path:
    """Two panels side by side (CPU-hours, lines seen) with a legend underneath; PNG at ``out``."""
    cers = [p[2] for _, pts in curves for p in pts if p[2] > 0]
    # a decade below the lowest point or goal once it comes within 2x of a decade line, so neither sits on the frame
    lo = 10 ** math.floor(math.log10(min(cers + ([target] if target else [])) / 2 or 1e-3))
    hi = 1.0
    legend_h = 22 * len(curves) + 12
    img = Image.new("RGB", (2 * PANEL_W, PANEL_H + legend_h), "white")
    draw = ImageDraw.Draw(img)
    panel(draw, 0, curves, 0, f"CER on {set_name} vs cost", "CPU-hours (all processes)", lo, hi, target)
    panel(draw, PANEL_W, curves, 1, f"CER on {set_name} vs data", "million lines seen", lo, hi, target)
    f = _font(13)
    for i, (name, pts) in enumerate(curves):
        y = PANEL_H + 8 + 22 * i
        colour = COLOURS[i % len(COLOURS)]
        draw.line([(MARGIN_L, y + 8), (MARGIN_L + 30, y + 8)], fill=colour, width=3)
        last = pts[-1]
        draw.text((MARGIN_L + 38, y), f"{name}: CER {last[2] * 100:.2f} % after {last[1]:.2f} M lines, "
                  f"{last[0]:.2f} CPU-hours", fill="black", font=f)
    out.parent.mkdir(parents=True, exist_ok=True)
    img.save(out)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("curves", nargs="+", metavar="CURVE_TSV[@SET][=NAME]")
    p.add_argument("--set", help="validation set (its path in the curve, or the folder's name)")
    p.add_argument("--target", type=float, help="a goal CER to draw (e.g. 0.03)")
    p.add_argument("--out", default="curve.png")
    args = p.parse_args(argv)
    try:
        curves = [load(c, args.set) for c in args.curves]
    except (OSError, ValueError, KeyError) as e:
        print(f"plot_curve: error: {e}", file=sys.stderr)
        return 1
    own = {split_spec(c)[1] for c in args.curves} - {None}
    if own:  # lines of several sets: the legend names them
        name = "validation sets" if len(own) > 1 or len(own) < len(args.curves) else Path(own.pop()).name
    else:
        name = args.set or Path(read_curve(split_spec(args.curves[0])[0])[0]["set"]).name
    print(f"wrote {plot(curves, Path(args.out), args.target, name)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
