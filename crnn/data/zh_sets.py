"""The Chinese yardstick's sets: 4-12 character lines of held-out words, rendered with fixed seeds and cached.

Text comes from the tenth of the corpus words that training never draws (``crnn-synth --split heldout`` words, by
frequency, without the uniformly drawn rare characters of training lines); each set is built once under a work folder
(PNG/JPEG files + ``gt.txt``, so ``crnn-eval --data WORK/SET`` reads it too), line i depending only on (set, seed, i):

- ``heldout``: the held-out CJK fonts (``--split heldout``) with the generator's usual damage (JPEG, blur, slight
  rotation, gradient and noisy backgrounds, dark-on-light and light-on-dark) but no clutter (fragments of
  neighbouring text at the edges would make the truth ambiguous);
- ``seen``: the same text source and damage, drawn in the training fonts;
- ``clean``: black on white, no effects, Noto Sans CJK SC Regular (a training font), rendered here with PIL;
- ``unseen_clean``: black on white, no effects, in the held-out CJK fonts (LXGW WenKai, AR PL SungtiL/KaitiM GB);
- ``unseen_print``: the same fonts with print damage and nothing else - JPEG (quality 30-95) always, Gaussian blur
  (radius 0.4-1.4 px at 40 px line height) on 60 %, a gradient background on half, light text on dark on a quarter;
- ``long``: as ``clean`` but 24-40 characters, longer than any training line (up to 12);
- ``dev_print`` / ``final_print``: faces held out by design (crnn/data/cjk_faces.tsv, role dev / final), line i in
  face i mod their number, with ``unseen_print``'s damage;
- ``trad_print``: the same held-out words in traditional forms (crnn/data/traditional.py), each line in OpenCC's,
  Taiwan's or Hong Kong's forms (equal odds), labels in ``zh_gb2312_trad``, each line with at least one
  traditional-only form, in the development faces that draw 90 % or more of that alphabet's OpenCC forms and of its
  Taiwan and Hong Kong forms.

``scripts/zh_benchmark.py`` builds and reads them (``--build-only`` only builds).
"""
from __future__ import annotations

import bisect
import functools
import io
import itertools
import json
import os
import random
from pathlib import Path

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
