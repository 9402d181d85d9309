"""``bench --workers N``: the load split over N client processes, so that the client is not the bottleneck.

One Python process parses every chunk of every stream it reads (the ``openai`` SDK builds a model per
chunk: most of the client's CPU time), so one core drives only so many streams at once before its own
delay shows in TTFT. With ``--workers N`` each load level (and, with ``--sequential``, each target)
runs in N fresh processes at once, each with its own event loop and connection pool:

- closed loop: worker k runs its share of the C workers (C split as evenly as whole numbers allow),
  and their starts interleave over the ramp as C workers of one process would;
- open loop: worker k sends at R/N with constant spacing shifted by k/R (the workers take turns), or
  its own Poisson stream of rate R/N (seed + k): together the same arrival process at R;
- each worker takes its share of ``-n`` per target (or runs ``--duration``) on its own round-robin
  schedule over the targets, and its share of ``--warmup`` before the first level;
- ``--replay``: every worker calibrates the targets and sends its warm-up calls, then worker k sends
  the recorded arrivals k, k + N, k + 2N, ... (the workers take turns from the shared start).
  ``--sweep`` stays in one process (:data:`.sweep.SWEEP_WORKERS` says why).

The workers of a level start together: once all are set up (and warmed up), the parent gives them one
start time on the monotonic clock they share. Each writes its spans to a file
(OTLP JSON lines) and sends back what is not in them (chunk gaps, event-loop lag, CPU time, late
arrivals); the parent reads the files like ``report`` does, so a ``--workers`` run gives the same
kind of numbers, and appends them to ``--out``. Ctrl-C reaches every worker (forwarded by the
parent): each cancels what is in flight and reports what finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from types import FrameType
from typing import Any, TextIO

from ...render.terminal import Progress
from ...spans.write import write_otlp_json
from ...stats.sketch import Sketch
from ..plan import LevelKey, Load, Plan, SdkParse, Target, Workload
from .arrivals import Arrivals
from .calibrate import InputCheck
from .clients import clients_for
from .loops import groups, share
from .record import TargetProgress
from .runner import Runner, RunState, instrumented, progress_lines, supervise

#: From "every worker is ready" to their common start: enough for each to see the go.
START_MARGIN_S = 0.05


@dataclass(frozen=True)
class Job:
    """What worker ``part`` of ``parts`` runs: one load level for some targets, its share of it."""

    part: int
    parts: int
    targets: list[Target]
    workload: Workload
    indices: list[int]
    load: Load
    requests: int | None
    seconds: float | None
    ramp: float
    warmup: int
    warmup_ramp: float
    seed: int
    timeout: float
    max_retries: int
    spans_file: str
    headers: dict[str, str] = field(default_factory=dict)
    sdk_parse: SdkParse = "validate"


def run_in_workers(plan: Plan, state: RunState, folder: str, err: TextIO) -> list[str]:
    """Every load level in ``--workers`` processes; their span files (the numbers ``state`` gets).
    What goes wrong with a worker is said on ``err``."""
    options, schedule = plan.options, plan.options.schedule
    requests = schedule.requests
    context = multiprocessing.get_context(
        "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    )
    files: list[str] = []
    finished: dict[str, TargetProgress] = {}  # of the levels already done
    live: dict[int, dict[str, Any]] = {}  # worker -> its latest progress snapshot
    processes: list[Any] = []

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        state.interrupted = True
        for process in processes:
            if process.is_alive() and process.pid:
                os.kill(process.pid, signal.SIGINT)

    def lines() -> list[str]:
        return progress_lines(plan.targets, _merged(finished, live.values()), state)

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        with Progress(lines, options.progress, err) as progress:
            for number, (load, indices) in enumerate(_cells(plan)):
                if state.interrupted:
                    break
                levels = plan.options.schedule.levels
                state.enter_level(load.label, levels.index(load) + 1, len(levels))
                parts = schedule.workers if load.replay_speed else min(schedule.workers, load.concurrency)
                jobs = [
                    Job(
                        part=part,
                        parts=parts,
                        targets=plan.targets,
                        workload=options.workload,
                        indices=indices,
                        load=load,
                        requests=None if requests is None else share(requests, parts, part),
                        seconds=schedule.duration,
                        ramp=load.ramp(schedule.ramp_up),
                        warmup=share(schedule.warmup, parts, part) if number == 0 else 0,
                        warmup_ramp=load.ramp(schedule.ramp_up),
                        seed=schedule.seed,
                        timeout=options.timeout,
                        max_retries=options.max_retries,
                        headers=options.headers,
                        sdk_parse=options.sdk_parse,
                        spans_file=os.path.join(folder, f"level{number}-worker{part}.jsonl"),
                    )
                    for part in range(parts)
                ]
                live.clear()
                processes[:] = []
                results = _run_level(context, jobs, processes, live, progress.update, err)
                finished = _merged(finished, live.values())
                for job, result in zip(jobs, results, strict=True):
                    if result is None:
                        state.failed_workers += 1
                        continue
                    _add(state, result)
                    files.append(job.spans_file)
    finally:
        signal.signal(signal.SIGINT, previous)
    return [f for f in files if os.path.exists(f)]


def _cells(plan: Plan) -> list[tuple[Load, list[int]]]:
    """(load level, targets) in the order they run."""
    return [
        (load, indices)
        for load in plan.options.schedule.levels
        for indices in groups(len(plan.targets), plan.options.schedule.sequential)
    ]


def _run_level(
    context: Any,
    jobs: list[Job],
    processes: list[Any],
    live: dict[int, dict[str, Any]],
    redraw: Callable[[], None],
    err: TextIO,
) -> list[dict[str, Any] | None]:
    """Start the level's workers and, once all are set up (and warmed up), give them one start time;
    show their progress until they are done; each one's result (None: it failed)."""
    go, origin = context.Event(), context.Value("d", 0.0)
    connections: dict[Connection, int] = {}
    for job in jobs:
        mine, theirs = context.Pipe(duplex=False)
        process = context.Process(target=work, args=(job, theirs, go, origin), daemon=True)
        process.start()
        theirs.close()
        processes.append(process)
        connections[mine] = job.part
    results: list[dict[str, Any] | None] = [None] * len(jobs)
    getting_ready = {job.part for job in jobs}
    while connections:
        for ready in wait(list(connections), timeout=0.25):
            assert isinstance(ready, Connection)
            part = connections[ready]
            try:
                kind, payload = ready.recv()
            except (EOFError, OSError):  # the worker is gone
                del connections[ready]
                getting_ready.discard(part)
                continue
            if kind == "progress":
                live[part] = payload
            elif kind == "ready":
                getting_ready.discard(part)
            elif kind == "result":
                results[part] = payload
            else:
                getting_ready.discard(part)
                print(f"openai-latency bench: worker {part} failed: {payload}", file=err)
        if not getting_ready and not go.is_set():
            origin.value = time.monotonic() + START_MARGIN_S  # the same clock in every process
            go.set()
        redraw()
    for process, result in zip(processes, results, strict=True):
        process.join()
        if result is None and process.exitcode not in (0, None):
            print(
                f"openai-latency bench: worker pid {process.pid} exited with status {process.exitcode}"
                " before reporting: its requests are missing from the results",
                file=err,
            )
    return results


