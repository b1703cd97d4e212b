"""Build the README's fine-tuning example: crops of codes and prices the shipped model cannot read.

    python tools/make_codes.py --out data/codes            # train.lmdb (400), val.lmdb (100), heldout.lmdb (200)
                                                           # and charset_en.txt

Text: prices (``$12.99``, ``€4,50``, ``$1,299.00``), invoice and part numbers (``INV-2024/0815``, ``SKU#A7-3321``,
``PN:4471-BX``), dates and times (``03/11/2024``, ``24.12.23``, ``12:45``), lot and expiry codes (``LOT:24A117``,
``EXP:06/2026``): capitals, digits and ``$ € . , : / # -``, which the base alphabet (alnum36, lower case) lacks.
Images: crnn-synth's renderer (crnn.data.synth.render_word: colours, backgrounds, geometry, camera effects) in a
style the base model never trained on: monospace fonts only (a printed-label look) and these strings. Every set
has its own seed, so no string-image pair repeats across sets; the same seed gives the same bytes on the same fonts.
The alphabets to fine-tune with are printed: ``CHARSET``, from the alnum36 model (configs/finetune_alnum36.yaml):
alnum36's characters, the capitals and the 8 symbols; ``CHARSET_EN``, from the default English model crnn_en
(configs/finetune.yaml): printable95, whose 95 characters hold every one of these but ``€``, and ``€`` - written to
``charset_en.txt`` beside the sets, one character per line (the space is a line holding one space), since the
characters themselves hold both quotes and would need shell quoting; ``model.charset=OUT/charset_en.txt``.
"""
from __future__ import annotations

import argparse
import random
import string
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SYMBOLS = "$€.,:/#-"
CHARSET = string.digits + string.ascii_lowercase + string.ascii_uppercase + SYMBOLS
CHARSET_EN = string.digits + string.ascii_letters + string.punctuation + " " + "€"  # printable95, then '€'
SETS = (("train", 400, 1), ("val", 100, 2), ("heldout", 200, 3))  # name, size, seed
UPPER = string.ascii_uppercase


def _d(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.digits) for _ in range(n))


def _l(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(UPPER) for _ in range(n))


def _price(rng: random.Random) -> str:
    cur = rng.choice("$€")
    units = str(rng.choice([rng.randint(0, 99), rng.randint(100, 9999)]))
    if cur == "€":  # European style: comma decimals, dot thousands
        units = f"{int(units):,}".replace(",", ".")
        return (f"{cur}{units},{_d(rng, 2)}" if rng.random() < 0.8 else f"{units},{_d(rng, 2)}{cur}")
    return f"{cur}{int(units):,}.{_d(rng, 2)}" if rng.random() < 0.85 else f"{cur}{units}"


def _code(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.25:
        return f"{rng.choice(['INV', 'ORD', 'REF', 'PO'])}-{rng.randint(2015, 2026)}/{_d(rng, 4)}"
    if r < 0.5:
        return f"{rng.choice(['SKU', 'NO', 'ID'])}#{_l(rng, 1)}{_d(rng, 1)}-{_d(rng, 4)}"
    if r < 0.75:
        return f"{rng.choice(['PN', 'SN', 'REF'])}:{_d(rng, 4)}-{_l(rng, 2)}"
    return f"#{_l(rng, rng.randint(1, 2))}-{_d(rng, rng.randint(2, 5))}"


def _date(rng: random.Random) -> str:
    day, month = rng.randint(1, 28), rng.randint(1, 12)
    r = rng.random()
    if r < 0.35:
        return f"{day:02d}/{month:02d}/{rng.randint(2000, 2030)}"
    if r < 0.6:
        return f"{day:02d}.{month:02d}.{rng.randint(0, 30):02d}"
    if r < 0.8:
        return f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
    return f"{rng.choice(['LOT', 'EXP', 'BATCH'])}:{_d(rng, 2)}{_l(rng, 1)}{_d(rng, 3)}" if rng.random() < 0.5 \
        else f"EXP:{month:02d}/{rng.randint(2024, 2030)}"


def code_text(rng: random.Random) -> str:
    """One string of the new kind."""
    r = rng.random()
    return _price(rng) if r < 0.35 else _code(rng) if r < 0.7 else _date(rng)


def mono_fonts() -> list[str]:
    """The monospace fonts among the generator's usable fonts (file names with Mono or Courier)."""
    from crnn.data.fonts import find_fonts

    fonts = [f for f in find_fonts(None) if any(k in Path(f).name for k in ("Mono", "mono", "Courier"))]
    if not fonts:
        raise SystemExit("make_codes: no monospace fonts found (apt-get install fonts-dejavu-core fonts-liberation2)")
    return fonts


def samples(num: int, seed: int, fonts: list[str]):
    """(JPEG bytes, label) pairs of one set, from crnn-synth's renderer with the code texts."""
    from crnn.data.synth import SynthOptions, encode_image, render_word, sample_rng

    opts = SynthOptions(charset=CHARSET, text="lines", max_len=20)  # lines: fonts are checked for '€' too
    for i in range(num):
        rng = sample_rng(seed, i)
        text = code_text(rng)
        yield encode_image(render_word(text, rng, fonts, opts), rng, opts), text


def write_charset_en(folder: Path) -> Path:
    """``folder/charset_en.txt``: CHARSET_EN one character per line (the space: a line holding one space)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "charset_en.txt"
    path.write_text("".join(f"{c}\n" for c in CHARSET_EN), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="data/codes", help="folder for train.lmdb, val.lmdb, heldout.lmdb")
    p.add_argument("--preview", metavar="PNG", help="also write a contact sheet of 36 training crops")
    args = p.parse_args(argv)
    from crnn.data.lmdb_io import write_lmdb
    from crnn.data.synth import contact_sheet

    fonts = mono_fonts()
    out = Path(args.out)
    for name, num, seed in SETS:
        path = out / f"{name}.lmdb"
        if path.exists():
            print(f"{path} exists; kept")
            continue
        n = write_lmdb(samples(num, seed, fonts), str(path), total=num)
        print(f"wrote {n} crops to {path} (seed {seed}, {len(fonts)} monospace fonts)")
    if args.preview:
        contact_sheet(list(samples(36, SETS[0][2], fonts))).save(args.preview)
        print(f"wrote {args.preview}")
    en = write_charset_en(out)
    print(f"CHARSET={CHARSET}")
    print(f"CHARSET_EN={en}  (printable95 and €, one per line: from weights/crnn_en.pt)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
