"""Script keys: what a request (``x-fake-<key>`` headers) or the server (``defaults``) asks the fake to do.

A request header wins over the server default. Times are milliseconds (floats allowed); "after N" counts
content chunks already sent (0 = before the first one). An unknown key or bad value gets a 400.

==========================  =====================================================================
``delay-ms``                wait before the response headers (every request, failures included)
``ttft-ms``                 stream: after the role-only first chunk, before the first content chunk
                            (with reasoning: before the first reasoning token)
``chunks``                  content chunks, one word each: ``"tok0"``, ``" tok1"``, ... (default 5)
``chunk-delay-ms``          stream: between content chunks
``jitter-ms``, ``seed``     each chunk delay += uniform(-jitter, +jitter), floored at 0; ``seed``
                            makes the sequence reproducible
``stall-after``, ``stall-ms``  one extra pause after content chunk N
``body-delay-ms``           non-stream: headers first, the body this much later
``fail-attempts``           attempts whose ``x-stainless-retry-count`` < N fail with ``fail-status``
``fail-status``             status of those failures (default 429; body shaped for the status)
``fail-error``              those failures send this named error instead (see ``error``)
``retry-after-ms``,         header values sent on failures (verbatim)
``retry-after``,
``should-retry``            (``x-should-retry``)
``error``                   always fail with an OpenAI error body: ``invalid_api_key`` 401,
                            ``model_not_found`` 404, ``context_length_exceeded`` 400,
                            ``rate_limit_exceeded`` 429, ``insufficient_quota`` 429,
                            ``server_error`` 500, ``overloaded`` 503 (``code`` = the key)
``status``                  force a status: >= 400 with a generic error body, else the normal body
``disconnect-after``        stream: abort the socket after N content chunks (no ``[DONE]``);
                            non-stream: abort right after the headers
``malformed-after``         stream: then ``data: {not json`` and the end of the body
``corrupt``                 ``invalid-json`` (non-stream: a 200 whose JSON body is cut in half),
                            ``truncated`` (non-stream: Content-Length of the whole body, half of it
                            sent, then the connection dropped), ``wrong-shape`` (valid JSON of the
                            wrong shape: the non-stream body, or a stream's first content chunk)
``stream-error-after``      stream: then an in-stream error (chat/completions ``{"error": ...}``,
                            Responses an ``error`` event) and the end of the body
``processing-ms``           ``openai-processing-ms`` value (default: ms spent before the headers)
``usage``                   ``auto`` (streams only with ``stream_options.include_usage``), ``always``,
                            ``never``
``finish-reason``           default ``stop`` (``tool_calls`` with ``tool-call``)
``tool-call``               ``1``: chat output is a ``fake_tool`` call with streamed arguments
                            (``{"text": "tok0 tok1 ..."}``)
``tool-name``               the called tool's name (default ``fake_tool``)
``tool-plan``               ``a,b,...``: an agent's loop: chat calls tool a while the conversation
                            holds no ``tool`` message, b while it holds one, ...; then answers
``response-status``         Responses: ``completed``, ``failed`` (``response.failed``),
                            ``incomplete`` (``response.incomplete``)
``every``                   ``N:key=value,...``: every Nth request (counted on first attempts)
                            also gets ``key=value``, e.g. ``7:fail-attempts=1`` (an occasional 429,
                            then a successful retry), ``10:error=invalid_api_key``, ``13:delay-ms=3000``.
                            A retry is matched to its request by the trace id of its ``traceparent``
                            (without one, retries get no override)
``prompt-cache``            ``1``: a prefix cache (:mod:`.prefix_cache`): the longest prefix of the
                            prompt's words (model + messages/input) seen in an earlier prompt is
                            cached; usage reports it as cached tokens (see ``cache-fields``)
``cached-ttft-ms``          ``ttft-ms`` of a cache hit (any cached token; default: ``ttft-ms``)
``cache-fields``            how usage reports cached input tokens: ``openai`` (default;
                            ``prompt_tokens_details.cached_tokens``, Responses
                            ``input_tokens_details.cached_tokens``), ``deepseek``
                            (``prompt_cache_hit_tokens`` and ``prompt_cache_miss_tokens``), ``none``
                            (no cache field: vLLM without ``--enable-prompt-tokens-details``)
``reasoning-tokens``        N tokens the model "thinks" before the answer (default 0), words
                            ``"think0"``, ``" think1"``, ...; usage counts them (completion/output
                            tokens = N + ``chunks``; ``reasoning_tokens`` = N) in every mode
``reasoning-delay-ms``      stream: the pace D of reasoning tokens: the first is due ``ttft-ms``
                            after the role chunk (Responses: the opening events), each next one D
                            later, and the first answer chunk D after the last (no jitter)
``reasoning-mode``          how the reasoning reaches the client: ``reasoning_content`` (default;
                            chat ``delta.reasoning_content``), ``reasoning`` (chat
                            ``delta.reasoning``), ``hidden`` (nothing: silence for ``ttft-ms`` +
                            N x D), ``summary`` (Responses: hidden, then N
                            ``reasoning_summary_text.delta`` events at pace D; chat: as ``hidden``).
                            Responses stream the first two as ``response.reasoning_text.delta`` in
                            a ``reasoning`` output item; completions always hide the reasoning
``capacity``                K: at most K requests answered at once, the others queued in arrival
                            order before their ``delay-ms`` (a full batch; 0 = no limit, default)
``server-timings``          ``llama``: llama.cpp's ``timings`` in chat/completions bodies and a
                            stream's last chunk, from the script; or a JSON value sent verbatim
``server-metrics``          ``vllm``: vLLM's ``metrics``, when the request has ``include_metrics``;
                            or a JSON value sent verbatim (both: :mod:`.server_account`)
``server-queue-ms``         the ``queue_time_ms`` of vLLM's ``metrics`` (default 0)
``server-span-parent``      with ``--export-spans``: the parent of the server's ``llm_request`` span:
                            ``traceparent`` (default: the request's), ``lost`` (a trace of its own),
                            ``stale`` (the right trace, a span that is not the call's)
``write-batch``             stream: write paced tokens (reasoning and answer) K at a time (default
                            1): each batch goes out in one write when its last token is due
``vad``                     Realtime: server VAD on (also by a ``session.update`` with ``server_vad``): a
                            user turn's first audio append gets ``speech_started``; ``vad-speech-ms``
``vad-speech-ms``           (default 300) later ``speech_stopped``, ``committed``, an automatic response
``transcribe-ms``           Realtime: ``conversation.item.input_audio_transcription.completed`` N ms
                            after each commit (0 also when a ``session.update`` configures transcription)
``barge-in-after``          Realtime: after N audio deltas of a response the user "speaks":
                            ``speech_started``, and the response ends cancelled (``response.done``)
``tokenizer``               how usage counts the prompt's tokens: ``words`` (default: its words),
                            ``pieces`` (a BPE-shaped count with a chat template's overhead:
                            :mod:`.tokens`)
==========================  =====================================================================

A request body with ``ignore_eos: true`` and ``max_tokens`` (``max_completion_tokens``, ``max_output_tokens``)
gets exactly that many output tokens (reasoning included), whatever ``chunks`` says: vLLM's and llama.cpp's
behaviour, which ``bench --output-tokens`` and ``--replay`` rely on.

Reasoning, in detail. A stream with N reasoning tokens at pace D goes: headers (after ``delay-ms``), the role
chunk, ``ttft-ms``, reasoning token 0, D, token 1, ... token N-1, D, answer chunk 0, then the answer as
without reasoning (``chunk-delay-ms``, ``jitter-ms``, stalls). Hidden reasoning keeps the same timeline
without sending the reasoning tokens; ``summary`` adds, after that silence, N summary deltas at pace D (each
followed by D, like streamed reasoning: they are not counted as extra tokens). With no answer chunks
(``chunks`` 0) the finish follows the last reasoning token at once, like a stream capped while reasoning.
"after N" keys (stalls, faults) count answer chunks only. Non-stream responses keep their own timing
(``delay-ms``, ``body-delay-ms``: script the thinking time there) and carry the reasoning words in chat
``message.reasoning_content`` / ``message.reasoning`` (none when hidden) and in a Responses ``reasoning``
output item (``content`` reasoning text, or ``summary``). The request fields ``reasoning_effort`` (chat) and
``reasoning.effort`` (Responses) are accepted and ignored.

Pacing. With ``write-batch`` 1 each token is written on its own, its pause after the previous write (every gap
is at least the scripted one). With K > 1 tokens are due at absolute deadlines (pause after pause from the end
of the opening events), and the server writes a batch of K (non-token events between them included) once its
last token is due: the average pace stays right at a 1-2 ms pace, which one sleep per token cannot keep, and
the client reads the batch coalesced. The log (:mod:`.records`) gives every event of a batch the time of that
one write, and keeps each token's deadline apart (``RequestRecord.scripted_ns``, filled with K > 1 only)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from .errors import ERRORS, ErrorSpec
from .tokens import TOKENIZERS, Tokenizer

HEADER_PREFIX: Final = "x-fake-"

UsageMode = Literal["auto", "always", "never"]
ResponseStatus = Literal["completed", "failed", "incomplete"]
Corruption = Literal["invalid-json", "truncated", "wrong-shape"]
CacheFields = Literal["openai", "deepseek", "none"]
ReasoningMode = Literal["reasoning_content", "reasoning", "hidden", "summary"]
REASONING_MODES: Final[tuple[str, ...]] = ("reasoning_content", "reasoning", "hidden", "summary")

#: Rate-limit headers sent on every response, by script key (the header is ``x-<key>``).
DEFAULT_RATE_LIMITS: Final[Mapping[str, str]] = {
    "ratelimit-limit-requests": "10000",
    "ratelimit-limit-tokens": "10000000",
    "ratelimit-remaining-requests": "9999",
    "ratelimit-remaining-tokens": "9999000",
    "ratelimit-reset-requests": "1s",
    "ratelimit-reset-tokens": "6m0s",
}


class ScriptError(ValueError):
    """A script key is unknown or its value cannot be used."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{HEADER_PREFIX}{key}: {message}")
        self.key = key


