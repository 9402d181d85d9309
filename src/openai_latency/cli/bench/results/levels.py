"""The per-level parts of bench's output: the client's own cost at each load level (and whether it
was the bottleneck there), and the ``--sweep`` table with its knee."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ...render.tables import Rows, markdown_table, table
from ...render.text import format_duration
from ...stats.percentiles import Dist
from ..plan import LevelKey, Load
from ..run.runner import LAG_WARNING_S, RunState
from ..run.sweep import Sweep
from .stats import TargetStats


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


#: The share of one core a ``--workers`` process is planned to use: a loop kept half idle wakes on
#: time (a busier one runs late, which is what the warning is about).
WORKER_BUSY_SHARE = 0.5
#: Above this share of successful streams without a TTFT (their first token waited on a busy
#: client), the client is named as the cause too.
TTFT_UNKNOWN_SHARE = 0.01


def level_client(
    key: LevelKey, level: Sequence[TargetStats], state: RunState, shape: Load | None = None
) -> dict[str, Any] | None:
    """The client's own cost at one load level (run in this process; every turn of a conversation
    ran in it), whether it was the bottleneck, the warning that says so in words and the
    ``--workers`` count the measured CPU calls for."""
    lags = state.level_lag.get(key.load)
    cpu = state.level_cpu.get(key.load)
    if cpu is None:
        return None
    requests = sum(s.requests + s.cancelled for s in level)
    lag = Dist.of(lags or [])
    return client_verdict(cpu, requests, lag, level, shape)


def client_verdict(
    cpu: float,
    requests: int,
    lag: Dist | None,
    level: Sequence[TargetStats],
    shape: Load | None,
    workers: int | None = None,
) -> dict[str, Any]:
    """What the client cost (``cpu`` seconds for ``requests``), and, when its event loop ran late
    (lag p95 above :data:`LAG_WARNING_S`) or left more than 1 % of the streams without a TTFT, the
    warning in words with the ``--workers`` suggestion (``workers``, else :func:`workers_for`)."""
    per_request = cpu / requests if requests else None
    streams = sum(s.requests - s.errors for s in level)
    unknown = sum(s.ttft_unknown for s in level)
    late_loop = bool(lag and lag.p95 > LAG_WARNING_S)
    starved = bool(streams and unknown / streams > TTFT_UNKNOWN_SHARE)
    bottleneck = late_loop or starved
    suggested = (workers or workers_for(per_request, lag, level, shape)) if bottleneck else None
    causes = (lag if late_loop else None, unknown if starved else 0, streams)
    return {
        "cpu_s": cpu,
        "cpu_per_request_s": per_request,
        "loop_lag_p95": lag.p95 if lag else None,
        "ttft_unknown_share": unknown / streams if streams else None,
        "bottleneck": bottleneck,
        "workers_suggested": suggested,
        "warning": _warning(*causes, per_request, suggested) if bottleneck else None,
    }


def workers_for(
    per_request: float | None, lag: Dist | None, level: Sequence[TargetStats], shape: Load | None
) -> int:
    """The client processes the load calls for: the CPU per request times the rate the load asks for
    (``--rate``; a closed loop: its concurrency over the calls' time without the loop's own lag), at
    :data:`WORKER_BUSY_SHARE` of a core each; at least 2."""
    if not per_request or shape is None:
        return 2
    if shape.rate is not None:
        wanted = shape.rate * len(level)
    else:
        e2e = [s.e2e.p50 for s in level if s.e2e]
        served = (sum(e2e) / len(e2e) if e2e else 0.0) - (lag.p50 if lag else 0.0)
        wanted = shape.concurrency / served if served > 0 else 0.0
    return max(2, math.ceil(per_request * wanted / WORKER_BUSY_SHARE))


def _warning(
    lag: Dist | None, unknown: int, streams: int, per_request: float | None, workers: int | None
) -> str:
    """The words: the causes found (``lag``: the loop ran late; ``unknown``: streams without a TTFT)."""
    causes = []
    if lag:
        causes.append(
            f"its event loop ran late by {format_duration(lag.p95)} at p95 (above"
            f" {LAG_WARNING_S * 1000:.0f} ms)"
        )
    if unknown:
        causes.append(f"{unknown} of {streams} streams have no TTFT (their first token waited on it)")
    cost = f" It used {per_request * 1000:.1f} ms of CPU per request." if per_request else ""
    return (
        f"the client, not the server, is the bottleneck here: {' and '.join(causes)}. The TTFT, TPOT"
        f" and chunk gaps at this load are the client's as much as the server's (late reads bunch"
        f" tokens: TPOT can read low as well as high).{cost} Run with --workers"
        f" {workers} (client processes, one core each) or lower the load."
    )


def level_client_lines(client: dict[str, Any] | None) -> list[tuple[str, str | None]]:
    if client is None:
        return []
    per = client["cpu_per_request_s"]
    text = f"client at this level: CPU {client['cpu_s']:.1f} s" + (
        f" ({per * 1000:.1f} ms per request)" if per else ""
    )
    if client["loop_lag_p95"] is not None:
        text += f", event-loop lag p95 {format_duration(client['loop_lag_p95'])}"
    lines: list[tuple[str, str | None]] = [(text, None)]
    if client["warning"]:
        lines.append(("warning: " + client["warning"], "yellow"))
    return lines


def sweep_lines(
    sweep: Sweep, stats: list[TargetStats], clients: dict[LevelKey, dict[str, Any] | None], markdown: bool
) -> list[tuple[str, str | None]]:
    """Latency and throughput against load, one row per level in the order run, the knee marked (bold),
    and the client's event-loop lag at each level (``clients``, :func:`level_client` of each level,
    computed once; ``!``: the client was the bottleneck there)."""
    names = list(dict.fromkeys(s.label for s in stats))
    found = {(s.level, s.label): s for s in stats}
    header = ["sweep", *(f"{n} req/s | ttft p50 | e2e p50" for n in names), "client lag p95", ""]
    rows: Rows = [header]
    bottlenecks: list[str] = []
    workers = 0
    for load in sweep.levels:
        cells = []
        for name in names:
            s = found.get((LevelKey(load.label), name))
            if s is None:
                cells.append("-")
                continue
            ttft = format_duration(s.ttft.p50) if s.ttft else "-"
            cells.append(f"{_rate(s.requests_per_s)} | {ttft} | {format_duration(s.e2e.p50)}")
        client = clients.get(LevelKey(load.label))
        lag = client["loop_lag_p95"] if client else None
        lag_text = "-" if lag is None else format_duration(lag)
        if client and client["bottleneck"]:
            lag_text += " !"
            bottlenecks.append(load.label)
            workers = max(workers, client["workers_suggested"] or 0)
        mark = "<- knee" if load.label == sweep.knee else ""
        if load.label in sweep.stopped:
            mark = "stopped: over-saturated"
        rows.append([load.label, *cells, lag_text, mark])
    lines: list[tuple[str, str | None]] = [
        (line, None) for line in (markdown_table(rows) if markdown else table(rows, indent=""))
    ]
    if sweep.knee:
        top = sweep.max_throughput or 0.0
        lines.append((
            f"knee: {sweep.knee} (throughput stops growing past it; highest {top:,.1f} requests/s per"
            " target): more load adds queueing time, not throughput",
            "bold",
        ))  # fmt: skip
    if bottlenecks:
        lines.append((
            f"the client, not the server, was the bottleneck at {', '.join(bottlenecks)} (marked !: its"
            f" event loop ran late by more than {LAG_WARNING_S * 1000:.0f} ms at p95, or more than 1 % of"
            " the streams lost their TTFT to it): those levels measure the client too. Give the client a"
            f" core of its own, or measure past this load with -c or --rate and --workers {workers}.",
            None,
        ))  # fmt: skip
    return lines
