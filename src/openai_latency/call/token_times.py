"""A stream's token times: time to first token, to first answer token, thinking time, time per
output token, and how visible the reasoning was; pure functions of the marks the chunk loop kept.

The chunk loop (:func:`.streams._on_chunk`) keeps, for the first token, the first answer token and
the last token, the chunk's hand-over time and its doubt (``doubt_ns``): the time since the last
observed arrival that was spent outside ``next``, the caller's own work. A chunk whose ``next``
blocked arrived at its hand-over (no doubt). A chunk that was already buffered arrived at some
moment of that time; with an idle caller there is none, and its hand-over is its arrival plus the
parse of the chunks that came with it. The hand-over is an upper bound, the doubt how unsure it is.
A boundary is used when that doubt is small (:func:`arrival`); otherwise the number is left unset
rather than guessed, so neither the caller's time is counted as the server's nor the server's as
the caller's.
"""

from __future__ import annotations

from typing import Literal

from .. import semconv as sc
from ..clock import seconds
from ..model import REASONING, SUMMARY, Attributes, StreamStats
from .timeline import Timeline

Visibility = Literal["streamed", "summary", "hidden", "none"]

SURE_NS = 2_000_000
"""A buffered token's hand-over is its arrival when it came at most this long after the last
observed arrival (the parse of a few chunks), or at most :data:`SURE_SHARE` of the time measured."""
SURE_SHARE = 0.05


def arrival(mark_ns: int, doubt_ns: int, start_ns: int) -> int | None:
    """``start_ns`` -> the arrival of the chunk handed over at ``mark_ns``, when it is known well
    enough: the hand-over itself (an upper bound, so never below the truth) when its doubt is at most
    max(2 ms, 5 %); else None."""
    if not mark_ns:
        return None
    elapsed = mark_ns - start_ns
    return elapsed if doubt_ns <= max(SURE_NS, elapsed * SURE_SHARE) else None


def visibility(channels: int, reasoning_tokens: object) -> Visibility:
    """streamed: reasoning text arrived; summary: only reasoning summaries; hidden: usage reports
    reasoning tokens but none arrived; none."""
    if channels & REASONING:
        return "streamed"
    if channels & SUMMARY:
        return "summary"
    if isinstance(reasoning_tokens, int) and reasoning_tokens > 0:
        return "hidden"
    return "none"


def token_times(timeline: Timeline, st: StreamStats, usage: Attributes, estimated: bool) -> Attributes:
    """TTFT, time to first answer token, reasoning duration and visibility, and TPOT with its rule.
    ``usage``: the stream's usage attributes; ``estimated``: there were none, so token chunks count."""
    out: Attributes = {}
    start = timeline.start_ns
    ttft = arrival(timeline.first_token_ns, st.first_token_doubt_ns, start)
    if ttft is not None:
        out[sc.OPENAI_LATENCY_TIME_TO_FIRST_TOKEN] = seconds(ttft)
    elif timeline.first_token_ns:
        out[sc.OPENAI_LATENCY_STREAM_FIRST_TOKEN_WAITING] = True
    ttfa = arrival(timeline.first_answer_ns, st.first_answer_doubt_ns, start)
    if ttfa is not None:
        out[sc.OPENAI_LATENCY_TIME_TO_FIRST_ANSWER_TOKEN] = seconds(ttfa)
    seen = visibility(st.channels, usage.get(sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS))
    out[sc.OPENAI_LATENCY_REASONING_VISIBILITY] = seen
    reasoned = timeline.first_answer_ns != timeline.first_token_ns
    if ttft is not None and ttfa is not None and reasoned:
        out[sc.OPENAI_LATENCY_REASONING_DURATION] = seconds(ttfa - ttft)
    tpot = time_per_output_token(timeline, st, seen, usage, estimated)
    if tpot is not None:
        out[sc.OPENAI_LATENCY_TIME_PER_OUTPUT_TOKEN] = tpot[0]
        out[sc.OPENAI_LATENCY_TIME_PER_OUTPUT_TOKEN_RULE] = tpot[1]
    return out


def time_per_output_token(
    timeline: Timeline, st: StreamStats, seen: Visibility, usage: Attributes, estimated: bool
) -> tuple[float, str] | None:
    """(seconds per token, rule): a time window over the tokens generated inside it.

    - ``all_tokens`` (reasoning streamed verbatim): first token of any channel -> last token, over
      output tokens - 1 (reasoning included: usage counts it in the completion tokens);
    - ``answer_tokens`` (reasoning hidden, summarised or absent): first answer token -> last token,
      over output - reasoning tokens - 1.

    The window's length: when both ends are known (:func:`arrival`'s rule, their doubt at most 5 % of
    the window) it is measured across the window, so an idle caller's stream is measured whole
    however fast the server and however it batched its writes; the tokens that arrived in the same
    read as the first one (``StreamStats.burst``: a batch, a server that held its first writes back)
    were made before the window and are not counted in it. When the caller's own work hid the
    arrivals, only the observed gaps count, and only when most gaps were observed (a caller slower
    than the server sees only the server's slowest gaps: unset). None when the window's token count
    is unknown.
    """
    output = st.token_chunks if estimated else usage.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS)
    if not isinstance(output, int):
        return None
    if seen == "streamed":
        rule, first, first_doubt = "all_tokens", timeline.first_token_ns, st.first_token_doubt_ns
        chunks, gap_ns, gaps = st.token_chunks, st.token_gap_ns, st.token_gaps
        tokens, burst = output, st.burst
    else:
        rule, first, first_doubt = "answer_tokens", timeline.first_answer_ns, st.first_answer_doubt_ns
        chunks = st.token_chunks - st.tokens_to_answer
        burst = st.burst if not st.tokens_to_answer else 0  # the burst is the first token's
        gap_ns = st.token_gap_ns - st.token_gap_ns_to_answer
        gaps = st.token_gaps - st.token_gaps_to_answer
        reasoning = usage.get(sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS)
        if estimated:
            tokens = chunks
        elif isinstance(reasoning, int):
            tokens = output - reasoning
        elif seen == "summary":  # the summary is not the reasoning: its token count is unknown
            return None
        else:
            tokens = output
    if tokens < 2 or not first:
        return None
    window = st.last_token_ns - first + first_doubt  # at most: the first may have come that early
    doubt = first_doubt + st.last_token_doubt_ns
    steps = tokens - 1 - burst  # the tokens that came with the first one were made before the window
    if window > 0 and steps > 0 and doubt <= window * SURE_SHARE:
        return seconds(round(window / steps)), rule
    if gaps and gaps * 2 >= chunks - 1:
        return seconds(round(gap_ns / gaps * (chunks - 1) / (tokens - 1))), rule
    return None
