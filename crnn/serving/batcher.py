"""Batching across requests: images from concurrent requests wait in a bounded queue, grouped by resized width, and
run through the network together.

A group runs when it holds ``max_batch`` images or when its oldest image has waited ``max_wait`` seconds (the
oldest such group first). While one batch runs, the next fills up, so under load the batches grow by themselves. Only images of one width share a batch (no padding between images), so a
reading never depends on the other requests. Everything here runs on the event loop; the forward pass runs on the
one inference thread that all models share, so a model is never used by two threads at once.
"""
from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field

import torch


class QueueFull(Exception):
    """More images than the queue has room for."""


@dataclass(eq=False)
class Item:
    """One image waiting for the network."""

    tensor: torch.Tensor  # [C, H, W]
    future: asyncio.Future
    arrived: float = field(default_factory=time.monotonic)


class Batcher:
    """The queue and batch loop of one model."""

    def __init__(self, forward: Callable[[torch.Tensor], torch.Tensor], executor: Executor, *, max_batch: int,
                 max_wait: float, max_queue: int, on_batch: Callable[[int, float], None] | None = None) -> None:
        self.forward, self.executor = forward, executor
        self.max_batch, self.max_wait, self.max_queue = max_batch, max_wait, max_queue
        self.on_batch = on_batch  # (batch size, seconds) after every forward pass, for the metrics
        self.groups: dict[int, deque[Item]] = {}  # resized width -> images in arrival order
        self.queued = 0
        self._wake = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        """Start the batch loop on the running event loop."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Finish what is queued, then end the loop."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            await self._task

    def has_room(self, n: int = 1) -> bool:
        """Whether ``n`` more images fit in the queue."""
        return self.queued + n <= self.max_queue

    def submit(self, tensors: list[torch.Tensor]) -> list[asyncio.Future]:
        """Queue one request's images; a future per image resolves to its logits ``[T, K]``. Raises QueueFull."""
        if not self.has_room(len(tensors)) or self._stopping:
            raise QueueFull
        loop = asyncio.get_running_loop()
        items = [Item(t, loop.create_future()) for t in tensors]
        for item in items:
            self.groups.setdefault(item.tensor.shape[-1], deque()).append(item)
        self.queued += len(items)
        self._wake.set()
        return [item.future for item in items]

    def discard(self, futures: list[asyncio.Future]) -> None:
        """Take a request's images that have not run yet out of the queue (its client gave up or timed out)."""
        drop = set(map(id, futures))
        for width, group in list(self.groups.items()):
            kept = deque(item for item in group if id(item.future) not in drop)
            self.queued -= len(group) - len(kept)
            self.groups[width] = kept
            if not kept:
                del self.groups[width]
        for f in futures:
            f.cancel()

    def _ready(self, now: float) -> tuple[int | None, float]:
        """The width whose group should run now (oldest first), else None and how long to wait for one."""
        full = [w for w, g in self.groups.items() if len(g) >= self.max_batch]
        if full:
            return min(full, key=lambda w: self.groups[w][0].arrived), 0.0
        oldest = min(self.groups, key=lambda w: self.groups[w][0].arrived)
        waited = now - self.groups[oldest][0].arrived
        if waited >= self.max_wait or self._stopping:
            return oldest, 0.0
        return None, self.max_wait - waited

    async def _run(self) -> None:
        """Take the next ready group, run it, hand each request its rows; until stopped with nothing queued."""
        loop = asyncio.get_running_loop()
        while not (self._stopping and self.queued == 0):
            if self.queued == 0:
                self._wake.clear()
                await self._wake.wait()
                continue
            width, delay = self._ready(time.monotonic())
            if width is None:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), delay)
                except asyncio.TimeoutError:
                    pass
                continue
            group = self.groups[width]
            batch = [group.popleft() for _ in range(min(self.max_batch, len(group)))]
            if not group:
                del self.groups[width]
            self.queued -= len(batch)
            await self._run_batch(loop, batch)

    async def _run_batch(self, loop: asyncio.AbstractEventLoop, batch: list[Item]) -> None:
        """One forward pass on the inference thread; results (or the error) to each waiting request."""
        start = time.perf_counter()
        try:
            stacked = torch.stack([item.tensor for item in batch])  # (B, C, H, W)
            logits = await loop.run_in_executor(self.executor, self.forward, stacked)  # (B, T, K)
        except Exception as e:  # noqa: BLE001 - reported to each request; the loop keeps serving
            for item in batch:
                if not item.future.done():
                    item.future.set_exception(e)
            return
        if self.on_batch is not None:
            self.on_batch(len(batch), time.perf_counter() - start)
        for item, row in zip(batch, logits):
            if not item.future.done():
                item.future.set_result(row)
