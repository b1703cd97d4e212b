"""The evaluation report as static HTML: index.html, extra error pages and img/*.png beside them; no server needed."""
from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from html import escape
from pathlib import Path

from PIL import Image

from crnn.data.vertical import vertical_line
from crnn.metrics import describe_protocol
from crnn.report import analysis as A
from crnn.report.svg import CHART_CSS, bar_chart

THUMB_HEIGHT, THUMB_MAX_WIDTH = 48, 420  # crops are shown at most this large (px)
TOP_CONFUSIONS = 30
MAX_DIFFERENT = 100  # crops shown where the compared readers disagree
MAX_NEVER_RIGHT = 400
LARGE_ALPHABET = 100  # distinct label characters from which characters are grouped by frequency


@dataclass
class DatasetInput:
    """One evaluated dataset: its crnn-eval row, the per-image samples and a way to fetch an image by index."""

    name: str
    row: dict  # the dataset's row of the crnn-eval summary (word_acc, cer, ned_similarity, ...)
    samples: list[A.Sample]
    image: Callable[[int], Image.Image | None]  # Sample.index -> the image as stored (None when unreadable)
    others: list[tuple[str, dict, dict[int, str]]] = field(default_factory=list)  # (name, scores, index -> text)


class _Images:
    """Writes each shown crop once as DIR/img/d{k}-{index}.png and returns its relative path."""

    def __init__(self, out: Path) -> None:
        self.dir = out / "img"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.done: dict[tuple[int, int], str] = {}

    def src(self, k: int, data: DatasetInput, index: int) -> str | None:
        """Relative URL of the crop (written on first use), None when the image cannot be read."""
        if (k, index) not in self.done:
            img = data.image(index)
            if img is None:
                return None
            name = f"d{k}-{index}.png"
            _thumbnail(img).save(self.dir / name, optimize=True)
            self.done[(k, index)] = f"img/{name}"
        return self.done[(k, index)]


def _thumbnail(img: Image.Image) -> Image.Image:
    """The crop scaled to THUMB_HEIGHT (never up by more than 2x) and at most THUMB_MAX_WIDTH wide, RGB or L."""
    img = img.convert("RGB") if img.mode not in ("RGB", "L") else img
    scale = min(THUMB_HEIGHT / img.height, THUMB_MAX_WIDTH / img.width, 2.0)
    if abs(scale - 1) > 0.05:
        img = img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))), Image.BILINEAR)
    return img


def readable_path(path: str | os.PathLike, cwd: str | os.PathLike | None = None, parts: int = 1) -> str:
    """A path as a reader of the report knows it: relative to ``cwd`` (default: the current directory) when it lies
    under it, else its last ``parts`` components (the folder's or file's name), never this machine's absolute path."""
    full = Path(os.path.abspath(path))
    base = Path(os.path.abspath(cwd if cwd is not None else os.getcwd()))
    if full != base and full.is_relative_to(base):
        return full.relative_to(base).as_posix()
    return "/".join(full.parts[-parts:]) if parts < len(full.parts) else full.as_posix()


def readable_names(paths: Sequence[str | os.PathLike], cwd: str | os.PathLike | None = None) -> list[str]:
    """:func:`readable_path` of each path, showing more of a path where two different paths would read alike."""
    full = [os.path.abspath(p) for p in paths]
    parts = [1] * len(paths)
    while True:
        names = [readable_path(p, cwd, k) for p, k in zip(paths, parts)]
        clash = [i for i, n in enumerate(names) if any(m == n and g != full[i] for m, g in zip(names, full))]
        if not clash or all(parts[i] >= len(Path(full[i]).parts) for i in clash):
            return names
        for i in clash:
            parts[i] += 1


