"""The Chinese text-line yardstick: our model(s) next to PP-OCRv4's and PP-OCRv6 small's recognisers on the same lines,
in one run.

    python scripts/zh_benchmark.py                                # weights zh, 500 lines per set, data/zh_bench/
    python scripts/zh_benchmark.py --weights zh --weights runs/zh_lines/best.pt --num 500 --json
    python scripts/zh_benchmark.py --num 20 --no-ppocr --work /tmp/zb # a quick look (sheet: /tmp/zb/contact_sheet.png)
    python scripts/zh_benchmark.py --width-step 1 --width-step 8      # the same weights read at two width roundings
    python scripts/zh_benchmark.py --width-scale 1 --width-scale 1.15 # ...at the trained widths and 1.15x as wide

Three sets of 4-12 character lines (words, names, numbers, a little Latin), text from the tenth of the corpus words
that training never draws (``crnn-synth --split heldout`` words, by frequency, without the uniformly drawn rare
characters of training lines), built once with fixed seeds and cached under ``--work`` (PNG/JPEG files + ``gt.txt``,
so ``crnn-eval --data WORK/heldout`` reads them too):

- ``heldout``: the held-out CJK fonts (``--split heldout``) with the generator's usual damage (JPEG, blur, slight
  rotation, gradient and noisy backgrounds, dark-on-light and light-on-dark) but no clutter (fragments of
  neighbouring text at the edges would make the truth ambiguous);
- ``seen``: the same text source and damage, drawn in the training fonts;
- ``clean``: black on white, no effects, Noto Sans CJK SC Regular (a training font), rendered here with PIL;
- ``unseen_clean``: black on white, no effects, in the held-out CJK fonts (LXGW WenKai, AR PL SungtiL/KaitiM GB):
  the first half of issue 31's target, printed lines in fonts the model never trained on;
- ``unseen_print``: the same fonts with issue 31's list of damage and nothing else - JPEG (quality 30-95) always,
  Gaussian blur (radius 0.4-1.4 px at 40 px line height) on 60 %, a gradient background on half, light text on dark on
  a quarter; no rotation, warps, low-resolution rendering or noise (those are in ``heldout``, which is harsher);
- ``long`` (only with ``--sets``): as ``clean`` but 24-40 characters, longer than any training line (up to 12),
  to see whether reading a line at its own width (up to 4096 px, crnn/infer.py) holds up;
- ``dev_print`` / ``final_print`` (only with ``--sets``): issue 43's faces held out by design (crnn/data/cjk_faces.tsv,
  role dev / final), line i in face i mod their number, with ``unseen_print``'s damage;
- ``trad_print`` (only with ``--sets``): the same held-out words written in traditional forms (crnn/data/traditional.py:
  发展 -> 發展, 头发 -> 頭髮), each line in OpenCC's, Taiwan's or Hong Kong's forms (drawn per line, equal odds: 爲 裏 啓,
  為 裡 啟, 為 裏 啓), labels in ``zh_gb2312_trad``, each line with at least one traditional-only form, drawn with
  ``dev_print``'s damage in the development faces that draw 90 % or more of that alphabet's 1,458 OpenCC forms and of
  its 23 Taiwan and Hong Kong forms (today MiSans alone, 1,390 and 21: Ma Shan Zheng and Long Cang have none, HongLei
  XingShu 4 and 0) - held-out faces and words, one face.

Scores are crnn's metrics under the ``unicode`` protocol (NFKC, whitespace collapsed): CER and line accuracy, and
the errors by character class (Hanzi, Latin, digits, other; one minimal edit script per line, in the JSON and a
second table).
Speed is lines/s on this machine, timed after the scoring pass in ``--speed-rounds`` interleaved rounds (default 5)
over ``--speed-lines`` lines taken evenly from all sets (default 400): every model reads them in each round, the
order reversed every other round, so that a machine whose speed drifts or warms up moves all alike (timed one after
another, the first model timed was handicapped); lines/s is the median over the rounds and a ratio to a peer the
median of the rounds' ratios (the scoring pass's own lines/s stays in the JSON as ``lines_per_s_pass``). Files are
read from disk by each tool, torch and onnxruntime
limited to ``--threads`` (default 2): ours through ``Recognizer.predict_paths`` (its default: batches of up to 64
lines of equal resized width); PP-OCRv4 through ``RapidOCR()(path, use_det=False, use_cls=False)`` (its default API
call: one line per call), PP-OCRv6 small the same way through rapidocr 3.x, whose wheel carries its ONNX models.
They come from ``pip install -e ".[peers]"`` (rapidocr-onnxruntime 1.4.4 and rapidocr 3.10.0: dev-only tools, never
dependencies of crnn); without one, its column is skipped with one line. ``--sheet`` writes a contact sheet PNG of the
first images of each set with the truth and every model's reading (green: right, red: wrong); every reading goes
to WORK/readings.tsv.
"""
from __future__ import annotations

import argparse
import bisect
import functools
import io
import itertools
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SETS = ("heldout", "seen", "clean", "unseen_clean", "unseen_print")  # the table's sets; "long" (--sets) adds
# issue 43's honest yardstick: faces held out by design, print damage; trad_print: traditional forms (zh_gb2312_trad)
FACE_SETS = ("dev_print", "final_print", "trad_print")
ALL_SETS = (*SETS, *FACE_SETS, "long")  # long: clean lines of 24-40 characters
SET_TITLES = {"heldout": "held-out fonts", "seen": "training fonts", "clean": "clean, Noto Sans CJK",
              "unseen_clean": "held-out fonts, clean", "unseen_print": "held-out fonts, print damage",
              "long": "long lines (24-40), clean", "dev_print": "development faces, print damage",
              "final_print": "final faces, print damage",
              "trad_print": "traditional forms, development faces that draw them, print damage"}
