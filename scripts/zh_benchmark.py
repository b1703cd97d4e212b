"""The Chinese text-line yardstick: our model(s) next to PP-OCRv4's and PP-OCRv6 small's recognisers on the same lines,
in one run, on the harness of crnn/yardstick (docs/compare.md).

    python scripts/zh_benchmark.py                                # weights zh, 500 lines per set, data/zh_bench/
    python scripts/zh_benchmark.py --weights zh --weights runs/zh_lines/best.pt --num 500 --json
    python scripts/zh_benchmark.py --num 20 --no-ppocr --work /tmp/zb # a quick look (sheet: /tmp/zb/contact_sheet.png)
    python scripts/zh_benchmark.py --width-step 1 --width-step 8      # the same weights read at two width roundings
    python scripts/zh_benchmark.py --width-scale 1 --width-scale 1.15 # ...at the trained widths and 1.15x as wide
    python scripts/zh_benchmark.py --batched                          # ...and ours read in batches, a row of its own
    python scripts/zh_benchmark.py --build-only --sets dev_print --num 1200 --work data/zh_faces   # only the sets

The sets (crnn/data/zh_sets.py: held-out words rendered with fixed seeds, cached under ``--work``): heldout, seen,
clean, unseen_clean, unseen_print by default; long, dev_print, final_print and trad_print with ``--sets``; a folder of
photographed lines with ``--real``. Scores are crnn's metrics under the ``unicode`` protocol (NFKC, whitespace
collapsed): CER and line accuracy, the errors by character class (Hanzi, Latin, digits, other; one minimal edit
script per line) and, on the face sets, per face.

Speed is lines/s reading one line per call for every model: ours through ``crnn.Recognizer(weights,
amp=...).read(path)``, read with ``--amp auto`` (bf16 where it measures faster on this CPU) and in float32 (a row
each; the auto row is left out where auto is float32 here), the peers through ``RapidOCR()(path, use_det=False,
use_cls=False)`` (rapidocr_onnxruntime 1.4.4 for PP-OCRv4, rapidocr 3.10 for PP-OCRv6 small). ``--batched`` adds ours
read in batches of equal resized width as a separately labelled row (``NAME, batched``), never mixed into the others.
After the scoring pass, ``--speed-rounds`` interleaved rounds (default 5) over ``--speed-lines`` lines taken evenly
from all sets (default 400): every model reads them in each round, the order reversed every other round; lines/s is
the median over the rounds, a ratio to a peer the median of the per-round ratios. torch and onnxruntime are limited
to ``--threads`` (default 2). Speed is this machine's: run the real yardstick with nothing else running (pause
training first), e.g. ``python scripts/zh_benchmark.py --weights zh --sets dev_print,final_print --num 1200 --work
data/zh_faces --json --markdown faces.md > faces.json``. The peers come from ``pip install -e ".[peers]"``; without
one its row is skipped with one line (``--require-peers``: an error before anything is read instead, as a model
card's report wants). A line a model raises on reads as "" (wrong) and is listed in the JSON (``failed``). Every
reading goes to WORK/readings.tsv, a contact sheet of the first lines of each set to WORK/contact_sheet.png
(``--sheet``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from crnn.data.zh_sets import (  # noqa: E402,F401  (the sets live in the library; these names stay importable here)
    ALL_SETS, FACE_SETS, FONT_GROUPS, LONG_LEN, MAX_LEN, MIN_LEN, SEEDS, SET_TITLES, SETS, TRAD_STANDARDS, bench_text,
    build_set, face_files, face_of, font_group, line_fonts, line_len, line_options, noto_sc, read_set, real_set,
    sample, set_fonts, text_source, trad_faces, trad_form_groups, traditional)
from crnn.yardstick.readers import PPOCR4 as PPOCR  # noqa: E402
from crnn.yardstick.readers import PPOCR6  # noqa: E402
from crnn.yardstick.run import Column  # noqa: E402

PROTOCOL = "unicode"
CLASSES = ("Hanzi", "Latin", "digits", "other")  # what a character of the truth is, for errors by class


# ----------------------------------------------------------------------------- scores
def char_class(ch: str) -> str:
    """Hanzi (CJK unified ideographs), Latin letters, digits, or other (punctuation, spaces, symbols)."""
    if "\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf":
        return "Hanzi"
    if ch.isascii() and ch.isalpha():
        return "Latin"
    return "digits" if ch.isascii() and ch.isdigit() else "other"


def class_errors(pred: str, truth: str) -> dict[str, list[int]]:
    """{class: [errors, truth characters]} of one line under the unicode protocol: one minimal edit script (the
    report's alignment), each substitution or deletion charged to the truth character's class, each insertion to
    the inserted one's."""
    from crnn.metrics import normalize_text
    from crnn.report.analysis import EQ, INS, align

    t = normalize_text(truth, PROTOCOL)
    out = {c: [0, 0] for c in CLASSES}
    for ch in t:
        out[char_class(ch)][1] += 1
    for op, tc, pc in align(t, normalize_text(pred, PROTOCOL)):
        if op != EQ:
            out[char_class(pc if op == INS else tc)][0] += 1
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
    from crnn.yardstick.run import score as harness_score

    r = harness_score(preds, labels, PROTOCOL)
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


def results(columns: list[Column], labels: dict[str, list[str]], paths: dict[str, list[str]] | None = None
            ) -> list[dict]:
    """One row per model: scores per set (per face on the face sets), lines/s and the ratios to both peers."""
    from crnn.yardstick.run import add_ratios, failures, speed

    rows = []
    for col in columns:
        row = {"model": col.name, "how": col.how, **speed(col, "lines")}
        row.update({s: {**score(col.readings[s], labels[s]), "by_class": errors_by_class(col.readings[s], labels[s])}
                    for s in labels})
        for s in set(labels) & set(FACE_SETS):
            row[s]["by_face"] = by_face(col.readings[s], labels[s], s)
        if paths and (failed := failures(col, paths)):
            row["failed"] = failed
        rows.append(row)
    add_ratios(rows, PPOCR, "x_ppocr4", "lines")  # issue 43: >= 3x both peers' lines/s
    add_ratios(rows, PPOCR6, "x_ppocr6_small", "lines")
    return rows


# ----------------------------------------------------------------------------- tables
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
    lengths = ", ".join(f"{s}: " + ("%d-%d" % LONG_LEN if s == "long" else "as photographed" if s.startswith("real:")
                                    else f"{MIN_LEN}-{MAX_LEN}") for s in sets)
    out.append(f"\n{num} lines per set (characters per line: {lengths}; text: held-out corpus words), protocol "
               f"unicode; lines/s one line per call (a batched row: in batches) {speed or 'over all sets'}, {threads} "
               "thread(s)" + (" (in brackets: x PP-OCRv4's / x PP-OCRv6 small's)" if any("x_ppocr4" in r for r in rows)
                              else "") + ". " + "; ".join(f"{r['model']}: {r['how']}" for r in rows))
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
            truth = normalize_text(ln[2], PROTOCOL)
            for m, pred in zip(models, ln[3:]):
                t = tot.setdefault((font_group(font), m), [0, 0])
                t[0] += edit_distance(normalize_text(pred, PROTOCOL), truth)
                t[1] += len(truth)
    groups = [g for g in [*(g for g, _ in FONT_GROUPS), "Latin faces (Latin-only lines)"] if (g, models[0]) in tot]
    out = ["| model | " + " | ".join(f"{g}: CER (errors / chars)" for g in groups) + " |",
           "|" + " --- |" * (len(groups) + 1)]
    for m in models:
        cells = [f"{100 * e / max(n, 1):.2f} % ({e} / {n})" for e, n in (tot[(g, m)] for g in groups)]
        out.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(out) + f"\n\nsets: {', '.join(s for s in sets if by_set[s])} ({readings})."


def contact_sheet(paths: dict[str, list[str]], labels: dict[str, list[str]], columns: list[Column], per_set: int,
                  out: Path) -> Path:
    """One PNG: the first ``per_set`` images of each set, each with its truth and every model's reading."""
    from PIL import Image, ImageDraw

    font = noto_sc(16)
    line_h, pad = 22, 6
    entries = [(s, i) for s in paths for i in range(min(per_set, len(paths[s])))]
    shown = [Image.open(paths[s][i]).convert("RGB") for s, i in entries]
    shown = [im.resize((max(1, round(im.width * 48 / im.height)), 48)) for im in shown]
    width = max(640, max(im.width for im in shown) + 2 * pad)
    cell_h = 48 + (2 + len(columns)) * line_h + 2 * pad  # set + truth, then one line per model
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
                        "own width); repeat for a row per value, e.g. --width-step 1 --width-step 8")
    p.add_argument("--width-scale", type=float, action="append", metavar="S",
                   help="read our model(s) with data.read_width_scale S instead of the checkpoint's (1 = at the "
                        "trained widths); repeat for a row per value, e.g. --width-scale 1 --width-scale 1.15")
    p.add_argument("--amp", action="append", choices=("off", "auto", "bf16"), metavar="MODE",
                   help="our model read in float32 (off), bf16 where it measures faster here (auto) or with its "
                        "weights in bf16 (bf16); repeat for a row each (default: auto and off; auto is left out "
                        "where it resolves to float32 beside an off row)")
    p.add_argument("--batched", action="store_true",
                   help="also read our model(s) in batches of equal resized width: a row of its own, 'NAME, batched'")
    p.add_argument("--num", type=int, default=500, help="lines per set (default 500)")
    p.add_argument("--work", default=str(REPO / "data" / "zh_bench"), help="where the sets are cached")
    p.add_argument("--sets", default=",".join(SETS), help=f"comma-separated sets of {','.join(ALL_SETS)} "
                   f"(default {','.join(SETS)})")
    p.add_argument("--real", action="append", default=[], metavar="DIR",
                   help="also read a folder of photographed lines (gt.txt + SOURCE.txt naming its source and "
                        "licence), reported as a set of its own; repeatable")
    p.add_argument("--threads", type=int, default=2, help="torch / onnxruntime threads (default 2)")
    p.add_argument("--no-ppocr", action="store_true", help="leave PP-OCRv4 and PP-OCRv6 small out")
    p.add_argument("--require-peers", action="store_true",
                   help="stop with an error, before reading anything, when a peer is not installed (a model card's "
                        "figures are read beside both; without it a missing peer's row is skipped with one line)")
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