def write_report(out: str | os.PathLike, datasets: Sequence[DatasetInput], meta: dict, *,
                 max_errors: int = 500, page_size: int = 100) -> Path:
    """Write ``out``/index.html (+ d{k}-errors-{p}.html pages, img/) for ``datasets``; returns the index path.

    ``meta`` is the crnn-eval summary (weights, protocol, decoder, ...). Each dataset's gallery shows its
    ``max_errors`` worst errors, ``page_size`` per page; every count on the pages covers all samples. The weights are
    named as :func:`readable_path` shows them (the datasets by the names their inputs carry: see
    :func:`readable_names`).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for stale in [*out.glob("d*-errors-*.html"), *out.glob("img/d*-*.png")]:  # a previous report's pages and crops
        stale.unlink()
    images = _Images(out)
    protocol = meta["protocol"]
    sections, nav = [], []
    for k, data in enumerate(datasets):
        rows = A.compare(data.samples, protocol)
        worst = A.worst_first(rows)[:max(0, max_errors)]
        pages = [worst[i:i + page_size] for i in range(0, len(worst), page_size)] or [[]]
        for p in range(1, len(pages)):
            _write(out / _page_name(k, p), f"{data.name}: errors, page {p + 1}",
                   _back_link(k, data.name) + _gallery(k, data, rows, pages, p, images))
        sections.append(_dataset_section(k, data, rows, pages, images, protocol, readable_path(str(meta["weights"]))))
        nav.append(f'<a href="#d{k}">{escape(data.name)}</a>')
    body = _header(meta) + f'<nav>{" · ".join(nav)}</nav>' + "".join(sections)
    index = out / "index.html"
    _write(index, "crnn evaluation report", body)
    return index


def _page_name(k: int, p: int) -> str:
    return "index.html" if p == 0 else f"d{k}-errors-{p + 1}.html"


def _back_link(k: int, name: str) -> str:
    return f'<p><a href="index.html#d{k}">&larr; back to the report on {escape(name)}</a></p>'


def _header(meta: dict) -> str:
    """Title and the settings every number depends on."""
    step = f", step {meta['step']}" if meta.get("step") is not None else ""
    protocol = describe_protocol(meta.get("protocol_requested", ""), meta["protocol"])
    warnings = "".join(f'<p class="warn">{escape(w)}</p>' for w in meta.get("warnings", []))
    weights = readable_path(str(meta["weights"]))
    tall = ""
    if "vertical" in meta:  # crnn-eval --vertical MODE: how the tall crops were read
        line = vertical_line(meta["vertical"], meta["overall"]["vertical"])
        tall = f"<tr><th>tall crops</th><td>{escape(line)}</td></tr>"
    return (f"<h1>Evaluation report</h1><table class='meta'>"
            f"<tr><th>weights</th><td>{escape(weights)} ({escape(str(meta.get('variant')))}, "
            f"{int(meta.get('num_classes', 1)) - 1} characters{step})</td></tr>"
            f"<tr><th>protocol</th><td>{escape(protocol)}"
            f"</td></tr><tr><th>decoder</th><td>{escape(str(meta.get('decoder')))}, "
            f"{meta.get('processes', 1)} process(es) on {escape(str(meta.get('device')))}</td></tr>"
            f"{tall}</table>{warnings}")


def _dataset_section(k: int, data: DatasetInput, rows: list[A.Row], pages: list, images: _Images,
                     protocol: str, weights: str = "model") -> str:
    """Summary, charts, confusions, characters and the first gallery page of one dataset."""
    calib = A.calibration(rows)
    parts = [f'<section class="dataset" id="d{k}"><h2>{escape(data.name)}</h2>',
             _summary(data.row, rows, protocol, A.expected_calibration_error(calib)),
             _comparison(k, data, rows, images, protocol, weights),
             "<h3>Where it fails</h3>", _charts(rows, calib),
             "<h3>Most frequent character confusions</h3>", _confusions(k, data, rows, images),
             "<h3>Characters</h3>", _characters(rows),
             "<h3>Errors, worst first</h3>", _gallery(k, data, rows, pages, 0, images), "</section>"]
    return "".join(parts)


def _comparison(k: int, data: DatasetInput, rows: list[A.Row], images: _Images, protocol: str, weights: str) -> str:
    """The other readers beside the model (crnn-eval --against, a second --weights): their scores side by side, then
    the crops where the readings differ - those one of them reads right and another wrong first."""
    if not data.others:
        return ""
    names = [weights, *(name for name, _, _ in data.others)]
    scores = [data.row, *(sc for _, sc, _ in data.others)]
    head = "".join(f"<th>{escape(n)}</th>" for n in names)
    cells = {key: "".join(f"<td class='num'>{fmt.format(sc.get(key, 0.0))}</td>" for sc in scores)
             for key, fmt in (("word_acc", "{:.2%}"), ("cer", "{:.4f}"), ("ned_similarity", "{:.4f}"))}
    failed = "".join(f"<td class='num'>{len(sc.get('failed', [])):,}</td>" for sc in scores)
    table = (f"<table class='cmp'><tr><th></th>{head}</tr><tr><th>word accuracy</th>{cells['word_acc']}</tr>"
             f"<tr><th>CER</th>{cells['cer']}</tr><tr><th>1-NED</th>{cells['ned_similarity']}</tr>"
             f"<tr><th>could not read (counted wrong)</th>{failed}</tr></table>")
    differ = []
    for r in rows:
        each = [r, *(A.compare([replace(r.sample, pred=got.get(r.sample.index, ""))], protocol)[0]
                     for _, _, got in data.others)]
        if len({x.guess for x in each}) > 1:
            split = len({x.correct for x in each}) > 1  # one reads it right, another does not
            differ.append((not split, r.sample.index, each))
    differ.sort(key=lambda d: d[:2])
    split = sum(not d[0] for d in differ)
    cards = "".join(_compared(images.src(k, data, d[1]), names, d[2]) for d in differ[:MAX_DIFFERENT])
    cap = f"; the first {MAX_DIFFERENT} are shown" if len(differ) > MAX_DIFFERENT else ""
    note = (f"<p>Read on the same {len(rows):,} images, one per call, under the same protocol. The readings differ "
            f"on {len(differ):,} crops: on {split:,} one reads right what another reads wrong (shown first), on "
            f"{len(differ) - split:,} they are wrong in different ways{cap}.</p>")
    return (f"<h3>Compared with other readers</h3>{table}{note}{LEGEND}"
            f"<div class='gallery'>{cards}</div>")


def _compared(src: str | None, names: list[str], each: list[A.Row]) -> str:
    """One crop where the readers disagree: the crop, its truth, and each reader's reading marked right or wrong."""
    reads = "".join(f"<div class='{'ok' if x.correct else 'bad'}'><span class='who'>{escape(n)}</span>"
                    f"{_marked_parts(x)[1]}</div>" for n, x in zip(names, each))
    return (f"<figure class='err cmp'>{_img(src, each[0])}<figcaption>"
            f"<div class='t'><span class='k'>truth</span><code>{escape(each[0].truth)}</code></div>{reads}"
            f"<div class='m'>image #{each[0].sample.index}</div></figcaption></figure>")


