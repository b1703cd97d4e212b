"""Vertical text: characters stacked top to bottom (Chinese and Japanese signs, book spines, shop fronts).

CRNN reads a horizontal line left to right; a tall crop squeezed to 32 px high comes out as a few pixels of width and
a wrong answer with no error. :func:`is_vertical` says when a crop looks like a column of characters, and
:func:`stack_to_line` cuts such a column at the empty rows between its characters and lays the characters side by
side, upright, as a horizontal line (``crnn.Recognizer(..., vertical="stack")``, ``crnn-predict --vertical stack``).
Text turned sideways (Latin along a spine, read after a quarter turn of the head) is a rotation, not a stack
(``vertical="rotate"``: both quarter turns); ``vertical="auto"`` tries every way, and :func:`vertical_candidates`
lists them: the reader keeps the most confident reading.
"""
from __future__ import annotations

import numpy as np
from PIL import Image

VERTICAL_RATIO = 2.0  # a crop this many times taller than wide (or more) looks like a column of characters
# what to do with a tall crop: warn (read it as it is and say so), stack (lay its stacked characters side by side),
# rotate (a quarter turn each way: text running down or up the crop), auto (all of those ways), off (as it is); of
# several ways, the reader keeps the most confident reading
VERTICAL_MODES = ("warn", "stack", "rotate", "auto", "off")
CUT_WIDTH = 64  # wider columns are cut on a copy this wide (the cuts scaled back): the same cuts, in milliseconds


def is_vertical(width: int, height: int) -> bool:
    """True for a crop at least :data:`VERTICAL_RATIO` times taller than wide."""
    return height >= VERTICAL_RATIO * max(width, 1)


def vertical_note(width: int, height: int) -> str:
    """The warning for a tall crop read as given ("" when it is not tall)."""
    if not is_vertical(width, height):
        return ""
    return (f"{width}x{height} image is {height / max(width, 1):.1f}x taller than wide: vertical text? crnn reads "
            f"horizontal lines; read it with vertical='auto' (crnn-predict --vertical auto: characters stacked top to "
            f"bottom, or text turned sideways), or pass vertical='off' to read it as it is")


def vertical_line(mode: str, counts: dict) -> str:
    """crnn-eval's line (table and report) on the tall crops read under a vertical mode: ``counts`` {"tall", "read"}."""
    tall, read = counts["tall"], counts["read"]
    if not tall:
        return f"vertical {mode}: no crop is at least {VERTICAL_RATIO:g}x taller than wide; every one read as it is"
    rest = f"; {tall - read} read as they are (no two characters found to stack)" if tall > read else ""
    return (f"vertical {mode}: {read} of {tall} crop(s) at least {VERTICAL_RATIO:g}x taller than wide read as "
            f"horizontal lines, each the most confident way{rest}")


def vertical_summary(tall: list[tuple[str, int, int]], total: int) -> str:
    """The one warning for a read of ``total`` images of which ``tall`` (name, width, height) are tall ("" for none):
    one crop's own note, or a count with the first few names."""
    if not tall:
        return ""
    if len(tall) == 1:
        where, w, h = tall[0]
        return f"{where}: {vertical_note(w, h)}"
    names = ", ".join(f"{where} ({w}x{h})" for where, w, h in tall[:3]) + (", ..." if len(tall) > 3 else "")
    return (f"{len(tall)} of {total} images are at least {VERTICAL_RATIO:g}x taller than wide (vertical text?), "
            f"e.g. {names}; they were read as they are, but crnn reads horizontal lines: read them with "
            f"vertical='auto' (crnn-predict --vertical auto), or pass vertical='off' to read them as they are")


def _border(a: np.ndarray) -> np.ndarray:
    """The pixels of ``a``'s four edges, one after another."""
    return np.concatenate([a[0], a[-1], a[:, 0], a[:, -1]])


def _otsu_ink(gray: np.ndarray) -> np.ndarray:
    """Boolean ink mask: Otsu's threshold, ink on the side away from the border's median (dark or light text)."""
    hist = np.bincount(gray.ravel(), minlength=256).astype(np.float64)
    total = hist.sum()
    omega = np.cumsum(hist) / total
    mu = np.cumsum(hist * np.arange(256)) / total
    with np.errstate(divide="ignore", invalid="ignore"):
        between = (mu[-1] * omega - mu) ** 2 / (omega * (1 - omega))
    t = int(np.nanargmax(between)) if np.isfinite(between).any() else 127
    return gray <= t if np.median(_border(gray)) > t else gray > t


