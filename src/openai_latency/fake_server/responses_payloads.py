"""OpenAI Responses API bodies and SSE events (``POST /v1/responses``, ``GET /v1/responses/{id}``), on the
same deterministic output as the other endpoints (:mod:`.payloads`).

With reasoning tokens the output starts with a ``reasoning`` item (``rs_<id>``, output index 0; the
message moves to index 1), streamed the way the ``reasoning-mode`` script key says: reasoning text
(``reasoning_content`` and ``reasoning`` modes: ``response.content_part.added`` of a ``reasoning_text``
part, ``response.reasoning_text.delta`` per token, ``.done``), nothing (``hidden``: the item is added
and done around the silence), or a summary (``summary``: ``response.reasoning_summary_part.added``,
``response.reasoning_summary_text.delta`` per token, ``.done``, ``response.reasoning_summary_part.done``).
"""

from __future__ import annotations

from collections.abc import Sequence

from .payloads import CREATED, JSON, STREAM_ERROR_MESSAGE, Event, Output, StreamPlan, cache_usage, dumps

_TEXT_MODES = ("reasoning_content", "reasoning")


def _response_error() -> JSON:
    return {"code": "server_error", "message": STREAM_ERROR_MESSAGE}


def response_json(out: Output, status: str | None = None, include_output: bool = True) -> JSON:
    """A Responses ``response`` object (``status`` defaults to the script's ``response-status``)."""
    status = status or out.script.response_status
    body: JSON = {
        "id": f"resp_{out.id}",
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "background": False,
        "error": _response_error() if status == "failed" else None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": None,
        "max_output_tokens": None,
        "metadata": {},
        "model": out.model,
        "output": _output_items(out, status) if include_output and status != "failed" else [],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": None,
        "user": None,
    }
    if include_output and out.script.usage != "never" and status != "in_progress":
        body["usage"] = {
            "input_tokens": out.prompt_tokens,
            **cache_usage(out, "input_tokens_details", {}),
            "output_tokens": out.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": out.reasoning_tokens},
            "total_tokens": out.prompt_tokens + out.completion_tokens,
        }
    return body


def _text_part(text: str) -> JSON:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def _message_item(out: Output, status: str, content: bool = True) -> JSON:
    return {
        "id": f"msg_{out.id}",
        "type": "message",
        "status": "incomplete" if status == "incomplete" else "completed" if content else "in_progress",
        "role": "assistant",
        "content": [_text_part(out.text)] if content else [],
    }


def _reasoning_item(out: Output, done: bool = True) -> JSON:
    """The ``reasoning`` output item: its text (or summary) once ``done``, empty while in progress."""
    mode = out.script.reasoning_mode
    item: JSON = {"id": f"rs_{out.id}", "type": "reasoning", "summary": []}
    if mode == "summary" and done:
        item["summary"] = [{"type": "summary_text", "text": out.reasoning_text}]
    if mode in _TEXT_MODES:
        item["content"] = [{"type": "reasoning_text", "text": out.reasoning_text}] if done else []
    item["status"] = "completed" if done else "in_progress"
    return item


def _output_items(out: Output, status: str) -> list[JSON]:
    reasoning = [_reasoning_item(out)] if out.reasoning else []
    return [*reasoning, _message_item(out, status)]


class _Events:
    """Responses SSE events numbered in the order they are built (which is the order they are sent)."""

    def __init__(self) -> None:
        self.seq = 0

    def event(self, kind: str, data: JSON) -> Event:
        built = _response_event(kind, self.seq, data)
        self.seq += 1
        return built

    def events(self, items: Sequence[tuple[str, JSON]]) -> list[Event]:
        return [self.event(kind, data) for kind, data in items]

    def deltas(self, kind: str, where: str, words: list[str], extra: str = "") -> list[Event]:
        """One ``kind`` delta event per word, from a string template (no ``json.dumps`` per event)."""
        built = []
        for word in words:
            data = f'{{"type":"{kind}","sequence_number":{self.seq},{where},"delta":{dumps(word)}{extra}}}'
            built.append((f"event:{kind}", f"event: {kind}\ndata: {data}\n\n".encode()))
            self.seq += 1
        return built


