"""``--dataset FILE``: the conversations a bench run sends, read from the user's data.

Formats (told apart by the file's first character, then by each item's keys):

- JSONL, one item a line: a JSON string (the prompt), ``{"prompt": ...}`` or ``{"text": ...}``,
  ``{"messages": [...]}`` (OpenAI chat messages, sent as they are), or a ShareGPT item;
- a JSON array of such items: ShareGPT's format is a list of
  ``{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", "value": ...}, ...]}``:
  the system turn and the first human turn are the first request, the later human turns the next
  user messages of a ``--turns`` conversation (the answers are the server's own).

``--dataset-sample N --seed S`` keeps N items chosen at random (reservoir sampling: the file is read
once, whatever its size, holding N items). A file over :data:`STREAM_BYTES` is never loaded whole:
its items are read one at a time, and without a sample only the first ``limit`` (the requests the run
sends per target) are kept.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from typing import IO, Any

from ...args import UsageError
from ..workload import Conversation

#: Above this size a dataset is read item by item, never whole.
STREAM_BYTES = 100 * 1024 * 1024
_READ = 1 << 16
_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}


def load(path: str, sample: int | None, seed: int, limit: int | None) -> tuple[Conversation, ...]:
    """The conversations of ``path``: a sample of ``sample`` items, else all of them (a file over
    :data:`STREAM_BYTES`: the first ``limit``; without a limit such a file needs a sample)."""
    try:
        size = os.path.getsize(path)
        handle = open(path, encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise UsageError(f"--dataset: cannot read {path}: {exc.strerror or exc}") from None
    if size > STREAM_BYTES and sample is None and limit is None:
        handle.close()
        raise UsageError(f"--dataset: {path} is over 100 MB: give --dataset-sample N (or -n)")
    rng = random.Random(seed)
    kept: list[tuple[int, Conversation]] = []
    number = -1
    try:
        with handle:
            for number, item in enumerate(_items(handle, path)):
                conversation = conversation_of(item, path, number)
                if sample is not None:
                    if len(kept) < sample:
                        kept.append((number, conversation))
                    else:
                        slot = rng.randrange(number + 1)
                        if slot < sample:
                            kept[slot] = (number, conversation)
                elif limit is None or size <= STREAM_BYTES or len(kept) < limit:
                    kept.append((number, conversation))
                else:
                    break
    except UnicodeDecodeError:
        raise UsageError(f"--dataset: {path} is not UTF-8 text") from None
    if not kept:
        raise UsageError(f"--dataset: {path} has no items")
    kept.sort(key=lambda pair: pair[0])  # the file's order
    return tuple(conversation for _, conversation in kept)


def _items(handle: IO[str], path: str) -> Iterator[Any]:
    first = handle.read(1)
    while first and first.isspace():
        first = handle.read(1)
    if first == "[":
        yield from _array_items(handle, path)
        return
    line_number = 1
    pending = first
    for line_number, line in enumerate(handle, start=1):
        text = (pending + line).strip()
        pending = ""
        if text:
            yield _decode(text, path, line_number)
    if pending.strip():
        yield _decode(pending, path, line_number)


def _decode(text: str, path: str, line: int) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--dataset: {path} line {line}: not JSON ({exc.msg})") from None


def _array_items(handle: IO[str], path: str) -> Iterator[Any]:
    """The items of a JSON array whose ``[`` was read, one at a time (bounded memory)."""
    decoder = json.JSONDecoder()
    buffer = ""
    position = 0
    while True:
        while True:  # skip separators
            while position < len(buffer) and buffer[position] in " \t\r\n,":
                position += 1
            if position < len(buffer):
                break
            more = handle.read(_READ)
            if not more:
                raise UsageError(f"--dataset: {path}: the JSON array is not closed")
            buffer, position = buffer[position:] + more, 0
        if buffer[position] == "]":
            return
        while True:
            try:
                item, end = decoder.raw_decode(buffer, position)
                break
            except json.JSONDecodeError as exc:
                more = handle.read(_READ)
                if not more:
                    raise UsageError(f"--dataset: {path}: not a JSON array of items ({exc.msg})") from None
                buffer, position = buffer[position:] + more, 0
        yield item
        buffer, position = buffer[end:], 0


def conversation_of(item: Any, path: str, number: int) -> Conversation:
    """One item of any supported format -> a :class:`Conversation`."""
    where = f"--dataset: {path} item {number + 1}"
    if isinstance(item, str) and item.strip():
        return Conversation(({"role": "user", "content": item},))
    if isinstance(item, dict):
        messages = item.get("messages")
        if isinstance(messages, list) and messages and all(_is_message(m) for m in messages):
            return Conversation(tuple(messages))
        turns = item.get("conversations") or item.get("conversation")
        if isinstance(turns, list):
            return _sharegpt(turns, where)
        for key in ("prompt", "text", "question", "input"):
            if isinstance(item.get(key), str) and item[key].strip():
                return Conversation(({"role": "user", "content": item[key]},))
    raise UsageError(
        f"{where}: expected a prompt string, {{'prompt': ...}}, {{'messages': [...]}} or a ShareGPT"
        " item ({'conversations': [{'from': 'human', 'value': ...}, ...]})"
    )


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("role"), str)


def _sharegpt(turns: list[Any], where: str) -> Conversation:
    """System turns before the first human turn and that turn: the first request; the later human
    turns: the next user messages. The recorded answers are not sent: the server's own are."""
    messages: list[dict[str, Any]] = []
    follow_ups: list[str] = []
    asked = False
    for turn in turns:
        if not isinstance(turn, dict):
            continue
        role = _ROLES.get(str(turn.get("from") or turn.get("role") or "").lower())
        value = turn.get("value", turn.get("content"))
        if not isinstance(value, str):
            continue
        if role == "system" and not asked:
            messages.append({"role": "system", "content": value})
        elif role == "user" and not asked:
            messages.append({"role": "user", "content": value})
            asked = True
        elif role == "user":
            follow_ups.append(value)
    if not asked:
        raise UsageError(f"{where}: a ShareGPT conversation without a human turn")
    return Conversation(tuple(messages), tuple(follow_ups))