def work(job: Job, connection: Connection, go: Any, origin: Any) -> None:
    """A worker process: its share of one level, its spans to ``job.spans_file``, the rest sent back."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # not the parent's (inherited by fork)
    try:
        _work(job, connection, go, origin)
    except KeyboardInterrupt:  # before the run began: nothing to report but the interruption
        with contextlib.suppress(OSError):
            connection.send(("result", {"interrupted": True}))
    except Exception as exc:  # a bug of ours: the parent says so
        with contextlib.suppress(OSError):
            connection.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        connection.close()


def _work(job: Job, connection: Connection, go: Any, origin: Any) -> None:
    state = RunState(planned={}, chunk_gaps={})
    with instrumented() as recorder:
        clients = clients_for(job.targets, job.timeout, job.max_retries, job.headers, job.sdk_parse)
        runner = Runner(job.targets, clients, job.workload, state, seed=job.seed)
        load = job.load

        async def level() -> None:
            part, parts = job.part, job.parts
            if job.warmup:
                closed = load.rate is None and load.replay_speed is None
                concurrency = share(load.concurrency, parts, part) if closed else 1
                ramp = job.warmup_ramp * concurrency / load.concurrency  # the same spacing as one process
                await runner.warmup(job.warmup, concurrency, ramp)
            if load.replay_speed is not None:
                await runner.prepare_replay()
            connection.send(("ready", None))
            while not go.is_set():  # the others' setup and warm-up
                await asyncio.sleep(0.005)
            if load.replay_speed is not None:
                await runner.replay(load, part, parts, origin.value)
                return
            await runner.run_group(
                job.indices, load, job.requests, job.seconds, job.ramp, part, parts, origin.value
            )

        def tick() -> None:
            connection.send(("progress", _snapshot(recorder.progress)))

        state.interrupted = asyncio.run(_with_final_tick(supervise(runner, level, tick), tick))
    write_otlp_json(job.spans_file, recorder.spans)
    connection.send(
        (
            "result",
            {
                "interrupted": state.interrupted,
                "chunk_gaps": state.chunk_gaps,
                "loop_lag": state.loop_lag,
                "cpu_s": state.cpu_s,
                "arrivals": state.arrivals,
                "cache_expected": list(state.cache_expected.items()),
                "short_outputs": list(state.short_outputs.items()),
                "input_checks": state.input_checks,
            },
        )
    )


async def _with_final_tick(run: Awaitable[bool], tick: Callable[[], None]) -> bool:
    interrupted = await run
    tick()
    return interrupted


def _snapshot(progress: dict[str, TargetProgress]) -> dict[str, Any]:
    return {name: (p.done, p.errors, list(p.ttft)) for name, p in progress.items()}


def _merged(base: dict[str, TargetProgress], snapshots: Any) -> dict[str, TargetProgress]:
    """Progress of the finished levels plus the workers' latest snapshots of the current one."""
    merged = {name: TargetProgress(p.done, p.errors, p.ttft.copy()) for name, p in base.items()}
    for snapshot in snapshots:
        for name, (done, errors, ttft) in snapshot.items():
            total = merged.setdefault(name, TargetProgress())
            total.done += done
            total.errors += errors
            total.ttft.extend(ttft)  # the last ROLLING of them (a display, not a statistic)
    return merged


def _add(state: RunState, result: dict[str, Any]) -> None:
    state.interrupted = state.interrupted or bool(result.get("interrupted"))
    for key, gaps in result.get("chunk_gaps", {}).items():
        state.chunk_gaps.setdefault(key, Sketch()).merge(gaps)
    state.loop_lag.extend(result.get("loop_lag", []))
    state.cpu_s += result.get("cpu_s", 0.0)
    for label, arrivals in result.get("arrivals", {}).items():
        state.arrivals.setdefault(label, Arrivals()).merge(arrivals)
    for key, check in result.get("input_checks", {}).items():
        state.input_checks.setdefault(key, InputCheck(check.calibration)).merge(check)
    for name in ("cache_expected", "short_outputs"):
        merged: dict[tuple[str, LevelKey], list[int]] = getattr(state, name)
        for (target, level), (count, of) in result.get(name, []):
            counts = merged.setdefault((target, level), [0, 0])
            counts[0] += count
            counts[1] += of
