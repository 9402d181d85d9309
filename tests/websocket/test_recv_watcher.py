"""The watcher of a websockets connection's ``recv`` (:func:`.arrivals._watch`): websockets' own
signatures get a watcher with the same parameters, any other one the ``*args, **kwargs`` watcher; each
passes arguments and results through unchanged and sees a failure on its way out."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from openai_latency.websocket import arrivals


class Sync:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.fail: BaseException | None = None

    def recv(self, timeout: float | None = None, decode: bool | None = None) -> Any:
        self.calls.append((timeout, decode))
        if self.fail is not None:
            raise self.fail
        return b"message"


class SyncOther(Sync):
    def recv(self, *, decode: bool | None = None, extra: int = 0) -> Any:  # type: ignore[override]
        self.calls.append((decode, extra))
        if self.fail is not None:
            raise self.fail
        return b"message"


class Async(Sync):
    async def recv(self, decode: bool | None = None) -> Any:  # type: ignore[override]
        self.calls.append((decode,))
        if self.fail is not None:
            raise self.fail
        return b"message"


class AsyncOther(Sync):
    async def recv(self, decode: bool | None = None, timeout: float = 1.0) -> Any:  # type: ignore[override]
        self.calls.append((decode, timeout))
        if self.fail is not None:
            raise self.fail
        return b"message"


def _run(ws: Any, **kwargs: Any) -> Any:
    result = ws.recv(**kwargs)
    return asyncio.run(result) if asyncio.iscoroutine(result) else result


@pytest.mark.parametrize(
    ("ws", "kwargs", "call", "varargs"),
    [
        (Sync(), {"decode": False}, (None, False), False),
        (Sync(), {"timeout": 2.0}, (2.0, None), False),
        (SyncOther(), {"decode": False, "extra": 3}, (False, 3), True),
        (Async(), {"decode": False}, (False,), False),
        (AsyncOther(), {"timeout": 0.5}, (None, 0.5), True),
    ],
    ids=["sync", "sync-timeout", "sync-other", "async", "async-other"],
)
def test_the_watcher_passes_through_and_sees_failures(
    ws: Any, kwargs: dict[str, Any], call: tuple[Any, ...], varargs: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[BaseException] = []
    monkeypatch.setattr(arrivals, "lost", lambda ws, exc: seen.append(exc))
    arrivals._watch(ws)
    try:
        assert "recv" in vars(ws)
        assert ws.recv.__code__.co_flags & 0x04 == (0x04 if varargs else 0)  # *args: the any-signature one
        assert _run(ws, **kwargs) == b"message"
        assert ws.calls == [call] and seen == []
        ws.fail = ConnectionError("gone")
        with pytest.raises(ConnectionError):
            _run(ws, **kwargs)
        assert seen == [ws.fail]
    finally:
        arrivals.uninstall_all()
    assert "recv" not in vars(ws)
