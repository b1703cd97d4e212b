"""Running the service: bind the socket, load the models, serve with uvicorn until SIGTERM or Ctrl-C, drain, return.

On SIGTERM (or SIGINT) the server stops accepting connections, answers every request already received (the batchers
finish what is queued), then returns 0 (SIGTERM) or 130 (SIGINT); uvicorn's own habit of re-raising the signal
after a graceful shutdown, which would end the process with -15, is left out.
"""
from __future__ import annotations

import contextlib
import ipaddress
import logging
import signal
import socket
import threading
from collections.abc import Iterator

import torch
import uvicorn

from crnn.serving.app import build_app
from crnn.serving.errors import ServeError
from crnn.serving.service import Service, ServeOptions, default_threads

log = logging.getLogger("crnn.serving")
GRACE_S = 5.0  # beyond the request timeout, how long a drain may take before the rest is cancelled


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: a free one), or ServeError naming the fix."""
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(2048)
    except OSError as e:
        raise ServeError(f"cannot listen on {host}:{port} ({e.strerror or e}); choose another --host/--port") from None
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    """http://host:port of a bound socket (IPv6 in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class _Server(uvicorn.Server):
    """uvicorn's server with the service's start-up line and a drain that ends in a normal return."""

    def __init__(self, config: uvicorn.Config, svc: Service, url: str) -> None:
        super().__init__(config)
        self.svc, self.url = svc, url
        self.signal: int | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: object) -> None:
        if self.signal is None:
            self.signal = sig
            busy = self.svc.metrics.active
            log.info("%s: finishing %d read request(s) in flight, then exiting", signal.Signals(sig).name, busy)
        self.svc.draining = True
        super().handle_exit(sig, frame)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and not self.should_exit:
            log.info("listening on %s (the page: /, API docs: /docs, metrics: /metrics)", self.url)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    try:
        return all(ipaddress.ip_address(info[4][0]).is_loopback
                   for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM))
    except (OSError, ValueError):
        return False


def run(opts: ServeOptions) -> int:
    """Serve until SIGTERM (-> 0) or Ctrl-C (-> 130). Raises ServeError and the loading errors before serving."""
    if not opts.token and not is_loopback(opts.host):  # crnn-serve and crnn.serve() alike
        log.warning("warning: listening on %s without a token: anyone who reaches this port can use it (set "
                    "$CRNN_SERVE_TOKEN)", opts.host)
    opts.check()
    sock = bind(opts.host, opts.port)  # before the models load: a port in use is said at once
    try:
        svc = Service.load(opts)
    except BaseException:
        sock.close()
        raise
    threads = opts.threads or default_threads()
    torch.set_num_threads(threads)
    for name, slot in svc.models.items():
        d = slot.describe()
        geometry = f"keep-ratio, height {d['height']}" if d["keep_ratio"] else f"{d['width']}x{d['height']}"
        log.info("model %s: %s (%s, %d classes, %s, %s)", name, d["weights"], d["variant"], d["classes"], geometry,
                 d["device"])
    log.info("%d torch thread(s) for the network%s, %d decoding thread(s); batches of up to %d images, waiting up to "
             "%g ms; queue %d images; timeout %g s; token %s", threads,
             " (every core but one, which HTTP and image decoding use)" if opts.threads is None else "",
             opts.decode_threads, opts.max_batch, opts.max_wait_ms, opts.max_queue, opts.timeout_s,
             "required" if opts.token else "off")
    config = uvicorn.Config(build_app(svc), log_config=None, access_log=opts.access_log, lifespan="on",
                            timeout_graceful_shutdown=int(opts.timeout_s + GRACE_S), server_header=False)
    logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
    logging.getLogger("uvicorn.access").setLevel(logging.INFO if opts.access_log else logging.WARNING)
    server = _Server(config, svc, url_of(sock))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    if server.signal is not None:
        log.info("stopped (%s)", signal.Signals(server.signal).name)
    return 130 if server.signal == signal.SIGINT else 0