CHARSET = "zh_gb2312"
TRAD_CHARSET = "zh_gb2312_trad"  # trad_print's labels
TRAD_STANDARDS = ("s2t", "s2tw", "s2hk")  # trad_print: each line in one, equal odds (crnn.data.traditional.STANDARDS)
# trad_print: the development faces that draw at least this share of OpenCC's traditional forms and of the Taiwan and
# Hong Kong forms, each
TRAD_FACE_SHARE = 0.9
MIN_LEN, MAX_LEN = 4, 12
LONG_LEN = (24, 40)  # lines 2-3x longer than any training line: does reading at the image's own width hold up?
SEEDS = {"heldout": 2301, "seen": 2302, "clean": 2303, "long": 2304, "unseen_clean": 2305, "unseen_print": 2306,
         "dev_print": 4301, "final_print": 4302, "trad_print": 4303}
VERSION = 2  # bump when the way a set is built changes (the cache is rebuilt); 2: faces drawn balanced by package
NOTO_CJK = "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"
PPOCR = "PP-OCRv4 (rapidocr)"
PPOCR6 = "PP-OCRv6 small (rapidocr 3.10)"


@dataclass
class Column:
    """One recogniser's readings of every set and the seconds it spent on them."""

    name: str
    readings: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # process CPU time (all threads): less sensitive than wall time to a busy machine
    lines: int = 0
    how: str = ""
    read: Callable[[list[str]], object] | None = field(default=None, repr=False)  # reads a list of lines, as timed
    rounds: list[float] = field(default_factory=list)  # lines/s in each interleaved timing round (--speed-rounds)


# ----------------------------------------------------------------------------- the sets
def line_options(charset: str = CHARSET):
    """SynthOptions of the damaged sets: Chinese lines, the generator's usual effects, no clutter (see module doc)."""
    from crnn.data.synth import SynthOptions

    return SynthOptions(charset=charset, max_len=MAX_LEN, text="lines", split="heldout", clutter=False)


def set_charset(name: str) -> str:
    """The alphabet of a set's labels: ``zh_gb2312_trad`` for ``trad_print``, else ``zh_gb2312``."""
    return TRAD_CHARSET if name == "trad_print" else CHARSET


@functools.lru_cache(maxsize=3)
def traditional(standard: str = "s2t") -> tuple:
    """(word -> its traditional form of ``standard`` within zh_gb2312_trad, the traditional-only forms) for
    ``trad_print`` (crnn.data.traditional.STANDARDS: OpenCC's, Taiwan's, Hong Kong's)."""
    from crnn.charset import zh_traditional_forms
    from crnn.data.traditional import to_traditional
    from crnn.data.words import label_rules

    return (functools.partial(to_traditional, alphabet=label_rules(TRAD_CHARSET)[0], standard=standard),
            frozenset(zh_traditional_forms()))


def trad_form_groups() -> tuple[str, str]:
    """(OpenCC's forms, the Taiwan and Hong Kong forms after them) of zh_gb2312_trad."""
    from crnn.charset import zh_traditional_rows

    rows = zh_traditional_rows()
    return "".join(f for f, _, std in rows if not std), "".join(f for f, _, std in rows if std)


@functools.lru_cache(maxsize=1)
def text_source() -> tuple:
    """(held-out corpus words, punctuation, their cumulative weights, Latin words) for :func:`bench_text`."""
    from crnn.data.lines import CJK_PUNCT_WEIGHTS, load_corpus
    from crnn.data.words import load_words

    corpus = load_corpus(CHARSET, None, "heldout")
    if corpus is None:
        raise RuntimeError("the Chinese word list needs jieba: pip install 'crnn[zh]'")
    punct = tuple(CJK_PUNCT_WEIGHTS)
    return corpus, punct, tuple(itertools.accumulate(CJK_PUNCT_WEIGHTS.values())), load_words(None)


def number(rng: random.Random) -> str:
    """A number as text writes it: a count, a year, a price, a share, a time."""
    kind = rng.randrange(5)
    if kind == 0:
        return f"{rng.randint(1950, 2030)}年"
    if kind == 1:
        return f"{rng.randint(0, 999)}.{rng.randint(0, 99):02d}" + rng.choice(["", "元", "%"])
    if kind == 2:
        return f"{rng.randint(0, 23)}:{rng.randint(0, 59):02d}"
    return str(rng.randint(0, 10 ** rng.randint(1, 5))) + rng.choice(["", "个", "人", "万", "次", "号"])


def bench_text(rng: random.Random, n: int, convert=None) -> str:
    """A line of exactly ``n`` characters: held-out corpus words (by frequency; names among them), some punctuation,
    numbers and a little Latin - and no uniformly drawn rare characters (unlike training lines). ``convert``: what
    words and numbers become (traditional forms for ``trad_print``), the same draws either way."""
    corpus, punct, cum, latin = text_source()
    convert = convert or (lambda text: text)
    out = ""
    while len(out) < n:
        r = rng.random()
        if r < 0.07 and out and out[-1] not in punct:
            out += punct[bisect.bisect_right(cum, rng.random() * cum[-1])]
        elif r < 0.13:
            out += convert(number(rng))
        elif r < 0.16:
            word = rng.choice(latin)
            out += word.capitalize() if rng.random() < 0.4 else word.upper() if rng.random() < 0.2 else word
        else:
            out += convert(corpus.draw(rng))
    return out[:n]


def line_len(rng: random.Random) -> int:
    """The length of the next line: 4..12, uniform."""
    return rng.randint(MIN_LEN, MAX_LEN)


def set_fonts(name: str) -> list[str]:
    """The fonts a set draws from: the training faces for ``seen``; the held-out CJK faces (with the Latin faces, for
    Latin-only lines) for ``heldout``, ``unseen_clean`` and ``unseen_print``."""
    from crnn.data.fonts import find_fonts

    return find_fonts(None, "train" if name == "seen" else "heldout")


