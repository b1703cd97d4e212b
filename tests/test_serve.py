"""crnn-serve: the real server in a subprocess on 127.0.0.1 (a free port it picks itself): readings equal to
crnn.Recognizer and crnn-predict, batching across concurrent requests, every bad input a 4xx with one line and the
server still serving, the token (401, nothing read), the queue limit (503) and timeout (504), SIGTERM drain (exit 0),
the metrics, and the page driven in headless Chromium; plus the pieces (alignment, batcher, weights names, CLI
errors) in-process."""
from __future__ import annotations

import asyncio
import base64
import http.client
import io
import itertools
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from PIL import Image

import crnn
from crnn.charset import Charset
from crnn.config import Config
from crnn.engine.checkpoint import model_checkpoint, save_checkpoint
from crnn.model import build_model
from tests.conftest import render_png
from tests.procs import kill_tree

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install -e '.[serve]')")
pytest.importorskip("uvicorn", reason="the serve extra is not installed (pip install -e '.[serve]')")

from crnn.serving.align import best_alignment, char_confidences  # noqa: E402
from crnn.serving.batcher import Batcher, QueueFull  # noqa: E402
from crnn.serving.errors import ServeError  # noqa: E402
from crnn.serving.models import parse_weights  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SAMPLES = sorted((REPO / "weights" / "samples").glob("synth_*.png"))
WORDS = ["hello", "street", "Coffee", "42", "open"]
START_S = 180  # a server's start-up (torch import, model load) on a busy 2-core machine


# ---------------------------------------------------------------------------- a server in a subprocess
class Server:
    """``python -m crnn.cli.serve --port 0 ...`` (or ``python -c <python> ...``) in a subprocess; its stderr is
    collected as it comes."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None, python: str | None = None) -> None:
        cmd = ["-c", python, *args] if python else ["-m", "crnn.cli.serve", "--host", "127.0.0.1", "--port", "0", *args]
        self.proc = subprocess.Popen([sys.executable, *cmd], cwd=REPO, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.listening = threading.Event()
        self.url = ""
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                self.listening.set()
        self.listening.set()  # ended: wait() below reports it

    def wait(self) -> "Server":
        """Block until the server listens; fail with its output if it ended instead."""
        self.listening.wait(START_S)
        assert self.proc.poll() is None and self.lines and "listening on" in self.lines[-1], \
            "the server did not start:\n" + self.log
        return self

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def stop(self) -> None:
        kill_tree(self.proc)

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
                timeout: float = 60) -> tuple[int, dict, bytes]:
        """One HTTP request on a fresh connection -> (status, headers, body)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def read(self, files: list[tuple[str, bytes]], fields: dict | None = None, headers: dict | None = None,
             field: str = "image", path: str = "/v1/read") -> tuple[int, dict]:
        """POST multipart images (and text fields) -> (status, JSON answer)."""
        body, ctype = multipart(files, fields or {}, field)
        status, _, data = self.request("POST", path, body, {"Content-Type": ctype, **(headers or {})})
        return status, json.loads(data)

    def read_json(self, payload: object, headers: dict | None = None) -> tuple[int, dict]:
        """POST a JSON body -> (status, JSON answer)."""
        status, _, data = self.request("POST", "/v1/read", json.dumps(payload).encode(),
                                       {"Content-Type": "application/json", **(headers or {})})
        return status, json.loads(data)

    def metrics(self, headers: dict | None = None) -> str:
        status, hdrs, data = self.request("GET", "/metrics", headers=headers)
        assert status == 200 and hdrs["content-type"].startswith("text/plain"), (status, hdrs)
        return data.decode()


