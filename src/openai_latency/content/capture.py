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

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai

from .._guard import guarded, report
from ..clock import to_epoch_ns
from ..model import Attributes, Observer, OperationKind, StreamStats, Telemetry
from .bounded_json import fit
from .messages import (
    JSON,
    arguments,
    chat_message,
    choice_message,
    make_message,
    reasoning_part,
    reasoning_text,
    responses_input,
    responses_output,
    text_part,
    tool_definitions,
)

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
REALTIME_TEXT = frozenset(
    {
        "response.output_text.delta",
        "response.text.delta",  # the beta API's names
        "response.output_audio_transcript.delta",
        "response.audio_transcript.delta",
    }
)


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
            capture.set(INPUT, [chat_message(m) for m in messages])
        capture.set(TOOLS, tool_definitions(kwargs.get("tools")))
    elif kind.api_type == "responses":
        capture.set(INPUT, responses_input(kwargs.get("input")))
        instructions = kwargs.get("instructions")
        if isinstance(instructions, str):
            capture.set(SYSTEM, [text_part(instructions)])
        capture.set(TOOLS, tool_definitions(kwargs.get("tools")))
    elif kind.api_type == "completions":
        prompt = kwargs.get("prompt")
        prompts = [prompt] if isinstance(prompt, str) else prompt if isinstance(prompt, list) else []
        texts = [p for p in prompts if isinstance(p, str)]
        capture.set(INPUT, [{"role": "user", "parts": [text_part(p)]} for p in texts])
    else:
        return None
    return capture


class TextBudget:
    """Text kept up to a number of characters, over many pieces: one character more than the
    limit, so that a cut value is told apart from one that fit (:func:`.bounded_json.fit` marks it)."""

    __slots__ = ("left",)

    def __init__(self, limit: int) -> None:
        self.left = limit + 1

    def take(self, text: Any) -> str:
        """The part of ``text`` that still fits."""
        if not isinstance(text, str) or self.left <= 0:
            return ""
        piece = text[: self.left]
        self.left -= len(piece)
        return piece


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
        self._take = TextBudget(limit).take
        self._text: dict[int, list[str]] = {}
        self._reasoning: dict[int, list[str]] = {}
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
            "realtime": self._collect_realtime,
        }.get(stream_kind)
        if collect is None:
            return observe

        def observe_and_collect(st: StreamStats, item: Any) -> int:
            output = observe(st, item)
            try:
                collect(item)
            except Exception:
                report("content capture")
            return output

        return observe_and_collect

    def _add_text(self, index: int, text: Any, into: dict[int, list[str]] | None = None) -> None:
        piece = self._take(text)
        if piece:
            (self._text if into is None else into).setdefault(index, []).append(piece)

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
            reasoning = reasoning_text(delta)
            if reasoning:
                self._add_text(index, reasoning, self._reasoning)
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

    def _collect_realtime(self, event: Any) -> None:
        """A Realtime response's text: text deltas and the audio's transcript (never the audio)."""
        if getattr(event, "type", None) in REALTIME_TEXT:
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
                return [responses_output(final)]
        elif result is not None:
            return [choice_message(choice, api_type) for choice in getattr(result, "choices", None) or ()]
        return self._collected_messages()

    def _collected_messages(self) -> list[JSON]:
        indexes = sorted({*self._text, *self._reasoning, *self._finish, *(i for i, _ in self._calls)})
        messages = []
        for index in indexes:
            parts: list[JSON] = []
            reasoning = "".join(self._reasoning.get(index, ()))
            if reasoning:
                parts.append(reasoning_part(reasoning))
            text = "".join(self._text.get(index, ()))
            if text:
                parts.append(text_part(text))
            for (i, _), call in sorted(self._calls.items()):
                if i == index:
                    args = arguments("".join(call["args"]))
                    parts.append(
                        {"type": "tool_call", "id": call["id"], "name": call["name"], "arguments": args}
                    )
            messages.append(make_message("assistant", parts, self._finish.get(index)))
        return messages


def _event_attributes(summary: Attributes) -> Attributes:
    """The span's response-side semconv attributes (ids, models, usage, finish reasons, error.type)."""
    return {k: v for k, v in summary.items() if k.startswith("gen_ai.") or k == "error.type"}
