"""``openai-latency bench``: the same workload against several endpoints or models, side by side.

Every request is a real ``openai`` SDK call with the instrumentation on, so besides TTFT, TPOT,
throughput and goodput the result has every phase of every request, retries and backoff apart, and
the failures triaged. Targets are interleaved request by request on one schedule, so machine and
network drift hit them alike. ``--out`` keeps every span as OTLP JSON lines for ``report``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, TextIO
from urllib.parse import urlsplit

from ..args import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, UsageError
from ..render.terminal import Output, Progress
from ..spans.calls import Call
from ..spans.collect import collect_calls
from ..spans.files import read_spans
from ..spans.names import BENCH_TARGET, OPERATION_NAME
from ..spans.span import ReadStats, Span
from ..spans.write import WriteError, from_readable, write_otlp_json
from .options.parser import build_parser, options_from
from .plan import Load, Plan, Target
from .results import cache
from .results.build import BenchResult, build
from .results.failures import FirstErrors, all_failed_lines
from .results.output import print_tables, render_csv, result_json
from .results.stats import target_stats
from .run.clients import clients_for
from .run.record import Recorder
from .run.runner import Runner, RunState, instrumented, progress_lines, supervise
from .run.shapes import run_levels, shape_for

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """The results on ``out``, notes and warnings on ``err``; :class:`UsageError` for bad input."""
    out = out or sys.stdout
    err = err or sys.stderr
    options = options_from(build_parser(out, err).parse_args(argv))
    try:
        import openai  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError as exc:
        raise UsageError(
            f"bench needs the cli extra: pip install 'openai-latency[cli]' ({exc.name} missing)"
        ) from None
    unreachable = _unreachable(options.targets)
    for target, reason in unreachable.items():
        print(
            f"openai-latency bench: target {target.name} ({target.base_url}) is unreachable: {reason};"
            " the other targets still run",
            file=err,
        )
    targets = [t for t in options.targets if t not in unreachable]
    if not targets:
        return EXIT_FAILED
    for target in targets:
        if target.api_key() is None:
            print(
                f"openai-latency bench: warning: {target.api_key_env} is not set: target {target.name}"
                " gets requests without an API key",
                file=err,
            )
    if options.out:
        _check_writable(options.out)
    if options.html:
        _check_writable(options.html, "--html")
        _check_plotly()
    plan = Plan(options, targets, unreachable)
    schedule = options.schedule
    if schedule.workers > 1:
        from .run.workers import run_in_workers

        with tempfile.TemporaryDirectory(prefix="openai-latency-bench-") as folder:
            state = _new_record(plan)
            parts = run_in_workers(plan, state, folder, err)
            if options.out:
                _concatenate(parts, options.out)
            return _finish(plan, read_spans(parts, ReadStats()) if parts else iter(()), state, out, err)
    with tempfile.TemporaryDirectory(prefix="openai-latency-bench-") as folder:
        spill = os.path.join(folder, "spans.jsonl")
        with instrumented(spill) as recorder:
            state = _run(plan, recorder, err)
        if recorder.spilled:  # a long run: its spans are in the spill file, the last level's too
            try:
                recorder.spill()
            except WriteError as exc:
                raise UsageError(f"cannot write spans to {folder}: {exc}") from None
            if options.out:
                _concatenate([spill], options.out)
            return _finish(plan, read_spans([spill], ReadStats()), state, out, err)
    if options.out:
        try:
            write_otlp_json(options.out, recorder.spans)
        except WriteError as exc:
            raise UsageError(f"--out: {exc}") from None
    errors = FirstErrors(messages=_first_messages(recorder.spans))
    return _finish(plan, (from_readable(span) for span in recorder.spans), state, out, err, errors)


def _new_record(plan: Plan) -> RunState:
    """The run's record, empty: what it plans per target (the progress display's totals)."""
    schedule, turns = plan.options.schedule, plan.options.workload.turns
    planned = 0 if schedule.sweep else (schedule.requests or 0) * len(schedule.levels) * turns
    return RunState(planned={t.name: planned for t in plan.targets}, chunk_gaps={})


def _run(plan: Plan, recorder: Recorder, err: TextIO) -> RunState:
    """The warm-up and every load level in this process, with the live progress on ``err``; the
    run's record (its per-level numbers keyed by :class:`.plan.LevelKey`)."""
    options, schedule = plan.options, plan.options.schedule
    state = _new_record(plan)
    clients = clients_for(
        plan.targets, options.timeout, options.max_retries, options.headers, options.sdk_parse
    )
    runner = Runner(plan.targets, clients, options.workload, state, seed=schedule.seed)

    async def work() -> None:
        if schedule.warmup:
            first = schedule.levels[0]
            concurrency = first.concurrency if first.rate is None else 1
            await runner.warmup(schedule.warmup, concurrency, first.ramp(schedule.ramp_up))

        async def level(load: Load) -> None:
            if load.replay_speed is not None:
                await runner.prepare_replay()
                await runner.replay(load)
            else:
                ramp = load.ramp(schedule.ramp_up)
                await runner.run(load, schedule.requests, schedule.duration, schedule.sequential, ramp)
            recorder.between_levels()

        shape, state.sweep = shape_for(schedule)  # the levels given, or a sweep's, picked as it goes
        await run_levels(shape, level, recorder.progress, lambda: state.in_flight, state.enter_level)

    def lines() -> list[str]:
        return progress_lines(plan.targets, recorder.progress, state)

    with Progress(lines, options.progress, err) as progress:
        state.interrupted = asyncio.run(supervise(runner, work, progress.update))
    return state


