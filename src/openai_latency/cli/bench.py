"""``openai-latency bench``: the same workload against several endpoints or models, side by side.

Every request is a real ``openai`` SDK call with the instrumentation on, so besides TTFT, TPOT,
throughput and goodput the result has every phase of every request, retries and backoff apart, and
the failures triaged. Targets are interleaved request by request on one schedule, so machine and
network drift hit them alike. ``--out`` keeps every span as OTLP JSON lines for ``report``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import socket
import sys
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.metrics import NoOpMeterProvider

from .args import UsageError
from .bench_args import build_parser, loads_from, workload_from
from .bench_config import (
    Load,
    Plan,
    Slo,
    Target,
    parse_key_envs,
    parse_target,
)
from .bench_output import print_tables, render_csv, result_json
from .bench_run import Recorder, Runner, RunState, freeze_survivors, frozen_heap, watch_loop_lag
from .bench_stats import target_stats
from .console import Output, Progress
from .report_stats import collect_calls
from .spans import from_readable, write_otlp_json

EXIT_INTERRUPTED = 130


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    opts = parser.parse_args(argv)
    try:
        return _bench(opts)
    except UsageError as exc:
        print(f"openai-latency bench: error: {exc}", file=sys.stderr)
        return 2


def _bench(opts: argparse.Namespace) -> int:
    key_envs = parse_key_envs(opts.api_key_env)
    targets = [parse_target(text, opts.model, key_envs) for text in opts.target]
    names = [t.name for t in targets]
    if len(set(names)) != len(names):
        raise UsageError(f"--target: names must differ, got {', '.join(names)}")
    if opts.poisson and opts.rate is None:
        raise UsageError("--poisson needs --rate")
    workload = workload_from(opts)
    loads = loads_from(opts)
    try:
        import openai
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError as exc:
        raise UsageError(
            f"bench needs the cli extra: pip install 'openai-latency[cli]' ({exc.name} missing)"
        ) from None
    unreachable = _unreachable(targets)
    for target, reason in unreachable.items():
        print(
            f"openai-latency bench: target {target.name} ({target.base_url}) is unreachable: {reason};"
            " the other targets still run",
            file=sys.stderr,
        )
    targets = [t for t in targets if t not in unreachable]
    if not targets:
        return 1
    for target in targets:
        if target.api_key() is None:
            print(
                f"openai-latency bench: warning: {target.api_key_env} is not set: target {target.name}"
                " gets requests without an API key",
                file=sys.stderr,
            )
    if opts.out:
        _check_writable(opts.out)

    from .. import OpenAILatencyInstrumentor

    recorder = Recorder()
    provider = TracerProvider(resource=Resource.create({"service.name": "openai-latency-bench"}))
    provider.add_span_processor(recorder)
    instrumentor = OpenAILatencyInstrumentor()
    instrumentor.instrument(
        tracer_provider=provider, meter_provider=NoOpMeterProvider(), phase_spans="detailed"
    )
    requests = opts.requests if opts.duration is None else None
    state = RunState(planned={t.name: (requests or 0) * len(loads) for t in targets}, chunk_gaps={})
    try:
        clients = [
            openai.AsyncOpenAI(
                base_url=t.base_url,
                api_key=t.api_key() or "-",
                timeout=opts.timeout,
                max_retries=opts.max_retries,
            )
            for t in targets
        ]
        runner = Runner(targets, clients, workload, state, seed=opts.seed)
        progress = Progress(lambda: _progress_lines(targets, recorder, state), opts.progress)
        with progress:
            state.interrupted = asyncio.run(_run_all(runner, clients, loads, opts, progress, requests))
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    return _finish(Plan(opts, targets, workload, loads, unreachable), recorder, state)


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


def _check_writable(path: str) -> None:
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise UsageError(f"--out: cannot write {path}: {exc.strerror or exc}") from None


async def _run_all(
    runner: Runner,
    clients: list[Any],
    loads: list[Load],
    opts: argparse.Namespace,
    progress: Progress,
    requests: int | None,
) -> bool:
    """Run warm-up and every load level; True when interrupted (Ctrl-C cancels what is in flight)."""
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    interrupted = False

    def on_interrupt() -> None:
        nonlocal interrupted
        interrupted = True
        main.cancel()

    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, on_interrupt)
    ticker = asyncio.ensure_future(_tick(progress))
    lag = asyncio.ensure_future(watch_loop_lag(runner.state))
    cpu = time.process_time()
    try:
        with frozen_heap():
            if opts.warmup:
                first = loads[0]
                await runner.warmup(
                    opts.warmup, first.concurrency if first.rate is None else 1, first.ramp(opts.ramp_up)
                )
            for load in loads:
                await runner.run(load, requests, opts.duration, opts.sequential, load.ramp(opts.ramp_up))
    except asyncio.CancelledError:
        if not interrupted:
            raise
    finally:
        ticker.cancel()
        lag.cancel()
        runner.state.cpu_s = time.process_time() - cpu
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
        for client in clients:
            with contextlib.suppress(Exception):
                await client.close()
    return interrupted


async def _tick(progress: Progress) -> None:
    while True:
        progress.update()
        freeze_survivors()
        await asyncio.sleep(0.25)


def _progress_lines(targets: Sequence[Target], recorder: Recorder, state: RunState) -> list[str]:
    lines = []
    for target in targets:
        p = recorder.progress.get(target.name)
        done, errors = (p.done, p.errors) if p else (0, 0)
        total = state.planned.get(target.name) or "?"
        ttft = p.rolling_ttft_p50() if p else None
        ttft_text = "-" if ttft is None else f"{ttft * 1000:.0f} ms"
        lines.append(f"{target.name}: {done}/{total} done, {errors} errors, rolling p50 ttft {ttft_text}")
    return lines


def _finish(plan: Plan, recorder: Recorder, state: RunState) -> int:
    opts, targets = plan.opts, plan.targets
    spans = recorder.spans
    if opts.out:
        write_otlp_json(opts.out, spans)
    calls = collect_calls(from_readable(span) for span in spans).calls
    by = ("target", "load")
    slo: Slo = opts.slo or Slo()
    stats = target_stats(calls, by, slo, opts.slow_threshold, opts.timeout, state.chunk_gaps)
    order = {t.name: i for i, t in enumerate(targets)}
    stats.sort(key=lambda s: (s.group.key.get("load", ""), order.get(s.group.key["target"], 0)))
    out = Output()
    if opts.format == "json":
        out.line(json.dumps(result_json(plan, stats, state, slo), indent=2))
    elif opts.format == "csv":
        out.line(render_csv(stats, slo))
    else:
        print_tables(out, plan, stats, state, slo)
    out.flush()
    if opts.out and opts.format in ("table", "markdown"):
        print(f"\nspans: {opts.out} (openai-latency report {opts.out} rereads them)", file=sys.stderr)
    if state.interrupted:
        print("openai-latency bench: interrupted: results of the finished requests above", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 1 if plan.unreachable else 0
