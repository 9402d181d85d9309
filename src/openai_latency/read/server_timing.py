"""The server's own account of a request, joined to ours.

Some inference servers say what they did with each request, in the response body:

- llama.cpp's ``llama-server``: a ``timings`` object in a non-stream body and in the last stream chunk
  (``cache_n`` prompt tokens reused from its cache, ``prompt_n``/``prompt_ms`` the prefill of the
  rest, ``predicted_n``/``predicted_ms`` the generation, ``predicted_per_token_ms``). Its
  ``prompt_ms`` runs from the start of the prompt's processing to the first token's sampling (the
  first token comes from the prefill's logits), and ``predicted_ms`` from there to the last token:
  ``predicted_n - 1`` decode steps. It reports no queue time.
- vLLM (``--enable-per-request-metrics``, and ``include_metrics: true`` in the request): a top-level
  ``metrics`` object (``queue_time_ms``, ``time_to_first_token_ms`` from arrival, so queue included,
  ``generation_time_ms``, ``mean_itl_ms``), in the last chunk when streaming.
- OpenAI: the ``openai-processing-ms`` header (read with the other headers in :mod:`.attributes`).

:func:`server_attributes` turns one of those objects into ``openai_latency.server.*`` attributes;
:func:`client_overhead` derives the client's share of the time to first token. A malformed object
(wrong types, negative or non-finite numbers, missing fields) gives what is valid and skips the
rest; nothing here raises into a call. :func:`with_metrics` is ``OPENAI_LATENCY_SERVER_METRICS=request``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import semconv as sc
from .._guard import guarded, report
from ..model import Attributes, OperationKind
from .attributes import is_given

_STREAM_KINDS = ("chat", "completions")
"""The endpoints vLLM's ``include_metrics`` applies to: chat and completions."""

SERVER_SECONDS = (
    sc.OPENAI_LATENCY_SERVER_QUEUE_TIME,
    sc.OPENAI_LATENCY_SERVER_PREFILL_TIME,
    sc.OPENAI_LATENCY_SERVER_TIME_TO_FIRST_TOKEN,
    sc.OPENAI_LATENCY_SERVER_DECODE_TIME,
    sc.OPENAI_LATENCY_SERVER_TIME_PER_OUTPUT_TOKEN,
)


_MAX_MS = 1e12
"""Above this (32 years) a duration is no duration: skipped like a negative one."""


def _ms(source: Mapping[str, Any], key: str) -> int | None:
    """``source[key]``, milliseconds as a finite number in [0, 1e12], in whole nanoseconds; else None."""
    value = source.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not 0 <= value <= _MAX_MS:  # NaN fails both comparisons
        return None
    return round(value * 1e6)


def _count(source: Mapping[str, Any], key: str) -> int | None:
    value = source.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _put(out: Attributes, key: str, ns: int | None) -> None:
    if ns is not None:
        out[key] = ns / 1e9  # one correctly rounded division: exact to the ns in shortest form


def llama_cpp(timings: Mapping[str, Any]) -> Attributes:
    """llama.cpp's ``timings`` -> attributes (time to first token = prefill: no queue reported)."""
    out: Attributes = {}
    cached = _count(timings, "cache_n")
    if cached is not None:
        out[sc.OPENAI_LATENCY_SERVER_CACHED_PROMPT_TOKENS] = cached
    prompt = _ms(timings, "prompt_ms")
    _put(out, sc.OPENAI_LATENCY_SERVER_PREFILL_TIME, prompt)
    _put(out, sc.OPENAI_LATENCY_SERVER_TIME_TO_FIRST_TOKEN, prompt)
    decode = _ms(timings, "predicted_ms")
    _put(out, sc.OPENAI_LATENCY_SERVER_DECODE_TIME, decode)
    predicted = _count(timings, "predicted_n")
    if decode is not None and predicted is not None and predicted > 1:
        # predicted_ms spans predicted_n - 1 decode steps (the first token is the prefill's)
        _put(out, sc.OPENAI_LATENCY_SERVER_TIME_PER_OUTPUT_TOKEN, round(decode / (predicted - 1)))
    return out


def vllm(metrics: Mapping[str, Any]) -> Attributes:
    """vLLM's per-request ``metrics`` -> attributes (prefill = its time to first token - queue)."""
    out: Attributes = {}
    queue = _ms(metrics, "queue_time_ms")
    first = _ms(metrics, "time_to_first_token_ms")
    _put(out, sc.OPENAI_LATENCY_SERVER_QUEUE_TIME, queue)
    _put(out, sc.OPENAI_LATENCY_SERVER_TIME_TO_FIRST_TOKEN, first)
    if queue is not None and first is not None and first >= queue:
        _put(out, sc.OPENAI_LATENCY_SERVER_PREFILL_TIME, first - queue)
    _put(out, sc.OPENAI_LATENCY_SERVER_DECODE_TIME, _ms(metrics, "generation_time_ms"))
    _put(out, sc.OPENAI_LATENCY_SERVER_TIME_PER_OUTPUT_TOKEN, _ms(metrics, "mean_itl_ms"))
    return out


