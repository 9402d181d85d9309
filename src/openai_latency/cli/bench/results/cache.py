"""Did the prompt cache hit? What the servers reported, against what the workload should get.

A call is a hit when its server reported cached input tokens (``gen_ai.usage.cache_read.input_tokens``
> 0: OpenAI's and vLLM's ``cached_tokens``, DeepSeek's ``prompt_cache_hit_tokens``), a miss when it
reported 0, and unknown when it reported no cache field at all: vLLM only reports one when started
with ``--enable-prompt-tokens-details``. TTFT and the phases where prefill happens are split by hit
and miss: a server that prefills before it sends the response headers shows the saving in
``http.server_wait``, one that sends the headers at once in ``first_token``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ...spans.calls import Call
from ...stats.percentiles import Dist, dist_dict

#: Where prefill shows: (name in the output, phase dictionary of the call, phase).
PREFILL_PHASES = (("http.server_wait", "http", "server_wait"), ("first_token", "phases", "first_token"))
WARNING = (
    "the server reports no prompt-cache field: hits cannot be verified; for vLLM start it with"
    " --enable-prompt-tokens-details"
)


@dataclass
class CacheSplit:
    """One target's successful calls at one load level, by what the server said of its cache."""

    hits: int
    misses: int
    unknown: int
    ttft_hit: Dist | None
    ttft_miss: Dist | None
    #: Per prefill phase: (p50 over hits, p50 over misses) in seconds, None where there were none.
    phases: dict[str, tuple[float | None, float | None]]

    @property
    def reported(self) -> int:
        return self.hits + self.misses


def split(calls: Iterable[Call]) -> CacheSplit:
    hit: list[Call] = []
    miss: list[Call] = []
    unknown = 0
    for call in calls:
        if call.error_type is not None:
            continue
        if call.cached_tokens is None:
            unknown += 1
        elif call.cached_tokens > 0:
            hit.append(call)
        else:
            miss.append(call)
    phases = {}
    for name, attribute, phase in PREFILL_PHASES:
        values = [_p50(getattr(c, attribute).get(phase) for c in group) for group in (hit, miss)]
        if any(v is not None for v in values):
            phases[name] = (values[0], values[1])
    return CacheSplit(
        hits=len(hit),
        misses=len(miss),
        unknown=unknown,
        ttft_hit=Dist.of(c.ttft for c in hit if c.ttft is not None),
        ttft_miss=Dist.of(c.ttft for c in miss if c.ttft is not None),
        phases=phases,
    )


def _p50(values: Iterable[float | None]) -> float | None:
    dist = Dist.of(v for v in values if v is not None)
    return dist.p50 if dist else None


def unverified(splits: Iterable[tuple[str, CacheSplit]]) -> list[str]:
    """The targets whose server reported no cache field on any successful call, in order."""
    reported: dict[str, bool] = {}
    for name, s in splits:
        if s.unknown or s.reported:
            reported[name] = reported.get(name, False) or bool(s.reported)
    return [name for name, seen in reported.items() if not seen]


def warning(targets: Sequence[str]) -> str:
    """The one warning of a run whose cache hits some server cannot show."""
    return f"openai-latency bench: warning: {', '.join(targets)}: {WARNING}"


def expectation_note(label: str, s: CacheSplit, expected: tuple[int, int] | None, policy: str) -> str | None:
    """A sentence when the reported hits differ from what the workload's prefixes allow."""
    if expected is None or not s.reported:
        return None
    should, sent = expected
    if sent == 0:
        return None
    share = should / sent
    reported = s.hits / s.reported
    if abs(reported - share) < 0.5 / sent + 1e-9:
        return None
    return (
        f"{label}: prompt cache: the server reported {s.hits} hits in {s.reported} requests, the"
        f" workload ({policy}) allows {should} of {sent}"
        + (
            ": the prompts share prefixes the bench did not plan (a shared system prompt?)"
            if reported > share
            else ": its prefix cache is off, too small, or caches only long prompts (OpenAI: 1,024 tokens)"
        )
    )


def as_dict(s: CacheSplit, expected: tuple[int, int] | None) -> dict[str, Any]:
    return {
        "hits": s.hits,
        "misses": s.misses,
        "unreported": s.unknown,
        "hit_ratio": s.hits / s.reported if s.reported else None,
        "expected_hits": expected[0] if expected else None,
        "expected_of": expected[1] if expected else None,
        "ttft_hit": dist_dict(s.ttft_hit),
        "ttft_miss": dist_dict(s.ttft_miss),
        "prefill_phases_p50": {name: {"hit": h, "miss": m} for name, (h, m) in s.phases.items()},
    }
