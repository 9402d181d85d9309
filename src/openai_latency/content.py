"""Opt-in message content capture, in the GenAI semantic conventions' message schema.

``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (setting ``capture_content``) decides where
``gen_ai.input.messages``, ``gen_ai.output.messages``, ``gen_ai.system_instructions`` and
``gen_ai.tool.definitions`` go: nowhere (``no_content``, the default: nothing here runs), the
operation span (``span_only``), one log record ``gen_ai.client.inference.operation.details``
through the OTel Logs API (``event_only``), or both (``span_and_event``).

Each value is a JSON string of at most ``content_max_length`` characters: when the whole is
longer, the longest strings inside (message texts, tool arguments...) are cut to a common length
and end with a marker, so the value stays valid JSON (:func:`.bounded_json.fit`). Request values
are serialized when the call starts (the caller's objects are not kept); stream output is collected
by an observer that exists only while capture is on, and never holds more text than the limit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai

from ._guard import guarded, report
from .bounded_json import fit
from .model import Attributes, Observer, OperationKind, StreamStats, Telemetry
from .timeline import to_epoch_ns

if TYPE_CHECKING:
    from opentelemetry._logs import Logger
    from opentelemetry.context import Context
    from opentelemetry.trace import Span

EVENT_NAME = "gen_ai.client.inference.operation.details"
SPAN_MODES = ("span_only", "span_and_event")
EVENT_MODES = ("event_only", "span_and_event")

INPUT = gen_ai.GEN_AI_INPUT_MESSAGES
OUTPUT = gen_ai.GEN_AI_OUTPUT_MESSAGES
SYSTEM = gen_ai.GEN_AI_SYSTEM_INSTRUCTIONS
TOOLS = gen_ai.GEN_AI_TOOL_DEFINITIONS

JSON = dict[str, Any]


@guarded()
def capture_request(
    telemetry: Telemetry, kind: OperationKind, kwargs: Mapping[str, Any]
) -> ContentCapture | None:
    """A capture for this call with its request content serialized, or None when the API has none."""
    settings = telemetry.settings
    capture = ContentCapture(
        settings.capture_content, settings.content_max_length, telemetry.logger, kind.api_type
    )
    if kind.api_type == "chat_completions":
        messages = kwargs.get("messages")
        if isinstance(messages, (list, tuple)):
            capture.set(INPUT, [_chat_message(m) for m in messages])
        capture.set(TOOLS, _tool_definitions(kwargs.get("tools")))
    elif kind.api_type == "responses":
        capture.set(INPUT, _responses_input(kwargs.get("input")))
        instructions = kwargs.get("instructions")
        if isinstance(instructions, str):
            capture.set(SYSTEM, [_text(instructions)])
        capture.set(TOOLS, _tool_definitions(kwargs.get("tools")))
    elif kind.api_type == "completions":
        prompt = kwargs.get("prompt")
        prompts = [prompt] if isinstance(prompt, str) else prompt if isinstance(prompt, list) else []
        texts = [p for p in prompts if isinstance(p, str)]
        capture.set(INPUT, [{"role": "user", "parts": [_text(p)]} for p in texts])
    else:
        return None
    return capture


class ContentCapture:
    """Request values (ready JSON), the non-stream result, and stream output collected so far."""

    def __init__(self, mode: str, limit: int, logger: Logger | None, api_type: str | None = None) -> None:
        self.mode = mode
        self.limit = limit
        self.logger = logger
        self.api_type = api_type
        """The call's openai.api.type: how to read its result into output messages."""
        self.values: dict[str, str] = {}
        self.result: Any = None
        """The parsed response of a non-stream call (set by :meth:`.Operation.returned`)."""
        self._budget = limit + 1  # one more character than kept tells "truncated" apart
        self._text: dict[int, list[str]] = {}
        self._calls: dict[tuple[int, int], JSON] = {}
        self._finish: dict[int, str] = {}

    def set(self, key: str, value: Any) -> None:
        if value:
            self.values[key] = fit(value, self.limit)

    # --- streams --------------------------------------------------------------------------------

    def observer(self, observe: Observer, stream_kind: str) -> Observer:
        """``observe`` plus collection of the output text (chosen once per stream, not per chunk)."""
        collect = {
            "chat": self._collect_chat,
            "completions": self._collect_completions,
            "responses": self._collect_responses,
        }.get(stream_kind)
        if collect is None:
            return observe

        def observe_and_collect(st: StreamStats, item: Any) -> bool:
            output = observe(st, item)
            try:
                collect(item)
            except Exception:
                report("content capture")
            return output

        return observe_and_collect

    def _take(self, text: Any) -> str:
        """The part of ``text`` that still fits the limit."""
        if not isinstance(text, str) or self._budget <= 0:
            return ""
        piece = text[: self._budget]
        self._budget -= len(piece)
        return piece

    def _add_text(self, index: int, text: Any) -> None:
        piece = self._take(text)
        if piece:
            self._text.setdefault(index, []).append(piece)

    def _collect_chat(self, chunk: Any) -> None:
        for choice in chunk.choices or ():
            index = choice.index or 0
            if choice.finish_reason:
                self._finish[index] = str(choice.finish_reason)
            delta = choice.delta
            if delta is None:
                continue
            for text in (delta.content, getattr(delta, "refusal", None)):
                if text:
                    self._add_text(index, text)
            for call in delta.tool_calls or ():
                entry = self._calls.setdefault(
                    (index, call.index or 0), {"id": None, "name": None, "args": []}
                )
                if call.id:
                    entry["id"] = call.id
                function = call.function
                if function is not None:
                    if function.name:
                        entry["name"] = function.name
                    piece = self._take(function.arguments)
                    if piece:
                        entry["args"].append(piece)

    def _collect_completions(self, chunk: Any) -> None:
        for choice in chunk.choices or ():
            index = choice.index or 0
            if choice.finish_reason:
                self._finish[index] = str(choice.finish_reason)
            if choice.text:
                self._add_text(index, choice.text)

    def _collect_responses(self, event: Any) -> None:
        if getattr(event, "type", None) == "response.output_text.delta":
            self._add_text(0, event.delta)

    # --- the end --------------------------------------------------------------------------------

    @guarded()
    def emit(
        self,
        span: Span,
        context: Context,
        request: Attributes,
        final_item: object,
        end_ns: int,
        summary: Attributes,
    ) -> None:
        """Puts the values on the operation ``span`` and/or emits the log record (in ``context``, with
        the ``request`` attributes and the ``summary``'s semconv ones), per the mode. ``final_item``:
        the final Response of a Responses stream, if any."""
        values = dict(self.values)
        output = self._output_messages(final_item)
        if output:
            values[OUTPUT] = fit(output, self.limit)
        if not values:
            return
        if self.mode in SPAN_MODES:
            span.set_attributes(values)
        if self.mode in EVENT_MODES and self.logger is not None:
            attributes = {**request, **_event_attributes(summary), **values}
            self.logger.emit(
                timestamp=to_epoch_ns(end_ns),
                context=context,
                event_name=EVENT_NAME,
                attributes=attributes,
            )

    def _output_messages(self, final_item: object) -> list[JSON]:
        api_type = self.api_type
        result = self.result
        if api_type == "responses":
            final = result if result is not None else final_item
            if final is not None and getattr(final, "output", None):
                return [_responses_output(final)]
        elif result is not None:
            return [_choice_message(choice, api_type) for choice in getattr(result, "choices", None) or ()]
        return self._collected_messages()

    def _collected_messages(self) -> list[JSON]:
        indexes = sorted({*self._text, *self._finish, *(i for i, _ in self._calls)})
        messages = []
        for index in indexes:
            parts: list[JSON] = []
            text = "".join(self._text.get(index, ()))
            if text:
                parts.append(_text(text))
            for (i, _), call in sorted(self._calls.items()):
                if i == index:
                    arguments = _arguments("".join(call["args"]))
                    parts.append(
                        {"type": "tool_call", "id": call["id"], "name": call["name"], "arguments": arguments}
                    )
            messages.append(_message("assistant", parts, self._finish.get(index)))
        return messages