def check(args: argparse.Namespace, sets: list[str]) -> str:
    """What is wrong with the options, in one line ("" when nothing is)."""
    from crnn.config import READ_WIDTH_SCALE_RANGE

    lo, hi = READ_WIDTH_SCALE_RANGE
    if not sets or any(s not in ALL_SETS for s in sets) or args.num < 1:
        return f"--sets takes {','.join(ALL_SETS)} and --num must be >= 1"
    if args.speed_rounds < 0 or args.speed_lines < 1:
        return "--speed-rounds must be >= 0 and --speed-lines >= 1"
    if any(n < 1 for n in args.width_step or []) or any(not lo <= s <= hi for s in args.width_scale or []):
        return f"--width-step must be >= 1 and --width-scale within {lo:g}..{hi:g}"
    if args.require_peers:
        from crnn.yardstick.readers import PPOCR4, PPOCR6, PeerMissing, require_peers

        if args.no_ppocr:
            return "--require-peers reads beside PP-OCRv4 and PP-OCRv6 small: leave out --no-ppocr"
        try:
            require_peers(PPOCR4, PPOCR6)
        except PeerMissing as e:
            return f"{e}; --require-peers reads beside both"
    return ""


def make_readers(args: argparse.Namespace) -> list:
    """Ours per weights, width step, width scale and precision (then batched, with --batched); the peers."""
    from crnn.yardstick.readers import PeerMissing, batched, ours, ppocr_v4, ppocr_v6

    amps = args.amp or ["auto", "off"]
    out = []
    for w, step, scale, amp in [(w, n, s, a) for w in args.weights or ["zh"] for n in args.width_step or [None]
                                for s in args.width_scale or [None] for a in amps]:
        try:
            reader = ours(w, amp, width_step=step, width_scale=scale)
        except (OSError, ValueError) as e:  # a missing shipped model, a bad checkpoint: skip this row
            print(f"zh_benchmark: skipped {w}: {' '.join(str(e).split())}", file=sys.stderr)
            continue
        if amp == "auto" and "off" in amps and reader.name.endswith("auto: off)"):
            print(f"zh_benchmark: {reader.name} reads in float32 here: only the float32 row", file=sys.stderr)
            continue
        out.append(reader)
    out += [batched(r) for r in out] if args.batched else []
    for make in () if args.no_ppocr else (ppocr_v4, ppocr_v6):
        try:
            out.append(make(args.threads))
        except PeerMissing as e:
            print(f"zh_benchmark: skipped {e}", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    if problem := check(args, sets):
        print(f"zh_benchmark: error: {problem}", file=sys.stderr)
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
    import torch

    from crnn.yardstick.run import read_sets, speed_sample, time_rounds, write_readings

    torch.set_num_threads(args.threads)
    readers = make_readers(args)
    columns = []
    for r in readers:
        print(f"reading with {r.name} ...", file=sys.stderr, flush=True)
        columns.append(read_sets(r, paths))
    sample = speed_sample(paths, args.speed_lines)
    if args.speed_rounds and columns:
        print(f"timing: {args.speed_rounds} interleaved rounds of {len(sample)} lines ...", file=sys.stderr)
        timed = {r.name: r.timed() for r in readers}
        for name, got in time_rounds(timed, sample, args.speed_rounds, lambda m: print(m, file=sys.stderr)).items():
            next(c for c in columns if c.name == name).rounds = got
    if columns:
        sheet = contact_sheet(paths, labels, columns, args.sheet_per_set,
                              Path(args.sheet) if args.sheet else work / "contact_sheet.png")
        print(f"contact sheet: {sheet}", file=sys.stderr)
        print(f"readings: {write_readings(work, paths, labels, columns)}", file=sys.stderr)
    rows = results(columns, labels, paths)
    how = (f"in {args.speed_rounds} interleaved rounds of {len(sample)} lines from all sets (median; a ratio: the "
           f"median of the rounds' ratios)") if args.speed_rounds and columns else ""
    tables = markdown(rows, sets, args.num, args.threads, how) + "\n\nErrors by character class:\n" + markdown_by_class(
        rows, sets) + (markdown_by_face(rows, sets) if rows and set(sets) & set(FACE_SETS) else "")
    if args.markdown:
        Path(args.markdown).write_text(tables + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps({"num": args.num, "threads": args.threads, "protocol": PROTOCOL,
                          "load_avg_1min": os.getloadavg()[0], "rows": rows}, ensure_ascii=False, indent=1))
    else:
        print(tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
