"""Hand-written inline SVG bar charts for the evaluation report (no plotting library)."""
from __future__ import annotations

from collections.abc import Sequence
from html import escape

from crnn.report.analysis import Bin

W, H = 290, 220  # chart size in px (a chart with many bins or a long title is wider: chart_width)
LEFT, RIGHT, TOP, BOTTOM = 44, 10, 30, 60  # plot margins: y labels, title, x labels + counts
MIN_SLOT = 22  # px per bar, at least
TITLE_PX, LABEL_PX = 7.5, 6.5  # about what one character of the 13 px bold title / a 12 px label takes


def chart_width(title: str, bins: int, x_title: str = "") -> int:
    """Wide enough for ``bins`` bars of MIN_SLOT px and for the whole title and axis title, and never below W."""
    return max(W, LEFT + RIGHT + MIN_SLOT * bins, round(len(title) * TITLE_PX) + 20,
               round(len(x_title) * LABEL_PX) + 20)


def bar_chart(title: str, bins: Sequence[Bin], *, x_title: str, rate: str = "accuracy",
              diagonal: bool = False, shares: bool = False) -> str:
    """Bars of each bin's accuracy (``rate="error"``: 1 - accuracy) on a 0-1 axis with the bin sizes below.

    ``diagonal``: the perfect-calibration line (bin b sits at confidence (b + 0.5) / len(bins)). ``shares``: a thin
    grey bar beside each bar with the bin's share of all samples.
    """
    width = chart_width(title, len(bins), x_title)
    pw, ph = width - LEFT - RIGHT, H - TOP - BOTTOM
    total = sum(b.n for b in bins) or 1
    slot = pw / max(len(bins), 1)
    parts = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{H}" '
             f'viewBox="0 0 {width} {H}" role="img" aria-label="{escape(title)}">',
             f'<text x="{width / 2:.0f}" y="18" class="ct">{escape(title)}</text>']
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        y = TOP + ph * (1 - tick)
        parts.append(f'<line x1="{LEFT}" x2="{width - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                     f'<text x="{LEFT - 4}" y="{y + 4:.1f}" class="yl">{tick:.0%}</text>')
    for i, b in enumerate(bins):
        value = b.accuracy if rate == "accuracy" else 1 - b.accuracy
        x0 = LEFT + i * slot
        bw = slot * (0.55 if shares else 0.75)
        bh = ph * value if b.n else 0
        tip = f"{b.label}: {value:.1%} {rate} ({b.correct} of {b.n} right)"
        parts.append(f'<rect x="{x0 + slot * 0.1:.1f}" y="{TOP + ph - bh:.1f}" width="{bw:.1f}" height="{bh:.1f}" '
                     f'class="bar {rate}"><title>{escape(tip)}</title></rect>')
        if shares:
            sh = ph * b.n / total
            parts.append(f'<rect x="{x0 + slot * 0.68:.1f}" y="{TOP + ph - sh:.1f}" width="{slot * 0.22:.1f}" '
                         f'height="{sh:.1f}" class="share"><title>{escape(b.label)}: {b.n / total:.1%} of the '
                         f'images</title></rect>')
        cx = x0 + slot / 2
        parts.append(f'<text x="{cx:.1f}" y="{TOP + ph + 13}" class="xl" '
                     f'transform="rotate(-35 {cx:.1f} {TOP + ph + 13})">{escape(b.label)}</text>')
        if b.n and slot >= 14:  # bin sizes where they fit (the tooltip always has them)
            bar_cx = x0 + slot * 0.1 + bw / 2
            parts.append(f'<text x="{bar_cx:.1f}" y="{TOP + ph - bh - 3:.1f}" class="n">{b.n}</text>')
    if diagonal and bins:
        parts.append(f'<line x1="{LEFT}" y1="{TOP + ph}" x2="{width - RIGHT}" y2="{TOP}" class="diag"/>')
    parts.append(f'<text x="{width / 2:.0f}" y="{H - 4}" class="xt">{escape(x_title)}</text></svg>')
    return "".join(parts)


CHART_CSS = """
svg.chart { background: #fff; border: 1px solid #ddd; border-radius: 4px; margin: 0 10px 10px 0; }
svg.chart text { font-size: 12px; fill: #333; }
svg.chart .ct { font-size: 13px; font-weight: bold; text-anchor: middle; }
svg.chart .xt { text-anchor: middle; fill: #666; }
svg.chart .yl { text-anchor: end; fill: #666; }
svg.chart .xl { text-anchor: end; }
svg.chart .n { text-anchor: middle; fill: #555; font-size: 10px; }
svg.chart .grid { stroke: #eee; }
svg.chart .bar.accuracy { fill: #4a8fd4; }
svg.chart .bar.error { fill: #d9534f; }
svg.chart .share { fill: #bbb; }
svg.chart .diag { stroke: #f0ad4e; stroke-width: 1.5; stroke-dasharray: 4 3; }
"""