def multipart(files: list[tuple[str, bytes]], fields: dict, field: str = "image") -> tuple[bytes, str]:
    """A multipart/form-data body: one file part per (filename, bytes) under ``field``, then text fields."""
    boundary = "crnnTestBoundary7MA4YWxk"
    parts = []
    for name, data in files:
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; filename="{name}"\r\n'
                     f"Content-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n")
    for key, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'.encode())
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text (0 when absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = re.escape(name) + (r"\{" + re.escape(want) + r"\}" if want else "") + r" ([0-9.e+-]+)$"
    m = re.search(pattern, text, re.MULTILINE)
    return float(m.group(1)) if m else 0.0


def tiny_checkpoint(path: Path, width: int = 48, keep_ratio: bool = False) -> Path:
    """An untrained tiny alnum36 model (reads noise; fast); ``keep_ratio``: lines keep their width, as zh does."""
    cfg = Config()
    cfg.model.hidden, cfg.data.width = 16, width
    cfg.data.keep_ratio = keep_ratio
    cs = Charset.from_spec("alnum36")
    torch.manual_seed(0)
    save_checkpoint(model_checkpoint(build_model("vgg_small", 1, cs.num_classes, 16).eval(), cfg, cs, step=1), path)
    return path


def png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A PNG signature and IHDR claiming ``width x height``, then an empty IDAT and IEND (no pixels)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return tiny_checkpoint(tmp_path_factory.mktemp("serve") / "tiny.pt")


@pytest.fixture(scope="module")
def line_model(tmp_path_factory) -> Path:
    return tiny_checkpoint(tmp_path_factory.mktemp("serve") / "line.pt", keep_ratio=True)


@pytest.fixture(scope="module")
def word_list(tmp_path_factory) -> Path:
    """A word list for the word decoder (crnn-serve --words)."""
    path = tmp_path_factory.mktemp("serve") / "words.txt"
    path.write_text("hello\nstreet\ncoffee\nopen\nopera\n")
    return path


@pytest.fixture(scope="module")
def servers(tiny, line_model, word_list):
    """Servers started at once: ``main`` (en + tiny, small limits, a word list), ``token``, ``slow`` (queue,
    timeout) and ``drain`` (stopped by its test)."""
    started = {
        "main": Server(["--weights", "en", "--weights", f"tiny={tiny}", "--weights", str(line_model),
                        "--words", str(word_list), "--max-wait-ms", "100", "--max-images", "4",
                        "--max-image-bytes", "300KiB", "--max-pixels", "1000000", "--max-request-bytes", "1MiB"]),
        "token": Server([str(tiny)], env={"CRNN_SERVE_TOKEN": "s3cret-token"},  # through the Python API
                        python="import sys, crnn; sys.exit(crnn.serve(sys.argv[1], host='127.0.0.1', port=0))"),
        "slow": Server(["--weights", str(tiny), "--max-batch", "8", "--max-wait-ms", "2500", "--max-queue", "2",
                        "--max-images", "2", "--timeout", "1"]),
        "drain": Server(["--weights", str(tiny), "--max-wait-ms", "1500"]),
    }
    try:
        yield {name: s.wait() for name, s in started.items()}
    finally:
        for s in started.values():
            s.stop()


@pytest.fixture(scope="module")
def word_files(tmp_path_factory) -> list[Path]:
    """Rendered words and the shipped sample crops, as files."""
    d = tmp_path_factory.mktemp("words")
    paths = []
    for i, w in enumerate(WORDS):
        paths.append(d / f"{i}_{w}.png")
        paths[-1].write_bytes(render_png(w))
    for s in SAMPLES[:3]:
        paths.append(d / s.name)
        shutil.copy(s, paths[-1])
    return paths


# ---------------------------------------------------------------------------- readings
@pytest.mark.slow
def test_readings_equal_recognizer_and_crnn_predict(servers, word_files, capsys):
    """The shipped en model: multipart and JSON answers equal crnn.Recognizer's and crnn-predict's, in input order."""
    from crnn.cli.predict import main as predict

    s = servers["main"]
    reader = crnn.Recognizer("en", device="cpu")
    want = reader.read([str(p) for p in word_files])
    assert predict(["--format", "json", "--device", "cpu", *map(str, word_files)]) == 0
    predicted = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [p["text"] for p in predicted] == [r.text for r in want]

    got = []
    for chunk in (word_files[:4], word_files[4:]):  # --max-images 4 on this server
        status, answer = s.read([(p.name, p.read_bytes()) for p in chunk])
        assert status == 200 and answer["model"] == "en", answer
        got += answer["readings"]
    assert [r["text"] for r in got] == [r.text for r in want]
    for r, w in zip(got, want):
        assert r["confidence"] == pytest.approx(w.confidence, rel=1e-4, abs=1e-7)
    status, answer = s.read_json({"images": [base64.b64encode(p.read_bytes()).decode() for p in word_files[:3]],
                                  "model": "en"})
    assert status == 200 and [r["text"] for r in answer["readings"]] == [r.text for r in want[:3]]
    assert any(r.text == w for r, w in zip(want, WORDS)), want  # the check reads real text, not only noise

    lexicon = ["hello", "street", "coffee", "forty", "opera"]
    beam = crnn.Recognizer("en", device="cpu", lexicon=lexicon).read([str(p) for p in word_files[:4]])
    status, answer = s.read([(p.name, p.read_bytes()) for p in word_files[:4]], {"lexicon": "\n".join(lexicon)})
    assert status == 200 and [r["text"] for r in answer["readings"]] == [r.text for r in beam]
    for r, w in zip(answer["readings"], beam):
        assert r["confidence"] == pytest.approx(w.confidence, rel=1e-4, abs=1e-9)


@pytest.mark.slow
def test_word_decoder_reads_as_recognizer_with_the_same_list(servers, word_files, word_list):
    """crnn-serve --words: decoder word answers as crnn.Recognizer(words=...) reads; a service without a list
    refuses it in one line; GET /v1/models lists the decoder only where there is a list."""
    s = servers["main"]
    want = crnn.Recognizer("en", device="cpu", words=word_list).read([str(p) for p in word_files[:4]])
    status, answer = s.read([(p.name, p.read_bytes()) for p in word_files[:4]], {"decoder": "word"})
    assert status == 200, answer
    assert [(r["text"], round(r["confidence"], 4)) for r in answer["readings"]] == \
        [(r.text, round(r.confidence, 4)) for r in want]
    assert json.loads(s.request("GET", "/v1/models")[2])["models"][0]["decoders"] == ["greedy", "beam", "word"]
    status, answer = servers["slow"].read([("w.png", render_png("word"))], {"decoder": "word"})
    assert status == 400 and "start crnn-serve with --words FILE" in answer["error"], answer
    assert json.loads(servers["slow"].request("GET", "/v1/models")[2])["models"][0]["decoders"] == ["greedy", "beam"]


@pytest.mark.slow
def test_keep_ratio_lines_of_many_widths_equal_recognizer(servers, line_model, tmp_path):
    """A keep-ratio model: widths differ, so one request's images go to several batches; the order and the readings
    stay those of crnn.Recognizer, also when 8 such requests come at once."""
    s = servers["main"]
    texts = ["a", "two words", "x1", "a longer line of text", "mid 42", "q", "zz top", "end"]
    paths = []
    for i, t in enumerate(texts):
        paths.append(tmp_path / f"{i}.png")
        paths[-1].write_bytes(render_png(t))
    want = crnn.Recognizer(line_model, device="cpu").read([str(p) for p in paths])
    requests = [[(p.name, p.read_bytes()) for p in paths[k:k + 4]] for k in (0, 4)] * 4
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda files: s.read(files, {"model": "line"}), requests))
    for k, (status, answer) in enumerate(answers):
        assert status == 200 and answer["model"] == "line", answer
        expected = want[4 * (k % 2): 4 * (k % 2) + 4]
        assert [r["text"] for r in answer["readings"]] == [w.text for w in expected]
        for r, w in zip(answer["readings"], expected):
            assert r["confidence"] == pytest.approx(w.confidence, rel=1e-4, abs=1e-9)


