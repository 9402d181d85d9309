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
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from ..version import __version__
from . import args as arguments
from .args import Parser, UsageError
from .bench_config import (
    DEFAULT_PROMPT,
    SLO_METRICS,
    Load,
    Slo,
    Target,
    Workload,
    parse_key_envs,
    parse_slo,
    parse_target,
    read_prompt,
    synthetic_prompt,
)
from .bench_output import render_csv, render_text, target_json
from .bench_run import Recorder, Runner, RunState
from .bench_stats import TargetStats, differs_most
from .console import Output, Progress
from .report_stats import collect_calls
from .spans import from_readable, write_otlp_json

EXIT_INTERRUPTED = 130


def _parser() -> Parser:
    parser = Parser(
        prog="openai-latency bench",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="Metric definitions: see README ('Benchmarking endpoints').",
    )
    what = parser.add_argument_group("targets")
    what.add_argument("--target", action="append", required=True, metavar="NAME=BASE_URL[@MODEL]")
    what.add_argument("--model", help="model for targets that do not name one")
    what.add_argument(
        "--api-key-env",
        action="append",
        metavar="NAME=VAR",
        help="API key variable per target (default OPENAI_API_KEY)",
    )
    work = parser.add_argument_group("workload")
    prompt = work.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", help="the user message (default: a short question)")
    prompt.add_argument("--prompt-file", metavar="FILE", help="the user message, from a file")
    prompt.add_argument(
        "--prompt-tokens", type=arguments.count, metavar="N", help="a synthetic prompt of ~N tokens"
    )
    work.add_argument("--max-tokens", type=arguments.count, default=64, metavar="K", help="default 64")
    work.add_argument("--stream", action=argparse.BooleanOptionalAction, default=True, help="default: stream")
    work.add_argument(
        "--stream-usage",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="ask for usage in the last chunk (stream_options.include_usage; default on)",
    )
    work.add_argument("--temperature", type=float)
    load = parser.add_argument_group("load")
    load.add_argument(
        "-c",
        "--concurrency",
        type=arguments.count_list,
        metavar="C[,C...]",
        help="closed loop: requests in flight (a list runs a sweep); with --rate: the cap",
    )
    load.add_argument(
        "--rate", type=arguments.positive_float, metavar="R", help="open loop: requests/s per target"
    )
    load.add_argument("--poisson", action="store_true", help="with --rate: exponential inter-arrival gaps")
    amount = load.add_mutually_exclusive_group()
    amount.add_argument(
        "-n", "--requests", type=arguments.count, metavar="N", help="requests per target (default 20)"
    )
    amount.add_argument(
        "--duration", type=arguments.duration, metavar="S", help="run each load level this long"
    )
    load.add_argument(
        "--warmup",
        type=arguments.non_negative_count,
        default=0,
        metavar="W",
        help="requests per target before measuring (not in the results)",
    )
    load.add_argument(
        "--sequential", action="store_true", help="one target after another instead of interleaved"
    )
    load.add_argument("--seed", type=int, default=0, help="for --poisson and --prompt-tokens (default 0)")
    client = parser.add_argument_group("client")
    client.add_argument("--timeout", type=arguments.duration, default=60.0, metavar="S", help="default 60 s")
    client.add_argument(
        "--max-retries", type=arguments.non_negative_count, default=2, help="SDK retries (default 2)"
    )
    result = parser.add_argument_group("results")
    result.add_argument(
        "--slo",
        type=parse_slo,
        metavar="BOUNDS",
        help=f"goodput bounds, e.g. ttft=500ms,tpot=50ms,e2e=5s ({', '.join(SLO_METRICS)})",
    )
    result.add_argument(
        "--slow-threshold",
        type=arguments.duration,
        metavar="S",
        help="triage: slow successes take at least this long (default: the target's p95)",
    )
    result.add_argument("--format", choices=("table", "json", "markdown", "csv"), default="table")
    result.add_argument(
        "--out", metavar="FILE", help="write every span as OTLP JSON lines (report rereads it)"
    )
    result.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="live progress on a terminal (default on)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
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
    workload = _workload(opts)
    loads = _loads(opts)
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

    from opentelemetry.metrics import NoOpMeterProvider

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


def _workload(opts: argparse.Namespace) -> Workload:
    if opts.prompt_file:
        prompt = read_prompt(opts.prompt_file)
    elif opts.prompt_tokens:
        prompt = synthetic_prompt(opts.prompt_tokens, opts.seed)
    else:
        prompt = opts.prompt or DEFAULT_PROMPT
    return Workload(prompt, opts.max_tokens, opts.stream, opts.temperature, opts.stream_usage)


def _loads(opts: argparse.Namespace) -> list[Load]:
    if opts.requests is None and opts.duration is None:
        opts.requests = 20
    if opts.rate is None:
        return [Load(c) for c in (opts.concurrency or [1])]
    caps = opts.concurrency or [1000]
    return [Load(cap, opts.rate, opts.poisson) for cap in caps]


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
    from .bench_stats import target_stats

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
        "results": [target_json(s, slo) for s in stats],
        "differs_most": {load: (d.as_dict() if d else None) for load, d in differences.items()},
        "out": opts.out,
    }
