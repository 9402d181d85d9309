"""``openai-latency bench``: the same workload against several endpoints or models, side by side.

Every request is a real ``openai`` SDK call with the instrumentation on, so besides TTFT, TPOT,
throughput and goodput the result has every phase of every request, retries and backoff apart, and
the failures triaged. Targets are interleaved request by request on one schedule, so machine and
network drift hit them alike. ``--out`` keeps every span as OTLP JSON lines for ``report``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

from .args import UsageError
from .bench_args import build_parser, loads_from, workload_from
from .bench_config import (
    Plan,
    Slo,
    Target,
    parse_key_envs,
    parse_target,
)
from .bench_output import print_tables, render_csv, result_json
from .bench_run import Runner, RunState, clients_for, instrumented, progress_lines, supervise
from .bench_stats import target_stats
from .console import Output, Progress
from .otlp_json import ReadStats, Span, read_spans
from .report_collect import collect_calls
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
        import openai  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401
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
    plan = Plan(opts, targets, workload, loads, unreachable)
    requests = opts.requests if opts.duration is None else None
    state = RunState(planned={t.name: (requests or 0) * len(loads) for t in targets}, chunk_gaps={})
    if opts.workers > 1:
        from .bench_workers import run_in_workers

        with tempfile.TemporaryDirectory(prefix="openai-latency-bench-") as folder:
            parts = run_in_workers(plan, requests, state, folder)
            if opts.out:
                _concatenate(parts, opts.out)
            return _finish(plan, read_spans(parts, ReadStats()) if parts else iter(()), state)
    with instrumented() as recorder:
        clients = clients_for(targets, opts.timeout, opts.max_retries)
        runner = Runner(targets, clients, workload, state, seed=opts.seed)

        async def work() -> None:
            if opts.warmup:
                first = loads[0]
                concurrency = first.concurrency if first.rate is None else 1
                await runner.warmup(opts.warmup, concurrency, first.ramp(opts.ramp_up))
            for load in loads:
                await runner.run(load, requests, opts.duration, opts.sequential, load.ramp(opts.ramp_up))

        progress = Progress(lambda: progress_lines(targets, recorder.progress, state), opts.progress)
        with progress:
            state.interrupted = asyncio.run(supervise(runner, work, progress.update))
    if opts.out:
        write_otlp_json(opts.out, recorder.spans)
    return _finish(plan, (from_readable(span) for span in recorder.spans), state)


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


def _concatenate(parts: Sequence[str], out: str) -> None:
    """The workers' span files, appended to ``--out`` (OTLP JSON lines: concatenation is a merge)."""
    with open(out, "ab") as target:
        for part in parts:
            with open(part, "rb") as source:
                shutil.copyfileobj(source, target)


def _finish(plan: Plan, spans: Iterable[Span], state: RunState) -> int:
    opts, targets = plan.opts, plan.targets
    calls = collect_calls(spans).calls
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
    return 1 if plan.unreachable or state.failed_workers else 0