@pytest.mark.slow
def test_per_character_confidences(servers, word_files):
    s = servers["main"]
    files = [(p.name, p.read_bytes()) for p in word_files[:3]]
    status, plain = s.read(files)
    status2, greedy = s.read(files, {"characters": "true"})
    status3, beam = s.read_json({"images": [base64.b64encode(b).decode() for _, b in files], "characters": True,
                                 "decoder": "beam", "beam_width": 5})
    assert status == status2 == status3 == 200
    for p, g in zip(plain["readings"], greedy["readings"]):
        assert g["text"] == p["text"] and "characters" not in p
        assert "".join(c["char"] for c in g["characters"]) == g["text"]
        assert all(0 <= c["confidence"] <= 1 for c in g["characters"])
    for b in beam["readings"]:
        assert "".join(c["char"] for c in b["characters"]) == b["text"]
        assert all(0 <= c["confidence"] <= 1 for c in b["characters"])
    # both decoders' confidence is the probability of the text read, over all its alignments: equal where they agree
    same = [(g, b) for g, b in zip(greedy["readings"], beam["readings"]) if g["text"] == b["text"]]
    assert same
    for g, b in same:
        assert g["confidence"] == pytest.approx(b["confidence"], rel=1e-4)


@pytest.mark.slow
def test_concurrent_requests_share_batches(servers):
    """16 clients at once, one image each: fewer forward passes than images, each answer what it reads alone."""
    s = servers["main"]
    imgs = [render_png(w) for w in ("abc", "de", "xyz9", "k") * 4]
    alone = {}
    for b in set(imgs):
        status, answer = s.read([("a.png", b)], {"model": "tiny"})
        assert status == 200
        alone[b] = answer["readings"][0]["text"]
    before = s.metrics()
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda b: s.read([("x.png", b)], {"model": "tiny"}), imgs))
    after = s.metrics()
    assert all(status == 200 for status, _ in answers)
    assert [a["readings"][0]["text"] for _, a in answers] == [alone[b] for b in imgs]
    images = metric(after, "crnn_batch_size_sum", model="tiny") - metric(before, "crnn_batch_size_sum", model="tiny")
    batches = (metric(after, "crnn_batch_size_count", model="tiny")
               - metric(before, "crnn_batch_size_count", model="tiny"))
    assert images == 16 and batches < 16, (images, batches)