def face_files(name: str) -> list[str]:
    """The faces of a FACE_SETS set, in the manifest's order (crnn/data/cjk_faces.tsv, role dev or final; for
    ``trad_print`` :func:`trad_faces`): line i is drawn in face i mod their number. A one-line error names the fetch
    command when one is missing."""
    from crnn.data.faces import faces, font_cache_dir

    if name == "trad_print":
        return trad_faces()
    role = name.removesuffix("_print")
    out = []
    for face in faces(role):
        path = os.path.join(font_cache_dir(), face.file)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path} is missing: python scripts/face_manifest.py --fetch --role {role}")
        out.append(path)
    return out


@functools.lru_cache(maxsize=1)
def trad_faces() -> list[str]:
    """The development faces that draw at least TRAD_FACE_SHARE of zh_gb2312_trad's OpenCC forms and of its Taiwan and
    Hong Kong forms, each (probed glyphs, crnn.data.fonts.glyph_coverage); FileNotFoundError when none does."""
    from crnn.data.fonts import glyph_coverage

    groups = trad_form_groups()
    probe = "".join(sorted("".join(groups)))
    able = [p for p in face_files("dev_print")
            if all(len(set(g) & glyph_coverage(p, probe)) >= TRAD_FACE_SHARE * len(g) for g in groups)]
    if not able:
        raise FileNotFoundError(f"no development face draws {TRAD_FACE_SHARE:.0%} of the {len(groups[0])} OpenCC "
                                f"forms and of the {len(groups[1])} Taiwan and Hong Kong forms of zh_gb2312_trad "
                                "(crnn/data/cjk_faces.tsv, role dev)")
    return able


def face_of(path: str):
    """The manifest row of a face file."""
    from crnn.data.faces import faces

    return next(f for f in faces() if f.file == os.path.basename(path))


def noto_sc(size: int):
    """Noto Sans CJK SC Regular (the SC face of the collection), or a one-line error."""
    from PIL import ImageFont

    if not os.path.isfile(NOTO_CJK):
        raise FileNotFoundError(f"{NOTO_CJK} is missing; apt-get install fonts-noto-cjk")
    for index in range(10):
        font = ImageFont.truetype(NOTO_CJK, size, index=index)
        if font.getname()[0].endswith(" SC"):
            return font
    raise FileNotFoundError(f"{NOTO_CJK} has no SC face")


def render_clean(text: str, size: int = 28):
    """Black ``text`` on white, no effects, 4 px margins (height about 1.4 x size)."""
    from PIL import Image, ImageDraw

    font = noto_sc(size)
    left, top, right, bottom = font.getbbox(text)
    img = Image.new("L", (right - left + 8, bottom - top + 8), 255)
    ImageDraw.Draw(img).text((4 - left, 4 - top), text, fill=0, font=font)
    return img


PICKED: list[str] = []  # the font file of every line render_printed draws (line_fonts replays a set to read them)
# held-out faces by file name; a Latin-only line of the held-out sets is drawn in one of the Latin faces
FONT_GROUPS = (("LXGW WenKai (+ Mono)", "LXGWWenKai"), ("AR PL SungtiL GB", "gbsn00lp"),
               ("AR PL KaitiM GB", "gkai00mp"), ("Droid Sans Fallback", "DroidSansFallback"))


def font_group(path: str) -> str:
    name = Path(path).name
    return next((g for g, stem in FONT_GROUPS if name.startswith(stem)), "Latin faces (Latin-only lines)")


def line_fonts(name: str, num: int) -> list[str]:
    """The font file of each of the first ``num`` lines of ``unseen_clean`` / ``unseen_print``: their drawing is
    replayed (each line depends only on its set, seed and index), nothing is read from the images."""
    fonts, out = tuple(set_fonts(name)), []
    for i in range(num):
        PICKED.clear()
        sample(name, i, fonts)
        out.append(PICKED[-1])
    return out


def markdown_by_font(readings: Path) -> str:
    """CER per held-out face of the two unseen-font sets, per model, from a readings.tsv this script wrote."""
    from crnn.metrics import edit_distance, normalize_text

    with open(readings, encoding="utf-8") as f:
        head, *lines = [ln.rstrip("\n").split("\t") for ln in f]
    models, sets = head[3:], ("unseen_clean", "unseen_print")
    by_set = {s: [ln for ln in lines if ln[0] == s] for s in sets}
    tot: dict[tuple[str, str], list[int]] = {}
    for s, rows in by_set.items():
        for ln, font in zip(rows, line_fonts(s, len(rows)) if rows else []):
            truth = normalize_text(ln[2], "unicode")
            for m, pred in zip(models, ln[3:]):
                t = tot.setdefault((font_group(font), m), [0, 0])
                t[0] += edit_distance(normalize_text(pred, "unicode"), truth)
                t[1] += len(truth)
    groups = [g for g in [*(g for g, _ in FONT_GROUPS), "Latin faces (Latin-only lines)"] if (g, models[0]) in tot]
    out = ["| model | " + " | ".join(f"{g}: CER (errors / chars)" for g in groups) + " |",
           "|" + " --- |" * (len(groups) + 1)]
    for m in models:
        cells = [f"{100 * e / max(n, 1):.2f} % ({e} / {n})" for e, n in (tot[(g, m)] for g in groups)]
        out.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(out) + f"\n\nsets: {', '.join(s for s in sets if by_set[s])} ({readings})."