def server_attributes(item: Any) -> Attributes | None:
    """The ``openai_latency.server.*`` attributes of a response body or final chunk carrying
    llama.cpp ``timings`` or vLLM ``metrics``; ``{}`` when it carries neither (or ``item`` is None),
    None when reading it failed (reported once). Fields the SDK's model does not declare: pydantic v2
    keeps them in ``__pydantic_extra__`` (empty on most responses: one attribute read, then done);
    a v1 model or a stand-in as attributes; a dict as keys."""
    try:
        if item is None:
            return {}
        extra = item if isinstance(item, Mapping) else getattr(item, "__pydantic_extra__", None)
        if extra is None:
            extra = {"timings": getattr(item, "timings", None), "metrics": getattr(item, "metrics", None)}
        elif not extra:
            return {}
        timings = extra.get("timings")
        if isinstance(timings, Mapping):
            return llama_cpp(timings)
        metrics = extra.get("metrics")
        if isinstance(metrics, Mapping):
            return vllm(metrics)
        return {}
    except Exception:
        report("server_timing.server_attributes")
        return None


def client_overhead(summary: Mapping[str, Any]) -> Attributes:
    """``openai_latency.client_overhead.time_to_first_token``: our time to first token minus the
    server's (network, client, and any server time the server does not count: llama.cpp's queue),
    in whole ns; negative when the two clocks disagree (kept: a sign that a server's account is off)."""
    ours = summary.get(sc.OPENAI_LATENCY_TIME_TO_FIRST_TOKEN)
    theirs = summary.get(sc.OPENAI_LATENCY_SERVER_TIME_TO_FIRST_TOKEN)
    if not isinstance(ours, float) or not isinstance(theirs, float):
        return {}
    overhead_ns = round(ours * 1e9) - round(theirs * 1e9)
    return {sc.OPENAI_LATENCY_CLIENT_OVERHEAD_TIME_TO_FIRST_TOKEN: overhead_ns / 1e9}


SERVER_METRICS = (
    (sc.OPENAI_LATENCY_SERVER_QUEUE_TIME, "server_queue_time"),
    (sc.OPENAI_LATENCY_SERVER_PREFILL_TIME, "server_prefill_time"),
    (sc.OPENAI_LATENCY_SERVER_TIME_TO_FIRST_TOKEN, "server_time_to_first_token"),
    (sc.OPENAI_LATENCY_SERVER_TIME_PER_OUTPUT_TOKEN, "server_time_per_output_token"),
    (sc.OPENAI_LATENCY_CLIENT_OVERHEAD_TIME_TO_FIRST_TOKEN, "client_overhead_time_to_first_token"),
)
"""Summary attribute -> the :class:`.metrics.Metrics` histogram that records it."""


def metric_points(summary: Mapping[str, Any]) -> list[tuple[str, float]]:
    """(histogram attribute, seconds) of the server's account in a finished call's summary (a
    negative client overhead, two clocks that disagree, stays on the span only). Most calls have
    none: three lookups (a prefill or an overhead comes only with a time to first token)."""
    if (
        sc.OPENAI_LATENCY_SERVER_TIME_TO_FIRST_TOKEN not in summary
        and sc.OPENAI_LATENCY_SERVER_QUEUE_TIME not in summary
        and sc.OPENAI_LATENCY_SERVER_TIME_PER_OUTPUT_TOKEN not in summary
    ):
        return []
    return [
        (instrument, value)
        for key, instrument in SERVER_METRICS
        if isinstance(value := summary.get(key), float) and value >= 0
    ]


INCLUDE_METRICS = "include_metrics"


@guarded()
def with_metrics(kind: OperationKind, kwargs: Mapping[str, Any]) -> dict[str, Any] | None:
    """``OPENAI_LATENCY_SERVER_METRICS=request``: the kwargs with ``include_metrics: true`` in
    ``extra_body`` (chat and completions), or None to send them unchanged (another endpoint, or the
    caller set ``include_metrics`` itself)."""
    if kind.stream_kind not in _STREAM_KINDS:
        return None
    extra_body = kwargs.get("extra_body")
    if not is_given(extra_body):
        extra_body = {}
    elif not isinstance(extra_body, Mapping) or INCLUDE_METRICS in extra_body:
        return None
    return {**kwargs, "extra_body": {**extra_body, INCLUDE_METRICS: True}}