def _reasoning_stream(out: Output, numbered: _Events) -> tuple[list[Event], list[Event], list[Event]]:
    """``(reasoning_open, reasoning, reasoning_close)`` of the reasoning item (output index 0); its
    ``response.output_item.added`` (and text part) are in the preamble."""
    mode = out.script.reasoning_mode
    ids = {"item_id": f"rs_{out.id}", "output_index": 0}
    done = ("response.output_item.done", {"output_index": 0, "item": _reasoning_item(out)})
    text = out.reasoning_text
    if mode in _TEXT_MODES:
        where = f'"item_id":"rs_{out.id}","output_index":0,"content_index":0'
        deltas = numbered.deltas("response.reasoning_text.delta", where, out.reasoning)
        part = {"type": "reasoning_text", "text": text}
        closing = [
            ("response.reasoning_text.done", {**ids, "content_index": 0, "text": text}),
            ("response.content_part.done", {**ids, "content_index": 0, "part": part}),
            done,
        ]
        return [], deltas, numbered.events(closing)
    if mode != "summary":  # hidden
        return [], [], numbered.events([done])
    summary = {**ids, "summary_index": 0}
    opening = numbered.events(
        [("response.reasoning_summary_part.added", {**summary, "part": {"type": "summary_text", "text": ""}})]
    )
    where = f'"item_id":"rs_{out.id}","output_index":0,"summary_index":0'
    deltas = numbered.deltas("response.reasoning_summary_text.delta", where, out.reasoning)
    closing = [
        ("response.reasoning_summary_text.done", {**summary, "text": text}),
        ("response.reasoning_summary_part.done", {**summary, "part": {"type": "summary_text", "text": text}}),
        done,
    ]
    return opening, deltas, numbered.events(closing)


def responses_stream(out: Output) -> StreamPlan:
    item_id = f"msg_{out.id}"
    status = out.script.response_status
    index = 1 if out.reasoning else 0  # the message's output index
    opening: list[tuple[str, JSON]] = [
        ("response.created", {"response": response_json(out, "in_progress", include_output=False)}),
        ("response.in_progress", {"response": response_json(out, "in_progress", include_output=False)}),
    ]
    message_open: list[tuple[str, JSON]] = [
        (
            "response.output_item.added",
            {"output_index": index, "item": _message_item(out, "", content=False)},
        ),
        (
            "response.content_part.added",
            {"item_id": item_id, "output_index": index, "content_index": 0, "part": _text_part("")},
        ),
    ]
    numbered = _Events()
    reasoning_open: list[Event] = []
    reasoning: list[Event] = []
    reasoning_close: list[Event] = []
    if out.reasoning:
        opening.append(
            ("response.output_item.added", {"output_index": 0, "item": _reasoning_item(out, False)})
        )
        if out.script.reasoning_mode in _TEXT_MODES:
            part = {"type": "reasoning_text", "text": ""}
            ids = {"item_id": f"rs_{out.id}", "output_index": 0, "content_index": 0}
            opening.append(("response.content_part.added", {**ids, "part": part}))
        preamble = numbered.events(opening)
        reasoning_open, reasoning, reasoning_close = _reasoning_stream(out, numbered)
        reasoning_close += numbered.events(message_open)
    else:
        preamble = numbered.events(opening + message_open)
    where = f'"item_id":"{item_id}","output_index":{index},"content_index":0'
    content = numbered.deltas("response.output_text.delta", where, out.words, ',"logprobs":[]')
    if status == "failed":
        closing: list[tuple[str, JSON]] = [("response.failed", {"response": response_json(out)})]
    else:
        ids = {"item_id": item_id, "output_index": index, "content_index": 0}
        closing = [
            ("response.output_text.done", {**ids, "text": out.text, "logprobs": []}),
            ("response.content_part.done", {**ids, "part": _text_part(out.text)}),
            ("response.output_item.done", {"output_index": index, "item": _message_item(out, status)}),
            (f"response.{status}", {"response": response_json(out)}),
        ]
    epilogue = numbered.events(closing)

    def error_event(sent: int) -> bytes:
        data = {"code": "server_error", "message": STREAM_ERROR_MESSAGE, "param": None}
        return _response_event("error", sent, data)[1]

    hidden = out.reasoning_tokens if out.script.reasoning_mode in ("hidden", "summary") else 0
    return StreamPlan(
        preamble, content, epilogue, error_event, reasoning, hidden, reasoning_open, reasoning_close
    )


def _response_event(kind: str, seq: int, data: JSON) -> Event:
    payload = dumps({"type": kind, "sequence_number": seq, **data})
    return f"event:{kind}", f"event: {kind}\ndata: {payload}\n\n".encode()
