"""What reading vertical lines costs: the honest yardstick's lines (issue 43's faces held out by design) set top to
bottom, read stacked (``crnn.Recognizer("zh", vertical="stack")``) and as they are, beside the same texts read
horizontally as ``scripts/zh_benchmark.py`` built them.

    python scripts/zh_vertical.py                                   # dev_print and final_print, 1,200 lines each
    python scripts/zh_vertical.py --sets dev_print --num 200 --out runs/zh/vertical.md

Each line of ``data/zh_faces/SET`` (built by ``scripts/zh_benchmark.py --build-only --sets SET --num 1200 --work
data/zh_faces``) is set again in its own face (line i in face i mod the set's faces, as the set was built), one
character every 1.0-1.3 em down a column 30-44 px wide, with the set's kind of print damage (blur, JPEG); a line whose
face lacks one of its characters is left out of every row. The same text is also set left to right with the same
size, pitch, ink and damage (the line a perfect cutting would make): the stacked row minus that one is what the cutting
loses. Spaces are dropped (vertical signs set none). CER under the ``unicode`` protocol.
"""
from __future__ import annotations

import argparse
import io
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from PIL import Image, ImageDraw, ImageFilter, ImageFont  # noqa: E402

SEED = 4317


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sets", default="dev_print,final_print", help="sets of data/zh_faces (default: both)")
    p.add_argument("--work", default="data/zh_faces", help="where the sets are (default data/zh_faces)")
    p.add_argument("--num", type=int, default=0, help="the first N lines of each set (default: all)")
    p.add_argument("--weights", default="zh", help="model (default: the shipped zh)")
    p.add_argument("--out", help="also write the table here (Markdown)")
    return p.parse_args(argv)


def setting(text: str, font_path: str, rng: random.Random) -> tuple[Image.Image, Image.Image]:
    """``text`` in ``font_path`` set twice with the same size, pitch, ink and damage: top to bottom, each character
    centred on the column, and left to right, each centred on its cell (the line a perfect cutting would give)."""
    size = rng.randint(30, 44)
    step = size * rng.uniform(1.0, 1.3)
    font = ImageFont.truetype(font_path, size)
    margin, ink = rng.randint(4, 10), rng.randint(0, 60)
    blur, quality = rng.uniform(0.2, 0.9), rng.randint(40, 90)
    across = size + 2 * margin
    along = int(len(text) * step + size * 0.6)
    out = []
    for vertical in (True, False):
        im = Image.new("L", (across, along) if vertical else (along, across), 255)
        draw = ImageDraw.Draw(im)
        for i, ch in enumerate(text):
            advance = draw.textlength(ch, font=font)
            pos = size * 0.3 + i * step
            xy = ((across - advance) / 2, pos) if vertical else (pos + (step - advance) / 2, margin)
            draw.text(xy, ch, font=font, fill=ink)
        im = im.filter(ImageFilter.GaussianBlur(blur))
        buf = io.BytesIO()
        im.save(buf, format="JPEG", quality=quality)
        out.append(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))
    return out[0], out[1]


def emit_table(table: list[str], out: str | None) -> int:
    """Print a Markdown table (percentages spaced as the docs write them) and, with ``out``, write it there too."""
    text = "\n".join(table).replace("%", " %")
    print(text)
    if out:
        Path(out).write_text(text + "\n", encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    names = args.sets.split(",")
    for name in names:
        gt = Path(args.work) / name / "gt.txt"
        if not gt.is_file():
            print(f"zh_vertical: {gt} not found; build it: python scripts/zh_benchmark.py --build-only --sets {name} "
                  f"--num 1200 --work {args.work}", file=sys.stderr)
            return 2
    import warnings

    from crnn.data.fonts import glyph_coverage
    from crnn.infer import VerticalWarning
    from crnn.metrics import RecognitionMetrics
    from zh_benchmark import face_files

    import crnn

    stacked = crnn.Recognizer(args.weights, vertical="stack")
    as_is = crnn.Recognizer(args.weights, vertical="off")
    rows = []
    for name in names:
        gt = Path(args.work) / name / "gt.txt"
        items = [line.rstrip("\n").split("\t", 1) for line in gt.read_text(encoding="utf-8").splitlines() if line]
        items = items[:args.num] if args.num else items
        faces = face_files(name)
        rng = random.Random(SEED)
        labels, columns, lines = [], [], []
        for i, (_, label) in enumerate(items):
            font, text = faces[i % len(faces)], label.replace(" ", "")
            if set(text) - glyph_coverage(font, text):
                continue  # the line's Latin or digits came from another face
            col, line = setting(text, font, rng)
            labels.append(text)
            columns.append(col)
            lines.append(line)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", VerticalWarning)
            readings = {"horizontal, the same setting": [r.text for r in as_is.read(lines)],
                        "vertical, stacked": [r.text for r in stacked.read(columns)],
                        "vertical, as it is": [r.text for r in as_is.read(columns)]}
        for how, texts in readings.items():
            m = RecognitionMetrics("unicode")
            m.update(texts, labels)
            res = m.compute()
            rows.append((name, how, len(labels), len(items), res["cer"], res["word_acc"]))
        print(f"zh_vertical: {name}: {len(labels)} of {len(items)} lines in their own face", file=sys.stderr)
    table = ["| set | read | lines | CER | line accuracy |", "| --- | --- | --- | --- | --- |"]
    table += [f"| {s} | {how} | {k} of {n} | {cer:.2%} | {acc:.1%} |" for s, how, k, n, cer, acc in rows]
    return emit_table(table, args.out)


if __name__ == "__main__":
    sys.exit(main())
