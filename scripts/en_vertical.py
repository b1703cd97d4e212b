"""What reading tall Latin crops costs: words set as signs set them when the space is tall - capitals stacked top
to bottom (a hotel or taxi sign) and words turned a quarter turn either way (a book spine, a shop's side panel) - in
the Latin faces held out by designer (``crnn/data/latin_faces.tsv``, role heldout), read by
``crnn.Recognizer(weights, vertical=...)`` with each mode.

    python scripts/en_vertical.py                           # 200 of each kind, the shipped en
    python scripts/en_vertical.py --num 100 --weights runs/en/best.pt --out runs/en/vertical.md

Each crop: a word of 3-8 letters from ``crnn/data/words.txt`` in a held-out face 24-40 px high, grey ink on grey
ground at least 90 levels apart (on half the crops the ground shaded across or along the crop), blurred and saved as
a JPEG; the stacked ones in capitals, one letter every 1.0-1.35 em down a column; the turned ones in the case a sign
uses (lower, capitalised, capitals). Crops under twice as tall as wide are drawn again. Word accuracy under the exact protocol (case, punctuation and spaces kept), for ``auto``
(every way, the most confident reading: the mode to use when you do not know), ``stack`` and ``rotate``; ``off``
(read as it is) shows what a tall crop costs without them. The Latin faces are fetched by the English model's
sitting (``python scripts/latin_faces.py --fetch``).
"""
from __future__ import annotations

import argparse
import io
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from PIL import Image, ImageDraw, ImageFilter, ImageFont  # noqa: E402

SEED = 4318
MODES = ("auto", "stack", "rotate", "off")
KINDS = ("stacked capitals", "turned words")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--num", type=int, default=200, help="crops of each kind (default 200)")
    p.add_argument("--weights", default="en", help="model (default: the shipped en)")
    p.add_argument("--out", help="also write the table here (Markdown)")
    return p.parse_args(argv)


def damaged(im: Image.Image, rng: random.Random) -> Image.Image:
    """Blur and a JPEG round trip, as a photographed sign."""
    im = im.filter(ImageFilter.GaussianBlur(rng.uniform(0.2, 1.0)))
    buf = io.BytesIO()
    im.save(buf, format="JPEG", quality=rng.randint(40, 90))
    return Image.open(io.BytesIO(buf.getvalue())).convert("RGB")


def inks(rng: random.Random) -> tuple[int, int]:
    """(ground, ink) grey levels at least 90 apart, dark on light or light on dark."""
    ground = rng.randint(0, 255)
    return ground, (ground + rng.randint(90, 165)) % 256


def painted(cover: Image.Image, rng: random.Random) -> Image.Image:
    """Ink on ground through the coverage mask ``cover`` (L, 255 = ink); on half the crops the ground is shaded across
    or along the crop (a lit pillar, a shadow's edge), up to two thirds of the way towards the ink at one end."""
    ground, ink = inks(rng)
    w, h = cover.size
    surface = np.full((h, w), float(ground))
    if rng.random() < 0.5:
        along = rng.random() < 0.5
        ramp = np.linspace(0, rng.uniform(0, 2 / 3) * (ink - ground), h if along else w)
        ramp = ramp[::-1] if rng.random() < 0.5 else ramp
        surface += ramp[:, None] if along else ramp[None, :]
    a = np.asarray(cover, dtype=np.float64) / 255
    return Image.fromarray((surface * (1 - a) + ink * a).round().clip(0, 255).astype(np.uint8))


def stacked(text: str, face: str, rng: random.Random) -> Image.Image:
    """``text``'s letters top to bottom, each centred on the column."""
    size = rng.randint(24, 40)
    font, step = ImageFont.truetype(face, size), size * rng.uniform(1.0, 1.35)
    across = size + 2 * rng.randint(3, 10)
    cover = Image.new("L", (across, int(len(text) * step + size * 0.6)), 0)
    draw = ImageDraw.Draw(cover)
    for i, ch in enumerate(text):
        draw.text(((across - draw.textlength(ch, font=font)) / 2, size * 0.3 + i * step), ch, font=font, fill=255)
    return damaged(painted(cover, rng), rng)


def turned(text: str, face: str, rng: random.Random) -> Image.Image:
    """``text`` set left to right, then turned a quarter turn one way or the other."""
    size = rng.randint(24, 40)
    font = ImageFont.truetype(face, size)
    width = int(ImageDraw.Draw(Image.new("L", (1, 1))).textlength(text, font=font)) + 2 * rng.randint(3, 10)
    cover = Image.new("L", (width, int(size * rng.uniform(1.2, 1.5))), 0)
    ImageDraw.Draw(cover).text((width / 2, cover.height / 2), text, font=font, fill=255, anchor="mm")
    return damaged(painted(cover.rotate(rng.choice((90, -90)), expand=True), rng), rng)


def crops(num: int, faces: list[str], words: list[str]) -> dict[str, list[tuple[Image.Image, str]]]:
    """``num`` tall crops of each kind, with their text, the same for every run."""
    from crnn.data.vertical import is_vertical

    rng = random.Random(SEED)
    out: dict[str, list[tuple[Image.Image, str]]] = {kind: [] for kind in KINDS}
    for kind in KINDS:
        while len(out[kind]) < num:
            face, word = rng.choice(faces), rng.choice(words)
            if kind == KINDS[0]:
                text = word.upper()
                im = stacked(text, face, rng)
            else:
                text = rng.choice((word, word, word.capitalize(), word.upper()))
                im = turned(text, face, rng)
            if is_vertical(*im.size):
                out[kind].append((im, text))
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from crnn.data.latin_faces import latin_dir, latin_faces

    faces = [os.path.join(latin_dir(), f.file) for f in latin_faces("heldout")]
    faces = [f for f in faces if os.path.isfile(f)]
    if not faces:
        print(f"en_vertical: none of the held-out Latin faces is in {latin_dir()}; fetch them: "
              f"python scripts/latin_faces.py --fetch", file=sys.stderr)
        return 2
    words_file = Path(__file__).resolve().parent.parent / "crnn" / "data" / "words.txt"
    words = [w for w in words_file.read_text(encoding="utf-8").split() if 3 <= len(w) <= 8 and w.isalpha()][:20000]
    import warnings

    import crnn
    from crnn.infer import VerticalWarning
    from crnn.metrics import RecognitionMetrics
    from zh_vertical import emit_table

    sets = crops(args.num, faces, words)
    rows = []
    for mode in MODES:
        reader = crnn.Recognizer(args.weights, vertical=mode)
        for kind, items in sets.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", VerticalWarning)
                texts = [r.text for r in reader.read([im for im, _ in items])]
            m = RecognitionMetrics("exact")
            m.update(texts, [t for _, t in items])
            res = m.compute()
            rows.append((mode, kind, len(items), res["word_acc"], res["cer"]))
        print(f"en_vertical: read with vertical={mode}", file=sys.stderr)
    table = [f"{len(faces)} held-out Latin faces, weights {args.weights}, exact protocol",
             "", "| vertical | crops | word accuracy | CER |", "| --- | --- | --- | --- |"]
    table += [f"| {mode} | {n} {kind} | {acc:.1%} | {cer:.2%} |" for mode, kind, n, acc, cer in rows]
    return emit_table(table, args.out)


if __name__ == "__main__":
    sys.exit(main())
