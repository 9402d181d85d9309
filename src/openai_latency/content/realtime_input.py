"""A Realtime session's input content, for content capture (off by default: none of this exists then).

An HTTP call's input is its request. A Realtime response's input is what the client added to the
conversation since the previous response began, which the server keeps; so the session collects it
as it goes, and each turn takes what was collected when it opens (:meth:`RealtimeInput.take`):

- ``conversation.item.create`` (sent): the item as a message (:func:`.messages.realtime_item`: text
  parts, tool calls and outputs; an audio part is its ``transcript`` when the item has one, else a part
  that names its type; audio bytes are never copied);
- the user's audio, once the server names its item (``input_audio_buffer.speech_stopped`` with server
  VAD, ``input_audio_buffer.committed``): a user message ``{"type": "input_audio"}``, which becomes the
  audio's transcript when ``conversation.item.input_audio_transcription.completed`` arrives for that
  item while its turn is still open (a transcript that comes after its turn ended is not recorded: the
  span is gone);
- ``session.update``'s ``instructions`` and ``tools``, and a ``response.create``'s own ``instructions``,
  ``tools`` and ``input`` (an out-of-band response): ``gen_ai.system_instructions``,
  ``gen_ai.tool.definitions`` and more input messages.

Values go out as on the HTTP path (:meth:`.capture.ContentCapture.set`: JSON of at most
``content_max_length`` characters, valid JSON, cut strings marked), set when the turn ends. Held text
is bounded as for stream output: at most ``content_max_length`` + 1 characters per turn's input.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

from .capture import INPUT, SYSTEM, TOOLS, ContentCapture, TextBudget
from .messages import JSON, make_message, realtime_item, text_part, tool_definitions

AUDIO_ITEMS_KEPT: Final = 64
"""Audio items whose transcript may still come, at most (the oldest are forgotten first)."""
TRANSCRIPT: Final = "conversation.item.input_audio_transcription.completed"
SERVER_EVENTS: Final = frozenset(
    {"input_audio_buffer.speech_stopped", "input_audio_buffer.committed", TRANSCRIPT}
)
CLIENT_EVENTS: Final = frozenset({"conversation.item.create", "session.update"})


class TurnInput:
    """One turn's input messages, instructions and tools, within a character budget."""

    __slots__ = ("budget", "instructions", "messages", "tools")

    def __init__(self, limit: int) -> None:
        self.budget = TextBudget(limit)
        self.messages: list[JSON] = []
        self.instructions: str | None = None
        self.tools: Any = None

    def take(self, text: Any) -> str:
        """The part of ``text`` that still fits the budget."""
        return self.budget.take(text)

    def add_items(self, items: Any) -> None:
        for item in items if isinstance(items, (list, tuple)) else ():
            message = realtime_item(item, self.take)
            if message is not None:
                self.messages.append(message)

    def response(self, fields: Mapping[str, Any]) -> None:
        """A ``response.create``'s ``response``: its own instructions, tools and input items."""
        instructions = fields.get("instructions")
        if isinstance(instructions, str):
            self.instructions = self.take(instructions)
        if fields.get("tools") is not None:
            self.tools = fields.get("tools")
        self.add_items(fields.get("input"))

    def apply(self, content: ContentCapture) -> None:
        """The values, on the turn's capture (at its end)."""
        content.set(INPUT, self.messages)
        if self.instructions:
            content.set(SYSTEM, [text_part(self.instructions)])
        content.set(TOOLS, tool_definitions(self.tools))


class RealtimeInput:
    """A session's input since its last turn began, and the audio items whose transcript may come."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.pending = TurnInput(limit)
        self.audio: OrderedDict[str, tuple[JSON, TurnInput]] = OrderedDict()
        self.instructions: str | None = None
        self.tools: Any = None
        self.committing: TurnInput | None = None
        """The input of a turn opened by a ``commit``: the next audio item the server names is its."""

    def take(self, trigger: str | None) -> TurnInput:
        """What a turn opening now gets: the input collected so far (the session's instructions and
        tools as defaults); collection starts over."""
        turn, self.pending = self.pending, TurnInput(self.limit)
        if turn.instructions is None and self.instructions is not None:
            turn.instructions = turn.take(self.instructions)
        if turn.tools is None:
            turn.tools = self.tools
        self.committing = turn if trigger == "commit" else None
        return turn

    def client_event(self, kind: str, fields: Mapping[str, Any]) -> None:
        if kind == "conversation.item.create":
            self.pending.add_items([fields.get("item")])
        elif kind == "session.update":
            session = fields.get("session")
            if isinstance(session, Mapping):
                instructions = session.get("instructions")
                if isinstance(instructions, str):
                    self.instructions = instructions[: self.limit + 1]
                if session.get("tools") is not None:
                    self.tools = session.get("tools")

    def server_event(self, kind: str, fields: Mapping[str, Any]) -> None:
        item_id = fields.get("item_id")
        if not isinstance(item_id, str):
            return
        if kind == TRANSCRIPT:
            known = self.audio.pop(item_id, None)
            if known is not None:
                message, owner = known
                message["parts"] = [text_part(owner.take(fields.get("transcript")))]
            return
        if item_id in self.audio:
            return  # speech_stopped, then committed: one item
        owner = self.committing if self.committing is not None else self.pending
        self.committing = None
        message = make_message("user", [{"type": "input_audio"}])
        owner.messages.append(message)
        self.audio[item_id] = (message, owner)
        if len(self.audio) > AUDIO_ITEMS_KEPT:
            self.audio.popitem(last=False)
