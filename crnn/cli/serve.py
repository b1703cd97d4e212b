"""crnn-serve: an HTTP service that reads the text in word and line images with one or more CRNN models."""
from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import re
import sys

PROG = "crnn-serve"
EPILOG = """examples:
  crnn-serve                                         (the shipped English model on http://127.0.0.1:8000)
  crnn-serve --weights en --weights zh=runs/zh/best.pt --port 8080
  CRNN_SERVE_TOKEN=secret crnn-serve --host 0.0.0.0  (every /v1 and /metrics request needs the token)
  curl -F image=@word.png http://127.0.0.1:8000/v1/read
  crnn-serve --words /usr/share/dict/american-english   (then curl -F decoder=word -F image=@word.png ...)

endpoints: POST /v1/read (multipart fields 'image', or JSON {"images": [base64, ...]}; options model, decoder,
beam_width, lexicon, characters), GET /v1/models, /healthz, /readyz, /metrics (Prometheus), / (a page to drop images
on), /docs (OpenAPI). Every refusal is JSON {"error": "..."} with a 4xx (503 + Retry-After when the queue is full,
504 past --timeout). SIGTERM finishes the requests in flight, then exits 0.
exit codes: 0 stopped by SIGTERM, 130 by Ctrl-C, 2 bad arguments / weights / port.
"""
SERVE_EXTRA = ("fastapi", "uvicorn", "python_multipart", "prometheus_client")  # import names of the serve extra
SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)(i?b)?\s*$", re.IGNORECASE)


def byte_size(text: str) -> int:
    """'8MiB', '500k', '1048576' -> bytes (k/m/g are powers of 1024)."""
    m = SIZE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 8MiB, 500KiB, 1048576)")
    return int(float(m.group(1)) * 1024 ** " kmg".index(m.group(2).lower() or " "))


def build_parser() -> argparse.ArgumentParser:
    """Argument parser of crnn-serve."""
    from crnn.infer import AMP_HELP, AMP_MODES, shipped_names_help
    from crnn.serving.images import Limits
    from crnn.serving.service import TOKEN_ENV, ServeOptions

    d, lim = ServeOptions(), Limits()
    p = argparse.ArgumentParser(prog=PROG, description=__doc__, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", action="append", metavar="SPEC",
                   help=f"a model to serve, repeatable: a shipped name - {shipped_names_help()} -, NAME=PATH, or a "
                        "checkpoint PATH (named by its file stem); the first is the default (default: en)")
    p.add_argument("--host", default=d.host, help=f"address to listen on (default: {d.host})")
    p.add_argument("--port", type=int, default=d.port, help=f"port (default: {d.port}; 0: any free port)")
    p.add_argument("--token", help=f"require 'Authorization: Bearer TOKEN' (default: ${TOKEN_ENV}, else none; the "
                                   "variable keeps it out of the process list)")
    p.add_argument("--device", default=d.device, help="auto | cpu | cuda | cuda:N (default: auto)")
    p.add_argument("--amp", choices=AMP_MODES, default=d.amp, help=AMP_HELP)
    p.add_argument("--threads", type=int, help="torch threads for the network (default: cores - 1, at least 1)")
    p.add_argument("--decode-threads", type=int, default=d.decode_threads,
                   help=f"threads that decode and resize images (default: {d.decode_threads})")
    p.add_argument("--max-batch", type=int, default=d.max_batch,
                   help=f"images per forward pass, from any requests (default: {d.max_batch})")
    p.add_argument("--max-wait-ms", type=float, default=d.max_wait_ms,
                   help=f"how long an image may wait for others to share its batch (default: {d.max_wait_ms:g}; "
                        "0: lowest latency at low load)")
    p.add_argument("--max-queue", type=int, default=d.max_queue,
                   help=f"images waiting per model before 503 + Retry-After (default: {d.max_queue})")
    p.add_argument("--timeout", type=float, default=d.timeout_s,
                   help=f"seconds a request may take before 504 (default: {d.timeout_s:g})")
    p.add_argument("--max-images", type=int, default=lim.max_images,
                   help=f"images per request (default: {lim.max_images})")
    p.add_argument("--max-image-bytes", type=byte_size, default=lim.max_image_bytes,
                   help="encoded size of one image (default: 8MiB)")
    p.add_argument("--max-pixels", type=int, default=lim.max_pixels,
                   help=f"width x height of one image, checked before decoding (default: {lim.max_pixels:,})")
    p.add_argument("--max-request-bytes", type=byte_size, default=lim.max_request_bytes,
                   help="size of one request body (default: 32MiB)")
    p.add_argument("--max-lexicon-words", type=int, default=lim.max_lexicon_words,
                   help=f"words in a request's lexicon (default: {lim.max_lexicon_words:,})")
    p.add_argument("--words", metavar="FILE",
                   help="a word list (one word, or 'word count', per line; Debian: /usr/share/dict/american-english "
                        "from wamerican) "
                        "for requests with decoder word: greedy with a word prior, as crnn-predict --words reads")
    p.add_argument("--access-log", action="store_true", help="log every request on stderr")
    return p


def options_from_args(args: argparse.Namespace):
    """ServeOptions from parsed arguments (the token from --token, else the environment)."""
    from crnn.infer import shipped_names_help
    from crnn.serving.images import Limits
    from crnn.serving.service import TOKEN_ENV, ServeOptions

    limits = Limits(max_images=args.max_images, max_image_bytes=args.max_image_bytes, max_pixels=args.max_pixels,
                    max_request_bytes=args.max_request_bytes, max_lexicon_words=args.max_lexicon_words)
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    return ServeOptions(weights=args.weights or ["en"], host=args.host, port=args.port, token=token,
                        device=args.device, amp=args.amp, threads=args.threads, decode_threads=args.decode_threads,
                        max_batch=args.max_batch, max_wait_ms=args.max_wait_ms, max_queue=args.max_queue,
                        timeout_s=args.timeout, limits=limits, access_log=args.access_log, words=args.words)


def main(argv: list[str] | None = None) -> int:
    """Entry point of crnn-serve."""
    missing = [m for m in SERVE_EXTRA if importlib.util.find_spec(m) is None]
    if missing:
        print(f"{PROG}: error: {', '.join(missing)} not installed; install the serve extra: pip install -e "
              "'.[serve]'", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    from crnn.charset import CharsetError
    from crnn.config import ConfigError
    from crnn.engine.checkpoint import CheckpointError
    from crnn.infer import InferenceError
    from crnn.serving import ServeError, run

    logging.basicConfig(level=logging.INFO, format=f"{PROG}: %(message)s", stream=sys.stderr)
    opts = options_from_args(args)
    try:
        return run(opts)
    except (ServeError, CheckpointError, InferenceError, ConfigError, CharsetError) as e:
        print(f"{PROG}: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
