"""The server's own account of a request, as real inference servers send it (script keys
``server-timings``, ``server-metrics``, ``server-queue-ms``).

- llama.cpp's ``llama-server``: a ``timings`` object in the non-stream body and in the last chunk of
  a stream (the usage chunk when there is one, else the finish chunk).
- vLLM with ``--enable-per-request-metrics``: a top-level ``metrics`` object, only when the request
  asks for it with ``include_metrics: true``; in the last chunk of a stream.

The numbers follow the script: the prefill (``prompt_ms``, vLLM's time to first token after the
queue) is ``ttft-ms`` (``cached-ttft-ms`` on a cache hit), the decode pace is ``chunk-delay-ms``;
a JSON value instead of ``llama``/``vllm`` is sent verbatim (malformed accounts, for tests).
"""

from __future__ import annotations

import json
from typing import Any

from .script import Script

JSON = dict[str, Any]


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)


def llama_timings(script: Script, prompt_tokens: int, cached_tokens: int, output_tokens: int) -> JSON:
    prompt_n = max(0, prompt_tokens - cached_tokens)
    prompt_ms = _ms(script.ttft)
    predicted_ms = _ms(script.chunk_delay * max(0, output_tokens - 1))
    steps = max(0, output_tokens - 1)
    return {
        "cache_n": cached_tokens,
        "prompt_n": prompt_n,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": round(prompt_ms / prompt_n, 6) if prompt_n else 0.0,
        "prompt_per_second": round(1e3 * prompt_n / prompt_ms, 3) if prompt_ms else 0.0,
        "predicted_n": output_tokens,
        "predicted_ms": predicted_ms,
        "predicted_per_token_ms": round(predicted_ms / steps, 6) if steps else 0.0,
        "predicted_per_second": round(1e3 * steps / predicted_ms, 3) if predicted_ms else 0.0,
    }


def vllm_metrics(script: Script, output_tokens: int) -> JSON:
    queue_ms = _ms(script.server_queue)
    generation_ms = _ms(script.chunk_delay * max(0, output_tokens - 1))
    return {
        "queue_time_ms": queue_ms,
        "time_to_first_token_ms": round(queue_ms + _ms(script.ttft), 3),
        "generation_time_ms": generation_ms,
        "mean_itl_ms": _ms(script.chunk_delay),
        "tokens_per_second": round(1e3 * output_tokens / generation_ms, 3) if generation_ms else 0.0,
    }


def account(
    script: Script, prompt_tokens: int, cached_tokens: int, output_tokens: int, include_metrics: bool
) -> JSON:
    """The top-level fields to add to the body or the stream's last chunk (``{}``: none)."""
    out: JSON = {}
    if script.server_timings == "llama":
        out["timings"] = llama_timings(script, prompt_tokens, cached_tokens, output_tokens)
    elif script.server_timings is not None:
        out["timings"] = json.loads(script.server_timings)
    if include_metrics and script.server_metrics == "vllm":
        out["metrics"] = vllm_metrics(script, output_tokens)
    elif include_metrics and script.server_metrics is not None:
        out["metrics"] = json.loads(script.server_metrics)
    return out