@dataclass(frozen=True, slots=True)
class Script:
    """The parsed script of one request. Times are seconds; ``None`` means "not scripted"."""

    delay: float = 0.0
    ttft: float = 0.0
    chunks: int = 5
    chunk_delay: float = 0.0
    jitter: float = 0.0
    seed: int | None = None
    stall_after: int | None = None
    stall: float = 0.0
    body_delay: float = 0.0
    fail_attempts: int = 0
    fail_status: int = 429
    fail_error: ErrorSpec | None = None
    retry_after_ms: str | None = None
    retry_after: str | None = None
    should_retry: str | None = None
    error: ErrorSpec | None = None
    status: int | None = None
    disconnect_after: int | None = None
    malformed_after: int | None = None
    stream_error_after: int | None = None
    corrupt: Corruption | None = None
    processing_ms: str | None = None
    usage: UsageMode = "auto"
    finish_reason: str | None = None
    tool_call: bool = False
    response_status: ResponseStatus = "completed"
    every: tuple[tuple[int, str, str], ...] = ()
    prompt_cache: bool = False
    cached_ttft: float | None = None
    cache_fields: CacheFields = "openai"
    reasoning_tokens: int = 0
    reasoning_delay: float = 0.0
    reasoning_mode: ReasoningMode = "reasoning_content"
    write_batch: int = 1
    capacity: int = 0
    server_timings: str | None = None
    server_metrics: str | None = None
    server_queue: float = 0.0
    server_span_parent: str = "traceparent"
    tool_name: str = "fake_tool"
    tool_plan: tuple[str, ...] = ()
    tokenizer: Tokenizer = "words"
    vad: bool = False
    vad_speech: float = 0.3
    barge_in_after: int | None = None
    transcribe: float | None = None
    rate_limits: Mapping[str, str] = field(default_factory=lambda: DEFAULT_RATE_LIMITS)


