"""OpenAI wire-format bodies and SSE events, with deterministic text: ``"tok0 tok1 ..."``.

One word per content chunk (and per reasoning token: ``"think0 think1 ..."``); usage counts those
words as completion tokens (reasoning included) and the words of the input as prompt tokens (or, with
``tokenizer: pieces``, the input's tokens as :mod:`.tokens` counts them). Stream
events are built as ready-to-send ``bytes`` (SSE text, not yet framed as HTTP chunks) from string
templates, so a chunk costs a string join, not a ``json.dumps``.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final

from .script import Script
from .tokens import pieces_tokens

JSON = dict[str, Any]
Event = tuple[str, bytes]  # (record kind, SSE text)

DEFAULT_MODEL: Final = "gpt-4o-mini"
DONE: Final[Event] = ("done", b"data: [DONE]\n\n")
MALFORMED: Final = b"data: {not json\n\n"
#: Valid JSON where a response or chunk should be, with fields of the wrong types (``corrupt``).
WRONG_SHAPE: Final = {"id": 7, "object": ["x"], "model": None, "choices": "none", "usage": "lots"}
STREAM_ERROR_MESSAGE: Final = "The server had an error while processing your request. Sorry about that!"
MODELS: Final = ("gpt-4o-mini", "gpt-4o", "gpt-4.1-mini", "o4-mini", "text-embedding-3-small")
CREATED: Final = 1_700_000_000


@dataclass(frozen=True, slots=True)
class Canned:
    """A response written exactly as given to the next request, whatever it asks (fuzzing: shapes no
    script produces). ``pieces`` are sent one write each: as a chunked body when ``stream``, else
    joined under one Content-Length."""

    pieces: Sequence[bytes]
    status: int = 200
    content_type: str = "application/json"
    stream: bool = False


def dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def sse(data: str) -> bytes:
    return f"data: {data}\n\n".encode()


def count_words(value: object) -> int:
    """Rough prompt tokens: words of the strings under ``content``/``text``/``input`` (token ids count 1)."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):
        return sum(1 if isinstance(v, int) else count_words(v) for v in value)
    if isinstance(value, dict):
        return sum(count_words(v) for k, v in value.items() if k in ("content", "text", "input"))
    return 0


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """A stream as data, in the order it is sent: ``preamble`` at once; ``hidden_reasoning`` tokens of
    silence; ``reasoning_open`` with the first of the paced ``reasoning`` tokens; ``reasoning_close``
    with the first ``content`` chunk (or before the ``epilogue`` when there is none); ``content``
    paced, with the scripted faults between its chunks; ``epilogue`` at once
    (:mod:`.stream_engine`)."""

    preamble: list[Event]
    content: list[Event]
    epilogue: list[Event]
    error_event: Callable[[int], bytes]  # events sent so far -> the SSE text of an in-stream error
    reasoning: list[Event] = field(default_factory=list)
    hidden_reasoning: int = 0
    reasoning_open: list[Event] = field(default_factory=list)
    reasoning_close: list[Event] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Output:
    """What the fake "model" says for one request."""

    id: str
    model: str
    words: list[str]  # chunk texts; "".join(words) is the whole text
    prompt_tokens: int
    script: Script
    cached_tokens: int = 0
    reasoning: list[str] = field(default_factory=list)  # reasoning token texts, before the answer
    account: JSON = field(default_factory=dict)
    """The server's own account (``timings``, ``metrics``: :mod:`.server_account`), top-level fields
    of a chat or completions body and of a stream's last chunk."""

    @property
    def text(self) -> str:
        return "".join(self.words)

    @property
    def reasoning_text(self) -> str:
        return "".join(self.reasoning)

    @property
    def reasoning_tokens(self) -> int:
        return len(self.reasoning)

    @property
    def completion_tokens(self) -> int:
        """Output tokens: the reasoning and the answer."""
        return len(self.words) + len(self.reasoning)

    @property
    def chat_reasoning_field(self) -> str | None:
        """The chat delta/message field that carries the reasoning (``None``: hidden)."""
        mode = self.script.reasoning_mode
        return mode if mode in ("reasoning_content", "reasoning") and self.reasoning else None


def make_output(
    request_hex: str, model: str, prompt: object, script: Script, cached_words: int = 0
) -> Output:
    words = [f"tok{i}" if i == 0 else f" tok{i}" for i in range(script.chunks)]
    reasoning = [f"think{i}" if i == 0 else f" think{i}" for i in range(script.reasoning_tokens)]
    prompt_tokens = pieces_tokens(prompt) if script.tokenizer == "pieces" else max(1, count_words(prompt))
    cached = min(cached_words, prompt_tokens)
    return Output(request_hex[:24], model, words, prompt_tokens, script, cached, reasoning)