def _summary(row: dict, rows: list[A.Row], protocol: str, ece: float) -> str:
    """The dataset's numbers (all samples, not only the shown ones) as a row of boxes, then the protocol's effect."""
    n = len(rows)
    right = sum(r.correct for r in rows)
    changed = sum(r.truth != r.sample.label for r in rows)
    stats = [("word accuracy", f"{row.get('word_acc', right / max(n, 1)):.2%}"),
             ("CER", f"{row.get('cer', 0.0):.4f}"),
             ("1-NED (similarity)", f"{row.get('ned_similarity', 0.0):.4f}"),
             ("images", f"{n:,}"), ("read right", f"{right:,}"), ("errors", f"{n - right:,}"),
             ("calibration error", f"{ece:.3f}"),
             ("undecodable, skipped", f"{row.get('undecodable_images', 0):,}")]
    boxes = "".join(f"<div class='stat'><b>{escape(v)}</b><span>{escape(k)}</span></div>" for k, v in stats)
    note = (f"<p class='proto'>Protocol <b>{escape(protocol)}</b>: it changed {changed:,} of {n:,} labels and removed "
            f"{row.get('removed_share', 0.0):.1%} of the label characters before comparing; each error below shows "
            "the raw strings where they differ.</p>")
    return f"<div class='stats'>{boxes}</div>{note}"


