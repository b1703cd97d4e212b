"""crnn-serve under load on this machine (loopback only) against crnn.Recognizer reading the same crops one by one.

    python benchmarks/bench_serve.py                         # shipped model; 1, 8, 32 clients; 10,000 requests
    python benchmarks/bench_serve.py --quick --out /tmp/bench_serve.json
    python benchmarks/bench_serve.py --weights runs/x/best.pt --clients 1,16,64 --total 20000

The server is ``crnn-serve`` in a subprocess on 127.0.0.1 (a free port), with its default settings unless given.
Each request carries one crop (multipart, as ``curl -F image=@crop.png`` sends it), so requests/s = crops/s. The
clients are asyncio tasks in this process, each on its own keep-alive connection, sending the next request as soon
as the last one is answered (closed loop); they send prebuilt bytes, so they cost the machine little next to the
server. The baseline is ``crnn.Recognizer.read(path)`` called once per crop in this process with the same number
of torch threads as the server's forward pass (what a naive service does per request, without HTTP); the batched
``Recognizer.read(paths)`` is timed too, as the ceiling batching can reach. Rounds interleave baseline and client
counts; the table gives the median over rounds. Every answer is checked: a failure is a non-200 answer, a broken
connection, or a text different from the baseline's reading of that crop. The server's resident memory
(VmRSS) is read after ``--first`` requests and after ``--total``.

Crops: the shared ``iiit5k_train`` (``$CRNN_SHARED_DATA``, else ``../shared/data``) when it is there, else words
rendered here with DejaVu Sans, so the speeds compare either way.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

from crnn.shared_data import shared_dataset

REPO = Path(__file__).resolve().parent.parent
BOUNDARY = "benchServeBoundary0x5f3759df"
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", default="en", help="model to serve (default: the shipped en)")
    p.add_argument("--crops", type=int, default=500, help="distinct crops cycled through (default 500)")
    p.add_argument("--clients", default="1,8,32", help="concurrent clients per level (default 1,8,32)")
    p.add_argument("--requests", type=int, default=800, help="requests per level and round (default 800)")
    p.add_argument("--baseline", type=int, default=300, help="one-by-one reads per round (default 300)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    p.add_argument("--first", type=int, default=1000, help="memory is read after this many requests (default 1,000)")
    p.add_argument("--total", type=int, default=10000, help="... and after this many in all (default 10,000)")
    p.add_argument("--seconds", type=float, default=60.0, help="at most this long per level and round (default 60)")
    p.add_argument("--server-args", default="", help="extra crnn-serve options, e.g. '--max-wait-ms 2'")
    p.add_argument("--quick", action="store_true", help="CI size: 40 crops, 2 rounds, 50 requests per level, "
                                                        "memory after 50 and 200 requests")
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args(argv)
    if args.quick:
        args.crops, args.requests, args.baseline, args.rounds = 40, 50, 30, 2
        args.first, args.total, args.seconds = 50, 200, 15.0
    args.levels = [int(c) for c in args.clients.split(",")]
    return args


# ---------------------------------------------------------------------------- crops
def crops(n: int, folder: Path) -> tuple[list[Path], str]:
    """``n`` crop files: the shared iiit5k_train when present, else rendered words (written to ``folder``)."""
    real = shared_dataset("iiit5k_train")
    if real is not None:
        lines = [ln.split("\t", 1)[0] for ln in (real / "gt.txt").read_text(encoding="utf-8").splitlines() if ln]
        return [real / rel for rel in lines[:n]], "iiit5k_train (real crops)"
    from PIL import Image, ImageDraw, ImageFont

    rng = random.Random(0)
    words = [w.strip() for w in (REPO / "crnn" / "data" / "words.txt").read_text(encoding="utf-8").split()
             if w.strip().isalpha()] or ["word"]
    font = ImageFont.truetype(FONT, 26) if Path(FONT).is_file() else ImageFont.load_default()
    paths = []
    for i in range(n):
        text = rng.choice(words)
        w = int(font.getlength(text)) + 12
        img = Image.new("L", (w, 36), 255)
        ImageDraw.Draw(img).text((6, 3), text, fill=rng.randint(0, 80), font=font)
        paths.append(folder / f"{i}.png")
        img.save(paths[-1])
    return paths, "rendered words (no shared real crops found)"


def request_bytes(data: bytes, name: str) -> bytes:
    """A whole HTTP/1.1 keep-alive POST /v1/read with one multipart image."""
    body = (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="image"; filename="{name}"\r\n'
            f"Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{BOUNDARY}--\r\n".encode()
    head = (f"POST /v1/read HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary={BOUNDARY}"
            f"\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    return head + body


# ---------------------------------------------------------------------------- the server
class Server:
    """crnn-serve in a subprocess on 127.0.0.1."""

    def __init__(self, weights: str, extra: list[str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "crnn.cli.serve", "--host", "127.0.0.1", "--port", "0",
                                      "--weights", weights, *extra], cwd=REPO, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.log: list[str] = []
        self.port = 0
        for line in self.proc.stderr:
            self.log.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if not self.port:
            self.proc.wait()
            raise SystemExit("bench_serve: error: the server did not start:\n" + "".join(self.log))
        self.threads = int(re.search(r"(\d+) torch thread", "".join(self.log)).group(1))
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()

    def rss_mib(self) -> float:
        """Resident memory of the server process."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024

    def stop(self) -> int:
        """SIGTERM, then the exit code (0 after a clean drain)."""
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