def _chat_error_event(_sent: int) -> bytes:
    body = {"message": STREAM_ERROR_MESSAGE, "type": "server_error", "param": None, "code": "server_error"}
    return sse(dumps({"error": body}))


def _usage_chat(out: Output, n: int = 1) -> JSON:
    completion = out.completion_tokens * n
    return {
        "prompt_tokens": out.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": out.prompt_tokens + completion,
        **cache_usage(out, "prompt_tokens_details", {"audio_tokens": 0}),
        "completion_tokens_details": {
            "reasoning_tokens": out.reasoning_tokens * n,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def cache_usage(out: Output, details: str, other: JSON) -> JSON:
    """The usage fields that report cached input tokens, in the script's ``cache-fields`` names."""
    fields = out.script.cache_fields
    if fields == "deepseek":
        miss = out.prompt_tokens - out.cached_tokens
        return {"prompt_cache_hit_tokens": out.cached_tokens, "prompt_cache_miss_tokens": miss}
    if fields == "none":
        return {details: other} if other else {}
    return {details: {"cached_tokens": out.cached_tokens, **other}}


def _with_usage(body: JSON, out: Output, n: int) -> JSON:
    """A chat or completions body with its ``usage`` (unless the script says ``never``)."""
    if out.script.usage != "never":
        body["usage"] = _usage_chat(out, n)
    body.update(out.account)
    return body


def _chunk_epilogue(out: Output, head: str, finish: str, include_usage: bool) -> list[Event]:
    """What ends a chat or completions stream: the finish chunk (``finish``: its choice object), the
    usage chunk when asked (``head`` opens a chunk up to its ``choices`` list), ``[DONE]``. The
    last of the two carries the server's account, if any."""
    account = "".join(f",{dumps(key)}:{dumps(value)}" for key, value in out.account.items())
    usage = out.script.usage == "always" or (out.script.usage == "auto" and include_usage)
    epilogue: list[Event] = [("finish", sse(f"{head}{finish}]{'' if usage else account}}}"))]
    if usage:
        epilogue.append(("usage", sse(f'{head}],"usage":{dumps(_usage_chat(out))}{account}}}')))
    epilogue.append(DONE)
    return epilogue


# -- chat completions ------------------------------------------------------------------------------


def _tool_arguments(words: list[str]) -> list[str]:
    """Argument pieces whose concatenation is the JSON ``{"text": "tok0 tok1 ..."}``."""
    if not words:
        return ['{"text": ""}']
    pieces = list(words)
    pieces[0] = '{"text": "' + pieces[0]
    pieces[-1] += '"}'
    return pieces


def _finish_reason(out: Output) -> str:
    return out.script.finish_reason or ("tool_calls" if out.script.tool_call else "stop")


def chat_json(out: Output, n: int) -> JSON:
    message: JSON = {"role": "assistant", "content": out.text, "refusal": None, "annotations": []}
    if out.script.tool_call:
        message["content"] = None
        call = {"name": out.script.tool_name, "arguments": "".join(_tool_arguments(out.words))}
        message["tool_calls"] = [{"id": f"call_{out.id}", "type": "function", "function": call}]
    if (reasoning_field := out.chat_reasoning_field) is not None:
        message[reasoning_field] = out.reasoning_text
    choices = [
        {"index": i, "message": message, "logprobs": None, "finish_reason": _finish_reason(out)}
        for i in range(n)
    ]
    body: JSON = {
        "id": f"chatcmpl-{out.id}",
        "object": "chat.completion",
        "created": CREATED,
        "model": out.model,
        "choices": choices,
        "service_tier": "default",
        "system_fingerprint": "fp_fake",
    }
    return _with_usage(body, out, n)


def chat_stream(out: Output, include_usage: bool) -> StreamPlan:
    head = (
        f'{{"id":"chatcmpl-{out.id}","object":"chat.completion.chunk","created":{CREATED},'
        f'"model":{dumps(out.model)},"service_tier":"default","system_fingerprint":"fp_fake","choices":['
    )

    def choice_object(delta: str, finish: str = "null") -> str:
        return f'{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{finish}}}'

    def choice(delta: str, finish: str = "null") -> bytes:
        return sse(f"{head}{choice_object(delta, finish)}]}}")

    if out.script.tool_call:
        role = choice('{"role":"assistant","content":null,"refusal":null}')
        pieces = _tool_arguments(out.words)
        content = [
            choice(
                f'{{"tool_calls":[{{"index":0,"id":"call_{out.id}","type":"function",'
                f'"function":{{"name":{dumps(out.script.tool_name)},"arguments":{dumps(pieces[0])}}}}}]}}'
            )
        ]
        content += [
            choice(f'{{"tool_calls":[{{"index":0,"function":{{"arguments":{dumps(p)}}}}}]}}')
            for p in pieces[1:]
        ]
        content = content[: len(out.words)]
    else:
        role = choice('{"role":"assistant","content":"","refusal":null}')
        content = [choice(f'{{"content":{dumps(word)}}}') for word in out.words]
    epilogue = _chunk_epilogue(out, head, choice_object("{}", dumps(_finish_reason(out))), include_usage)
    reasoning_field = out.chat_reasoning_field
    if reasoning_field is None:  # hidden (also ``summary``: chat has no summaries)
        reasoning: list[Event] = []
        hidden = out.reasoning_tokens
    else:
        reasoning = [("reasoning", choice(f'{{"{reasoning_field}":{dumps(w)}}}')) for w in out.reasoning]
        hidden = 0
    content_events = [("content", c) for c in content]
    return StreamPlan([("role", role)], content_events, epilogue, _chat_error_event, reasoning, hidden)


# -- legacy completions ----------------------------------------------------------------------------


def completion_json(out: Output, n: int) -> JSON:
    choices = [
        {"text": out.text, "index": i, "logprobs": None, "finish_reason": _finish_reason(out)}
        for i in range(n)
    ]
    body: JSON = {
        "id": f"cmpl-{out.id}",
        "object": "text_completion",
        "created": CREATED,
        "model": out.model,
        "choices": choices,
        "system_fingerprint": "fp_fake",
    }
    return _with_usage(body, out, n)


def completion_stream(out: Output, include_usage: bool) -> StreamPlan:
    head = (
        f'{{"id":"cmpl-{out.id}","object":"text_completion","created":{CREATED},'
        f'"model":{dumps(out.model)},"system_fingerprint":"fp_fake","choices":['
    )

    def choice_object(text: str, finish: str = "null") -> str:
        return f'{{"text":{dumps(text)},"index":0,"logprobs":null,"finish_reason":{finish}}}'

    def choice(text: str, finish: str = "null") -> bytes:
        return sse(f"{head}{choice_object(text, finish)}]}}")

    epilogue = _chunk_epilogue(out, head, choice_object("", dumps(_finish_reason(out))), include_usage)
    content = [("text", choice(word)) for word in out.words]
    # completions have no reasoning field: the reasoning is always hidden (silence, and usage)
    return StreamPlan([], content, epilogue, _chat_error_event, hidden_reasoning=out.reasoning_tokens)


# -- other endpoints -------------------------------------------------------------------------------


def embeddings_json(body: JSON, model: str) -> JSON:
    inputs = body.get("input", "")
    if isinstance(inputs, str) or (isinstance(inputs, list) and inputs and isinstance(inputs[0], int)):
        inputs = [inputs]
    dims = body.get("dimensions") or 8
    dims = dims if isinstance(dims, int) and 0 < dims <= 65536 else 8
    as_base64 = body.get("encoding_format") == "base64"
    data = []
    for index in range(len(inputs) if isinstance(inputs, list) else 1):
        vector = [round(((index * 31 + j * 7) % 100) / 100 - 0.5, 4) for j in range(dims)]
        embedding: object = vector
        if as_base64:
            embedding = base64.b64encode(struct.pack(f"<{dims}f", *vector)).decode("ascii")
        data.append({"object": "embedding", "index": index, "embedding": embedding})
    tokens = max(1, count_words({"input": inputs}))
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def model_json(model_id: str) -> JSON:
    return {"id": model_id, "object": "model", "created": CREATED, "owned_by": "openai"}


def models_json() -> JSON:
    return {"object": "list", "data": [model_json(m) for m in MODELS]}


@cache
def tiny_png_base64() -> str:
    """A valid 1x1 grey PNG, built once."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)  # 1x1, 8-bit greyscale
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\x80"))
    return base64.b64encode(png + chunk(b"IEND", b"")).decode("ascii")


def images_json(body: JSON) -> JSON:
    n = body.get("n") if isinstance(body.get("n"), int) else 1
    prompt = body.get("prompt") if isinstance(body.get("prompt"), str) else ""
    return {
        "created": CREATED,
        "data": [{"b64_json": tiny_png_base64(), "revised_prompt": prompt} for _ in range(max(1, n or 1))],
    }


def files_json() -> JSON:
    files = [
        {
            "id": f"file-fake{i}",
            "object": "file",
            "bytes": 1024 * (i + 1),
            "created_at": CREATED,
            "filename": f"data{i}.jsonl",
            "purpose": "fine-tune",
            "status": "processed",
        }
        for i in range(2)
    ]
    return {
        "object": "list",
        "data": files,
        "has_more": False,
        "first_id": "file-fake0",
        "last_id": "file-fake1",
    }


def not_found_json(method: str, path: str) -> JSON:
    message = f"Invalid URL ({method} {path})"
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
