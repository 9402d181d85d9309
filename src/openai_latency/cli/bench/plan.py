"""What one ``openai-latency bench`` run is, typed: targets, the workload, the load, the SLO, and
the options of the client and of the results (:class:`BenchOptions`); :class:`Plan` adds what the
targets' reachability check found. ``options`` builds them from the command line."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal

#: The SLO bounds ``--slo`` accepts: metric name -> what it bounds.
SLO_METRICS = {
    "ttft": "time to first token (any channel, reasoning included)",
    "ttft_answer": "time to first answer token",
    "reasoning": "thinking time (first reasoning token -> first answer token)",
    "ttfc": "time to first chunk",
    "tpot": "time per output token",
    "e2e": "request duration",
}
#: The default ``--ramp-up``: 5 ms per closed-loop worker, at most 1 s. Setting up a streamed request
#: through the SDK takes the client 1-3 ms of CPU, so C workers started at one instant delay the
#: last one's TTFT by C times that (+190 ms on every request of the first round at -c 64, measured).
RAMP_PER_WORKER_S = 0.005
RAMP_MAX_S = 1.0
Format = Literal["table", "json", "markdown", "csv"]


@dataclass(frozen=True)
class Target:
    name: str
    base_url: str
    model: str
    #: The environment variable that holds the API key (the key itself is never stored here).
    api_key_env: str

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None


@dataclass(frozen=True)
class Workload:
    prompt: str
    max_tokens: int
    stream: bool
    temperature: float | None
    #: Ask for usage in the last chunk (``stream_options.include_usage``).
    stream_usage: bool
    #: ``reasoning_effort`` of every request (``--reasoning-effort``), None: not sent.
    reasoning_effort: str | None = None
    #: Merged into every request's JSON body (``--extra-body``: the SDK's ``extra_body``).
    extra_body: dict[str, Any] | None = None

    def create_kwargs(self, model: str) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": self.prompt}],
            "max_tokens": self.max_tokens,
        }
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.stream:
            kwargs["stream"] = True
            if self.stream_usage:
                kwargs["stream_options"] = {"include_usage": True}
        if self.reasoning_effort is not None:
            kwargs["reasoning_effort"] = self.reasoning_effort
        if self.extra_body:
            kwargs["extra_body"] = dict(self.extra_body)
        return kwargs


@dataclass(frozen=True)
class Load:
    """One load level: a closed loop of ``concurrency`` workers, or arrivals at ``rate`` per target."""

    concurrency: int
    rate: float | None = None
    poisson: bool = False

    def ramp(self, ramp_up: float | None) -> float:
        """Seconds over which the closed loop starts its workers (``--ramp-up``; open loop: 0)."""
        if self.rate is not None:
            return 0.0
        if ramp_up is not None:
            return ramp_up
        return min(RAMP_PER_WORKER_S * self.concurrency, RAMP_MAX_S)

    @property
    def label(self) -> str:
        if self.rate is None:
            return f"c={self.concurrency}"
        kind = "poisson" if self.poisson else "rate"
        return f"{kind}={self.rate:g}/s c<={self.concurrency}"


@dataclass(frozen=True)
class Slo:
    bounds: dict[str, float] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.bounds)

    @property
    def text(self) -> str:
        return ",".join(f"{name}={seconds * 1000:g}ms" for name, seconds in self.bounds.items())


@dataclass(frozen=True)
class Schedule:
    """How much load, in what order: the load levels, each ``requests`` per target or ``duration`` s."""

    levels: list[Load]
    #: Requests per target and level; None: run each level for ``duration`` seconds.
    requests: int | None
    duration: float | None
    #: Requests per target before the first level, not measured.
    warmup: int = 0
    #: ``--ramp-up`` (None: :meth:`Load.ramp`'s default).
    ramp_up: float | None = None
    #: One target after another instead of interleaved request by request.
    sequential: bool = False
    seed: int = 0
    #: Client processes sharing the load (``--workers``).
    workers: int = 1


@dataclass(frozen=True)
class BenchOptions:
    """Everything the command line of one bench run says, parsed and checked."""

    targets: list[Target]
    workload: Workload
    schedule: Schedule
    slo: Slo
    #: The client's timeout (s) and retries (the SDK's ``timeout`` and ``max_retries``).
    timeout: float = 60.0
    max_retries: int = 2
    #: Triage: slow successes take at least this long (None: the target's p95).
    slow_threshold: float | None = None
    format: Format = "table"
    #: Where every span goes as OTLP JSON lines (None: nowhere).
    out: str | None = None
    progress: bool = True


@dataclass(frozen=True)
class Plan:
    """One bench run: its options, the targets that run, and those left out."""

    options: BenchOptions
    #: The reachable targets, in the order given.
    targets: list[Target]
    #: Targets left out because they refused connections, with the reason.
    unreachable: dict[Target, str]
