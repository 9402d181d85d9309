"""``--api responses-ws``: Responses turns over WebSocket (``client.responses.connect()``), one connection
per concurrency slot.

A :class:`Pool` per client keeps the connections that are idle; a request takes one (or opens one: at
most as many as requests in flight, the concurrency), sends its ``response.create`` and reads the
turn's events to its last one, then gives the connection back. A connection that failed mid-turn
(dropped, closed by the server) is closed and forgotten: the next request opens a new one. Each turn
is one operation span of the instrumentation (``openai_latency.transport=websocket``), so the stats,
the verdict, the HTML and the JSON are the same as ``--api responses``'s.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from typing import Any

from ...stats.sketch import Sketch
from .record import Tag

_FINAL = frozenset({"response.completed", "response.failed", "response.incomplete", "error"})
_OUTPUT = frozenset(
    {"response.output_text.delta", "response.function_call_arguments.delta", "response.refusal.delta"}
)
#: Fields of a ``responses.create`` call that a ``response.create`` event does not take.
_NOT_IN_EVENT = ("stream", "stream_options", "extra_headers", "extra_query", "timeout")


class Pool:
    """The idle WebSocket connections of one client."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.idle: list[Any] = []
        self.opened = 0

    async def take(self) -> Any:
        if self.idle:
            return self.idle.pop()
        self.opened += 1
        return await self.client.responses.connect().enter()

    def give(self, connection: Any) -> None:
        self.idle.append(connection)

    async def close(self) -> None:
        idle, self.idle = self.idle, []
        for connection in idle:
            with contextlib.suppress(Exception):
                await connection.close()


_POOLS: weakref.WeakKeyDictionary[Any, Pool] = weakref.WeakKeyDictionary()


def pool(client: Any) -> Pool:
    found = _POOLS.get(client)
    if found is None:
        found = _POOLS[client] = Pool(client)
    return found


def event_of(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The ``response.create`` event of a ``responses.create`` call's keyword arguments."""
    event = {key: value for key, value in kwargs.items() if key not in _NOT_IN_EVENT}
    event.update(event.pop("extra_body", None) or {})
    return {"type": "response.create", **event}


async def send(
    client: Any, kwargs: dict[str, Any], tag: Tag, gaps: Sketch | None, keep: bool
) -> tuple[str, int | None, int | None]:
    """One turn: ``(answer text when keep, output tokens, input tokens)``; the SDK's exception (or
    a ``RuntimeError`` for an ``error`` event or a failed response) when it failed."""
    connections = pool(client)
    connection = await connections.take()
    parts: list[str] = []
    last = 0
    final: Any = None
    try:
        await connection.send(event_of(kwargs))
        async for event in connection:
            kind = event.type
            if kind in _OUTPUT:
                if keep:
                    parts.append(str(getattr(event, "delta", "") or ""))
                tag.content_chunks += 1
                if gaps is not None:
                    now = time.perf_counter_ns()
                    if last:
                        gaps.add((now - last) / 1e9)
                    last = now
            elif kind in _FINAL:
                final = event
                break
    except BaseException:
        with contextlib.suppress(Exception):
            await connection.close()
        raise
    if final is None:  # the server closed the connection cleanly mid-turn
        with contextlib.suppress(Exception):
            await connection.close()
        raise RuntimeError("the WebSocket connection closed mid-turn")
    connections.give(connection)
    if final.type in ("error", "response.failed"):
        raise RuntimeError(f"the turn failed: {final.type}")
    usage = getattr(getattr(final, "response", None), "usage", None)
    return "".join(parts), _tokens(usage, "output_tokens"), _tokens(usage, "input_tokens")


def _tokens(usage: Any, name: str) -> int | None:
    tokens = getattr(usage, name, None)
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None


async def close_all() -> None:
    """Closes every idle connection (the run's end)."""
    for connections in list(_POOLS.values()):
        await connections.close()
