"""The three APIs bench speaks (``--api``): which SDK resource, and where the generated text is.

A chunk "has content" when it carries output: text, a tool call's arguments (the first tool-call
delta counts as output), or a refusal; role-only and usage-only chunks do not.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ...stats.sketch import Sketch
from ..workload import Api
from . import ws_pool
from .record import Tag


def resource(client: Any, api: Api) -> Any:
    """The SDK resource whose ``create`` sends one request of ``api``."""
    if api in ("responses", "responses-ws"):  # responses-ws: HTTP for what is not a turn (calibration)
        return client.responses
    if api == "completions":
        return client.completions
    return client.chat.completions


def _chat(chunk: Any) -> str | None:
    for choice in getattr(chunk, "choices", None) or ():
        delta = getattr(choice, "delta", None)
        if delta is None:
            continue
        if delta.content:
            return str(delta.content)
        calls = getattr(delta, "tool_calls", None)
        if calls:
            function = getattr(calls[0], "function", None)
            return str(getattr(function, "arguments", None) or "")
        if getattr(delta, "refusal", None):
            return str(delta.refusal)
    return None


def _completions(chunk: Any) -> str | None:
    for choice in getattr(chunk, "choices", None) or ():
        text = getattr(choice, "text", None)
        if text:
            return str(text)
    return None


_RESPONSES_OUTPUT = frozenset(
    {"response.output_text.delta", "response.function_call_arguments.delta", "response.refusal.delta"}
)


def _responses(event: Any) -> str | None:
    if getattr(event, "type", None) in _RESPONSES_OUTPUT:
        return str(getattr(event, "delta", "") or "")
    return None


#: Per API: a stream item -> its output text ("" for output without text), None without output.
CONTENT: dict[str, Callable[[Any], str | None]] = {
    "chat": _chat,
    "completions": _completions,
    "responses": _responses,
    "responses-ws": _responses,
}


def answer_text(result: Any, api: Api) -> str:
    """A non-stream result's answer text (what the next turn of a conversation repeats)."""
    if api in ("responses", "responses-ws"):
        return str(getattr(result, "output_text", "") or "")
    choices = getattr(result, "choices", None) or ()
    if not choices:
        return ""
    if api == "completions":
        return str(getattr(choices[0], "text", "") or "")
    message = getattr(choices[0], "message", None)
    return str(getattr(message, "content", "") or "")


async def send(
    client: Any, api: Api, kwargs: dict[str, Any], tag: Tag, gaps: Sketch | None, keep: bool
) -> tuple[str, int | None, int | None]:
    """One call of ``api``; a stream's content chunks counted in ``tag``, the gaps between them
    added to ``gaps`` (unless None). Returns the answer's text when ``keep`` (else ""), and the
    output and input tokens the server reported (None without usage)."""
    if api == "responses-ws":
        return await ws_pool.send(client, kwargs, tag, gaps, keep)
    create = resource(client, api).create
    if not kwargs.get("stream"):
        result = await create(**kwargs)
        return (answer_text(result, api) if keep else ""), output_tokens(result), input_tokens(result)
    content = CONTENT[api]
    stream = await create(**kwargs)
    last = 0
    parts: list[str] = []
    chunk: Any = None
    async with stream:
        async for chunk in stream:
            text = content(chunk)
            if text is None:
                continue
            if keep:
                parts.append(text)
            tag.content_chunks += 1
            if gaps is None:
                continue
            now = time.perf_counter_ns()
            if last:
                gaps.add((now - last) / 1e9)
            last = now
    # the usage is in the last chunk (chat, completions) or the last event's response (Responses)
    last_item = getattr(chunk, "response", None) or chunk
    return "".join(parts), output_tokens(last_item), input_tokens(last_item)


def output_tokens(result: Any) -> int | None:
    return _usage(result, "completion_tokens", "output_tokens")


def input_tokens(result: Any) -> int | None:
    """The input tokens of a result's usage (chat and completions ``prompt_tokens``, Responses
    ``input_tokens``); None without usage."""
    return _usage(result, "prompt_tokens", "input_tokens")


def _usage(result: Any, name: str, responses_name: str) -> int | None:
    usage = getattr(result, "usage", None)
    tokens = getattr(usage, name, None)
    if tokens is None:
        tokens = getattr(usage, responses_name, None)
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None
