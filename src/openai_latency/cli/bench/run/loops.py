"""The two load loops of ``openai-latency bench``: a closed loop of workers on one shared schedule,
and an open loop of arrivals at a rate with a cap on the requests in flight."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Awaitable, Callable, Collection, Iterator, Sequence

Send = Callable[[int], Awaitable[None]]


async def closed_loop(
    order: Iterator[int],
    concurrency: int,
    send: Send,
    deadline: float | None,
    first: float = 0.0,
    every: float = 0.0,
    origin: float | None = None,
) -> None:
    """``concurrency`` workers on one shared schedule; worker k starts ``first + k * every`` s after
    ``origin`` (``time.monotonic()``; default now)."""
    origin = time.monotonic() if origin is None else origin

    async def worker(number: int) -> None:
        wait = origin + first + number * every - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        for index in order:  # one shared iterator: each request is taken exactly once
            if deadline is not None and time.monotonic() >= deadline:
                return
            await send(index)

    await _gather([worker(number) for number in range(concurrency)])


async def open_loop(
    order: Iterator[int],
    rate: float,
    poisson: bool,
    rng: random.Random,
    cap: int,
    send: Send,
    deadline: float | None,
    offset: float = 0.0,
    origin: float | None = None,
) -> int:
    """Arrivals at ``rate`` per second, the first ``offset`` s after ``origin`` (``time.monotonic()``;
    default now); returns how many found all ``cap`` slots busy (late)."""
    slots = asyncio.Semaphore(cap)
    tasks: set[asyncio.Task[None]] = set()
    late = 0
    start = time.monotonic() if origin is None else origin
    due = offset
    try:
        for number, index in enumerate(order):
            if number:
                due += rng.expovariate(rate) if poisson else 1.0 / rate
            wait = start + due - time.monotonic()
            if deadline is not None and start + due >= deadline:
                break
            if wait > 0:
                await asyncio.sleep(wait)
            if slots.locked():
                late += 1
            await slots.acquire()
            task = asyncio.ensure_future(send(index))
            tasks.add(task)
            task.add_done_callback(_finisher(tasks, slots))
        if tasks:
            await asyncio.gather(*tasks)
    finally:
        await cancel_all(tasks)
    return late


def _finisher(
    tasks: set[asyncio.Task[None]], slots: asyncio.Semaphore
) -> Callable[[asyncio.Task[None]], None]:
    def done(task: asyncio.Task[None]) -> None:
        tasks.discard(task)
        slots.release()

    return done


async def _gather(coroutines: list[Awaitable[None]]) -> None:
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        await asyncio.gather(*tasks)
    finally:
        await cancel_all(tasks)


async def cancel_all(tasks: Collection[asyncio.Task[None]]) -> None:
    """Cancels the requests still in flight when a loop stops (its end, an error, Ctrl-C) and waits
    until each has ended."""
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)


def groups(targets: int, sequential: bool) -> list[list[int]]:
    """The targets that run together: all of them (interleaved), or one after another."""
    return [[i] for i in range(targets)] if sequential else [list(range(targets))]


def share(total: int, parts: int, part: int) -> int:
    """Part ``part`` of ``total`` split into ``parts`` near-equal whole shares."""
    return total // parts + (1 if part < total % parts else 0)


def schedule(indices: Sequence[int], requests: int | None) -> Iterator[int]:
    """Round-robin over the targets: ``requests`` each, or without end (a ``--duration`` run)."""
    if requests is None:
        return itertools.cycle(indices)
    return iter([index for _ in range(requests) for index in indices])