_Converter = Callable[[str, str], object]


def _ms(key: str, value: str) -> float:
    try:
        ms = float(value)
    except ValueError:
        raise ScriptError(key, f"expected milliseconds, got {value!r}") from None
    if not ms >= 0 or ms == float("inf"):
        raise ScriptError(key, f"expected a finite number >= 0, got {value!r}")
    return ms / 1000.0


def _count(key: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ScriptError(key, f"expected an integer, got {value!r}") from None
    if number < 0:
        raise ScriptError(key, f"expected an integer >= 0, got {value!r}")
    return number


def _positive(key: str, value: str) -> int:
    number = _count(key, value)
    if number < 1:
        raise ScriptError(key, f"expected an integer >= 1, got {value!r}")
    return number


def _status(key: str, value: str) -> int:
    number = _count(key, value)
    if not 200 <= number <= 599:
        raise ScriptError(key, f"expected an HTTP status 200-599, got {value!r}")
    return number


def _choice(key: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ScriptError(key, f"expected one of {', '.join(allowed)}, got {value!r}")
    return value


def _flag(key: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ScriptError(key, f"expected 1 or 0, got {value!r}")


def _account(name: str) -> _Converter:
    """``name`` (the shape built from the script) or a JSON value sent verbatim."""

    def convert(key: str, value: str) -> str:
        if value.strip() == name:
            return name
        try:
            json.loads(value)
        except ValueError:
            raise ScriptError(key, f"expected {name} or a JSON value, got {value!r}") from None
        return value

    return convert


def _error(key: str, value: str) -> ErrorSpec:
    try:
        return ERRORS[value]
    except KeyError:
        raise ScriptError(key, f"expected one of {', '.join(ERRORS)}, got {value!r}") from None


def _every(key: str, value: str) -> tuple[tuple[int, str, str], ...]:
    rules = []
    for part in (item.strip() for item in value.split(",")):
        if not part:
            continue
        number, colon, assignment = part.partition(":")
        name, equals, setting = assignment.partition("=")
        if not colon or not equals or not number.strip().isdigit() or int(number) < 1:
            raise ScriptError(key, f"expected N:key=value[,N:key=value...] with N >= 1, got {part!r}")
        name = normalize_key(name)
        if name == key:
            raise ScriptError(key, "cannot nest every")
        parse_script({name: setting.strip()})  # the value must be valid for its key
        rules.append((int(number), name, setting.strip()))
    return tuple(rules)


# key -> (Script field, converter). Converters take (key, raw string).

_FIELDS: Final[dict[str, tuple[str, _Converter | None]]] = {
    "delay-ms": ("delay", _ms),
    "ttft-ms": ("ttft", _ms),
    "chunks": ("chunks", _count),
    "chunk-delay-ms": ("chunk_delay", _ms),
    "jitter-ms": ("jitter", _ms),
    "seed": ("seed", _count),
    "stall-after": ("stall_after", _count),
    "stall-ms": ("stall", _ms),
    "body-delay-ms": ("body_delay", _ms),
    "fail-attempts": ("fail_attempts", _count),
    "fail-status": ("fail_status", _status),
    "fail-error": ("fail_error", _error),
    "retry-after-ms": ("retry_after_ms", None),
    "retry-after": ("retry_after", None),
    "should-retry": ("should_retry", None),
    "error": ("error", _error),
    "status": ("status", _status),
    "disconnect-after": ("disconnect_after", _count),
    "malformed-after": ("malformed_after", _count),
    "stream-error-after": ("stream_error_after", _count),
    "corrupt": ("corrupt", lambda k, v: _choice(k, v, ("invalid-json", "truncated", "wrong-shape"))),
    "processing-ms": ("processing_ms", None),
    "usage": ("usage", lambda k, v: _choice(k, v, ("auto", "always", "never"))),
    "finish-reason": ("finish_reason", None),
    "tool-call": ("tool_call", _flag),
    "tool-name": ("tool_name", None),
    "tool-plan": ("tool_plan", lambda k, v: tuple(name.strip() for name in v.split(",") if name.strip())),
    "response-status": ("response_status", lambda k, v: _choice(k, v, ("completed", "failed", "incomplete"))),
    "every": ("every", lambda k, v: _every(k, v)),
    "prompt-cache": ("prompt_cache", _flag),
    "cached-ttft-ms": ("cached_ttft", _ms),
    "cache-fields": ("cache_fields", lambda k, v: _choice(k, v, ("openai", "deepseek", "none"))),
    "reasoning-tokens": ("reasoning_tokens", _count),
    "reasoning-delay-ms": ("reasoning_delay", _ms),
    "reasoning-mode": ("reasoning_mode", lambda k, v: _choice(k, v, REASONING_MODES)),
    "write-batch": ("write_batch", _positive),
    "capacity": ("capacity", _count),
    "server-timings": ("server_timings", _account("llama")),
    "server-metrics": ("server_metrics", _account("vllm")),
    "server-queue-ms": ("server_queue", _ms),
    "server-span-parent": (
        "server_span_parent",
        lambda k, v: _choice(k, v, ("traceparent", "lost", "stale")),
    ),
    "tokenizer": ("tokenizer", lambda k, v: _choice(k, v, TOKENIZERS)),
    "vad": ("vad", _flag),
    "vad-speech-ms": ("vad_speech", _ms),
    "barge-in-after": ("barge_in_after", _count),
    "transcribe-ms": ("transcribe", _ms),
}

#: Every script key, as used in ``defaults`` and (with the ``x-fake-`` prefix) in request headers.
SCRIPT_KEYS: Final[tuple[str, ...]] = (*_FIELDS, *DEFAULT_RATE_LIMITS)


def normalize_key(key: str) -> str:
    """``"x-fake-delay-ms"``, ``"delay_ms"`` and ``"delay-ms"`` all name the key ``"delay-ms"``."""
    key = key.strip().lower().replace("_", "-")
    if key.startswith(HEADER_PREFIX):
        key = key[len(HEADER_PREFIX) :]
    if key not in _FIELDS and key not in DEFAULT_RATE_LIMITS:
        raise ScriptError(key, f"unknown script key (known: {', '.join(SCRIPT_KEYS)})")
    return key


def normalize_defaults(defaults: Mapping[str, object] | None) -> dict[str, str]:
    """Validate a ``defaults`` mapping and turn it into wire strings keyed by script key."""
    raw: dict[str, str] = {}
    for key, value in (defaults or {}).items():
        if value is None:
            continue
        text = ("1" if value else "0") if isinstance(value, bool) else str(value)
        raw[normalize_key(key)] = text
    parse_script(raw)  # fail early, at construction, on bad values
    return raw


def parse_script(raw: Mapping[str, str]) -> Script:
    """Build a :class:`Script` from script keys (without prefix) to raw string values."""
    values: dict[str, object] = {}
    rate_limits: dict[str, str] | None = None
    for key, text in raw.items():
        spec = _FIELDS.get(key)
        if spec is None:
            if key not in DEFAULT_RATE_LIMITS:
                raise ScriptError(key, "unknown script key")
            if rate_limits is None:
                rate_limits = dict(DEFAULT_RATE_LIMITS)
            rate_limits[key] = text
            continue
        name, convert = spec
        values[name] = text if convert is None else convert(key, text)
    if rate_limits is not None:
        values["rate_limits"] = rate_limits
    return Script(**values)  # type: ignore[arg-type]