def _charts(rows: list[A.Row], calib: list[A.Bin]) -> str:
    """Accuracy by label length, width, aspect ratio; calibration."""
    if not rows:
        return "<p>No images.</p>"
    charts = [bar_chart("Accuracy by label length", A.by_label_length(rows), x_title="characters (after protocol)"),
              bar_chart("Accuracy by image width", A.by_quantile(rows, lambda r: r.sample.width),
                        x_title="width of the stored crop (px)"),
              bar_chart("Accuracy by aspect ratio", A.by_quantile(rows, lambda r: _aspect(r.sample), fmt="{:.1f}"),
                        x_title="width / height"),
              bar_chart("Confidence calibration", calib, x_title="confidence bin (grey: share of images; "
                        "dashed: perfect)", diagonal=True, shares=True)]
    return f'<div class="charts">{"".join(charts)}</div>'


def _aspect(s: A.Sample) -> float:
    return s.width / s.height if s.height else 0.0


def _confusions(k: int, data: DatasetInput, rows: list[A.Row], images: _Images) -> str:
    """The substitutions / deletions / insertions seen in the most crops, each with an example crop (a crop on at
    most two cards)."""
    conf = A.confusions(rows)
    if not conf:
        return "<p>No character errors.</p>"
    by_index = {r.sample.index: r for r in rows}
    kinds = {A.SUB: "read as", A.DEL: "missed", A.INS: "added"}
    cards = []
    for c, example in A.top_confusions(conf, TOP_CONFUSIONS):
        what = (f"{_char(c.truth)} {kinds[c.kind]} {_char(c.pred)}" if c.kind == A.SUB
                else f"{kinds[c.kind]} {_char(c.truth or c.pred)}")
        r = by_index[example]
        crops = "crop" if c.count == 1 else "crops"
        cards.append(f"<figure class='conf'><div class='what'><b>{c.count:,}</b> {crops}: {what}</div>"
                     f"{_img(images.src(k, data, example), r)}{_marked(r)}</figure>")
    totals = {kind: sum(c.occurrences for c in conf if c.kind == kind) for kind in kinds}
    head = (f"<p>{totals[A.SUB]:,} substitutions, {totals[A.DEL]:,} deletions (truth characters missed), "
            f"{totals[A.INS]:,} insertions (extra characters read) in {len(conf):,} distinct confusions; "
            f"the {len(cards)} seen in the most crops (a crop counts once per card; one crop is shown on at most "
            "two cards), each with its clearest example:</p>")
    return head + LEGEND + f'<div class="confs">{"".join(cards)}</div>'


LEGEND = ("<p class='legend'><span class='s'>substituted</span><span class='d'>missed</span>"
          "<span class='i'>added</span> (truth and reading after the protocol)</p>")


def _characters(rows: list[A.Row]) -> str:
    """CER of characters by their frequency in the evaluated labels, and the characters never read right."""
    stats = A.char_stats(rows)
    if not stats:
        return "<p>No label characters.</p>"
    never = A.never_right(stats)
    note = (f"<p>{len(stats):,} distinct characters in the evaluated labels (after the protocol). Frequency = "
            "occurrences in these labels; error = the character was substituted or missed (insertions have no "
            "truth character).</p>")
    chart = bar_chart("Error rate by character frequency", A.cer_by_frequency(stats), rate="error",
                      x_title="occurrences in the evaluated labels")
    if len(stats) <= LARGE_ALPHABET:
        per_char = [A.Bin(_plain(s.char), s.occurrences, s.right) for s in stats]
        worst = [b for b in sorted(per_char, key=lambda b: (b.accuracy, -b.n)) if b.accuracy < 1][:30]
        if worst:
            chart += bar_chart(f"Error rate of the {len(worst)} most-missed characters", worst, rate="error",
                               x_title="character")
    items = "".join(f"<span class='ch' title='{s.occurrences} occurrence(s)'>{_char(s.char)}"
                    f"<small>&times;{s.occurrences}</small></span>" for s in never[:MAX_NEVER_RIGHT])
    more = f" and {len(never) - MAX_NEVER_RIGHT:,} more" if len(never) > MAX_NEVER_RIGHT else ""
    listing = (f"<p>Never read right: {len(never):,} character(s), most frequent first (&times; occurrences)"
               f"{more}:</p><div class='never'>{items}</div>" if never else "<p>Every character was read right "
                                                                          "at least once.</p>")
    return note + f'<div class="charts">{chart}</div>' + listing


