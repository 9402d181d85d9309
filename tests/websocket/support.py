"""What the WebSocket tests share: the SDK gate, turns driven to their end, records found by response id."""

from __future__ import annotations

import importlib
from typing import Any

import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan

from openai_latency.fake_server import RequestRecord
from tests.support.span_checks import attrs

TERMINAL = ("response.completed", "response.failed", "response.incomplete", "error")
MODEL = "gpt-4o-mini"


def require_responses_ws() -> None:
    """Skips the module on an SDK without Responses WebSocket mode (openai < 2.22) or without websockets."""
    pytest.importorskip("websockets")
    module = importlib.import_module("openai.resources.responses")
    if not hasattr(module.Responses, "connect"):
        pytest.skip(f"openai {openai.__version__} has no responses.connect()", allow_module_level=True)


def require_realtime() -> None:
    pytest.importorskip("websockets")
    try:
        module = importlib.import_module("openai.resources.realtime")
    except ImportError:
        pytest.skip(f"openai {openai.__version__} has no realtime.connect()", allow_module_level=True)
    if not hasattr(module.Realtime, "connect"):
        pytest.skip(f"openai {openai.__version__} has no realtime.connect()", allow_module_level=True)


def create(**fields: Any) -> dict[str, Any]:
    return {"type": "response.create", "model": MODEL, "input": "hello there", **fields}


def script(**keys: Any) -> dict[str, str]:
    """``metadata`` of a response.create that scripts its turn: ``script(ttft_ms=50)``."""
    return {"x-fake-" + key.replace("_", "-"): str(value) for key, value in keys.items()}


def drain(connection: Any) -> list[Any]:
    """Events until the turn's last one."""
    events = []
    for event in connection:
        events.append(event)
        if event.type in TERMINAL:
            break
    return events


async def drain_async(connection: Any) -> list[Any]:
    events = []
    async for event in connection:
        events.append(event)
        if event.type in TERMINAL:
            break
    return events


def record_of(server: Any, op: ReadableSpan) -> RequestRecord:
    """The server's record of the turn ``op`` (its response id is ``resp_`` + the record's id)."""
    response_id = attrs(op)["gen_ai.response.id"]
    # no wait for the log as a whole: a session still open is a record in flight, and the log's
    # snapshot would wait its full second for it; only this turn's own record is waited for
    for record in server.records(wait=0):
        if f"resp_{record.request_id[4:28]}" == response_id:
            return server.record(record.request_id)  # type: ignore[no-any-return]
    raise AssertionError(f"no record for {response_id}")


def ws_url(server: Any) -> str:
    """The client's ``websocket_base_url`` for a fake server: openai 1.x builds ``wss://`` from any
    ``base_url`` for Realtime, so the tests name the scheme."""
    return str(server.base_url).replace("http://", "ws://", 1)


def ws_patched_callables() -> dict[str, Any]:
    """What each entry of the WebSocket patch table points at now (the entries this SDK has), by
    ``path@module``: compared before, during and after instrumentation."""
    from openai_latency.instrumentor import _resolve_owner
    from openai_latency.websocket import hooks

    out = {}
    for module_name, path, _wrapper in hooks.patch_table(hooks.WsHooks(None)):
        owner = _resolve_owner(module_name, path)
        if owner is not None:
            out[path + "@" + module_name] = vars(owner)[path.split(".")[1]]
    return out