def render_printed(text: str, fonts: tuple[str, ...], rng: random.Random, damage: bool, charset: str = CHARSET):
    """``text`` in a font of ``fonts`` that draws all of it, 28 px, 6 px margins, black on white - or, with
    ``damage``, issue 31's print damage (see the module doc). Returns (PIL image, JPEG quality or None for PNG).
    ValueError when no font draws the text (``charset``: the alphabet whose glyphs the fonts are probed for)."""
    import numpy as np
    from PIL import Image, ImageDraw, ImageFilter

    from crnn.data.fonts import font_picker, load_font
    from crnn.data.synth import script_chars

    info = font_picker(fonts, script_chars(line_options(charset))).pick(text, rng)
    PICKED.append(info.path)
    font = load_font(info.path, 28)
    left, top, right, bottom = font.getbbox(text)
    w, h = right - left + 12, bottom - top + 12
    mask = Image.new("L", (w, h), 0)
    ImageDraw.Draw(mask).text((6 - left, 6 - top), text, fill=255, font=font)
    if not damage:
        return Image.eval(mask, lambda v: 255 - v), None
    ink = np.asarray(mask, np.float32)[..., None] / 255
    dark, light = rng.uniform(0, 70), rng.uniform(185, 255)
    bg = np.full((h, w, 1), light, np.float32)
    if rng.random() < 0.5:  # a gradient across the line (lighting, paper, a printed tint)
        ramp = np.linspace(0, 1, w, dtype=np.float32)[None, :, None]
        bg = bg - ramp * rng.uniform(40, 90) if rng.random() < 0.5 else bg - ramp[:, ::-1] * rng.uniform(40, 90)
    fg = np.full((h, w, 1), dark, np.float32)
    if rng.random() < 0.25:  # light text on a dark ground
        bg, fg = 255 - bg, 255 - fg
    tint = np.array([rng.uniform(0.85, 1.0) for _ in range(3)], np.float32)
    img = Image.fromarray(np.clip((bg * (1 - ink) + fg * ink) * tint, 0, 255).astype(np.uint8))
    if rng.random() < 0.6:
        img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.4, 1.4)))
    return img, rng.randint(30, 95)


def sample(name: str, index: int, fonts: tuple[str, ...]) -> tuple[bytes, str, str]:
    """Line ``index`` of set ``name``: (encoded image, file extension, label); the same in every run."""
    from crnn.data.synth import encode_image, render_word, sample_rng
    from crnn.data.words import text_label

    rng = sample_rng(SEEDS[name], index)
    standard = rng.choice(TRAD_STANDARDS) if name == "trad_print" else None  # OpenCC's, Taiwan's or Hong Kong's forms
    for _ in range(20):
        n = rng.randint(*LONG_LEN) if name == "long" else line_len(rng)
        convert, forms = traditional(standard) if standard else (None, None)
        label = text_label(bench_text(rng, n, convert), set_charset(name))
        if not label or len(label) < MIN_LEN or (forms and forms.isdisjoint(label)):
            continue
        if name in ("clean", "long"):
            buf = io.BytesIO()
            render_clean(label).save(buf, format="PNG")
            return buf.getvalue(), "png", label
        if name in ("unseen_clean", "unseen_print", *FACE_SETS):
            face = (fonts[index % len(fonts)],) if name in FACE_SETS else fonts
            try:
                img, quality = render_printed(label, face, rng, damage=name != "unseen_clean",
                                              charset=set_charset(name))
            except ValueError:
                continue
            buf = io.BytesIO()
            img.save(buf, format="PNG") if quality is None else img.save(buf, format="JPEG", quality=quality)
            return buf.getvalue(), "png" if quality is None else "jpg", label
        try:
            img = render_word(label, rng, list(fonts), line_options())
        except ValueError:  # no font of the set draws every character: draw another line
            continue
        return encode_image(img, rng, line_options()), "jpg", label
    raise RuntimeError(f"set {name}: cannot make line {index}")


def build_set(name: str, work: Path, num: int) -> Path:
    """``work/name/`` with ``num`` images and ``gt.txt``; reused when it was built the same way with >= num lines."""
    folder = work / name
    manifest = {"set": name, "num": num, "seed": SEEDS[name], "version": VERSION, "charset": set_charset(name)}
    if name == "trad_print":
        manifest["standards"] = list(TRAD_STANDARDS)  # a set cached before the three standards is rebuilt
    done = folder / "manifest.json"
    if done.is_file():
        cached = json.loads(done.read_text(encoding="utf-8"))
        if cached.get("num", 0) >= num and {**cached, "num": num} == manifest:
            return folder  # line i depends only on (set, seed, i): the first num lines are the set of num
    (folder / "images").mkdir(parents=True, exist_ok=True)
    fonts = tuple(face_files(name)) if name in FACE_SETS else tuple(set_fonts(name)) if name not in ("clean", "long") \
        else ()
    lines = []
    for i in range(num):
        data, ext, label = sample(name, i, fonts)
        rel = f"images/{i:05d}.{ext}"
        (folder / rel).write_bytes(data)
        lines.append(f"{rel}\t{label}\n")
    (folder / "gt.txt").write_text("".join(lines), encoding="utf-8")
    done.write_text(json.dumps(manifest), encoding="utf-8")
    return folder


def real_set(folder: Path) -> tuple[str, str]:
    """(set name, title) of a folder of real (photographed) lines: its gt.txt and a SOURCE.txt whose lines name the
    source (``source: ...``) and the licence (``licence: ...``). ValueError, naming what is missing, otherwise:
    photographed lines count only with a named source and licence."""
    src = folder / "SOURCE.txt"
    if not (folder / "gt.txt").is_file():
        raise ValueError(f"{folder}: no gt.txt (lines of PATH<TAB>TEXT)")
    fields = {}
    if src.is_file():
        for ln in src.read_text(encoding="utf-8").splitlines():
            key, colon, value = ln.partition(":")
            if colon and value.strip():
                fields[key.strip().lower().replace("license", "licence")] = value.strip()
    missing = [k for k in ("source", "licence") if k not in fields]
    if missing:
        raise ValueError(f"{folder}: photographed lines count only with a named source and licence: write "
                         f"{src} with a line 'source: ...' and a line 'licence: ...' (missing: {', '.join(missing)})")
    return f"real:{folder.name}", f"photographed: {folder.name} ({fields['source']}; {fields['licence']})"