# ---------------------------------------------------------------------------- the clients
async def one_client(port: int, reqs: list[bytes], want: list[str], order: list[int], lat: list[float],
                     errors: list[str], deadline: float) -> None:
    """Send the requests ``order`` (indices into ``reqs``) one after another on one keep-alive connection."""
    reader = writer = None
    for i in order:
        if time.perf_counter() > deadline:
            return
        t0 = time.perf_counter()
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(reqs[i])
            status_line = await reader.readline()
            length = 0
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b""):
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = await reader.readexactly(length)
            lat.append(time.perf_counter() - t0)
            status = int(status_line.split()[1])
            if status != 200:
                errors.append(f"HTTP {status}: {body[:200].decode(errors='replace')}")
                continue
            text = json.loads(body)["readings"][0]["text"]
            if text != want[i]:
                errors.append(f"crop {i}: read {text!r}, Recognizer reads {want[i]!r}")
        except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as e:
            errors.append(f"{type(e).__name__}: {e}")
            writer = None
    if writer is not None:
        writer.close()


def load(port: int, reqs: list[bytes], want: list[str], clients: int, n: int, seconds: float, start: int) -> dict:
    """``n`` requests from ``clients`` closed-loop clients (crops from index ``start`` on) -> rate and latencies."""
    lat: list[float] = []
    errors: list[str] = []
    idx = [(start + k) % len(reqs) for k in range(n)]
    shares = [idx[c::clients] for c in range(clients)]

    async def run() -> float:
        t0 = time.perf_counter()
        await asyncio.gather(*(one_client(port, reqs, want, s, lat, errors, t0 + seconds) for s in shares))
        return time.perf_counter() - t0
    wall = asyncio.run(run())
    done = len(lat)
    lat.sort()
    return {"clients": clients, "requests": done, "seconds": wall, "requests_per_s": done / wall,
            "p50_ms": 1000 * lat[len(lat) // 2] if lat else None,
            "p99_ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else None,
            "errors": len(errors), "first_errors": errors[:5]}


def baseline(reader, paths: list[Path], n: int, start: int) -> dict:
    """``n`` crops read one call at a time with crnn.Recognizer."""
    lat = []
    t0 = time.perf_counter()
    for k in range(n):
        t = time.perf_counter()
        reader.read(str(paths[(start + k) % len(paths)]))
        lat.append(time.perf_counter() - t)
    wall = time.perf_counter() - t0
    lat.sort()
    return {"requests": n, "seconds": wall, "requests_per_s": n / wall, "p50_ms": 1000 * lat[n // 2],
            "p99_ms": 1000 * lat[min(n - 1, int(0.99 * n))], "errors": 0}


# ---------------------------------------------------------------------------- the run
def cpu_name() -> str:
    """The CPU's model name (lscpu's)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def median_row(rows: list[dict], base: list[dict]) -> dict:
    """Median over rounds of each figure and of the per-round ratio to ``base``; errors and requests summed."""
    out = {k: statistics.median(r[k] for r in rows) for k in ("requests_per_s", "p50_ms", "p99_ms")
           if all(r.get(k) is not None for r in rows)}
    out["x_one_by_one"] = statistics.median(r["requests_per_s"] / b["requests_per_s"] for r, b in zip(rows, base))
    out.update(requests=sum(r["requests"] for r in rows), errors=sum(r["errors"] for r in rows),
               rounds=[round(r["requests_per_s"], 1) for r in rows])
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the table, optionally write JSON."""
    args = parse_args(argv)
    import crnn

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench_serve_") as tmp:
        paths, source = crops(args.crops, Path(tmp))
        server = Server(args.weights, args.server_args.split())
        try:
            result = measure(args, server, paths, source, crnn)
        finally:
            code = server.stop()
    result.update(server_exit_code=code, load_average=[load_before[0], os.getloadavg()[0]])
    report(result, args)
    return 0 if code == 0 else 1


def measure(args: argparse.Namespace, server: Server, paths: list[Path], source: str, crnn) -> dict:
    """Baseline and load levels, interleaved; memory after --first and --total requests."""
    torch.set_num_threads(server.threads)  # the baseline gets the threads the server's forward pass gets
    reader = crnn.Recognizer(args.weights, device="cpu")
    want = [r.text for r in reader.read([str(p) for p in paths])]
    reqs = [request_bytes(p.read_bytes(), p.name) for p in paths]
    top = max(args.levels)
    sent = 0
    warm = load(server.port, reqs, want, top, args.first, 10 * args.seconds, 0)  # also the warm-up
    sent += warm["requests"]
    rss_first = server.rss_mib()
    batched, base, levels = [], [], {c: [] for c in args.levels}
    for r in range(args.rounds):
        t0 = time.perf_counter()
        reader.read([str(p) for p in paths])
        batched.append({"requests": len(paths), "seconds": time.perf_counter() - t0, "errors": 0,
                        "requests_per_s": len(paths) / (time.perf_counter() - t0)})
        base.append(baseline(reader, paths, args.baseline, r * args.baseline))
        for c in args.levels:
            row = load(server.port, reqs, want, c, args.requests, args.seconds, sent)
            levels[c].append(row)
            sent += row["requests"]
    errors = warm["errors"] + sum(row["errors"] for rows in levels.values() for row in rows)
    rest = max(0, args.total - sent)
    soak = load(server.port, reqs, want, top, rest, 100 * args.seconds, sent) if rest else None
    if soak:
        sent += soak["requests"]
        errors += soak["errors"]
    rss_total = server.rss_mib()
    return {"cpu": cpu_name(), "cores": os.cpu_count(), "torch": torch.__version__, "crops": len(paths),
            "source": source, "weights": args.weights, "server_threads": server.threads,
            "server_args": args.server_args, "rounds": args.rounds, "batched": median_row(batched, base),
            "one_by_one": median_row(base, base), "levels": {c: median_row(rows, base) for c, rows in levels.items()},
            "requests_total": sent, "errors_total": errors,
            "first_errors": (warm["first_errors"] + [e for rows in levels.values() for row in rows
                                                     for e in row["first_errors"]])[:5],
            "rss_mib": {str(args.first): rss_first, str(sent): rss_total},
            "rss_growth": rss_total / rss_first - 1}


def report(res: dict, args: argparse.Namespace) -> None:
    """Print the table; write JSON."""
    print(f"{res['crops']} crops ({res['source']}), model {res['weights']}; {res['cpu']}, {res['cores']} cores, "
          f"load average {res['load_average'][0]:.1f} -> {res['load_average'][1]:.1f}; server: "
          f"{res['server_threads']} torch thread(s) {res['server_args']}".rstrip())
    print(f"{'what (median of ' + str(res['rounds']) + ' rounds)':<44} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'x 1-by-1':>8} {'errors':>6}")
    rows = [("Recognizer.read(path), one by one", res["one_by_one"]),
            ("Recognizer.read(paths), batched (ceiling)", res["batched"])]
    rows += [(f"crnn-serve, {c} client{'s' if int(c) > 1 else ''}", row) for c, row in res["levels"].items()]
    for name, row in rows:
        p50 = f"{row['p50_ms']:8.1f}" if "p50_ms" in row else f"{'-':>8}"
        p99 = f"{row['p99_ms']:8.1f}" if "p99_ms" in row else f"{'-':>8}"
        print(f"{name:<44} {row['requests_per_s']:8.1f} {p50} {p99} {row['x_one_by_one']:8.2f} "
              f"{row['errors']:>6}")
    (n1, m1), (n2, m2) = res["rss_mib"].items()
    print(f"failed requests: {res['errors_total']} of {res['requests_total']:,}; server RSS {m1:.0f} MiB after "
          f"{int(n1):,} requests, {m2:.0f} MiB after {int(n2):,} ({100 * res['rss_growth']:+.1f} %); "
          f"exit code after SIGTERM {res['server_exit_code']}")
    for e in res["first_errors"]:
        print(f"  error: {e}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({**res, "command": " ".join(sys.argv)}, indent=2) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