def _gallery(k: int, data: DatasetInput, rows: list[A.Row], pages: list, p: int, images: _Images) -> str:
    """One page of the error gallery with its pager."""
    errors = sum(not r.correct for r in rows)
    shown = sum(len(pg) for pg in pages)
    if not errors:
        return "<p>No errors.</p>"
    start = sum(len(pg) for pg in pages[:p])
    cap = f" (the {shown:,} worst are shown)" if shown < errors else ""
    head = (f"<p>{errors:,} errors{cap}; page {p + 1} of {len(pages)}: errors {start + 1:,}-{start + len(pages[p]):,},"
            " sorted by normalised edit distance, then confidence.</p>")
    cards = "".join(_card(images.src(k, data, r.sample.index), r) for r in pages[p])
    pager = _pager(k, len(pages), p)
    return head + LEGEND + pager + f'<div class="gallery">{cards}</div>' + pager


def _pager(k: int, n: int, p: int) -> str:
    if n <= 1:
        return ""
    links = [f"<b>{i + 1}</b>" if i == p else f'<a href="{_page_name(k, i)}{"#d%d" % k if i == 0 else ""}">{i + 1}</a>'
             for i in range(n)]
    return f'<div class="pager">pages: {" ".join(links)}</div>'


def _card(src: str | None, r: A.Row) -> str:
    """One error: crop, truth and reading with the differing characters marked, confidence, raw strings."""
    s = r.sample
    raw = ""
    if r.truth != s.label or r.guess != s.pred:
        raw = (f"<div class='raw'>raw: <q>{escape(s.label)}</q> &rarr; <q>{escape(s.pred)}</q> "
               "(before the protocol)</div>")
    return (f"<figure class='err'>{_img(src, r)}<figcaption>{_marked(r)}"
            f"<div class='m'>confidence {s.confidence:.2f} · distance {r.distance} · image #{s.index}</div>"
            f"{raw}</figcaption></figure>")


def _img(src: str | None, r: A.Row) -> str:
    if src is None:
        return "<span class='noimg'>(image unreadable)</span>"
    return f'<img src="{escape(src)}" alt="{escape(r.sample.label)}">'


def _marked(r: A.Row) -> str:
    """Truth and reading (after the protocol) with substituted, missed and added characters marked."""
    return "".join(_marked_parts(r))


def _marked_parts(r: A.Row) -> tuple[str, str]:
    """:func:`_marked`'s truth line and reading line."""
    truth: list[tuple[str, str]] = []  # (css class, char); "" = unchanged
    read: list[tuple[str, str]] = []
    for op, t, g in r.ops or [(A.EQ, c, c) for c in r.truth]:
        cls = {A.EQ: "", A.SUB: "s", A.DEL: "d", A.INS: "i"}[op]
        if op != A.INS:
            truth.append((cls, t))
        if op != A.DEL:
            read.append((cls, g))
    read_html = _runs(read) or "<span class='none'>(nothing read)</span>"
    return (f"<div class='t'><span class='k'>truth</span><code>{_runs(truth)}</code></div>",
            f"<div class='p'><span class='k'>read</span><code>{read_html}</code></div>")


def _runs(chars: list[tuple[str, str]]) -> str:
    """Escaped characters, each run of one class in one span."""
    out, i = [], 0
    while i < len(chars):
        j = i
        while j < len(chars) and chars[j][0] == chars[i][0]:
            j += 1
        text = escape("".join(c for _, c in chars[i:j]))
        out.append(f"<span class='{chars[i][0]}'>{text}</span>" if chars[i][0] else text)
        i = j
    return "".join(out)


def _plain(c: str) -> str:
    return "␠" if c == " " else c


def _char(c: str) -> str:
    return f"<code class='c'>{escape(_plain(c))}</code>"


def _write(path: Path, title: str, body: str) -> None:
    """A complete page: styles, the body, and the script that marks images that did not load."""
    html = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{CSS}{CHART_CSS}</style>'
            f'</head><body><div id="broken" class="warn" hidden></div>{body}<script>{CHECK_IMAGES}</script>'
            f"</body></html>\n")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, path)


