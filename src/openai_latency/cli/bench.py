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

from ..version import __version__
from .args import UsageError
from .bench_args import build_parser, loads_from, workload_from
from .bench_config import (
    Load,
    Slo,
    Target,
    Workload,
    parse_key_envs,
    parse_target,
)
from .bench_output import render_csv, render_text, target_json
from .bench_run import LAG_WARNING_S, Recorder, Runner, RunState, watch_loop_lag
from .bench_stats import TargetStats, differs_most, target_stats
from .console import Output, Progress
from .report_stats import Dist, collect_calls
from .spans import from_readable, write_otlp_json
from .tree import format_duration

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
    return _finish(opts, targets, workload, loads, recorder, state, unreachable)


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
        if opts.warmup:
            await runner.warmup(opts.warmup, max(loads[0].concurrency if loads[0].rate is None else 1, 1))
        for load in loads:
            await runner.run(load, requests, opts.duration, opts.sequential)
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


def _finish(
    opts: argparse.Namespace,
    targets: Sequence[Target],
    workload: Workload,
    loads: list[Load],
    recorder: Recorder,
    state: RunState,
    unreachable: dict[Target, str],
) -> int:
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
        out.line(json.dumps(_json(opts, targets, workload, loads, stats, state, unreachable, slo), indent=2))
    elif opts.format == "csv":
        out.line(render_csv(stats, slo))
    else:
        _print_tables(out, opts, targets, workload, loads, stats, state, slo)
    out.flush()
    if opts.out and opts.format in ("table", "markdown"):
        print(f"\nspans: {opts.out} (openai-latency report {opts.out} rereads them)", file=sys.stderr)
    if state.interrupted:
        print("openai-latency bench: interrupted: results of the finished requests above", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 1 if unreachable else 0


def _client(stats: list[TargetStats], state: RunState) -> dict[str, Any]:
    """What the bench client itself cost, and whether it held the measured calls up."""
    requests = sum(s.requests + s.cancelled for s in stats)
    lag = Dist.of(state.loop_lag)
    return {
        "cpu_s": state.cpu_s,
        "cpu_per_request_s": state.cpu_s / requests if requests else None,
        "loop_lag": lag.as_dict() if lag else None,
        "bottleneck": bool(lag and lag.p95 > LAG_WARNING_S),
    }


def _client_lines(stats: list[TargetStats], state: RunState) -> list[tuple[str, str | None]]:
    client = _client(stats, state)
    per_request = client["cpu_per_request_s"]
    text = f"client: CPU {state.cpu_s:.1f} s" + (
        f" ({per_request * 1000:.1f} ms per request)" if per_request else ""
    )
    lag = client["loop_lag"]
    if lag:
        text += f", event-loop lag p50 {format_duration(lag['p50'])}, p95 {format_duration(lag['p95'])}"
    lines: list[tuple[str, str | None]] = [(text, None)]
    if client["bottleneck"]:
        lines.append((
            "warning: the bench client was busy itself (event-loop lag p95 above"
            f" {LAG_WARNING_S * 1000:.0f} ms): its TTFT and chunk gaps include that delay."
            " Lower -c, or give the client a core of its own.",
            "yellow",
        ))  # fmt: skip
    return lines


def _by_load(stats: list[TargetStats]) -> dict[str, list[TargetStats]]:
    levels: dict[str, list[TargetStats]] = {}
    for s in stats:
        levels.setdefault(s.group.key.get("load", ""), []).append(s)
    return levels


def _print_tables(
    out: Output,
    opts: argparse.Namespace,
    targets: Sequence[Target],
    workload: Workload,
    loads: list[Load],
    stats: list[TargetStats],
    state: RunState,
    slo: Slo,
) -> None:
    amount = (
        f"{opts.requests} requests per target" if opts.requests else f"{opts.duration:g} s per load level"
    )
    mode = "stream" if workload.stream else "no stream"
    order = "sequential" if opts.sequential else "interleaved"
    levels = ", ".join(load.label for load in loads)
    out.line(
        f"openai-latency bench: {len(targets)} target(s), {amount}, {levels},"
        f" {mode}, max_tokens {workload.max_tokens}, {order}"
        + (f", {opts.warmup} warm-up" if opts.warmup else ""),
        style="bold",
    )
    if state.late:
        out.line(f"{state.late} arrivals found every slot busy and started late (raise -c)", style="yellow")
    if not stats:
        out.line("no request finished")
        return
    for line, style in _client_lines(stats, state):
        out.line(line, style)
    for load, level in _by_load(stats).items():
        if len(loads) > 1:
            out.line(f"\n== {load}", style="bold")
        out.line()
        text = render_text(level, slo, differs_most(level), markdown=opts.format == "markdown")
        for line in text.split("\n"):
            style = "bold" if line.startswith("The phase that differs most") else None
            out.line(line, style)


def _json(
    opts: argparse.Namespace,
    targets: Sequence[Target],
    workload: Workload,
    loads: list[Load],
    stats: list[TargetStats],
    state: RunState,
    unreachable: dict[Target, str],
    slo: Slo,
) -> dict[str, Any]:
    differences = {load: differs_most(level) for load, level in _by_load(stats).items()}
    return {
        "tool": "openai-latency bench",
        "version": __version__,
        "config": {
            "targets": [{"name": t.name, "base_url": t.base_url, "model": t.model} for t in targets],
            "unreachable": [
                {"name": t.name, "base_url": t.base_url, "reason": r} for t, r in unreachable.items()
            ],
            "stream": workload.stream,
            "max_tokens": workload.max_tokens,
            "prompt_chars": len(workload.prompt),
            "loads": [load.label for load in loads],
            "requests_per_target": opts.requests,
            "duration_s": opts.duration,
            "warmup": opts.warmup,
            "interleaved": not opts.sequential,
            "slo": slo.bounds,
            "timeout_s": opts.timeout,
            "max_retries": opts.max_retries,
            "seed": opts.seed,
        },
        "interrupted": state.interrupted,
        "late_arrivals": state.late,
        "client": _client(stats, state),
        "results": [target_json(s, slo) for s in stats],
        "differs_most": {load: (d.as_dict() if d else None) for load, d in differences.items()},
        "out": opts.out,
    }