def _flattened(gray: np.ndarray) -> np.ndarray:
    """``gray`` less its surface: each column's median over the crop's height (a column of characters is mostly
    ground down any line of pixels), then each row's median, smoothed over about the column's width (a bar of a
    letter spans a few rows only); 128 is the surface after it."""
    g = gray.astype(np.float32)
    g -= np.median(g, axis=0, keepdims=True)
    rows = np.median(g, axis=1)
    k = max(3, gray.shape[1] | 1)
    rows = np.median(np.lib.stride_tricks.sliding_window_view(np.pad(rows, k // 2, mode="edge"), k), axis=1)
    return np.clip(g - rows[:, None] + 128, 0, 255).astype(np.uint8)


def _ink(gray: np.ndarray) -> np.ndarray:
    """Boolean ink mask (:func:`_otsu_ink`); where one threshold takes part of the border for ink - a shaded or lit
    surface, a gradient across the column - the same on the crop less its surface (:func:`_flattened`)."""
    ink = _otsu_ink(gray)
    return _otsu_ink(_flattened(gray)) if _border(ink).mean() > 0.1 else ink


def _runs(ink: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int]], int]:
    """(ink per row, runs [start, end) of rows with ink, the column's ink width)."""
    rows = ink.sum(axis=1).astype(np.float64)
    cols = np.flatnonzero(ink.sum(axis=0) > max(1, 0.02 * ink.shape[0]))
    if cols.size == 0:
        return rows, [], 0
    width = max(4, int(cols[-1] - cols[0] + 1))
    on = np.concatenate([[False], rows > 0, [False]])
    edges = np.flatnonzero(on[1:] != on[:-1])
    return rows, list(zip(edges[::2].tolist(), edges[1::2].tolist())), width


def _square_groups(runs: list[tuple[int, int]], pitch: float) -> list[tuple[int, int]]:
    """The runs grouped into characters that fit in 1.15 squares of side ``pitch`` and come nearest a square (a
    character drawn in pieces - 二, 卜 - stays whole); a group of touching characters is cut into squares."""
    def cost(a: int, b: int) -> float:
        h = (b - a) / pitch
        return max(0.0, 0.8 - h) ** 2 + max(0.0, h - 1.0) ** 2

    best, back = [0.0] + [float("inf")] * len(runs), [0] * (len(runs) + 1)
    for j in range(1, len(runs) + 1):
        for i in range(j, 0, -1):
            a, b = runs[i - 1][0], runs[j - 1][1]
            if i < j and b - a > 1.15 * pitch:
                break
            c = best[i - 1] + cost(a, b)
            if c < best[j]:
                best[j], back[j] = c, i - 1
    groups, j = [], len(runs)
    while j > 0:
        a, b = runs[back[j]][0], runs[j - 1][1]
        n = max(1, round((b - a) / pitch)) if b - a >= 1.6 * pitch else 1
        groups[:0] = [(a + (b - a) * k // n, a + (b - a) * (k + 1) // n) for k in range(n)]
        j = back[j]
    return groups


def _grid_groups(rows: np.ndarray, runs: list[tuple[int, int]], width: int) -> list[tuple[int, int]]:
    """Cuts at one regular pitch (vertical CJK advances every character by the same amount): of the pitches 0.95-2
    times the column's ink width and every phase, the cuts that cross the least ink and lie deepest in the gaps
    (none where every set of cuts crosses more ink than gap)."""
    first, last = runs[0][0], runs[-1][1]
    idx = np.arange(len(rows))
    before = np.maximum.accumulate(np.where(rows > 0, idx, -10**6))
    after = np.minimum.accumulate(np.where(rows > 0, idx, 10**6)[::-1])[::-1]
    depth = np.minimum(idx - before, after - idx).astype(np.float64)  # rows to the nearest ink (0 on ink)
    best, best_score = None, 0.0  # no cut at all, unless cuts find more gap than ink
    for pitch in np.arange(0.95 * width, 2.0 * width + 0.5, 0.5):
        for phase in np.arange(1.0, pitch, 1.0):
            r = np.arange(first + phase, last - 1, pitch).astype(int)
            if r.size == 0:
                continue
            score = (np.minimum(depth[r], pitch / 4) - rows[r]).sum()
            if score > best_score:
                best, best_score = r, score
    edges = [first, *(best.tolist() if best is not None else []), last]
    return [(a, b) for a, b in zip(edges, edges[1:]) if rows[a:b].sum() > 0]


def cell_candidates(image: Image.Image) -> list[list[tuple[int, int]]]:
    """Ways to cut a column into its stacked characters (row ranges, top first), distinct, at most two: where the
    empty rows alone cannot say (三二一 or ＝二二?), the recogniser's confidence chooses (crnn.infer): characters
    grouped to come nearest squares of the column's width, and cuts at one regular pitch."""
    gray = image.convert("L")
    scale = min(1.0, CUT_WIDTH / gray.width)  # the search's cost grows with the square of the width: cut small
    if scale < 1.0:
        gray = gray.resize((CUT_WIDTH, max(1, round(gray.height * scale))), Image.BILINEAR)
    rows, runs, width = _runs(_ink(np.asarray(gray)))
    if not runs:
        return []
    out: list[list[tuple[int, int]]] = []
    for cells in (_square_groups(runs, width), _grid_groups(rows, runs, width)):
        cells = [(round(a / scale), min(image.height, round(b / scale))) for a, b in cells]
        if len(cells) >= 2 and cells not in out:
            out.append(cells)
    return out


def stack_cells(image: Image.Image, cells: list[tuple[int, int]], ink: np.ndarray | None = None) -> Image.Image:
    """The rows ``cells`` of ``image`` side by side, upright, left to right, each piece's surroundings its own edge
    pixels repeated (``ink``: the image's ink mask, when the caller has it)."""
    rgb = image.convert("RGB")
    arr = np.asarray(rgb)
    ink = _ink(np.asarray(rgb.convert("L"))) if ink is None else ink
    h, w = arr.shape[:2]
    pitch = max(b - a for a, b in cells)
    # rows kept above and below each cell; columns beside its ink, and the gap between two characters: together
    # about a tenth of the pitch, as letters and Hanzi sit in a line (a third of it, as before 2026-11-30, is a
    # word space: stacked capitals read "TAX I", "HO USE")
    pad, side, gap = max(1, pitch // 10), max(1, pitch // 20), max(1, pitch // 16)
    pieces = []
    for a, b in cells:
        # a character's own width, at least half the column's: narrow Latin letters (I, T) sit as in a word, not
        # a column's width apart; a narrow Hanzi (丨, 卜) keeps room around it, as its square does in a line
        cols = np.flatnonzero(ink[a:b].any(axis=0))
        lo, hi = (int(cols[0]), int(cols[-1]) + 1) if cols.size else (0, w)
        need = int(0.5 * pitch) - (hi - lo)
        if need > 0:
            lo, hi = max(0, lo - need // 2), min(w, hi + need - need // 2)
        pieces.append(arr[max(0, a - pad):min(h, b + pad), max(0, lo - side):min(w, hi + side)])
    # each piece grown to the line's height and by half a gap each side by repeating its own edge pixels: the
    # photograph's surface runs on between the characters, with no box edges for the reader to take for an I or a
    # space (pasting the pieces on one flat colour left those on any shaded or textured background)
    out_h = pitch + 2 * pad
    grown = []
    for piece in pieces:
        top = (out_h - piece.shape[0]) // 2
        grown.append(np.pad(piece, ((top, out_h - piece.shape[0] - top), (gap // 2, gap - gap // 2), (0, 0)), "edge"))
    line = np.concatenate(grown, axis=1)
    return Image.fromarray(np.pad(line, ((0, 0), (gap // 2, gap - gap // 2), (0, 0)), "edge"))


def stack_to_lines(image: Image.Image) -> list[Image.Image]:
    """A column of stacked characters -> horizontal lines of the same characters, upright, top first: one per way of
    cutting it (:func:`cell_candidates`); ``[image]`` when no way finds two characters."""
    candidates = cell_candidates(image)
    ink = _ink(np.asarray(image.convert("L"))) if candidates else None
    return [stack_cells(image, cells, ink) for cells in candidates] or [image]


def vertical_candidates(image: Image.Image, mode: str) -> list[Image.Image]:
    """The horizontal lines to read for a tall crop under ``mode`` (stack: its stacked characters side by side, one per
    cutting; rotate: a quarter turn each way; auto: all of those); ``[]`` when the crop is not tall, or the mode reads
    it as it is (warn, off), or stacking finds fewer than two characters and the mode only stacks."""
    if mode not in ("stack", "rotate", "auto") or not is_vertical(*image.size):
        return []
    out = [line for line in stack_to_lines(image) if line is not image] if mode != "rotate" else []
    if mode != "stack":
        out += [image.rotate(90, expand=True), image.rotate(-90, expand=True)]  # text running up, text running down
    return out
