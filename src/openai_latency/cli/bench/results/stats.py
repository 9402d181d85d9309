"""The numbers of ``openai-latency bench``, from the spans of its calls (what ``report`` rereads).

The per-call metrics (``ttft``, ``ttft_answer``, ``reasoning``, ``ttfc``, ``tpot``, ``e2e``,
``tokens_per_s``), what they mean and which calls count, are :mod:`..stats.metric_table`'s; their
distributions are the group's (:mod:`..stats.groups`, what ``report`` prints): computed once, there.

- ``throughput``: the successful calls' output tokens of the target over the wall time from its
  first call's start to its last call's end.
- ``goodput``: the share of requests that succeeded and met every ``--slo`` bound (a bound on a
  value the request does not have, such as ttft of a non-stream call, does not count against it).
- Output tokens come from the server's ``usage``; where it was missing (``openai_latency.usage.estimated``)
  they are the content chunks the bench client received (``openai_latency.bench.output_chunks``, kept
  in the ``--out`` file), and the output says for how many requests.
- Chunk gaps: the time between two content chunks as the bench client received them, pooled over
  the target's requests at one load level (the one number that does not come from the spans), in
  bounded memory: exact up to 4,096 gaps, percentiles within 0.5 % past that (:mod:`..stats.sketch`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...spans.calls import Call
from ...stats.groups import GroupStats, group, summarize, throughput
from ...stats.metric_table import METRIC
from ...stats.percentiles import Dist
from ...stats.sketch import Sketch, sketch_dist
from ...stats.triage import Bucket, slow_limit, triage
from ..plan import Slo
from ..run.calibrate import InputCheck
from .cache import CacheSplit, split


@dataclass
class TargetStats:
    group: GroupStats
    requests: int
    errors: int
    cancelled: int
    throughput: float | None
    requests_per_s: float | None
    goodput: float | None
    goodput_requests: int
    retries: int
    backoff_s: float
    output_tokens: int
    estimated_tokens: int
    #: Successful streams without a TTFT: their first token arrived while the client was busy.
    ttft_unknown: int
    cache_hit_ttft: Dist | None
    cache_miss_ttft: Dist | None
    chunk_gaps: Dist | None
    triage: dict[str, Bucket]
    #: Hits and misses as the server reported them (:mod:`.cache`).
    cache: CacheSplit | None = None
    #: (requests whose prefix the server had seen, requests) as the workload planned them.
    cache_expected: tuple[int, int] | None = None
    #: ``--output-tokens``: (requests that got fewer output tokens than asked, requests with usage).
    short_outputs: tuple[int, int] | None = None
    #: ``--replay``: the input tokens the server reported against the recorded ones.
    input_check: InputCheck | None = None

    @property
    def ttft(self) -> Dist | None:
        return self.group.ttft

    @property
    def ttft_answer(self) -> Dist | None:
        return self.group.ttft_answer

    @property
    def reasoning(self) -> Dist | None:
        return self.group.reasoning

    @property
    def ttfc(self) -> Dist | None:
        return self.group.ttfc

    @property
    def e2e(self) -> Dist:
        return self.group.duration

    @property
    def tpot(self) -> Dist | None:
        return self.group.tpot

    @property
    def tokens_per_s(self) -> Dist | None:
        return self.group.tokens_per_s

    @property
    def label(self) -> str:
        """The target's name (a sweep prints one table per load level)."""
        return self.group.key.get("target") or self.group.label

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0


def target_stats(
    calls: Sequence[Call],
    by: Sequence[str],
    slo: Slo,
    slow_threshold: float | None = None,
    client_timeout: float | None = None,
    chunk_gaps: dict[tuple[str, str], Sketch] | None = None,
) -> list[TargetStats]:
    """One entry per group of ``by`` keys (bench: target, and load level in a sweep)."""
    cancelled: dict[tuple[str, ...], int] = {}
    finished = []
    for call in calls:
        if call.category == "cancelled":
            values = tuple(call.keys[name] for name in by)
            cancelled[values] = cancelled.get(values, 0) + 1
        else:
            finished.append(call)
    result = []
    for summary in summarize(group(finished, by), slow_threshold):
        key = summary.key
        gaps = (chunk_gaps or {}).get((key.get("target", ""), key.get("load", "")))
        result.append(_stats(summary, slo, client_timeout, gaps, cancelled.get(tuple(key.values()), 0)))
    return result


def _stats(
    group: GroupStats,
    slo: Slo,
    client_timeout: float | None,
    gaps: Sketch | None,
    cancelled: int,
) -> TargetStats:
    calls = group.group.members
    ok = [call for call in calls if call.error_type is None]
    tokens = sum(call.output_tokens or 0 for call in ok)
    start = min(call.start_ns for call in calls)
    end = max(call.end_ns for call in calls)
    wall = (end - start) / 1e9
    cached = [call for call in ok if call.ttft is not None and call.cached_tokens is not None]
    any_hit = any((call.cached_tokens or 0) > 0 for call in cached)
    good = [call for call in ok if _meets(call, slo)] if slo else []
    return TargetStats(
        group=group,
        requests=len(calls),
        errors=len(calls) - len(ok),
        cancelled=cancelled,
        throughput=throughput(calls),
        requests_per_s=len(calls) / wall if wall > 0 else None,
        goodput=len(good) / len(calls) if slo and calls else None,
        goodput_requests=len(good),
        retries=sum(len(call.retry_reasons) for call in calls),
        backoff_s=sum(call.phases.get("retry_backoff", 0.0) for call in calls),
        output_tokens=tokens,
        estimated_tokens=sum(1 for call in ok if call.usage_estimated),
        ttft_unknown=sum(1 for call in ok if call.first_token_waiting),
        cache_hit_ttft=Dist.of(c.ttft or 0.0 for c in cached if (c.cached_tokens or 0) > 0)
        if any_hit
        else None,
        cache_miss_ttft=Dist.of(c.ttft or 0.0 for c in cached if not c.cached_tokens) if any_hit else None,
        chunk_gaps=sketch_dist(gaps),
        triage=triage(calls, slow_limit(group.duration, _threshold(group)), client_timeout),
        cache=split(calls),
    )


def _threshold(group: GroupStats) -> float | None:
    return group.slow.threshold if group.slow.rule == "threshold" else None


def _meets(call: Call, slo: Slo) -> bool:
    """Every bound holds where the call has the value (a successful call: every metric counts it)."""
    for name, bound in slo.bounds.items():
        value = METRIC[name].of(call)
        if value is not None and value > bound:
            return False
    return True
