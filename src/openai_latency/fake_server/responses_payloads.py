"""OpenAI Responses API bodies and SSE events (``POST /v1/responses``, ``GET /v1/responses/{id}``), on the
same deterministic output as the other endpoints (:mod:`.payloads`)."""

from __future__ import annotations

from .payloads import CREATED, JSON, STREAM_ERROR_MESSAGE, Event, Output, StreamPlan, dumps


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
        "output": [_message_item(out, status)] if include_output and status != "failed" else [],
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
            "input_tokens_details": {"cached_tokens": out.cached_tokens},
            "output_tokens": out.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
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


def responses_stream(out: Output) -> StreamPlan:
    item_id = f"msg_{out.id}"
    status = out.script.response_status
    where = f'"item_id":"{item_id}","output_index":0,"content_index":0'
    events: list[tuple[str, JSON]] = [
        ("response.created", {"response": response_json(out, "in_progress", include_output=False)}),
        ("response.in_progress", {"response": response_json(out, "in_progress", include_output=False)}),
        ("response.output_item.added", {"output_index": 0, "item": _message_item(out, "", content=False)}),
        (
            "response.content_part.added",
            {"item_id": item_id, "output_index": 0, "content_index": 0, "part": _text_part("")},
        ),
    ]
    preamble = [_response_event(kind, i, data) for i, (kind, data) in enumerate(events)]
    seq = len(preamble)
    content: list[Event] = []
    for word in out.words:
        kind = "response.output_text.delta"
        data = f'{{"type":"{kind}","sequence_number":{seq},{where},"delta":{dumps(word)},"logprobs":[]}}'
        content.append((f"event:{kind}", f"event: {kind}\ndata: {data}\n\n".encode()))
        seq += 1
    if status == "failed":
        closing: list[tuple[str, JSON]] = [("response.failed", {"response": response_json(out)})]
    else:
        item = _message_item(out, status)
        closing = [
            (
                "response.output_text.done",
                {"item_id": item_id, "output_index": 0, "content_index": 0, "text": out.text, "logprobs": []},
            ),
            (
                "response.content_part.done",
                {"item_id": item_id, "output_index": 0, "content_index": 0, "part": _text_part(out.text)},
            ),
            ("response.output_item.done", {"output_index": 0, "item": item}),
            (f"response.{status}", {"response": response_json(out)}),
        ]
    epilogue = [_response_event(kind, seq + i, data) for i, (kind, data) in enumerate(closing)]

    def error_event(sent: int) -> bytes:
        data = {"code": "server_error", "message": STREAM_ERROR_MESSAGE, "param": None}
        return _response_event("error", sent, data)[1]

    return StreamPlan(preamble, content, epilogue, error_event)


def _response_event(kind: str, seq: int, data: JSON) -> Event:
    payload = dumps({"type": kind, "sequence_number": seq, **data})
    return f"event:{kind}", f"event: {kind}\ndata: {payload}\n\n".encode()