# ---------------------------------------------------------------------------- bad input
def bad_inputs() -> list[tuple[str, dict, int, str]]:
    """(name, request, status, words the message must hold)."""
    word = render_png("word")
    bomb = png(Image.new("L", (4000, 4000), 255))  # 16 Mpx of white: a few KiB of PNG
    big = os.urandom(310 * 1024)
    return [
        ("not an image", {"files": [("a.txt", b"hello, this is text")]}, 400, "image 0 (a.txt): not an image"),
        ("truncated", {"files": [("t.png", word[: len(word) // 2])]}, 400, "image 0 (t.png): cannot decode"),
        ("0x0", {"files": [("z.png", png_header_only(0, 0))]}, 400, "image 0 (z.png): the image is 0x0"),
        ("no rows", {"files": [("r.png", png_header_only(30, 0))]}, 400, "the image is 30x0: it has no pixels"),
        ("enormous header", {"files": [("e.png", png_header_only(100_000, 100_000))]}, 413,
         "100000x100000 = 10000.0 Mpx, over the limit of 1 Mpx"),
        ("decompression bomb", {"files": [("b.png", bomb)]}, 413, "4000x4000 = 16.0 Mpx, over the limit of 1 Mpx"),
        ("bytes", {"files": [("big.png", big)]}, 413, "over the limit of 300 KiB per image"),
        ("empty file", {"files": [("e.png", b"")]}, 400, "empty"),
        ("too many images", {"files": [("w.png", word)] * 5}, 413, "5 images, over the limit of 4 per request"),
        ("far too many", {"files": [("w.png", word)] * 9}, 413, "over the limit of 4 per request"),
        ("no image", {"files": [], "fields": {"model": "en"}}, 400, "no image"),
        ("wrong field", {"files": [("w.png", word)], "field": "file"}, 400, "unknown form field 'file'"),
        ("text in image field", {"files": [], "fields": {"image": "word.png"}}, 400, "holds text, not a file"),
        ("unknown model", {"files": [("w.png", word)], "fields": {"model": "fr"}}, 400, "unknown model 'fr'"),
        ("decoder", {"files": [("w.png", word)], "fields": {"decoder": "viterbi"}}, 400, "greedy or beam"),
        ("beam width", {"files": [("w.png", word)], "fields": {"beam_width": "0"}}, 400, "beam_width"),
        ("lexicon greedy", {"files": [("w.png", word)], "fields": {"decoder": "greedy", "lexicon": "a"}}, 400,
         "needs the beam decoder"),
        ("lexicon unusable", {"files": [("w.png", word)], "fields": {"lexicon": "ÄÖÜ\n€"}}, 400, "can be spelled"),
        ("characters", {"files": [("w.png", word)], "fields": {"characters": "maybe"}}, 400, "true or false"),
        ("base64", {"json": {"images": ["not base64!"]}}, 400, "images[0]: not valid base64"),
        ("base64 of text", {"json": {"images": [base64.b64encode(b"plain").decode()]}}, 400, "not an image"),
        ("json key", {"json": {"image": ["x"]}}, 400, "unknown key 'image'"),
        ("json images type", {"json": {"images": "abc"}}, 400, "list of base64"),
        ("json list", {"json": [1, 2]}, 400, "must be an object"),
        ("json broken", {"raw": (b"{images: ", "application/json")}, 400, "not valid JSON"),
        ("json empty", {"json": {"images": []}}, 400, "no image"),
        ("content type", {"raw": (b"hello", "text/plain")}, 415, "content type 'text/plain'"),
        ("multipart broken", {"raw": (b"--x\r\nnonsense", "multipart/form-data; boundary=x")}, 400, "multipart"),
        ("body", {"raw": (b"x" * (1024 * 1024 + 10), "application/json")}, 413, "over the limit of 1 MiB"),
    ]


@pytest.mark.slow
def test_every_bad_input_is_a_4xx_with_one_line_and_the_server_keeps_serving(servers):
    s = servers["main"]
    for name, req, status, words in bad_inputs():
        if "json" in req:
            got, answer = s.read_json(req["json"])
        elif "raw" in req:
            body, ctype = req["raw"]
            got, _, data = s.request("POST", "/v1/read", body, {"Content-Type": ctype})
            answer = json.loads(data)
        else:
            got, answer = s.read(req["files"], req.get("fields"), field=req.get("field", "image"))
        assert got == status, (name, got, answer)
        assert set(answer) == {"error"} and "\n" not in answer["error"] and words in answer["error"], (name, answer)
    for method, path, status in (("GET", "/nowhere", 404), ("GET", "/v1/read", 405), ("DELETE", "/v1/models", 405)):
        got, _, data = s.request(method, path)
        assert got == status and "\n" not in json.loads(data)["error"]
    assert s.proc.poll() is None
    status, answer = s.read([("w.png", render_png("word"))])
    assert status == 200 and answer["readings"][0]["text"] == crnn.Recognizer("en", device="cpu").read(
        Image.open(io.BytesIO(render_png("word")))).text
    m = s.metrics()
    assert metric(m, "crnn_requests_total", endpoint="/v1/read", status="500") == 0
    assert metric(m, "crnn_requests_total", endpoint="/v1/read", status="413") >= 5
    assert "Traceback" not in s.log and "Exception" not in s.log, s.log


# ---------------------------------------------------------------------------- token, queue, timeout, drain
@pytest.mark.slow
def test_token_needed_and_nothing_read_without_it(servers):
    s = servers["token"]
    good = {"Authorization": "Bearer s3cret-token"}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"}):
        status, answer = s.read([("w.png", render_png("word"))], headers=headers)
        assert status == 401 and "Authorization: Bearer TOKEN" in answer["error"], answer
    status, hdrs, _ = s.request("GET", "/v1/models")
    assert status == 401 and hdrs["www-authenticate"] == "Bearer"
    assert s.request("GET", "/metrics")[0] == 401
    # a body of 50 MB is announced but never sent: the 401 comes from the headers alone
    with socket.create_connection(("127.0.0.1", s.port), timeout=20) as sock:
        sock.sendall(b"POST /v1/read HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 50000000\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 401 ")
    assert metric(s.metrics(good), "crnn_images_read_total", model="tiny") == 0
    for path in ("/healthz", "/readyz", "/"):
        assert s.request("GET", path)[0] == 200
    status, answer = s.read([("w.png", render_png("word"))], headers=good)
    assert status == 200 and len(answer["readings"]) == 1
    assert metric(s.metrics(good), "crnn_images_read_total", model="tiny") == 1
    assert "s3cret-token" not in s.log


@pytest.mark.slow
def test_full_queue_is_503_with_retry_after_and_slow_answers_time_out(servers):
    """--max-queue 2, batches wait 2.5 s, --timeout 1: two queued images fill the queue; their request gets 504."""
    s = servers["slow"]
    word = render_png("word")
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(s.read, [("a.png", word), ("b.png", word)])
        deadline = time.monotonic() + 20
        while json.loads(s.request("GET", "/readyz")[2])["queued"]["tiny"] != 2:
            assert time.monotonic() < deadline and not first.done(), "the first request never queued"
            time.sleep(0.05)
        body, ctype = multipart([("c.png", word)], {})
        status, hdrs, data = s.request("POST", "/v1/read", body, {"Content-Type": ctype})
        assert status == 503 and hdrs["retry-after"] == "1" and "full" in json.loads(data)["error"]
        assert s.request("GET", "/readyz")[0] == 503
        status, answer = first.result(timeout=30)
    assert status == 504 and "--timeout" in answer["error"], answer
    ready = json.loads(s.request("GET", "/readyz")[2])
    assert ready == {"status": "ready", "queued": {"tiny": 0}}  # the timed-out images left the queue
    assert s.request("GET", "/healthz")[0] == 200 and s.proc.poll() is None


@pytest.mark.slow
def test_sigterm_finishes_requests_in_flight_then_exits_0(servers):
    s = servers["drain"]
    with ThreadPoolExecutor(1) as pool:
        inflight = pool.submit(s.read, [("w.png", render_png("word"))])
        deadline = time.monotonic() + 20
        while json.loads(s.request("GET", "/readyz")[2])["queued"]["tiny"] != 1:
            assert time.monotonic() < deadline, "the request never queued"
            time.sleep(0.02)
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        with pytest.raises(OSError):  # no new connections while it drains
            socket.create_connection(("127.0.0.1", s.port), timeout=5).close()
        status, answer = inflight.result(timeout=30)
    assert status == 200 and len(answer["readings"]) == 1
    assert s.proc.wait(timeout=30) == 0
    assert "SIGTERM: finishing 1 read request(s) in flight" in s.log and "Traceback" not in s.log, s.log


# ---------------------------------------------------------------------------- models, health, metrics
@pytest.mark.slow
def test_models_health_and_metrics(servers):
    s = servers["main"]
    status, _, data = s.request("GET", "/v1/models")
    info = json.loads(data)
    assert status == 200 and info["default"] == "en"
    assert [m["name"] for m in info["models"]] == ["en", "tiny", "line"]
    assert info["models"][2]["keep_ratio"] is True and "max_width" in info["models"][2]
    en = info["models"][0]  # the shipped default: printable95 (blank + 95), each crop at its own width
    assert (en["variant"], en["classes"], en["height"], en["keep_ratio"]) == ("vgg_small", 96, 48, True)
    assert en["weights"].endswith("crnn_en.pt") and "width" not in en
    assert info["limits"]["max_images"] == 4 and info["limits"]["max_pixels"] == 1_000_000
    assert json.loads(s.request("GET", "/healthz")[2]) == {"status": "ok"}
    assert s.request("GET", "/readyz")[0] == 200
    s.read([("w.png", render_png("word"))], {"model": "tiny"})
    m = s.metrics()
    for name in ("crnn_requests_total", "crnn_request_duration_seconds_bucket", "crnn_batch_size_bucket",
                 "crnn_queue_depth", "crnn_forward_duration_seconds_bucket", "crnn_requests_in_flight"):
        assert re.search(rf"^{name}[{{ ]", m, re.MULTILINE), name
    assert metric(m, "crnn_requests_total", endpoint="/v1/read", status="200") >= 1
    assert metric(m, "crnn_queue_depth", model="tiny") == 0
    openapi = json.loads(s.request("GET", "/openapi.json")[2])
    body = openapi["paths"]["/v1/read"]["post"]["requestBody"]["content"]
    assert {"multipart/form-data", "application/json"} <= set(body)
    assert s.request("GET", "/docs")[0] == 200


# ---------------------------------------------------------------------------- the page, in headless Chromium
def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("Debian's chromium is not installed (scripts/setup.sh installs it as root); the page was not "
                    "opened in a browser")
    return exe


class DevTools:
    """Headless Chromium driven over the DevTools protocol (a websocket on 127.0.0.1)."""

    def __init__(self, profile: Path) -> None:
        self.profile = profile

    def __enter__(self) -> "DevTools":
        from websockets.sync.client import connect

        self.proc = subprocess.Popen([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                      f"--user-data-dir={self.profile}", "--remote-debugging-address=127.0.0.1",
                                      "--remote-debugging-port=0", "--remote-allow-origins=*",
                                      "--window-size=1000,700", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            port = None
            for line in self.proc.stderr:
                m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
                if m:
                    port = int(m.group(1))
                    break
            assert port, "chromium did not open its DevTools port"
            threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
            for _ in range(100):
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                conn.request("GET", "/json/list")
                pages = [t for t in json.loads(conn.getresponse().read()) if t["type"] == "page"]
                if pages:
                    break
                time.sleep(0.1)
            self._connection = connect(pages[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=30)
            self.ws = self._connection.__enter__()
        except BaseException:
            kill_tree(self.proc)
            raise
        self.ids = itertools.count(1)
        self.events: list[dict] = []
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._connection.__exit__(None, None, None)
        finally:
            kill_tree(self.proc)

    def call(self, method: str, **params) -> dict:
        mid = next(self.ids)
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=120))
            if msg.get("id") == mid:
                assert "error" not in msg, msg
                return msg["result"]
            self.events.append(msg)

    def open(self, url: str) -> None:
        """Navigate and wait for the load event."""
        self.call("Page.enable")
        self.call("Page.navigate", url=url)
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self.events.append(json.loads(self.ws.recv(timeout=120)))

    def evaluate(self, js: str) -> object:
        res = self.call("Runtime.evaluate", expression=js, awaitPromise=True, returnByValue=True)
        assert "exceptionDetails" not in res, res["exceptionDetails"]
        return res["result"].get("value")


DROP_JS = """(async () => {
  const until = async (ok, what) => { const t0 = Date.now();
    while (!ok()) { if (Date.now() - t0 > 60000) throw new Error("waited for " + what + "; state " +
      document.body.dataset.state + ", error: " + document.getElementById("error").textContent);
      await new Promise(r => setTimeout(r, 50)); } };
  await until(() => document.body.dataset.state === "ready" || document.body.dataset.state === "done"
              || document.body.dataset.state === "error", "the models");
  document.getElementById("model").value = MODEL;
  document.getElementById("characters").checked = CHARS;
  const dt = new DataTransfer();
  for (const [name, b64] of FILES)
    dt.items.add(new File([Uint8Array.from(atob(b64), c => c.charCodeAt(0))], name, {type: "image/png"}));
  const drop = document.getElementById("drop");
  const before = document.querySelectorAll("tr.reading").length;
  drop.dispatchEvent(new DragEvent("dragover", {dataTransfer: dt, bubbles: true, cancelable: true}));
  document.body.dataset.state = "dropped";
  drop.dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true, cancelable: true}));
  await until(() => ["done", "error"].includes(document.body.dataset.state), "the readings");
  const rows = [...document.querySelectorAll("tr.reading")].slice(before);
  await until(() => rows.every(r => r.querySelector("img").complete), "the thumbnails");
  return {state: document.body.dataset.state, error: document.getElementById("error").textContent,
          rows: rows.map(r => ({text: r.querySelector("td.text").textContent,
                                conf: r.querySelector("td.conf").textContent,
                                chars: r.querySelectorAll("span.ch").length,
                                shown: r.querySelector("img").naturalWidth > 0}))};
})()"""


def drop_files(tools: DevTools, files: list[tuple[str, bytes]], model: str, chars: bool = False) -> dict:
    js = DROP_JS.replace("MODEL", json.dumps(model)).replace("CHARS", json.dumps(chars)).replace(
        "FILES", json.dumps([[n, base64.b64encode(b).decode()] for n, b in files]))
    return tools.evaluate(js)  # type: ignore[return-value]


@pytest.mark.slow
def test_page_reads_dropped_images_in_headless_chromium(servers, word_files, tmp_path):
    chromium()
    s = servers["main"]
    files = [(p.name, p.read_bytes()) for p in word_files[:6]]  # more than --max-images 4: the page sends two posts
    want = s.read(files[:4])[1]["readings"] + s.read(files[4:])[1]["readings"]
    with DevTools(tmp_path / "profile") as tools:
        tools.open(f"http://127.0.0.1:{s.port}/")
        got = drop_files(tools, files, "en", chars=True)
        assert got["state"] == "done" and got["error"] == "", got
        assert [r["text"] for r in got["rows"]] == [w["text"] or "(nothing read)" for w in want]
        assert [r["conf"] for r in got["rows"]] == [f"{100 * w['confidence']:.1f} %" for w in want]
        assert [r["chars"] for r in got["rows"]] == [len(w["text"]) for w in want]
        assert all(r["shown"] for r in got["rows"])  # every thumbnail decoded in the browser
        shot = tools.call("Page.captureScreenshot", format="png")["data"]
        (tmp_path / "page.png").write_bytes(base64.b64decode(shot))
        bad = drop_files(tools, [("notes.png", b"not an image at all")], "tiny")
        assert bad["state"] == "error" and "400: image 0 (notes.png): not an image" in bad["error"], bad


# ---------------------------------------------------------------------------- the pieces, in-process
def _collapse(path: tuple[int, ...]) -> list[int]:
    return [c for i, c in enumerate(path) if c != 0 and (i == 0 or path[i - 1] != c)]


def test_alignment_is_the_most_likely_path_of_the_text():
    torch.manual_seed(3)
    for T, labels in ((6, [1]), (6, [1, 1]), (6, [2, 1, 2]), (5, [1, 2]), (7, [2, 2, 1])):
        lp = torch.randn(T, 3).log_softmax(-1)
        paths = [p for p in itertools.product(range(3), repeat=T) if _collapse(p) == labels]
        best = max(paths, key=lambda p: sum(float(lp[t, c]) for t, c in enumerate(p)))
        got = best_alignment(lp, labels)
        assert [labels[k] if k >= 0 else 0 for k in got] == list(best)
        conf = char_confidences(lp, labels)
        assert conf == pytest.approx([max(float(lp[t, labels[k]].exp()) for t, kk in enumerate(got) if kk == k)
                                      for k in range(len(labels))])
    assert char_confidences(torch.zeros(4, 3), []) == []


def test_batcher_groups_by_width_and_bounds_the_queue():
    calls: list[tuple[int, ...]] = []

    def forward(x: torch.Tensor) -> torch.Tensor:  # (B, C, H, W) -> (B, T, K): each row says its image's value
        calls.append(tuple(x.shape))
        return x[:, 0, 0, :1].unsqueeze(-1).expand(-1, 1, 3).clone()

    async def scenario() -> None:
        b = Batcher(forward, ThreadPoolExecutor(1), max_batch=3, max_wait=0.05, max_queue=8)
        b.start()
        tensors = [torch.full((1, 4, w), float(i)) for i, w in enumerate([8, 16, 8, 8, 16, 8, 8])]
        futures = b.submit(tensors)
        with pytest.raises(QueueFull):
            b.submit([torch.zeros(1, 4, 8)] * 2)  # 7 queued + 2 > 8
        rows = await asyncio.gather(*futures)
        assert [float(r[0, 0]) for r in rows] == [float(i) for i in range(7)]  # each request gets its own row
        assert b.queued == 0
        late = b.submit([torch.full((1, 4, 8), 9.0)])
        b.discard(late)  # a client that gave up: its image leaves the queue and never runs
        assert b.queued == 0 and late[0].cancelled()
        await b.stop()

    asyncio.run(scenario())
    assert sorted(calls) == sorted([(3, 1, 4, 8), (2, 1, 4, 8), (2, 1, 4, 16)])  # width 8: 5 images = 3 + 2


def test_weights_names(tmp_path):
    ck = tiny_checkpoint(tmp_path / "mine.pt")
    assert parse_weights([]) == {"en": "en"}
    assert parse_weights(["en", f"small={ck}", str(ck)]) == {"en": "en", "small": str(ck), "mine": str(ck)}
    with pytest.raises(ServeError, match="two models are named 'en'"):
        parse_weights(["en", "en=x.pt"])
    with pytest.raises(ServeError, match="NAME=PATH"):
        parse_weights(["bad name=x.pt"])


def test_cli_refuses_bad_settings_with_one_line(tmp_path, capsys):
    from crnn.cli.serve import main

    cases = [(["--weights", str(tmp_path / "missing.pt")], "missing.pt"),
             (["--max-queue", "2", "--max-images", "4"], "--max-queue (2) must hold at least one full request"),
             (["--weights", "en", "--weights", "en=x.pt"], "two models are named 'en'"),
             (["--max-wait-ms", "-1"], "--max-wait-ms"),
             (["--words", str(tmp_path / "nope.txt")], f"cannot read the word list {tmp_path / 'nope.txt'}")]
    for argv, words in cases:
        assert main(["--port", "0", *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("crnn-serve: error: ") and words in err[-1], err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        assert main(["--port", str(busy.getsockname()[1])]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("crnn-serve: error: cannot listen on 127.0.0.1:") and "--port" in err[-1]
    with pytest.raises(ServeError, match="--max-queue"):
        crnn.serve("en", port=0, max_queue=1, max_images=2)
    assert "serve" in crnn.__all__ and crnn.serve is crnn.api.serve


@pytest.mark.slow
def test_a_tall_crop_is_read_with_the_vertical_text_warning_or_stacked(servers, word_files):
    """The service reads a crop at least twice as tall as wide as it is and says so in the reading, as crnn-predict
    warns on stderr; other crops carry no warning. vertical=stack reads its stacked letters side by side, as
    crnn.Recognizer(vertical="stack") does; a bad value is a 400."""
    from tests.test_vertical import stacked_letters

    buf = io.BytesIO()
    stacked_letters("TAXI").save(buf, format="PNG")
    files = [("taxi.png", buf.getvalue()), (word_files[0].name, word_files[0].read_bytes())]
    status, answer = servers["main"].read(files)
    assert status == 200, answer
    tall, word = answer["readings"]
    assert tall["warning"].startswith("60x196 image is 3.3x taller than wide: vertical text?")
    assert "warning" not in word
    status, answer = servers["main"].read(files, {"vertical": "stack"})
    assert status == 200 and [r["text"] for r in answer["readings"]] == [
        r.text for r in crnn.Recognizer("en", device="cpu", vertical="stack").read(
            [stacked_letters("TAXI"), str(word_files[0])])]
    assert answer["readings"][0]["text"] == "TAXI" and "warning" not in answer["readings"][0]
    status, answer = servers["main"].read_json({"images": [base64.b64encode(files[0][1]).decode()],
                                                "vertical": "sideways"})
    assert status == 400 and answer["error"].startswith("vertical must be one of warn, stack, rotate, auto, off")
