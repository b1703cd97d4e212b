"""The service's state and its read pipeline: settings, the models and their batchers, the thread pools, metrics.

A request's images are decoded and resized on the decoding threads, queued on their model's batcher, run through
the network on the one inference thread with other requests' images of the same width, and decoded (greedy or beam,
lexicon, per-character confidences) on the decoding threads again; the event loop only moves bytes and futures.
"""
from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import AsyncIterator

import torch

from crnn.serving.batcher import Batcher, QueueFull
from crnn.serving.errors import RequestError, ServeError
from crnn.serving.images import Limits, open_image
from crnn.serving.metrics import Metrics
from crnn.serving.models import ModelSlot, ReadOptions, parse_weights

TOKEN_ENV = "CRNN_SERVE_TOKEN"
RETRY_AFTER_S = 1


def default_threads() -> int:
    """Torch threads for the forward pass: every core but one, which the HTTP layer and image decoding use."""
    return max(1, (os.cpu_count() or 1) - 1)


@dataclass
class ServeOptions:
    """Everything ``crnn-serve`` takes (``--help`` says what each means)."""

    weights: list[str] = field(default_factory=lambda: ["en"])
    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    device: str = "auto"
    amp: str = "off"
    threads: int | None = None  # None: default_threads()
    decode_threads: int = 2
    max_batch: int = 32
    max_wait_ms: float = 5.0
    max_queue: int = 256
    timeout_s: float = 30.0
    limits: Limits = field(default_factory=Limits)
    access_log: bool = False
    words: str | None = None  # a word list for decoder "word" (a file, one word per line), shared by every model

    def check(self) -> None:
        """Raise ServeError for settings that cannot work, naming the option and the fix."""
        lim = self.limits
        if min(self.max_batch, self.max_queue, self.decode_threads, lim.max_images, lim.max_image_bytes,
               lim.max_pixels, lim.max_request_bytes, lim.max_lexicon_words) < 1:
            raise ServeError("--max-batch, --max-queue, --decode-threads and the --max-* limits must be >= 1")
        if self.threads is not None and self.threads < 1:
            raise ServeError(f"--threads must be >= 1, got {self.threads}")
        if self.max_wait_ms < 0 or self.timeout_s <= 0:
            raise ServeError("--max-wait-ms must be >= 0 and --timeout > 0")
        if self.max_queue < lim.max_images:
            raise ServeError(f"--max-queue ({self.max_queue}) must hold at least one full request "
                             f"(--max-images {lim.max_images})")
        if not 0 <= self.port <= 65535:
            raise ServeError(f"--port must be 0-65535 (0: any free port), got {self.port}")
        if self.token is not None and not self.token.strip():
            raise ServeError(f"the token is empty; pass --token TOKEN or set {TOKEN_ENV}, or neither for no token")


