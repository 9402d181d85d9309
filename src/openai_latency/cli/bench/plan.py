"""What one ``openai-latency bench`` run is, typed: targets, the workload, the load, the SLO, and
the options of the client and of the results (:class:`BenchOptions`); :class:`Plan` adds what the
targets' reachability check found. ``options`` builds them from the command line."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from .lengths import Lengths
from .workload import Api, Conversation, Message, PrefixPolicy, responses_tools, text_of

#: How bench's SDK client builds response models (:mod:`.run.clients`).
SdkParse = Literal["validate", "construct"]

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
    #: ``reasoning_effort`` of every request (``--reasoning-effort``; Responses: ``reasoning.effort``).
    reasoning_effort: str | None = None
    api: Api = "chat"
    #: ``--prefix-cache`` (default cold: a unique first line per request).
    prefix: PrefixPolicy = field(default_factory=PrefixPolicy)
    #: ``--tools``: tool definitions in the chat shape (converted for the Responses API).
    tools: tuple[dict[str, Any], ...] = ()
    #: ``--dataset``: the conversations to send, in order, cycled (empty: ``prompt``).
    conversations: tuple[Conversation, ...] = ()
    #: ``--turns``: requests per conversation.
    turns: int = 1
    #: ``--replay``: each recorded call's seconds after the first (its conversation is the same item).
    replay_offsets: tuple[float, ...] = ()
    #: ``--output-tokens``: each request's max_tokens drawn from it (None: ``max_tokens``).
    output_tokens: Lengths | None = None
    #: Fields every request's body gets besides the API's (``extra_body``: the ignore-EOS hint). A
    #: user's ``--extra-body`` is merged over it, key by key: the user's value wins.
    extra_body: dict[str, Any] = field(default_factory=dict)

    def items(self) -> tuple[Conversation, ...]:
        return self.conversations or (Conversation(({"role": "user", "content": self.prompt},)),)

    def create_kwargs(
        self, model: str, messages: list[Message], max_tokens: int | None = None, stream: bool | None = None
    ) -> dict[str, Any]:
        """The SDK call's keyword arguments for these messages (``api``'s resource's ``create``)."""
        kwargs: dict[str, Any] = {"model": model}
        limit = max_tokens or self.max_tokens
        responses = self.api in ("responses", "responses-ws")
        if responses:
            kwargs["input"] = messages
            kwargs["max_output_tokens"] = limit
        else:
            if self.api == "chat":
                kwargs["messages"] = messages
            else:
                kwargs["prompt"] = text_of(messages)
            kwargs["max_tokens"] = limit
        if self.extra_body:
            kwargs["extra_body"] = dict(self.extra_body)
        if self.tools:
            kwargs["tools"] = responses_tools(self.tools) if responses else list(self.tools)
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.stream if stream is None else stream:
            kwargs["stream"] = True
            if self.stream_usage and not responses:  # Responses: usage is in the last event
                kwargs["stream_options"] = {"include_usage": True}
        if self.reasoning_effort is not None and self.api != "completions":
            if responses:
                kwargs["reasoning"] = {"effort": self.reasoning_effort}
            else:
                kwargs["reasoning_effort"] = self.reasoning_effort
        return kwargs


@dataclass(frozen=True)
class Load:
    """One load level: a closed loop of ``concurrency`` workers, or arrivals at ``rate`` per target."""

    concurrency: int
    rate: float | None = None
    poisson: bool = False
    #: ``--replay``: the recorded arrivals at this speed (``--replay-speed``) instead of a loop.
    replay_speed: float | None = None

    def ramp(self, ramp_up: float | None) -> float:
        """Seconds over which the closed loop starts its workers (``--ramp-up``; open loop: 0)."""
        if self.rate is not None or self.replay_speed is not None:
            return 0.0
        if ramp_up is not None:
            return ramp_up
        return min(RAMP_PER_WORKER_S * self.concurrency, RAMP_MAX_S)

    @property
    def label(self) -> str:
        if self.replay_speed is not None:
            return f"replay x{self.replay_speed:g}"
        if self.rate is None:
            return f"c={self.concurrency}"
        kind = "poisson" if self.poisson else "rate"
        return f"{kind}={self.rate:g}/s c<={self.concurrency}"


class LevelKey(NamedTuple):
    """What bench's results are keyed by: a load level (:attr:`Load.label`) and, in a ``--turns K``
    run, the conversation's turn (1-based; None: one turn). The spans keep its :attr:`label`
    (``"c=4 turn 2"``, the ``load`` attribute ``report --by load`` groups by); :meth:`of` reads it
    back, once, where the spans become numbers."""

    load: str
    turn: int | None = None

    @property
    def label(self) -> str:
        return self.load if self.turn is None else f"{self.load}{TURN}{self.turn}"

    @classmethod
    def of(cls, label: str) -> LevelKey:
        load, sep, turn = label.rpartition(TURN)
        return cls(load, int(turn)) if sep and turn.isdigit() else cls(label)


TURN = " turn "
#: The key of the warm-up's requests (their spans are dropped).
WARMUP = LevelKey("warmup")


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
    #: ``--sweep N``: the search for the highest throughput, then N rate levels (None: ``levels``).
    sweep: int | None = None
    stop_over_saturated: bool = False


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
    #: How the SDK builds response models (:mod:`.run.clients`): pydantic's validator, or its default.
    sdk_parse: SdkParse = "validate"
    #: Triage: slow successes take at least this long (None: the target's p95).
    slow_threshold: float | None = None
    format: Format = "table"
    #: ``--header K=V``: sent with every request (never printed or recorded).
    headers: dict[str, str] = field(default_factory=dict)
    #: Where every span goes as OTLP JSON lines (None: nowhere).
    out: str | None = None
    progress: bool = True
    #: The target the verdict compares the others with (None: the first target).
    baseline: str | None = None
    #: Where the charts go as one HTML page (None: nowhere).
    html: str | None = None


@dataclass(frozen=True)
class Plan:
    """One bench run: its options, the targets that run, and those left out."""

    options: BenchOptions
    #: The reachable targets, in the order given.
    targets: list[Target]
    #: Targets left out because they refused connections, with the reason.
    unreachable: dict[Target, str]
