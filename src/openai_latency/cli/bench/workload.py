"""What each bench request sends: the prompt-cache policy, the conversation, the API's request.

**Cache-honest by default.** A server with a prefix cache (vLLM, SGLang, llama.cpp; OpenAI from
1,024 tokens; DeepSeek) answers a prompt it has seen before without its prefill, so a benchmark
that sends one prompt over and over measures cache hits that real traffic never gets. Every request
therefore starts with a header line of its own (``bench-<12 digits>``, :func:`header`) unless
``--prefix-cache`` asks otherwise:

- ``cold``: a new header per request (every request a miss);
- ``warm``: one header per prompt for the whole run; the first use of a prompt is a priming request
  (a warm-up: not in the results), then every request sends the same prompt (every request a hit);
- ``shared:N``: N requests in a row send the same prompt with the same header (1 miss, N-1 hits).

A conversation (``--turns K``) grows by the previous answer and the next user message each turn, so
turn k's prompt starts with turn k-1's: later turns are hits whatever the policy.
"""

from __future__ import annotations

import argparse
import copy
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

Api = Literal["chat", "responses", "completions", "responses-ws"]
APIS: tuple[Api, ...] = ("chat", "responses", "completions", "responses-ws")
Message = dict[str, Any]
#: The next user message of a conversation whose data has none of its own (``--turns`` on prompts).
FOLLOW_UP = "Go on: add one more point to your answer."


@dataclass(frozen=True)
class PrefixPolicy:
    mode: Literal["cold", "warm", "shared"] = "cold"
    #: ``shared:N``: requests per prefix.
    share: int = 1

    @property
    def label(self) -> str:
        return f"shared:{self.share}" if self.mode == "shared" else self.mode

    def expected_hit(self, number: int) -> bool:
        """Whether request ``number`` (0-based, of one target) of a first turn should hit the cache."""
        if self.mode == "warm":
            return True
        return self.mode == "shared" and number % self.share != 0


def parse_prefix_cache(text: str) -> PrefixPolicy:
    """``cold``, ``warm`` or ``shared:N`` (N >= 2) -> :class:`PrefixPolicy` (an argparse type)."""
    value = text.strip().lower()
    if value in ("cold", "warm"):
        return PrefixPolicy(value)  # type: ignore[arg-type]
    name, colon, number = value.partition(":")
    if name == "shared" and colon and number.isdigit() and int(number) >= 2:
        return PrefixPolicy("shared", int(number))
    raise argparse.ArgumentTypeError(f"expected cold, warm or shared:N with N >= 2, got {text!r}")


@dataclass(frozen=True)
class Conversation:
    """One item of the workload: the first turn's messages and the next user messages, if any."""

    messages: tuple[Message, ...]
    follow_ups: tuple[str, ...] = ()
    #: A replayed call's output tokens and stream flag (None: the workload's).
    max_tokens: int | None = None
    stream: bool | None = None
    #: A replayed call's recorded input tokens (None: not a replayed call, or not recorded).
    input_tokens: int | None = None


def header(rng: random.Random) -> str:
    """A short random first line: no two prompts that carry different ones share a prefix. Decimal
    digits, always 12: the line is the same number of tokens whatever its value in the usual
    tokenizers (they cut digits one by one or three by three, where hex letters and digits merge
    differently from one value to the next), which ``--replay``'s exact input lengths rely on."""
    return f"bench-{rng.randrange(10**12):012d}"


def with_header(messages: Sequence[Message], line: str) -> list[Message]:
    """The messages with ``line`` as the first line of the first one's text."""
    result = [dict(m) for m in messages]
    first = result[0]
    content = first.get("content")
    if isinstance(content, list):  # content parts: a text part first
        first["content"] = [{"type": "text", "text": line}, *copy.deepcopy(content)]
    else:
        first["content"] = f"{line}\n{content or ''}"
    return result


@dataclass
class Turn:
    """One request of a conversation: what to send, and whether the cache should hit."""

    messages: list[Message]
    expected_hit: bool
    priming: bool = False


class RequestSource:
    """The requests of one target, in order: the workload's conversations, cycled, with the prefix
    policy's header. Not shared between targets: each server has a cache of its own."""

    def __init__(self, conversations: Sequence[Conversation], policy: PrefixPolicy, seed: int | None) -> None:
        self._conversations = conversations
        self._policy = policy
        self._rng = random.Random(seed)
        self._warm: dict[int, str] = {}  # warm: item -> its header
        self._number = 0
        self._shared: tuple[int, str] | None = None  # shared: (item, header) of the current group

    def next(self, item: int | None = None) -> tuple[Conversation, list[Turn]]:
        """The next conversation (or conversation ``item``: a replayed call) and its first turn (a
        priming turn before it in warm mode)."""
        number, policy = self._number, self._policy
        self._number += 1
        expected = policy.expected_hit(number)
        turns: list[Turn] = []
        if policy.mode == "shared":
            if number % policy.share == 0 or self._shared is None:
                self._shared = (number // policy.share % len(self._conversations), header(self._rng))
            chosen, line = self._shared
            item = chosen if item is None else item
        else:
            item = number % len(self._conversations) if item is None else item
            if policy.mode == "warm":
                line = self._warm.get(item) or ""
                if not line:
                    line = self._warm[item] = header(self._rng)
                    primed = with_header(self._conversations[item].messages, line)
                    turns.append(Turn(primed, False, priming=True))
            else:
                line = header(self._rng)
        conversation = self._conversations[item]
        turns.append(Turn(with_header(conversation.messages, line), expected))
        return conversation, turns


def next_turn(conversation: Conversation, messages: list[Message], answer: str, turn: int) -> list[Message]:
    """Turn ``turn`` (1-based, >= 2): the previous messages, the answer, the next user message."""
    follow_ups = conversation.follow_ups
    text = follow_ups[turn - 2] if turn - 2 < len(follow_ups) else FOLLOW_UP
    return [*messages, {"role": "assistant", "content": answer}, {"role": "user", "content": text}]


def text_of(messages: Sequence[Message]) -> str:
    """The messages as one completions prompt: their texts, one paragraph each."""
    parts = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        parts.append(str(content or ""))
    return "\n\n".join(parts)


def responses_tools(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat tool definitions (``{"type": "function", "function": {...}}``) in the Responses API's
    flat shape (``{"type": "function", "name": ..., "parameters": ...}``); others as given."""
    result = []
    for tool in tools:
        function = tool.get("function")
        if tool.get("type") == "function" and isinstance(function, dict):
            result.append({"type": "function", **function})
        else:
            result.append(dict(tool))
    return result