class Service:
    """The models by name, their batchers, the thread pools and the metrics of one running service."""

    def __init__(self, opts: ServeOptions, models: dict[str, ModelSlot]) -> None:
        self.opts, self.models = opts, models
        self.default_model = next(iter(models))
        self.metrics = Metrics()
        self.inference = ThreadPoolExecutor(1, thread_name_prefix="crnn-infer")  # one forward pass at a time
        self.decoding = ThreadPoolExecutor(opts.decode_threads, thread_name_prefix="crnn-decode")
        self.batchers: dict[str, Batcher] = {}
        self.ready = False
        self.draining = False

    @classmethod
    def load(cls, opts: ServeOptions) -> "Service":
        """Check the settings and load every model (raises ServeError, CheckpointError, InferenceError)."""
        opts.check()
        names = parse_weights(opts.weights)
        words = None
        if opts.words is not None:
            from crnn.infer import read_word_list

            words = read_word_list(opts.words)
        models = {}
        for name, weights in names.items():
            models[name] = ModelSlot(name, weights, opts.device, opts.amp, words=words)
        return cls(opts, models)

    @asynccontextmanager
    async def lifespan(self, app: object) -> AsyncIterator[None]:
        """Start the batchers and warm each model up; on shutdown, finish what is queued and stop the threads."""
        for name, slot in self.models.items():
            b = Batcher(slot.forward, self.inference, max_batch=self.opts.max_batch,
                        max_wait=self.opts.max_wait_ms / 1000, max_queue=self.opts.max_queue,
                        on_batch=self._batch_observer(name))
            self.metrics.queue_depth.labels(name).set_function(lambda b=b: b.queued)
            b.start()
            self.batchers[name] = b
        loop = asyncio.get_running_loop()
        for slot in self.models.values():  # first pass allocates and picks kernels: not on a client's time
            c, t = slot.engine.config.model.in_channels, slot.engine.transform
            w = 4 * t.height if t.keep_ratio else t.width
            await loop.run_in_executor(self.inference, slot.forward, torch.zeros(1, c, t.height, w))
        self.ready = True
        try:
            yield
        finally:
            self.ready, self.draining = False, True
            for b in self.batchers.values():
                await b.stop()
            self.inference.shutdown(wait=True)
            self.decoding.shutdown(wait=True)

    def _batch_observer(self, name: str):
        """Metrics callback of one model's batcher."""
        size, seconds = self.metrics.batch_size.labels(name), self.metrics.forward_time.labels(name)

        def observe(n: int, dt: float) -> None:
            size.observe(n)
            seconds.observe(dt)
        return observe

    def full(self) -> bool:
        """True when no model's queue has room for another image (refuse before reading the body)."""
        return all(not b.has_room(1) for b in self.batchers.values())

    def busy_error(self, what: str) -> RequestError:
        """503 with Retry-After."""
        return RequestError(503, what, {"Retry-After": str(RETRY_AFTER_S)})

    def slot(self, name: str | None) -> ModelSlot:
        """The model a request names (the first one when it names none)."""
        if name is None:
            return self.models[self.default_model]
        if not isinstance(name, str) or name not in self.models:
            raise RequestError(400, f"unknown model {name!r}; this server has {', '.join(self.models)} "
                                    "(GET /v1/models)")
        return self.models[name]

    async def read(self, slot: ModelSlot, images: list[tuple[str, bytes]], opts: ReadOptions) -> list[dict]:
        """Read one request's images (``(where, bytes)`` pairs) within the request timeout -> readings in order."""
        futures: list[asyncio.Future] = []
        try:
            return await asyncio.wait_for(self._read(slot, images, opts, futures), self.opts.timeout_s)
        except asyncio.TimeoutError:
            raise RequestError(504, f"no answer within {self.opts.timeout_s:g} s (crnn-serve --timeout); the server "
                                    "is overloaded: retry later or send fewer images at once",
                               {"Retry-After": str(RETRY_AFTER_S)}) from None
        finally:
            pending = [f for f in futures if f.cancelled() or not f.done()]  # cancelled: by the timeout
            if pending:
                self.batchers[slot.name].discard(pending)

    async def _read(self, slot: ModelSlot, images: list[tuple[str, bytes]], opts: ReadOptions,
                    futures: list[asyncio.Future]) -> list[dict]:
        loop = asyncio.get_running_loop()
        batcher = self.batchers[slot.name]
        if not batcher.has_room(len(images)):
            raise self.busy_error(f"the queue of model {slot.name!r} is full ({batcher.queued} of "
                                  f"{batcher.max_queue} images waiting); retry after {RETRY_AFTER_S} s")
        prepared = await loop.run_in_executor(self.decoding, self._prepare, slot, images, opts.vertical)
        try:
            futures += batcher.submit([t for tensors, _ in prepared for t in tensors])
        except QueueFull:
            raise self.busy_error(f"the queue of model {slot.name!r} is full ({batcher.max_queue} images "
                                  f"waiting); retry after {RETRY_AFTER_S} s") from None
        rows = await asyncio.gather(*futures)
        decoded = iter(await loop.run_in_executor(self.decoding, self._decode, slot, rows, opts))
        readings = []
        for tensors, note in prepared:  # a stacked vertical crop: the most confident of its readings
            reading = max([next(decoded) for _ in tensors], key=lambda r: r["confidence"])
            if note:
                reading["warning"] = note
            readings.append(reading)
        self.metrics.images.labels(slot.name).inc(len(images))
        return readings

    def _prepare(self, slot: ModelSlot, images: list[tuple[str, bytes]],
                 vertical: str = "warn") -> list[tuple[list[torch.Tensor], str]]:
        """Decode and resize each image (decoding thread); the first bad one ends the request with its 4xx."""
        out = []
        for where, data in images:
            img = open_image(data, where, self.opts.limits)
            try:
                out.append(slot.prepare(img, vertical))
            except Exception as e:  # an image mode or size the resize cannot take: the client's image
                raise RequestError(400, f"{where}: cannot use this image ({e})") from None
        return out

    @staticmethod
    def _decode(slot: ModelSlot, rows: list[torch.Tensor], opts: ReadOptions) -> list[dict]:
        """Decode each image's logits with the request's options (decoding thread)."""
        return [slot.read(row, opts) for row in rows]
