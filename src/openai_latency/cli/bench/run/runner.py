"""The load generator of ``openai-latency bench``: real ``AsyncOpenAI`` calls on one shared schedule.

Every request runs through the instrumented SDK; what it measured is in its spans, which
:class:`Recorder` keeps (tagged with the target and the load level). The bench loop itself only
notes the arrival time of each content chunk, for the inter-chunk gap distribution.

- Closed loop: ``concurrency`` workers take the next request from one shared schedule, so exactly
  that many requests are in flight.
- Open loop: arrivals at ``rate`` per target (constant spacing, or exponential gaps with
  ``poisson``), at most ``concurrency`` in flight; each start against its due time (:mod:`.arrivals`).
- Targets are interleaved request by request (round-robin on the shared schedule) unless
  ``sequential``: then each target runs the whole load on its own, one after another.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...stats.sketch import Sketch
from ..plan import WARMUP, LevelKey, Load, Target, Workload
from ..workload import Conversation, Message, RequestSource, next_turn
from . import ws_pool
from .api import send
from .arrivals import Arrivals
from .calibrate import Calibration, InputCheck, calibrate, prober, replayed
from .loops import closed_loop, groups, open_loop, schedule, share
from .record import TAG, Recorder, Tag, TargetProgress, freeze_survivors, frozen_heap, tags
from .replay import replay_loop
from .sweep import Sweep


@dataclass
class RunState:
    """Shared by the runner and the progress display."""

    planned: dict[str, int]
    #: Gaps between content chunks as the client received them, per (target, level): bounded
    #: memory however long the run (exact up to 4,096 gaps, then within 0.5 %: :mod:`..stats.sketch`).
    #: Every per-level record is keyed by the typed (load, turn) :class:`..plan.LevelKey`.
    chunk_gaps: dict[tuple[str, LevelKey], Sketch]
    #: Per load level (its label, :attr:`LevelKey.load`) of an arrival schedule (open loop,
    #: ``--replay``): when the arrivals started against when they were due.
    arrivals: dict[str, Arrivals] = field(default_factory=dict)
    interrupted: bool = False
    #: How late the event loop woke a 50 ms sleep, sampled all through the run (seconds). A client
    #: whose loop is late delays every chunk it reads: its TTFT is partly its own.
    loop_lag: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    #: ``--workers`` processes that ended without reporting (their requests are missing).
    failed_workers: int = 0
    #: Per (target, level): [requests whose prompt prefix the server has seen, requests].
    cache_expected: dict[tuple[str, LevelKey], list[int]] = field(default_factory=dict)
    #: ``--output-tokens``, per (target, level): [requests with fewer output tokens than asked,
    #: requests whose server reported its output tokens].
    short_outputs: dict[tuple[str, LevelKey], list[int]] = field(default_factory=dict)
    #: ``--replay``, per (target, level): the input tokens reported against the recorded ones.
    input_checks: dict[tuple[str, LevelKey], InputCheck] = field(default_factory=dict)
    #: Requests (conversations) in flight now.
    in_flight: int = 0
    #: The load level running now (its label), and per load level (:attr:`LevelKey.load`: the turns
    #: of a conversation run together) the client's CPU time and event-loop lag samples.
    level: str = ""
    level_cpu: dict[str, float] = field(default_factory=dict)
    level_lag: dict[str, list[float]] = field(default_factory=dict)
    #: ``--sweep``: what it found (None: no sweep).
    sweep: Sweep | None = None
    #: The progress display's first line: the number of the level running (1-based of ``levels``;
    #: 0: not known, as in a --sweep), and when the run and the level started (``time.monotonic``).
    level_number: int = 0
    levels: int = 0
    started: float = field(default_factory=time.monotonic)
    level_started: float = 0.0

    def enter_level(self, label: str, number: int, levels: int) -> None:
        self.level, self.level_number, self.levels = label, number, levels
        self.level_started = time.monotonic()


def progress_lines(
    targets: Sequence[Target], progress: Mapping[str, TargetProgress], state: RunState
) -> list[str]:
    lines = []
    if state.level:
        now = time.monotonic()
        number = f" ({state.level_number} of {state.levels})" if state.levels else ""
        lines.append(
            f"level {state.level}{number}: {now - state.level_started:.1f} s in it,"
            f" {now - state.started:.1f} s elapsed"
        )
    for target in targets:
        p = progress.get(target.name)
        done, errors = (p.done, p.errors) if p else (0, 0)
        total = state.planned.get(target.name) or "?"
        ttft = p.rolling_ttft_p50() if p else None
        ttft_text = "-" if ttft is None else f"{ttft * 1000:.0f} ms"
        lines.append(f"{target.name}: {done}/{total} done, {errors} errors, rolling p50 ttft {ttft_text}")
    return lines


LAG_INTERVAL = 0.05
#: Above this p95 event-loop lag the results say that the client was a bottleneck.
LAG_WARNING_S = 0.010


async def watch_loop_lag(state: RunState) -> None:
    while True:
        start = time.perf_counter()
        await asyncio.sleep(LAG_INTERVAL)
        lag = max(0.0, time.perf_counter() - start - LAG_INTERVAL)
        state.loop_lag.append(lag)
        if state.level:
            state.level_lag.setdefault(state.level, []).append(lag)


#: The service name of bench's spans.
SERVICE = "openai-latency-bench"
TICK_S = 0.25


@contextlib.contextmanager
def instrumented(spill_path: str | None = None) -> Iterator[Recorder]:
    """The instrumentation on, with every span kept by a :class:`Recorder` (no metrics); a long run's
    spans spilled to ``spill_path`` between levels."""
    from opentelemetry.metrics import NoOpMeterProvider
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    from .... import OpenAILatencyInstrumentor

    recorder = Recorder(spill_path)
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(recorder)
    instrumentor = OpenAILatencyInstrumentor()
    instrumentor.instrument(
        tracer_provider=provider, meter_provider=NoOpMeterProvider(), phase_spans="detailed"
    )
    try:
        yield recorder
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


async def supervise(runner: Runner, work: Callable[[], Awaitable[None]], tick: Callable[[], None]) -> bool:
    """Run ``work`` (warm-up and load levels) with the event-loop lag sampled, the CPU time counted and
    ``tick`` called a few times a second; True when interrupted: Ctrl-C cancels what is in flight."""
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    interrupted = False

    def on_interrupt() -> None:
        nonlocal interrupted
        if not interrupted:  # a second SIGINT (the terminal's and a --workers parent's) changes nothing
            interrupted = True
            main.cancel()

    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, on_interrupt)
    ticker = asyncio.ensure_future(_tick(tick))
    lag = asyncio.ensure_future(watch_loop_lag(runner.state))
    cpu = time.process_time()
    try:
        with frozen_heap():
            await work()
    except asyncio.CancelledError:
        if not interrupted:
            raise
    finally:
        ticker.cancel()
        lag.cancel()
        runner.state.cpu_s += time.process_time() - cpu
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
        with contextlib.suppress(Exception):
            await ws_pool.close_all()  # --api responses-ws
        for client in runner.clients:
            with contextlib.suppress(Exception):
                await client.close()
    return interrupted


async def _tick(tick: Callable[[], None]) -> None:
    while True:
        tick()
        freeze_survivors()
        await asyncio.sleep(TICK_S)


class Runner:
    def __init__(
        self,
        targets: Sequence[Target],
        clients: Sequence[Any],
        workload: Workload,
        state: RunState,
        seed: int = 0,
    ) -> None:
        self.targets = targets
        self.seed = seed
        self.clients = clients
        self.workload = workload
        self.state = state
        items = workload.items()
        # headers are random per run (not from --seed): a rerun must not hit the previous run's cache
        self._sources = [RequestSource(items, workload.prefix, None) for _ in targets]
        self._calibrations = [Calibration() for _ in targets]  # --replay's, per target
        self._attributes: dict[tuple[int, LevelKey, bool], dict[str, str | bool]] = {}
        self._lengths = random.Random(seed)  # --output-tokens draws

    async def request(self, index: int, load: str, warmup: bool = False, item: int | None = None) -> None:
        """One request slot: a conversation (one call per turn; a priming call first in warm mode).
        A call's failure is the endpoint's answer, recorded in its span; it ends the conversation."""
        self.state.in_flight += 1
        try:
            await self._conversation(index, load, warmup, item)
        finally:
            self.state.in_flight -= 1

    async def _conversation(self, index: int, load: str, warmup: bool, item: int | None) -> None:
        target = self.targets[index]
        conversation, turns = self._sources[index].next(item)
        if turns[0].priming:
            await self._tagged(index, WARMUP, True, turns.pop(0).messages, conversation)
        first = turns[0]
        messages, expected = first.messages, first.expected_hit
        rounds = self.workload.turns
        for turn in range(1, rounds + 1):
            key = LevelKey(load, None if rounds == 1 or warmup else turn)
            if not warmup:
                counts = self.state.cache_expected.setdefault((target.name, key), [0, 0])
                counts[0] += expected
                counts[1] += 1
            answer = await self._tagged(index, key, warmup, messages, conversation)
            if answer is None or turn == rounds:
                return
            messages = next_turn(conversation, messages, answer, turn + 1)
            expected = True  # the previous turn's prompt is this one's prefix

    async def _tagged(
        self, index: int, level: LevelKey, warmup: bool, messages: list[Message], conversation: Conversation
    ) -> str | None:
        """One call with its spans tagged; the answer's text (conversations only), None when it failed."""
        key = (index, level, warmup)
        attributes = self._attributes.get(key)
        if attributes is None:
            attributes = self._attributes[key] = tags(self.targets[index].name, level, warmup)
        tag = Tag(self.targets[index].name, level, warmup, attributes)
        token = TAG.set(tag)
        try:
            return await self._call(index, tag, messages, conversation)
        except asyncio.CancelledError:
            raise
        except Exception:  # the SDK's own exception: the span has it (error.type, category)
            return None
        finally:
            TAG.reset(token)

    async def _call(self, index: int, tag: Tag, messages: list[Message], conversation: Conversation) -> str:
        """One request; a stream's content chunks are counted in ``tag``, their gaps kept (not warm-up).
        Returns the answer's text when the workload is a conversation (else "")."""
        workload = self.workload
        lengths = workload.output_tokens
        asked = conversation.max_tokens if lengths is None else lengths.draw(self._lengths)
        kwargs = workload.create_kwargs(self.targets[index].model, messages, asked, conversation.stream)
        gaps = None if tag.warmup else self.state.chunk_gaps.get((tag.target, tag.level))
        if gaps is None and not tag.warmup:
            gaps = self.state.chunk_gaps[(tag.target, tag.level)] = Sketch()
        text, tokens, inputs = await send(
            self.clients[index], workload.api, kwargs, tag, gaps, workload.turns > 1
        )
        if asked is not None and not tag.warmup:
            counts = self.state.short_outputs.setdefault((tag.target, tag.level), [0, 0])
            counts[0] += tokens is not None and tokens < asked
            counts[1] += tokens is not None
        if conversation.input_tokens is not None and not tag.warmup:
            check = self.state.input_checks.setdefault(
                (tag.target, tag.level), InputCheck(self._calibrations[index])
            )
            check.add(conversation.input_tokens, inputs)
        return text

    async def replay(self, load: Load, part: int = 0, parts: int = 1, origin: float | None = None) -> None:
        """``--replay``: every recorded arrival, at ``load.replay_speed``, to every target (worker
        ``part`` of ``parts``: its turns, from ``origin``); :meth:`prepare_replay` first."""
        assert load.replay_speed is not None

        def send(i: int, item: int) -> Awaitable[None]:
            return self.request(i, load.label, item=item)

        offsets, speed = self.workload.replay_offsets, load.replay_speed
        with self.level(load.label):
            arrivals = await replay_loop(offsets, len(self.targets), speed, send, part, parts, origin)
            self.state.arrivals.setdefault(load.label, Arrivals()).merge(arrivals)

    async def prepare_replay(self) -> None:
        """Before the first arrival: the calibrated prompts and one warm-up call of each kind."""
        items = self.workload.items()
        # Per target, the prompts of the recorded input lengths, calibrated on its tokenizer (probes)
        for i, target in enumerate(self.targets):
            probe = prober(self.clients[i], self.workload, target.model, target.name)
            self._calibrations[i] = await calibrate(probe)
            self._sources[i] = RequestSource(
                replayed(items, self._calibrations[i]), self.workload.prefix, None
            )
        # Then, per target, one call of each kind the recording has (stream or not), not measured:
        # a recorded arrival must not pay for a connection or the SDK's first call of its kind
        # (its lazy imports and response models: tens of ms, measured).
        firsts = {bool(c.stream): number for number, c in reversed(list(enumerate(items)))}
        for item in sorted(firsts.values()):
            await asyncio.gather(*(self.request(i, "warmup", True, item) for i in range(len(self.targets))))

    async def warmup(self, requests: int, concurrency: int, ramp: float = 0.0) -> None:
        order = iter([index for _ in range(requests) for index in range(len(self.targets))])

        def send(i: int) -> Awaitable[None]:
            return self.request(i, "warmup", warmup=True)

        await closed_loop(order, concurrency, send, None, every=ramp / concurrency)

    async def run(
        self, load: Load, requests: int | None, seconds: float | None, sequential: bool, ramp: float = 0.0
    ) -> None:
        with self.level(load.label):
            for indices in groups(len(self.targets), sequential):
                await self.run_group(indices, load, requests, seconds, ramp)

    @contextlib.contextmanager
    def level(self, label: str) -> Iterator[None]:
        """The client's own cost while one load level runs: CPU time and event-loop lag, per level."""
        state = self.state
        if state.level != label:  # not announced by enter_level (a --sweep's levels)
            state.level_started = time.monotonic()
        state.level = label
        cpu = time.process_time()
        try:
            yield
        finally:
            state.level_cpu[label] = state.level_cpu.get(label, 0.0) + time.process_time() - cpu
            state.level = ""

    async def run_group(
        self,
        indices: Sequence[int],
        load: Load,
        requests: int | None,
        seconds: float | None,
        ramp: float = 0.0,
        part: int = 0,
        parts: int = 1,
        origin: float | None = None,
    ) -> None:
        """One load level for these targets, from ``origin`` (``time.monotonic()``; default now). In a
        ``--workers`` run this process is worker ``part`` of ``parts``: it takes its share of the
        concurrency (or of the rate), and its place in the ramp (or in the arrival spacing) from the
        origin all workers share, so that together they make the load of one."""
        origin = time.monotonic() if origin is None else origin
        deadline = None if seconds is None else origin + seconds
        order = schedule(indices, requests)

        def send(i: int) -> Awaitable[None]:
            return self.request(i, load.label)

        if load.rate is None:
            spacing = ramp / load.concurrency  # between the starts of two workers, over all processes
            concurrency = share(load.concurrency, parts, part)
            first, every = part * spacing, parts * spacing
            await closed_loop(order, concurrency, send, deadline, first, every, origin)
        else:
            rate = load.rate * len(indices)
            rng = random.Random(self.seed + part)
            offset = 0.0 if load.poisson else part / rate  # constant spacing: the workers take turns
            cap = share(load.concurrency, parts, part)
            shape = (rate / parts, load.poisson, rng, cap)
            arrivals = await open_loop(order, *shape, send, deadline, offset, origin)
            self.state.arrivals.setdefault(load.label, Arrivals()).merge(arrivals)