# After load, <body data-images=N data-broken=M>; a banner names the fix when crops did not load.
CHECK_IMAGES = """
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var broken = imgs.filter(function (i) { return !i.complete || i.naturalWidth === 0; });
  document.body.setAttribute('data-images', imgs.length);
  document.body.setAttribute('data-broken', broken.length);
  if (broken.length) {
    var b = document.getElementById('broken');
    b.textContent = broken.length + ' of ' + imgs.length + ' images did not load: keep the img/ folder next to '
      + 'this page when moving it.';
    b.hidden = false;
  }
});
"""

CSS = """
body { font: 14px/1.45 system-ui, sans-serif, "Noto Sans CJK SC"; margin: 0 auto; padding: 12px 24px;
       max-width: 1600px; color: #222; background: #fafafa; }
h1 { font-size: 22px; margin: 6px 0 10px; }
h2 { font-size: 18px; border-bottom: 2px solid #4a8fd4; padding-bottom: 3px; }
h3 { font-size: 15px; margin: 18px 0 6px; color: #333; }
nav { margin: 6px 0 14px; } nav a { margin-right: 6px; }
table { border-collapse: collapse; background: #fff; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: middle; }
table.meta th { background: #f1f4f8; font-weight: 600; }
.stats { display: flex; flex-wrap: wrap; gap: 8px; margin: 8px 0; }
.stat { background: #fff; border: 1px solid #ddd; border-radius: 4px; padding: 6px 12px; min-width: 96px; }
.stat b { display: block; font-size: 20px; font-variant-numeric: tabular-nums; }
.stat span { color: #666; font-size: 12px; }
.proto { color: #444; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.warn { background: #fff3cd; border: 1px solid #f0ad4e; padding: 6px 10px; }
.charts { display: flex; flex-wrap: wrap; }
.gallery { display: grid; grid-template-columns: repeat(auto-fill, minmax(230px, 1fr)); gap: 8px; }
figure.err { margin: 0; background: #fff; border: 1px solid #ddd; border-radius: 4px; padding: 6px; }
figure.err img { display: block; max-width: 100%; height: 48px; object-fit: contain; object-position: left;
                 image-rendering: auto; margin-bottom: 4px; background: #eee; }
.confs { display: grid; grid-template-columns: repeat(auto-fill, minmax(190px, 1fr)); gap: 6px; }
figure.conf { margin: 0; background: #fff; border: 1px solid #ddd; border-radius: 4px; padding: 4px 6px; }
figure.conf img { height: 32px; display: block; max-width: 100%; object-fit: contain; object-position: left;
                  margin: 3px 0; }
.what { font-size: 13px; }
code { font: 14px/1.3 ui-monospace, "DejaVu Sans Mono", monospace, "Noto Sans CJK SC"; white-space: pre; }
.k { display: inline-block; width: 38px; color: #888; font-size: 11px; }
.s { background: #ffe08a; } .d { background: #f7b3b0; text-decoration: line-through; }
.i { background: #b9e3f9; text-decoration: underline; } .none { color: #999; font-style: italic; }
.m, .raw { color: #666; font-size: 11px; } .raw q { white-space: pre; }
.never { display: flex; flex-wrap: wrap; gap: 4px; }
.ch { background: #fff; border: 1px solid #ddd; padding: 1px 4px; border-radius: 3px; }
.ch small { color: #999; font-size: 10px; margin-left: 2px; }
.pager { margin: 6px 0; } .pager a, .pager b { margin-right: 4px; }
table.cmp td, table.cmp th { font-size: 13px; } table.cmp th { background: #f1f4f8; }
figure.cmp .ok .p, figure.cmp .bad .p { display: inline; } .who { display: block; font-size: 11px; color: #555; }
figure.cmp .ok { border-left: 3px solid #5cb85c; padding-left: 4px; margin: 2px 0; }
figure.cmp .bad { border-left: 3px solid #d9534f; padding-left: 4px; margin: 2px 0; }
.legend { font-size: 12px; color: #666; } .legend span { padding: 0 4px; margin-right: 8px; color: #222; }
"""