def _event_attributes(summary: Attributes) -> Attributes:
    """The span's response-side semconv attributes (ids, models, usage, finish reasons, error.type)."""
    return {k: v for k, v in summary.items() if k.startswith("gen_ai.") or k == "error.type"}


def _get(obj: Any, name: str) -> Any:
    """Request params are TypedDicts (plain dicts) or, sometimes, SDK models."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _text(content: str) -> JSON:
    return {"type": "text", "content": content}


def _message(role: str, parts: list[JSON], finish_reason: str | None = None) -> JSON:
    message: JSON = {"role": role, "parts": parts}
    if finish_reason is not None:
        message["finish_reason"] = finish_reason
    return message


def _arguments(raw: Any) -> Any:
    """Tool call arguments as an object when they are JSON, else as sent."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _parts(content: Any) -> list[JSON]:
    """Message content (a string or a list of typed parts) -> semconv parts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [_text(content)]
    if not isinstance(content, (list, tuple)):
        return []
    parts: list[JSON] = []
    for part in content:
        kind = _get(part, "type")
        if kind in ("text", "input_text", "output_text", "refusal"):
            parts.append(_text(_get(part, "text") or _get(part, "refusal") or ""))
        elif kind == "image_url":
            parts.append({"type": "uri", "modality": "image", "uri": _get(_get(part, "image_url"), "url")})
        elif kind == "input_image" and _get(part, "image_url"):
            parts.append({"type": "uri", "modality": "image", "uri": _get(part, "image_url")})
        elif kind == "input_audio":
            audio = _get(part, "input_audio")
            mime = f"audio/{_get(audio, 'format')}"
            parts.append(
                {"type": "blob", "modality": "audio", "mime_type": mime, "content": _get(audio, "data")}
            )
        elif kind in ("file", "input_file") and (
            _get(_get(part, "file"), "file_id") or _get(part, "file_id")
        ):
            file_id = _get(_get(part, "file"), "file_id") or _get(part, "file_id")
            parts.append({"type": "file", "modality": "document", "file_id": file_id})
        else:
            parts.append({"type": str(kind)})
    return parts


def _tool_call(call_id: Any, function: Any) -> JSON:
    arguments = _arguments(_get(function, "arguments"))
    return {"type": "tool_call", "id": call_id, "name": _get(function, "name"), "arguments": arguments}


def _chat_message(message: Any) -> JSON:
    role = str(_get(message, "role") or "user")
    if role == "tool":
        response = {"type": "tool_call_response", "id": _get(message, "tool_call_id")}
        content = _get(message, "content")
        texts = [p["content"] for p in _parts(content) if p.get("type") == "text"]
        response["response"] = "".join(texts) if texts else content
        return _message(role, [response])
    parts = _parts(_get(message, "content"))
    for call in _get(message, "tool_calls") or ():
        parts.append(_tool_call(_get(call, "id"), _get(call, "function")))
    out = _message(role, parts)
    name = _get(message, "name")
    if isinstance(name, str):
        out["name"] = name
    return out


def _choice_message(choice: Any, api_type: str | None) -> JSON:
    finish = getattr(choice, "finish_reason", None)
    if api_type == "completions":
        return _message("assistant", [_text(choice.text or "")], finish)
    message = getattr(choice, "message", None)
    parts = _parts(getattr(message, "content", None))
    refusal = getattr(message, "refusal", None)
    if refusal:
        parts.append(_text(refusal))
    for call in getattr(message, "tool_calls", None) or ():
        parts.append(_tool_call(call.id, getattr(call, "function", None)))
    return _message("assistant", parts, finish)


def _responses_input(value: Any) -> list[JSON]:
    if isinstance(value, str):
        return [_message("user", [_text(value)])]
    if not isinstance(value, (list, tuple)):
        return []
    messages = []
    for item in value:
        kind = _get(item, "type")
        if kind == "function_call":
            messages.append(_message("assistant", [_tool_call(_get(item, "call_id"), item)]))
        elif kind == "function_call_output":
            part = {
                "type": "tool_call_response",
                "id": _get(item, "call_id"),
                "response": _get(item, "output"),
            }
            messages.append(_message("tool", [part]))
        elif _get(item, "role"):
            messages.append(_message(str(_get(item, "role")), _parts(_get(item, "content"))))
        else:
            messages.append(_message("user", [{"type": str(kind)}]))
    return messages


def _responses_output(response: Any) -> JSON:
    parts: list[JSON] = []
    for item in response.output:
        kind = getattr(item, "type", None)
        if kind == "message":
            parts.extend(_parts([c.model_dump() if hasattr(c, "model_dump") else c for c in item.content]))
        elif kind == "function_call":
            parts.append(_tool_call(item.call_id, item))
        elif kind == "reasoning":
            for summary in getattr(item, "summary", None) or ():
                parts.append({"type": "reasoning", "content": getattr(summary, "text", "")})
        else:
            parts.append({"type": str(kind)})
    details = getattr(response, "incomplete_details", None)
    reason = getattr(details, "reason", None)
    finish = reason or ("tool_call" if any(p["type"] == "tool_call" for p in parts) else "stop")
    return _message("assistant", parts, str(finish))


def _tool_definitions(tools: Any) -> list[JSON]:
    """Chat tools (``{"type": "function", "function": {...}}``) and Responses tools (flat) -> flat."""
    if not isinstance(tools, (list, tuple)):
        return []
    out = []
    for tool in tools:
        kind = _get(tool, "type")
        spec = _get(tool, kind) if isinstance(kind, str) and _get(tool, kind) is not None else tool
        definition: JSON = {"type": kind}
        for key in ("name", "description", "parameters"):
            value = _get(spec, key)
            if value is not None:
                definition[key] = value
        out.append(definition)
    return out
