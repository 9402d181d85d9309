"""The metric table: every per-call number the CLI puts in a distribution, said once.

Per metric: its name (the ``--slo`` name, the bench JSON key), the words the verdict uses, the line
``bench --help`` prints, the definition docs/BENCH.md prints (its table is tested against
:func:`markdown_rows`), the unit, where the value comes from, the value of a call, and which calls
count. bench's and report's statistics (:mod:`.groups`), the verdict (:mod:`.verdict`), goodput,
the ``--html`` charts and ``--slo`` all read it.

Which calls count (:data:`COUNTING_RULE`): the values of a stream (``ttft``, ``ttft_answer``,
``reasoning``, ``ttfc``, ``tpot``, ``tokens_per_s``) are taken from the calls that succeeded only. A
stream that failed after its first token has a first token, but it is a failure: it counts in the
error rate and the triage, never as a sample of how fast the answers came (vLLM's and guidellm's
benchmarks do the same). ``e2e`` counts every call, failed ones included: the time the caller waited,
whatever came of it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from ..spans.calls import Call
from .percentiles import Dist

#: ``succeeded``: the calls without an error; ``every``: every call, failed ones included.
Counts = Literal["succeeded", "every"]
COUNTS_WORDS: dict[Counts, str] = {
    "succeeded": "successful calls",
    "every": "every call, failed ones included",
}


@dataclass(frozen=True)
class Metric:
    name: str
    #: What the verdict and the charts call it: "time to first token".
    title: str
    #: ``bench --help``'s line (wrapped there).
    help: str
    #: docs/BENCH.md's definition.
    definition: str
    #: Where the value is read: the span attribute, or what it is computed from.
    source: str
    unit: str
    value: Callable[[Call], float | None]
    counts: Counts
    #: ``--slo`` accepts an upper bound on it.
    bound: bool = True

    def of(self, call: Call) -> float | None:
        """The call's value, or None when the call does not count or has none."""
        if self.counts == "succeeded" and call.error_type is not None:
            return None
        return self.value(call)

    def values(self, calls: Iterable[Call]) -> list[float]:
        return [value for call in calls if (value := self.of(call)) is not None]

    def dist(self, calls: Iterable[Call]) -> Dist | None:
        return Dist.of(self.values(calls))


def _tokens_per_s(call: Call) -> float | None:
    return call.output_tokens / call.duration if call.output_tokens and call.duration > 0 else None


METRICS: tuple[Metric, ...] = (
    Metric(
        "ttft",
        "time to first token",
        "call start -> first generated token of any channel, reasoning included",
        "call start -> first generated token of any channel, reasoning included (the benchmark"
        " tools' consensus: guidellm, AIPerf, llmeter)",
        "`openai_latency.time_to_first_token`",
        "s",
        lambda call: call.ttft,
        "succeeded",
    ),
    Metric(
        "ttft_answer",
        "time to first answer token",
        "call start -> first answer token (= ttft when nothing is reasoned in the open)",
        "call start -> first answer token (content, tool call, refusal); equals `ttft` when nothing"
        " was reasoned in the open",
        "`openai_latency.time_to_first_answer_token`",
        "s",
        lambda call: call.ttft_answer,
        "succeeded",
    ),
    Metric(
        "reasoning",
        "thinking time",
        "thinking time: first reasoning token -> first answer token (reasoning streamed)",
        "thinking time: first reasoning token -> first answer token, for streams whose reasoning"
        " arrives (`reasoning_content`, `reasoning`, Responses reasoning text or summaries); hidden"
        " reasoning is inside `ttft`",
        "`openai_latency.reasoning.duration`",
        "s",
        lambda call: call.reasoning,
        "succeeded",
    ),
    Metric(
        "ttfc",
        "time to first chunk",
        "call start -> first chunk of any kind (a role-only chunk counts)",
        "call start -> first chunk of any kind (a role-only chunk counts)",
        "`gen_ai.response.time_to_first_chunk`",
        "s",
        lambda call: call.ttfc,
        "succeeded",
    ),
    Metric(
        "tpot",
        "time per output token",
        "a window over the tokens inside it, first token excluded: every token's when reasoning"
        " streams (completion tokens - 1), else the answer's (output - reasoning tokens - 1);"
        " server time only, never the caller's",
        "a time window over the tokens generated inside it, the first token excluded: reasoning"
        " streamed -> first to last token of any channel over completion tokens - 1; reasoning hidden"
        " or summarised -> the answer window over output - reasoning tokens - 1; no reasoning ->"
        " vLLM's definition. Server time only, never the caller's"
        " (`openai_latency.time_per_output_token.rule` on each span says which)",
        "`openai_latency.time_per_output_token`",
        "s",
        lambda call: call.tpot,
        "succeeded",
    ),
    Metric(
        "e2e",
        "end to end",
        "the whole call, retries and backoff included",
        "the whole call, retries and backoff included",
        "the operation span",
        "s",
        lambda call: call.duration,
        "every",
    ),
    Metric(
        "tokens_per_s",
        "output tokens per second",
        "output tokens / e2e, per request",
        "output tokens / e2e, per request",
        "spans",
        "tokens/s",
        _tokens_per_s,
        "succeeded",
        bound=False,
    ),
)
METRIC: dict[str, Metric] = {metric.name: metric for metric in METRICS}
#: The names ``--slo`` accepts.
SLO_METRICS: tuple[str, ...] = tuple(metric.name for metric in METRICS if metric.bound)

COUNTING_RULE = (
    "which calls count: "
    + ", ".join(metric.name for metric in METRICS if metric.counts == "succeeded")
    + " over the calls that succeeded (a stream that failed after its first token is an error, not a"
    " sample); "
    + ", ".join(metric.name for metric in METRICS if metric.counts == "every")
    + " over every call, failed ones included (the time the caller waited)"
)


def help_text(more: Iterable[tuple[str, str]] = (), width: int = 96) -> str:
    """``bench --help``'s table of the metrics (and of the ``more`` numbers: name, line), then the
    rule of which calls count."""
    lines = []
    for name, line in [*((metric.name, metric.help) for metric in METRICS), *more]:
        wrapped = textwrap.wrap(line, width - 15)
        lines.append(f"  {name:<12} {wrapped[0]}")
        lines.extend(f"{'':15}{line}" for line in wrapped[1:])
    lines.extend(textwrap.wrap(COUNTING_RULE, width, initial_indent="  ", subsequent_indent="  "))
    return "\n".join(lines)


def markdown_rows() -> list[str]:
    """docs/BENCH.md's rows of these metrics: name, definition, the calls that count, the source."""
    return [
        f"| `{metric.name}` | {metric.definition} | {COUNTS_WORDS[metric.counts]} | {metric.source} |"
        for metric in METRICS
    ]