def read_set(folder: Path, num: int | None = None) -> tuple[list[str], list[str]]:
    """(image paths, labels) of the first ``num`` lines (None: all) of a built set."""
    paths, labels = [], []
    for ln in (folder / "gt.txt").read_text(encoding="utf-8").splitlines()[:num]:
        rel, label = ln.split("\t", 1)
        paths.append(str(folder / rel))
        labels.append(label)
    return paths, labels


# ----------------------------------------------------------------------------- the readers
def ours(weights: str, sets: dict[str, list[str]], threads: int, width_step: int | None = None,
         width_scale: float | None = None, amp: str = "off") -> Column:
    """Our model on every set: ``Recognizer.predict_paths`` (batches of <= 64 equal-width lines); ``width_step`` /
    ``width_scale`` override the checkpoint's ``data.width_step`` / ``data.read_width_scale``, ``amp`` reads in bf16
    (amp="bf16": on a CPU the weights held in bfloat16; the column is then named ``WEIGHTS (width_step N,
    width_scale S, bf16)``)."""
    import torch

    from crnn.infer import Recognizer

    torch.set_num_threads(threads)
    rec = Recognizer.from_checkpoint(weights, device="cpu", amp=amp)
    given = []
    if width_step is not None:
        rec.config.data.width_step = rec.transform.width_step = width_step
        given.append(f"width_step {width_step}")
    if width_scale is not None:
        rec.config.data.read_width_scale = rec.transform.width_scale = width_scale
        given.append(f"width_scale {width_scale:g}")
    if amp != "off":
        given.append(amp)
    name = f"{weights} ({', '.join(given)})" if given else weights
    list(rec.predict_paths(next(iter(sets.values()))[:8]))  # warm-up, not timed
    col = Column(name, how=f"predict_paths, batches of <= 64 lines of equal resized width (width_step "
                           f"{rec.transform.width_step}, widths x {rec.transform.width_scale:g})")
    for name, paths in sets.items():
        t0, c0 = time.perf_counter(), time.process_time()
        col.readings[name] = [p.text or "" for p in rec.predict_paths(paths)]
        col.seconds += time.perf_counter() - t0
        col.cpu_seconds += time.process_time() - c0
        col.lines += len(paths)
    col.read = lambda paths: list(rec.predict_paths(paths))
    return col


def ppocr_engine(threads: int):
    """RapidOCR's PP-OCRv4 pipeline (recognition is used alone), or None when rapidocr is not installed."""
    try:
        from rapidocr_onnxruntime import RapidOCR
    except ImportError:
        return None
    kw = {"intra_op_num_threads": threads, "inter_op_num_threads": 1}
    try:
        return RapidOCR(**kw)
    except TypeError:  # an older rapidocr without these keywords: its defaults
        return RapidOCR()


def ppocr6_engine(threads: int):
    """RapidOCR 3.x's default pipeline, whose recogniser is PP-OCRv6 small (bundled in the wheel), or None."""
    try:
        from rapidocr import RapidOCR
    except ImportError:
        return None
    return RapidOCR(params={"EngineConfig.onnxruntime.intra_op_num_threads": threads,
                            "EngineConfig.onnxruntime.inter_op_num_threads": 1, "Global.log_level": "warning"})


def ppocr(engine, sets: dict[str, list[str]], version: int = 4) -> Column:
    """A PP-OCR recogniser on every set: one ``engine(path, use_det=False, use_cls=False)`` call per line
    (rapidocr_onnxruntime's API for PP-OCRv4, rapidocr 3.x's for PP-OCRv6)."""
    def read(path: str) -> str:
        if version == 6:
            out = engine(path, use_det=False, use_cls=False, use_rec=True)
            return out.txts[0] if out.txts else ""
        result, _ = engine(path, use_det=False, use_cls=False, use_rec=True)
        return result[0][0] if result else ""

    for p in next(iter(sets.values()))[:8]:  # warm-up, not timed
        read(p)
    col = Column(PPOCR6 if version == 6 else PPOCR,
                 how="RapidOCR()(path, use_det=False, use_cls=False): one line per call")
    for name, paths in sets.items():
        t0, c0 = time.perf_counter(), time.process_time()
        col.readings[name] = [read(p) for p in paths]
        col.seconds += time.perf_counter() - t0
        col.cpu_seconds += time.process_time() - c0
        col.lines += len(paths)
    col.read = lambda paths: [read(p) for p in paths]
    return col


