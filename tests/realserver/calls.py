"""One instrumented call against the real server, with what it exported and what the server said."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import openai

from tests.support.span_checks import Captured, attrs, duration_ns

from .llama import LlamaServer
from .tiny_model import prompt_of

MS = 1e6


@dataclass
class Observed:
    """Our operation span's attributes, our phases (ms, summed by name) and the server's ``timings``
    (from the body, or the stream's last chunk: what the caller received)."""

    attributes: dict[str, Any]
    phases: dict[str, float]
    phase_names: list[str]
    timings: dict[str, Any]
    usage: Any
    token_ns: list[int]
    """Streams: when the caller got each content chunk (``perf_counter_ns``, the caller's own clock)."""

    def ms(self, key: str) -> float:
        return float(self.attributes[key]) * 1000.0

    @property
    def ttft_ms(self) -> float:
        """``openai_latency.time_to_first_token``; when it is unset (the first token was already
        waiting when the SDK handed it over, more than 2 ms after the last arrival seen: a cache hit
        whose first token comes with the headers, on a loaded machine), the hand-over time instead:
        request_build + network_wait + first_token."""
        if "openai_latency.time_to_first_token" in self.attributes:
            return self.ms("openai_latency.time_to_first_token")
        assert self.attributes["openai_latency.stream.first_token_waiting"] is True
        return sum(self.phases[name] for name in ("request_build", "network_wait", "first_token"))

    @property
    def server_total_ms(self) -> float:
        return float(self.timings["prompt_ms"]) + float(self.timings["predicted_ms"])


def client(server: LlamaServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="sk-none", max_retries=0, timeout=120)


def call(
    captured: Captured,
    sdk: openai.OpenAI,
    server: LlamaServer,
    prompt_tokens: int,
    salt: int,
    max_tokens: int,
    stream: bool,
) -> Observed:
    """A chat call with a prompt of ``prompt_tokens`` words (``salt``: which prompt), its result read
    the way an application does; the exported spans read back."""
    captured.clear()
    messages = [{"role": "user", "content": prompt_of(prompt_tokens, salt)}]
    token_ns: list[int] = []
    kwargs: dict[str, Any] = {"model": server.shape.name, "messages": messages, "max_tokens": max_tokens}
    if stream:
        last = None
        for chunk in sdk.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True}
        ):
            if chunk.choices and chunk.choices[0].delta.content:
                token_ns.append(time.perf_counter_ns())
            last = chunk
        assert last is not None
        body = last
    else:
        body = sdk.chat.completions.create(**kwargs)
    op = captured.operation()
    phases: dict[str, float] = {}
    names = []
    for span in sorted(captured.phases(op), key=lambda s: s.start_time or 0):
        name = span.name.removeprefix("openai.")
        names.append(name)
        phases[name] = phases.get(name, 0.0) + duration_ns(span) / MS
    extra = body.model_extra or {}
    return Observed(attrs(op), phases, names, extra["timings"], body.usage, token_ns)
