"""``capacity``: a server that answers at most K requests at a time and queues the rest.

A request past the K in progress waits, in arrival order, before anything of its own happens (its
``delay-ms`` included), like a model server whose batch is full: load beyond K adds queueing time
to TTFT and no throughput. The saturation tests and benchmarks measure against it."""

from __future__ import annotations

import asyncio
from collections import deque


class Capacity:
    """The requests in progress and the queue, shared by every connection of one server."""

    def __init__(self) -> None:
        self.busy = 0
        self._waiting: deque[tuple[asyncio.Future[None], int]] = deque()

    async def enter(self, limit: int) -> None:
        """Wait for one of ``limit`` slots (FIFO); :meth:`leave` must follow once this returns."""
        if self.busy < limit and not self._waiting:
            self.busy += 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (future, limit)
        self._waiting.append(entry)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.leave()  # a slot was given just as the request went away
            else:
                self._waiting.remove(entry)
            raise

    def leave(self) -> None:
        self.busy -= 1
        while self._waiting and self.busy < self._waiting[0][1]:
            future, _ = self._waiting.popleft()
            if not future.done():
                self.busy += 1
                future.set_result(None)