def _pair(counts: list[int] | None) -> tuple[int, int] | None:
    return (counts[0], counts[1]) if counts else None


def _unreachable(targets: Sequence[Target]) -> dict[Target, str]:
    """Targets whose host does not accept a TCP connection (checked once, before the run)."""
    result = {}
    for target in targets:
        url = urlsplit(target.base_url)
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            with socket.create_connection((url.hostname or "", port), timeout=3):
                pass
        except OSError as exc:
            result[target] = exc.strerror or str(exc) or type(exc).__name__
    return result


def _check_writable(path: str, option: str = "--out") -> None:
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise UsageError(f"{option}: cannot write {path}: {exc.strerror or exc}") from None


def _check_plotly() -> None:
    from ..render.html import MissingPlotly, plotly_js

    try:
        plotly_js()
    except MissingPlotly as exc:
        raise UsageError(str(exc)) from None


def _write_html(plan: Plan, calls: list[Call], result: BenchResult, err: TextIO, state: RunState) -> None:
    from ...version import __version__
    from ..render.charts import Knee
    from ..render.html import write_page
    from ..render.verdict import sentences

    options = plan.options
    levels = result.levels
    sweep = state.sweep
    slipped = [f"warning: {a.sentence(label)}" for label, a in state.arrivals.items() if a.slipped]
    notes = (
        slipped
        + [
            (f"{load}: " if load and len(levels) > 1 else "") + f"warning: {text}"
            for load, text in result.warnings()
        ]
        + [
            f"{level.key.label}: {line}" if len(levels) > 1 else line
            for level in levels
            for v in level.verdicts
            for line in sentences(v)
        ]
    )
    title = f"openai-latency bench: {', '.join(t.name for t in plan.targets)}"
    assert options.html is not None
    knee = Knee(sweep.knee, sweep.knee_rule) if sweep and sweep.knee else None
    write_page("bench", options.html, title, notes, calls, __version__, err, knee)


def _concatenate(parts: Sequence[str], out: str) -> None:
    """The workers' span files, appended to ``--out`` (OTLP JSON lines: concatenation is a merge)."""
    with open(out, "ab") as target:
        for part in parts:
            with open(part, "rb") as source:
                shutil.copyfileobj(source, target)


def _first_messages(spans: Iterable[ReadableSpan]) -> dict[str, str]:
    """Per target, the message of its first failed call (the exception's, kept as the span's status)."""
    messages: dict[str, str] = {}
    for span in spans:
        attributes = span.attributes or {}
        target = str(attributes.get(BENCH_TARGET, "-"))
        if OPERATION_NAME in attributes and span.status.description and target not in messages:
            messages[target] = " ".join(span.status.description.split())[:300]
    return messages


def _finish(
    plan: Plan,
    spans: Iterable[Span],
    state: RunState,
    out: TextIO,
    err: TextIO,
    errors: FirstErrors | None = None,
) -> int:
    options = plan.options
    errors = errors or FirstErrors()
    calls = collect_calls(errors.watch(spans)).calls
    stats = target_stats(
        calls, ("target", "load"), options.slo, options.slow_threshold, options.timeout, state.chunk_gaps
    )
    for s in stats:
        key = (s.group.key.get("target", ""), s.level)
        s.cache_expected = _pair(state.cache_expected.get(key))
        s.short_outputs = _pair(state.short_outputs.get(key))
        s.input_check = state.input_checks.get(key)
    unverified = cache.unverified((s.label, s.cache) for s in stats if s.cache is not None)
    if unverified:
        print(cache.warning(unverified), file=err)
    result = build(plan, stats, state)  # the verdicts and every number: once, read by each output
    output = Output(out)
    if options.format == "json":
        output.line(json.dumps(result_json(plan, result, state), indent=2))
    elif options.format == "csv":
        output.line(render_csv(result.stats, options.slo))
    else:
        print_tables(output, plan, result, state)
    output.flush()
    if options.html:
        _write_html(plan, calls, result, err, state)
    if options.out and options.format in ("table", "markdown"):
        print(f"\nspans: {options.out} (openai-latency report {options.out} rereads them)", file=err)
    if state.interrupted:
        print("openai-latency bench: interrupted: results of the finished requests above", file=err)
        return EXIT_INTERRUPTED
    failed = all_failed_lines(stats, plan.targets, errors)
    for line in failed:
        print(line, file=err)
    return EXIT_FAILED if plan.unreachable or state.failed_workers or failed else EXIT_OK