def speed_sample(paths: dict[str, list[str]], num: int) -> list[str]:
    """``num`` lines taken evenly from all sets (all of them when there are fewer)."""
    every = [p for ps in paths.values() for p in ps]
    if len(every) <= num:
        return every
    return [every[i * len(every) // num] for i in range(num)]


def time_rounds(columns: list[Column], sample: list[str], rounds: int) -> None:
    """Interleaved timing: ``rounds`` rounds in which every column reads ``sample`` its own way (ours in batches,
    the peers one line per call), the order reversed every other round, so that a machine whose speed drifts or
    warms up moves them all alike; each round's lines/s goes to the column's ``rounds``."""
    timed = [c for c in columns if c.read is not None]
    for r in range(rounds):
        for col in timed if r % 2 == 0 else timed[::-1]:
            t0 = time.perf_counter()
            col.read(sample)
            col.rounds.append(len(sample) / (time.perf_counter() - t0))
        print(f"  timing round {r + 1}/{rounds}: " + ", ".join(f"{c.name} {c.rounds[-1]:.0f}" for c in timed),
              file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- scores and output
CLASSES = ("Hanzi", "Latin", "digits", "other")  # what a character of the truth is, for errors by class


def char_class(ch: str) -> str:
    """Hanzi (CJK unified ideographs), Latin letters, digits, or other (punctuation, spaces, symbols)."""
    if "\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf":
        return "Hanzi"
    if ch.isascii() and ch.isalpha():
        return "Latin"
    return "digits" if ch.isascii() and ch.isdigit() else "other"


def class_errors(pred: str, truth: str) -> dict[str, list[int]]:
    """{class: [errors, truth characters]} of one line under the unicode protocol: one minimal edit script, each
    substitution or deletion charged to the truth character's class, each insertion to the inserted one's."""
    from crnn.metrics import normalize_text

    p, t = normalize_text(pred, "unicode"), normalize_text(truth, "unicode")
    out = {c: [0, 0] for c in CLASSES}
    for ch in t:
        out[char_class(ch)][1] += 1
    d = [[i + j if i * j == 0 else 0 for j in range(len(p) + 1)] for i in range(len(t) + 1)]
    for i in range(1, len(t) + 1):
        for j in range(1, len(p) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (t[i - 1] != p[j - 1]))
    i, j = len(t), len(p)
    while i or j:  # walk one minimal path back, preferring a match or substitution
        if i and j and d[i][j] == d[i - 1][j - 1] + (t[i - 1] != p[j - 1]):
            out[char_class(t[i - 1])][0] += t[i - 1] != p[j - 1]
            i, j = i - 1, j - 1
        elif i and d[i][j] == d[i - 1][j] + 1:
            out[char_class(t[i - 1])][0] += 1
            i -= 1
        else:
            out[char_class(p[j - 1])][0] += 1
            j -= 1
    return out


def errors_by_class(preds: list[str], labels: list[str]) -> dict[str, dict[str, float]]:
    """Per character class: errors, truth characters and their ratio (the class's share of the set's CER)."""
    tot = {c: [0, 0] for c in CLASSES}
    for pred, truth in zip(preds, labels):
        for c, (e, n) in class_errors(pred, truth).items():
            tot[c][0] += e
            tot[c][1] += n
    return {c: {"errors": e, "chars": n, "cer": e / n if n else 0.0} for c, (e, n) in tot.items()}


def score(preds: list[str], labels: list[str]) -> dict[str, float]:
    """CER and line accuracy under the unicode protocol (crnn's metrics)."""
    from crnn.metrics import RecognitionMetrics

    m = RecognitionMetrics(protocol="unicode")
    m.update(preds, labels)
    r = m.compute()
    return {"cer": r["cer"], "line_acc": r["word_acc"], "samples": int(r["samples"])}


def by_face(preds: list[str], labels: list[str], name: str) -> dict[str, dict]:
    """A FACE_SETS set's scores per face (line i is in face i mod their number) with the face's style."""
    files = face_files(name)
    out = {}
    for k, path in enumerate(files):
        face = face_of(path)
        out[face.family] = {**score(preds[k::len(files)], labels[k::len(files)]), "style": face.style,
                            "file": face.file}
    return out


def results(columns: list[Column], labels: dict[str, list[str]]) -> list[dict]:
    """One row per recogniser: scores per set (per face on the face sets) and lines/s."""
    rows = []
    for col in columns:
        row = {"model": col.name, "how": col.how, "lines_per_s": col.lines / max(col.seconds, 1e-9),
               "lines_per_cpu_s": col.lines / max(col.cpu_seconds, 1e-9)}
        if col.rounds:  # the interleaved rounds' median replaces the scoring pass as the speed figure
            row.update({"lines_per_s_pass": row["lines_per_s"], "lines_per_s": statistics.median(col.rounds),
                        "rounds": col.rounds})
        row.update({name: {**score(col.readings[name], labels[name]),
                            "by_class": errors_by_class(col.readings[name], labels[name])} for name in labels})
        for name in set(labels) & set(FACE_SETS):
            row[name]["by_face"] = by_face(col.readings[name], labels[name], name)
        rows.append(row)
    for peer, key in ((PPOCR, "x_ppocr4"), (PPOCR6, "x_ppocr6_small")):  # issue 43: >= 3x both peers' lines/s
        base = next((r for r in rows if r["model"] == peer), None)
        for r in rows if base else []:
            if r.get("rounds") and base.get("rounds"):
                r[key] = statistics.median([a / b for a, b in zip(r["rounds"], base["rounds"])])
            else:
                r[key] = r["lines_per_s"] / base["lines_per_s"]
    return rows


def markdown_by_face(rows: list[dict], sets: list[str]) -> str:
    """CER (line accuracy) per held-out face of the face sets, one column per model, faces as rows."""
    out = []
    for s in (s for s in FACE_SETS if s in sets):
        faces = rows[0][s]["by_face"]
        out += [f"\n{SET_TITLES[s]}: CER (line accuracy) per face\n",
                "| face | style | " + " | ".join(r["model"] for r in rows) + " |", "|" + " --- |" * (len(rows) + 2)]
        for fam, f in faces.items():
            cells = [f"{100 * r[s]['by_face'][fam]['cer']:.2f} % ({100 * r[s]['by_face'][fam]['line_acc']:.0f} %)"
                     for r in rows]
            out.append(f"| {fam} | {f['style']} | " + " | ".join(cells) + " |")
        worst = [max(r[s]["by_face"].values(), key=lambda f: f["cer"])["cer"] for r in rows]
        out.append("| **all / worst face** | | " + " | ".join(
            f"**{100 * r[s]['cer']:.2f} %** / {100 * w:.2f} %" for r, w in zip(rows, worst)) + " |")
    return "\n".join(out)


def markdown(rows: list[dict], sets: list[str], num: int, threads: int, speed: str = "") -> str:
    """The results as a Markdown table (CER and line accuracy in %, per set; lines/s, in brackets x PP-OCRv4's /
    x PP-OCRv6 small's; ``speed``: how lines/s was timed, when not over the scoring pass)."""
    head = "| model | " + " | ".join(f"{SET_TITLES[s]}: CER / line acc" for s in sets) + " | lines/s |"
    out = [head, "|" + " --- |" * (len(sets) + 2)]
    for r in rows:
        cells = [f"{100 * r[s]['cer']:.2f} % / {100 * r[s]['line_acc']:.1f} %" for s in sets]
        x = [f"{r[k]:.1f}x" for k in ("x_ppocr4", "x_ppocr6_small") if k in r]
        ratio = f" ({' / '.join(x)})" if x and r["model"] not in (PPOCR, PPOCR6) else ""
        out.append(f"| {r['model']} | " + " | ".join(cells) + f" | {r['lines_per_s']:.0f}{ratio} |")
    lengths = ", ".join(f"{s}: {'%d-%d' % LONG_LEN if s == 'long' else 'as photographed' if s.startswith('real:') else f'{MIN_LEN}-{MAX_LEN}'}"
                        for s in sets)
    out.append(f"\n{num} lines per set (characters per line: {lengths}; text: held-out corpus words), protocol unicode; "
               f"lines/s {speed or 'over all sets'}, {threads} thread(s)"
               + (" (in brackets: x PP-OCRv4's / x PP-OCRv6 small's)" if any("x_ppocr4" in r for r in rows) else "")
               + ". " + "; ".join(f"{r['model']}: {r['how']}" for r in rows))
    return "\n".join(out)


def markdown_by_class(rows: list[dict], sets: list[str]) -> str:
    """Errors per character class (errors / truth characters of that class, summed over ``sets``) as Markdown."""
    head = "| model | " + " | ".join(f"{c}: errors / chars" for c in CLASSES) + " | all |"
    out = [head, "|" + " --- |" * (len(CLASSES) + 2)]
    for r in rows:
        tot = {c: [sum(r[s]["by_class"][c][k] for s in sets) for k in ("errors", "chars")] for c in CLASSES}
        cells = [f"{100 * e / n:.2f} % ({e} / {n})" if n else "-" for e, n in tot.values()]
        e, n = sum(v[0] for v in tot.values()), sum(v[1] for v in tot.values())
        out.append(f"| {r['model']} | " + " | ".join(cells) + f" | {100 * e / max(n, 1):.2f} % |")
    return "\n".join(out) + f"\n\nsets: {', '.join(sets)}; an insertion counts for the inserted character's class."


def write_readings(paths: dict[str, list[str]], labels: dict[str, list[str]], columns: list[Column],
                   out: Path) -> Path:
    """Every line's truth and readings as TSV: set, path, truth, then one column per model (for error analysis)."""
    rows = ["\t".join(["set", "path", "truth", *(c.name for c in columns)])]
    for s in paths:
        for i, path in enumerate(paths[s]):
            rows.append("\t".join([s, path, labels[s][i], *(c.readings[s][i] for c in columns)]))
    out.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return out


def contact_sheet(paths: dict[str, list[str]], labels: dict[str, list[str]], columns: list[Column], per_set: int,
                  out: Path) -> Path:
    """One PNG: the first ``per_set`` images of each set, each with its truth and every model's reading."""
    from PIL import Image, ImageDraw

    font = noto_sc(16)
    line_h, pad = 22, 6
    entries = [(s, i) for s in paths for i in range(min(per_set, len(paths[s])))]
    shown = [Image.open(paths[s][i]).convert("RGB") for s, i in entries]
    shown = [im.resize((max(1, round(im.width * 48 / im.height)), 48)) for im in shown]
    text_rows = 2 + len(columns)  # set + truth, then one per model
    width = max(640, max(im.width for im in shown) + 2 * pad)
    cell_h = 48 + text_rows * line_h + 2 * pad
    sheet = Image.new("RGB", (width, cell_h * len(entries)), "white")
    draw = ImageDraw.Draw(sheet)
    for k, ((s, i), im) in enumerate(zip(entries, shown)):
        y = k * cell_h + pad
        draw.line([(0, k * cell_h), (width, k * cell_h)], fill=(180, 180, 180))
        draw.text((pad, y), f"{SET_TITLES[s]} #{i}", fill=(90, 90, 90), font=font)
        sheet.paste(im, (pad, y + line_h))
        y += line_h + 48
        draw.text((pad, y), f"truth: {labels[s][i]}", fill=(0, 0, 0), font=font)
        for col in columns:
            y += line_h
            got = col.readings[s][i]
            ok = score([got], [labels[s][i]])["line_acc"] == 1.0
            draw.text((pad, y), f"{col.name}: {got}", fill=(0, 130, 0) if ok else (200, 0, 0), font=font)
    out.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(out)
    return out


# ----------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", action="append", metavar="NAME_OR_PATH",
                   help="our model: a shipped name (zh) or a checkpoint; repeat for several (default: zh)")
    p.add_argument("--width-step", type=int, action="append", metavar="N",
                   help="read our model(s) with data.width_step N instead of the checkpoint's (1 = each line at its "
                        "own width); repeat for a column per value, e.g. --width-step 1 --width-step 8")
    p.add_argument("--width-scale", type=float, action="append", metavar="S",
                   help="read our model(s) with data.read_width_scale S instead of the checkpoint's (1 = at the "
                        "trained widths); repeat for a column per value, e.g. --width-scale 1 --width-scale 1.15")
    p.add_argument("--amp", action="append", choices=("off", "bf16"), metavar="MODE",
                   help="our model read in fp32 (off, the default) or with its weights in bf16 (amp=bf16); repeat for "
                        "a column each")
    p.add_argument("--num", type=int, default=500, help="lines per set (default 500)")
    p.add_argument("--work", default=str(REPO / "data" / "zh_bench"), help="where the sets are cached")
    p.add_argument("--sets", default=",".join(SETS), help=f"comma-separated sets of {','.join(ALL_SETS)} "
                   f"(default {','.join(SETS)})")
    p.add_argument("--real", action="append", default=[], metavar="DIR",
                   help="also read a folder of photographed lines (gt.txt + SOURCE.txt naming its source and "
                        "licence), reported as a set of its own; repeatable")
    p.add_argument("--threads", type=int, default=2, help="torch / onnxruntime threads (default 2)")
    p.add_argument("--no-ppocr", action="store_true", help="leave PP-OCRv4 and PP-OCRv6 small out")
    p.add_argument("--speed-rounds", type=int, default=5, metavar="R",
                   help="after the scoring pass, R interleaved timing rounds over --speed-lines lines, the order "
                        "reversed every other round; lines/s is their median, a ratio the median of per-round "
                        "ratios (default 5; 0: time the scoring pass itself, each model in turn)")
    p.add_argument("--speed-lines", type=int, default=400, metavar="N",
                   help="lines read per model in each timing round, taken evenly from all sets (default 400)")
    p.add_argument("--sheet", default=None, help="contact sheet PNG (default: WORK/contact_sheet.png)")
    p.add_argument("--sheet-per-set", type=int, default=4, help="images per set on the contact sheet (default 4)")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")
    p.add_argument("--markdown", metavar="FILE", help="also write the tables (markdown) to FILE")
    p.add_argument("--by-font", action="store_true", help="only print CER per held-out face on the two unseen-font "
                   "sets, per model, from WORK/readings.tsv of an earlier run (no model is run)")
    p.add_argument("--build-only", action="store_true", help="make the sets (cached under --work) and stop: "
                   "training validates on WORK/heldout")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    if not sets or any(s not in ALL_SETS for s in sets) or args.num < 1:
        print(f"zh_benchmark: error: --sets takes {','.join(ALL_SETS)} and --num must be >= 1", file=sys.stderr)
        return 2
    if args.speed_rounds < 0 or args.speed_lines < 1:
        print("zh_benchmark: error: --speed-rounds must be >= 0 and --speed-lines >= 1", file=sys.stderr)
        return 2
    work = Path(args.work)
    if args.by_font:
        if not (work / "readings.tsv").is_file():
            print(f"zh_benchmark: error: no {work / 'readings.tsv'}: run the benchmark with --work {work} first",
                  file=sys.stderr)
            return 2
        print(markdown_by_font(work / "readings.tsv"))
        return 0
    paths, labels = {}, {}
    for s in sets:
        t0 = time.perf_counter()
        paths[s], labels[s] = read_set(build_set(s, work, args.num), args.num)
        print(f"set {s}: {len(paths[s])} lines in {work / s} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    for folder in map(Path, args.real):
        try:
            name, SET_TITLES[name] = real_set(folder)
        except ValueError as e:
            print(f"zh_benchmark: error: {e}", file=sys.stderr)
            return 2
        sets.append(name)
        paths[name], labels[name] = read_set(folder)
    if args.build_only:
        return 0
    columns = []
    from crnn.config import READ_WIDTH_SCALE_RANGE

    lo, hi = READ_WIDTH_SCALE_RANGE
    if any(n < 1 for n in args.width_step or []) or any(not lo <= s <= hi for s in args.width_scale or []):
        print(f"zh_benchmark: error: --width-step must be >= 1 and --width-scale within {lo:g}..{hi:g}",
              file=sys.stderr)
        return 2
    for w, step, scale, amp in [(w, n, s, a) for w in args.weights or ["zh"] for n in args.width_step or [None]
                                for s in args.width_scale or [None] for a in args.amp or ["off"]]:
        try:
            columns.append(ours(w, paths, args.threads, step, scale, amp))
        except (OSError, ValueError) as e:  # a missing shipped model, a bad checkpoint: skip this column
            print(f"zh_benchmark: skipped {w}: {' '.join(str(e).split())}", file=sys.stderr)
    if not args.no_ppocr:
        engine = ppocr_engine(args.threads)
        if engine is None:
            print("zh_benchmark: skipped PP-OCRv4: rapidocr_onnxruntime is not installed "
                  "(pip install rapidocr-onnxruntime)", file=sys.stderr)
        else:
            columns.append(ppocr(engine, paths))
        engine6 = ppocr6_engine(args.threads)
        if engine6 is None:
            print("zh_benchmark: skipped PP-OCRv6 small: rapidocr 3.x is not installed (pip install rapidocr==3.10.0)",
                  file=sys.stderr)
        else:
            columns.append(ppocr(engine6, paths, version=6))
    sample = speed_sample(paths, args.speed_lines)
    if args.speed_rounds and any(c.read for c in columns):
        print(f"timing: {args.speed_rounds} interleaved rounds of {len(sample)} lines ...", file=sys.stderr)
        time_rounds(columns, sample, args.speed_rounds)
    if columns:
        sheet = contact_sheet(paths, labels, columns, args.sheet_per_set,
                              Path(args.sheet) if args.sheet else work / "contact_sheet.png")
        print(f"contact sheet: {sheet}", file=sys.stderr)
    if columns:
        print(f"readings: {write_readings(paths, labels, columns, work / 'readings.tsv')}", file=sys.stderr)
    rows = results(columns, labels)
    how = (f"in {args.speed_rounds} interleaved rounds of {len(sample)} lines from all sets (median; a ratio: the "
           f"median of the rounds' ratios)") if args.speed_rounds and any(c.rounds for c in columns) else ""
    tables = markdown(rows, sets, args.num, args.threads, how) + "\n\nErrors by character class:\n" + markdown_by_class(
        rows, sets) + (markdown_by_face(rows, sets) if rows and set(sets) & set(FACE_SETS) else "")
    if args.markdown:
        Path(args.markdown).write_text(tables + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps({"num": args.num, "threads": args.threads, "protocol": "unicode",
                          "load_avg_1min": os.getloadavg()[0], "rows": rows},
                         ensure_ascii=False, indent=1))
    else:
        print(tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
