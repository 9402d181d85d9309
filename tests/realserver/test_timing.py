"""Our phases against llama.cpp's own account of the same request (its ``timings``).

What this server does, and the tests pin down (docs/ARCHITECTURE.md, "What a real server taught us"):
- a stream's response headers go out when the request arrives, before the prompt is processed, so
  the prefill is inside ``first_token``, and ``network_wait`` (``http.server_wait``) stays short
  whatever the prompt length;
- a non-stream response's headers go out with the body, after the whole generation: everything the
  server did is inside ``network_wait``, and ``response_read`` is the body's parse;
- ``prompt_ms`` runs from the start of the prompt's processing to the first token's sampling (the
  first token is the prefill's), ``predicted_ms`` from there to the last token (``predicted_n - 1``
  decode steps): the server's TTFT and TPOT in our definitions;
- a repeated prompt comes from the cache (``cache_n``): its prefill, and our ``first_token``, shrink.

Tolerances come from the spread measured on this 2-core machine under the other sessions' load
(each test prints what it measured); the reasons for each are in the comments.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import openai
import pytest

from tests.support.span_checks import Captured, attrs, duration_ns

from .calls import Observed, call, client
from .llama import LlamaServer
from .tiny_model import prompt_of

# What the server does before the headers (parse, tokenize, template, the slot's start; no RAM-cache
# copy: llama.py) and after the last token (the body), plus loopback and the SDK's
# parse: measured 0.4-5 ms on an idle machine, up to 12 ms when the other sessions' tests load both
# cores (the server's own prompt_ms then varies 160-330 ms for the same 512 tokens). Held to 15 ms.
OVERHEAD_MAX_MS = 15.0
# On a loaded machine the server's HTTP thread can send a stream's headers up to ~25 ms into the
# prefill (measured): that part of the prefill is then in network_wait. Where the prefill lands is
# therefore checked on medians, as shares: first_token holds >= 85 % of it (measured 88-100 %, 96 %
# median under load), network_wait <= 15 % (measured 1-12 %).
PREFILL_IN_FIRST_TOKEN = 0.85
PREFILL_IN_NETWORK_WAIT = 0.15
# The caller's own pace (first -> last token hand-over, over n - 1) under the server's by more than
# this: the server held its first writes back (see the TPOT test).
TPOT_REL = 0.15
# Physical lower bounds (the client cannot see a token before the server made it) get this slack:
# the two clocks' resolution and the server's rounding to microseconds.
SLACK_MS = 0.5
TRIALS = 5


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _stream(
    captured: Captured, sdk: openai.OpenAI, llama: LlamaServer, tokens: int, salt: int, max_tokens: int = 16
) -> Observed:
    return call(captured, sdk, llama, prompt_tokens=tokens, salt=salt, max_tokens=max_tokens, stream=True)


def test_first_token_is_the_prefill(instrument: Callable[..., Captured], llama: LlamaServer) -> None:
    """Streams: the server sends the headers when the slot starts the request (queue behind it,
    prefill ahead), so the prefill (``prompt_ms``) lands in ``first_token``; ``network_wait`` holds
    only the request's trip and tokenization. On a loaded machine the server's HTTP thread can send the
    headers a few ms into the prefill: then that part is in ``network_wait``, never lost."""
    captured = instrument()
    sdk = client(llama)
    seen = [_stream(captured, sdk, llama, tokens=512, salt=salt) for salt in range(10, 10 + TRIALS)]
    for s in seen:
        prompt_ms, first_token, wait = (
            s.timings["prompt_ms"],
            s.phases["first_token"],
            s.phases["network_wait"],
        )
        print(f"\n  512 tokens: prompt_ms {prompt_ms:.1f}, first_token {first_token:.1f}"
              f" ({first_token - prompt_ms:+.2f}), network_wait {wait:.2f}")  # fmt: skip
        assert first_token + wait >= prompt_ms - SLACK_MS  # send -> first token holds the whole prefill
        assert first_token <= prompt_ms + OVERHEAD_MAX_MS
        overhead = s.ms("openai_latency.client_overhead.time_to_first_token")
        assert overhead == pytest.approx(s.ttft_ms - prompt_ms, abs=1e-6)
    assert _median([s.phases["first_token"] / s.timings["prompt_ms"] for s in seen]) >= PREFILL_IN_FIRST_TOKEN
    assert (
        _median([s.phases["network_wait"] / s.timings["prompt_ms"] for s in seen]) <= PREFILL_IN_NETWORK_WAIT
    )
    assert (
        0
        < _median([s.ms("openai_latency.client_overhead.time_to_first_token") for s in seen])
        <= 2 * OVERHEAD_MAX_MS
    )


def test_time_per_output_token_is_the_servers_decode_pace(
    instrument: Callable[..., Captured], llama: LlamaServer
) -> None:
    """Where the server delivered its tokens as it decoded them, TPOT is its decode pace: the median
    of five streams within 5 % (measured -0.4 to +0.1 %), each within 25 %.

    The prompt is 768 tokens, so that the decode runs at ~2.5-3.5 ms per token (attention over the
    context): with a short context this server decodes at 1.6-2.1 ms per token, and then (each a
    known limitation of ``token_times``, docs/ARCHITECTURE.md "What a real server taught us"),
    one token per write, most ``next()``
    calls block under ``streams.BLOCKED_NS`` (2 ms): every chunk counts as buffered and TPOT is
    unset in most streams (``stream.buffered_chunks`` says why), or, when just over half the gaps
    were over 2 ms, it comes from those slower gaps only and reads high (+18 % measured: hence 25 %
    per stream). With both cores loaded the server sometimes holds its first writes back, so the
    first token arrives with dozens made after it and the caller's own window is shorter than the
    decode (TPOT -53 % measured; tests/core/test_first_burst.py's xfail): such streams (the caller's
    clock more than 15 % under the server's pace) are printed, not compared. Streams until five are
    compared, at most 30 (idle: most are; both cores loaded: 1 in 5 to 1 in 3)."""
    captured = instrument()
    sdk = client(llama)
    errors: list[float] = []
    for salt in range(20, 50):
        if len(errors) == TRIALS:
            break
        s = _stream(captured, sdk, llama, tokens=768, salt=salt, max_tokens=64)
        theirs = s.timings["predicted_ms"] / (s.timings["predicted_n"] - 1)
        assert s.ms("openai_latency.server.time_per_output_token") == pytest.approx(theirs, abs=1e-6)
        if "openai_latency.time_per_output_token" not in s.attributes:
            print(f"\n  TPOT unset, server {theirs:.3f} ms,"
                  f" buffered chunks {s.attributes['openai_latency.stream.buffered_chunks']}")  # fmt: skip
            assert s.attributes["openai_latency.stream.buffered_chunks"] > 0
            continue
        ours = s.ms("openai_latency.time_per_output_token")
        caller = (s.token_ns[-1] - s.token_ns[0]) / (len(s.token_ns) - 1) / 1e6
        assert s.attributes["openai_latency.time_per_output_token.rule"] == "answer_tokens"
        if caller < (1 - TPOT_REL) * theirs:
            print(f"\n  held back: TPOT {ours:.3f} ms, the caller's clock {caller:.3f}, server {theirs:.3f}")
            continue
        error = (ours - theirs) / theirs
        errors.append(error)
        print(f"\n  TPOT ours {ours:.3f} ms, caller {caller:.3f}, server {theirs:.3f} ({error:+.2%})")
        assert abs(error) <= 0.25
    assert len(errors) == TRIALS, "5 of 30 streams delivered as the server decoded them"
    assert abs(_median(errors)) <= 0.05


def test_a_non_stream_call_waits_for_everything_in_network_wait(
    instrument: Callable[..., Captured], llama: LlamaServer
) -> None:
    """Non-stream: the headers come with the body, after prefill and decode: ``network_wait`` holds
    the server's prompt_ms + predicted_ms and the overhead, ``response_read`` only the body's parse."""
    captured = instrument()
    sdk = client(llama)
    seen = [
        call(captured, sdk, llama, prompt_tokens=256, salt=salt, max_tokens=32, stream=False)
        for salt in range(30, 30 + TRIALS)
    ]
    for s in seen:
        total, wait = s.server_total_ms, s.phases["network_wait"]
        print(f"\n  server prompt+predicted {total:.1f} ms, network_wait {wait:.1f} ({wait - total:+.2f}),"
              f" response_read {s.phases['response_read']:.2f}")  # fmt: skip
        assert wait >= total - SLACK_MS
        assert s.attributes["openai_latency.dominant_phase"] == "network_wait"
    assert _median([s.phases["network_wait"] - s.server_total_ms for s in seen]) <= OVERHEAD_MAX_MS
    assert _median([s.phases["response_read"] for s in seen]) <= OVERHEAD_MAX_MS


def test_ttft_grows_with_the_prompt_in_first_token(
    instrument: Callable[..., Captured], llama: LlamaServer
) -> None:
    """16, 256 and 1,024 prompt tokens (three prompts each): TTFT grows with the server's prefill,
    and the growth is in ``first_token`` (where this server's prefill happens), not ``network_wait``."""
    captured = instrument()
    sdk = client(llama)
    lengths = (16, 256, 1024)
    seen = {n: [_stream(captured, sdk, llama, tokens=n, salt=100 + 10 * i + k) for k in range(3)]
            for i, n in enumerate(lengths)}  # fmt: skip

    def med(n: int, what: Callable[[Observed], float]) -> float:
        return _median([what(s) for s in seen[n]])

    for n in lengths:
        print(f"\n  {n:>5} tokens: TTFT {med(n, lambda s: s.ttft_ms):.1f} ms,"
              f" prompt_ms {med(n, lambda s: s.timings['prompt_ms']):.1f},"
              f" first_token {med(n, lambda s: s.phases['first_token']):.1f},"
              f" network_wait {med(n, lambda s: s.phases['network_wait']):.2f} (medians of 3)")  # fmt: skip
    ttft = [med(n, lambda s: s.ttft_ms) for n in lengths]
    prefill = [med(n, lambda s: s.timings["prompt_ms"]) for n in lengths]
    first_token = [med(n, lambda s: s.phases["first_token"]) for n in lengths]
    wait = [med(n, lambda s: s.phases["network_wait"]) for n in lengths]
    assert ttft[0] < ttft[1] < ttft[2] and prefill[0] < prefill[1] < prefill[2]
    growth = prefill[2] - prefill[0]
    # TTFT also holds the server's work before the slot starts, which a loaded machine can stretch by
    # ~30 ms on one length's three calls (measured): its growth is held to the prefill's from below
    # by share, from above by the overhead bound.
    assert PREFILL_IN_FIRST_TOKEN * growth <= ttft[2] - ttft[0] <= growth + OVERHEAD_MAX_MS
    assert first_token[2] - first_token[0] >= PREFILL_IN_FIRST_TOKEN * growth
    assert wait[2] - wait[0] <= PREFILL_IN_NETWORK_WAIT * growth
    assert all(s.attributes["openai_latency.dominant_phase"] == "first_token" for s in seen[1024])


def test_a_repeated_prompt_comes_from_the_cache(
    instrument: Callable[..., Captured], llama: LlamaServer
) -> None:
    """The same 1,024-token prompt twice (three prompts): the second is a cache hit (``cache_n``
    1,024, one token prefilled), reported in usage and in our attributes, and the prefill time it
    saved is missing from our ``first_token`` (and TTFT), not from ``network_wait``."""
    captured = instrument()
    sdk = client(llama)
    pairs = []
    for salt in (50, 51, 52):
        first = _stream(captured, sdk, llama, tokens=1024, salt=salt)
        again = _stream(captured, sdk, llama, tokens=1024, salt=salt)
        pairs.append((first, again))
        for name, s in (("first", first), ("again", again)):
            print(f"\n  {name}: cache_n {s.timings['cache_n']}, prompt_n {s.timings['prompt_n']},"
                  f" prompt_ms {s.timings['prompt_ms']:.1f}, first_token {s.phases['first_token']:.1f},"
                  f" TTFT {s.ttft_ms:.1f}, network_wait {s.phases['network_wait']:.2f}")  # fmt: skip
        assert first.timings["cache_n"] <= 1  # at most <s>, shared with any earlier prompt
        assert again.timings["cache_n"] == 1024 and again.timings["prompt_n"] == 1
        a = again.attributes
        assert a["openai_latency.server.cached_prompt_tokens"] == 1024
        assert a["gen_ai.usage.cache_read.input_tokens"] == 1024
        assert a["gen_ai.usage.input_tokens"] == 1025
        assert first.timings["prompt_ms"] - again.timings["prompt_ms"] > 0.5 * first.timings["prompt_ms"]
    saved = _median([f.timings["prompt_ms"] - a.timings["prompt_ms"] for f, a in pairs])
    ttft_saved = _median([f.ttft_ms - a.ttft_ms for f, a in pairs])
    assert PREFILL_IN_FIRST_TOKEN * saved <= ttft_saved <= saved + OVERHEAD_MAX_MS
    first_token_saved = _median([f.phases["first_token"] - a.phases["first_token"] for f, a in pairs])
    assert first_token_saved >= PREFILL_IN_FIRST_TOKEN * saved
    wait_saved = _median([f.phases["network_wait"] - a.phases["network_wait"] for f, a in pairs])
    assert wait_saved <= PREFILL_IN_NETWORK_WAIT * saved


def test_a_queued_request_waits_in_network_wait(
    instrument: Callable[..., Captured], llama: LlamaServer
) -> None:
    """One slot, two streams: the second waits for the first to finish before its slot starts, and
    this server sends the headers only when the slot starts, so the queue is in the second call's
    ``network_wait`` (llama.cpp reports no queue time: its ``client_overhead`` holds it)."""
    captured = instrument()
    sdk = client(llama)
    captured.clear()
    first: list[dict[str, Any]] = []  # the first stream's timings

    def stream(tokens: int, salt: int, max_tokens: int) -> dict[str, Any]:
        messages = [{"role": "user", "content": prompt_of(tokens, salt=salt)}]
        last = None
        for chunk in sdk.chat.completions.create(
            model=llama.shape.name,
            messages=messages,
            max_tokens=max_tokens,
            stream=True,
            stream_options={"include_usage": True},
        ):
            last = chunk
        assert last is not None and last.model_extra is not None
        timings: dict[str, Any] = last.model_extra["timings"]
        return timings

    thread = threading.Thread(target=lambda: first.append(stream(1024, 60, 32)))
    thread.start()
    time.sleep(0.05)  # the first request is in its prefill
    stream(16, 61, 4)
    thread.join(timeout=60)
    ops = {attrs(op)["gen_ai.usage.input_tokens"]: op for op in captured.operations()}
    queued = ops[17]
    a, phases = (
        attrs(queued),
        {s.name.removeprefix("openai."): duration_ns(s) / 1e6 for s in captured.phases(queued)},
    )
    busy_ms = first[0]["prompt_ms"] + first[0]["predicted_ms"] if first else 0.0
    prefill_ms = a["openai_latency.server.prefill_time"] * 1e3
    # unset when TTFT is (its first token already waiting at the hand-over: see calls.Observed.ttft_ms)
    overhead_ms = a.get("openai_latency.client_overhead.time_to_first_token", 0.0) * 1e3
    print(
        f"\n  queued behind a {busy_ms:.0f} ms request: network_wait {phases['network_wait']:.1f} ms,"
        f" first_token {phases['first_token']:.1f}, server prefill {prefill_ms:.1f},"
        f" client_overhead {overhead_ms:.1f}"
    )
    assert first, "the first stream finished"
    assert phases["network_wait"] >= 0.5 * busy_ms  # it started ~50 ms into the first one's ~450 ms
    assert phases["first_token"] <= prefill_ms + OVERHEAD_MAX_MS
    if "openai_latency.time_to_first_token" in a:  # the queue is most of the client overhead
        assert overhead_ms >= 0.9 * phases["network_wait"]
    assert a["openai_latency.dominant_phase"] == "network_wait"
