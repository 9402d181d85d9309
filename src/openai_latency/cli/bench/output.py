"""``openai-latency bench`` results as a side-by-side table, Markdown, CSV or JSON."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from ...version import __version__
from ..render.server_split import split_lines
from ..render.tables import Rows, markdown_table, table
from ..render.terminal import Output
from ..render.text import format_duration, triple
from ..render.triage import triage_lines
from ..spans.names import HTTP_PHASES, phase_rank
from ..stats.groups import phases_dict
from ..stats.percentiles import Dist, dist_dict, json_number
from ..stats.server_split import server_json
from .plan import Plan, Slo
from .run import LAG_WARNING_S, RunState
from .stats import Difference, TargetStats, differs_most


def _rate(value: float | None, unit: str) -> str:
    return "-" if value is None else f"{value:,.1f} {unit}"


def summary_rows(stats: Sequence[TargetStats], slo: Slo) -> Rows:
    rows: Rows = [["p50 / p95 / p99", *(s.label for s in stats)]]

    def add(name: str, cells: list[str]) -> None:
        rows.append([name, *cells])

    add("requests", [str(s.requests) for s in stats])
    add("errors (rate)", [f"{s.errors} ({s.error_rate * 100:.1f}%)" for s in stats])
    if any(s.cancelled for s in stats):
        add("cancelled (not counted)", [str(s.cancelled) for s in stats])
    add("ttft (first content token)", [triple(s.ttft) for s in stats])
    add("ttfc (first chunk)", [triple(s.ttfc) for s in stats])
    if any(s.cache_hit_ttft for s in stats):
        add("ttft, prompt cache hit", [triple(s.cache_hit_ttft) for s in stats])
        add("ttft, prompt cache miss", [triple(s.cache_miss_ttft) for s in stats])
    add("e2e (whole call)", [triple(s.e2e) for s in stats])
    add("tpot (first token excluded)", [triple(s.tpot) for s in stats])
    add("chunk gaps (client)", [triple(s.chunk_gaps) for s in stats])
    add(
        "tokens/s per request p50", [_rate(s.tokens_per_s.p50 if s.tokens_per_s else None, "") for s in stats]
    )
    add("throughput (output tokens/s)", [_rate(s.throughput, "") for s in stats])
    add("requests/s", [_rate(s.requests_per_s, "") for s in stats])
    if slo:
        add(f"goodput ({slo.text})", [_goodput(s) for s in stats])
    add("retries (backoff)", [f"{s.retries} ({format_duration(s.backoff_s)})" for s in stats])
    for row in rows[1:]:
        row[1:] = [cell.strip() for cell in row[1:]]
    return rows


def _goodput(s: TargetStats) -> str:
    return "-" if s.goodput is None else f"{s.goodput * 100:.1f}% ({s.goodput_requests}/{s.requests})"


def phase_rows(stats: Sequence[TargetStats]) -> Rows:
    names: list[str] = []
    for s in stats:
        names += [p.name for p in s.group.phases if p.name not in names]
        for p in s.group.http:
            if f"  http.{p.name}" not in names:
                names.append(f"  http.{p.name}")
    names.sort(key=_phase_order)
    rows: Rows = [["phase p50 / p95", *(s.label for s in stats)]]
    for name in names:
        cells = []
        for s in stats:
            phases = s.group.http if name.startswith("  http.") else s.group.phases
            key = name.removeprefix("  http.")
            found = next((p.dist for p in phases if p.name == key), None)
            cells.append(
                "-" if found is None else f"{format_duration(found.p50)} / {format_duration(found.p95)}"
            )
        rows.append([name, *cells])
    return rows


def _phase_order(name: str) -> tuple[int, int]:
    """Phases in call order, each http.* sub-phase right after network_wait, in its own order."""
    if name.startswith("  http."):
        return (phase_rank("network_wait"), 1 + phase_rank(name.removeprefix("  http."), HTTP_PHASES))
    return (phase_rank(name), 0)


def _plain_table(rows: Rows) -> list[str]:
    return table(rows, indent="")


def notes(stats: Sequence[TargetStats], difference: Difference | None) -> list[str]:
    lines = []
    if difference is not None:
        lines.append(_sentence(difference))
    for s in stats:
        if s.estimated_tokens:
            lines.append(
                f"{s.label}: {s.estimated_tokens} of {s.requests - s.errors} successful requests had no"
                " usage from the server: their output tokens are counted content chunks."
            )
    return lines


def _sentence(difference: Difference) -> str:
    (low_name, low), (high_name, high) = difference.low, difference.high
    ratio = f", x{high / low:.1f}" if low > 0 else ""
    text = (
        f"The phase that differs most between targets: {difference.phase}"
        f" (median per call {_ms(high)} on {high_name} vs {_ms(low)} on {low_name}{ratio})"
    )
    if difference.inner is not None:
        name, inner_high, inner_low = difference.inner
        text += f"; inside it http.{name} ({_ms(inner_high)} vs {_ms(inner_low)})"
    return text + "."


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds >= 0.01 else f"{seconds * 1000:.1f} ms"


def render_text(
    stats: Sequence[TargetStats], slo: Slo, difference: Difference | None, markdown: bool = False
) -> str:
    table = markdown_table if markdown else _plain_table
    lines = [*table(summary_rows(stats, slo)), "", *table(phase_rows(stats)), ""]
    lines += notes(stats, difference)
    for s in stats:
        calls = s.requests
        lines += ["", f"{s.label}:" if not markdown else f"**{s.label}**", ""]
        lines += triage_lines(s.triage, calls)
    return "\n".join(lines)


def render_csv(stats: Sequence[TargetStats], slo: Slo) -> str:
    """Long format: one row per (target, metric, statistic)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["target", "metric", "statistic", "value"])
    for s in stats:
        for metric, value in _flat(s, slo):
            name, _, statistic = metric.rpartition(".")
            writer.writerow([s.label, name, statistic, "" if value is None else repr(value)])
    return buffer.getvalue().rstrip("\n")


def _flat(s: TargetStats, slo: Slo) -> list[tuple[str, float | int | None]]:
    data = target_json(s, slo)
    flat: list[tuple[str, Any]] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}.{key}" if prefix else key, item)
        elif (isinstance(value, (int, float)) and not isinstance(value, bool)) or value is None:
            flat.append((prefix if "." in prefix else f"{prefix}.value", value))

    walk("", {k: v for k, v in data.items() if k not in ("key", "label", "triage")})
    return flat


def target_json(s: TargetStats, slo: Slo) -> dict[str, Any]:
    return {
        "key": s.group.key,
        "label": s.label,
        "requests": s.requests,
        "errors": s.errors,
        "error_rate": s.error_rate,
        "cancelled": s.cancelled,
        "ttft": dist_dict(s.ttft),
        "ttfc": dist_dict(s.ttfc),
        "e2e": dist_dict(s.e2e),
        "tpot": dist_dict(s.tpot),
        "chunk_gaps": dist_dict(s.chunk_gaps),
        "tokens_per_s": dist_dict(s.tokens_per_s),
        "throughput_tokens_per_s": json_number(s.throughput),
        "requests_per_s": json_number(s.requests_per_s),
        "goodput": json_number(s.goodput),
        "goodput_requests": s.goodput_requests if slo else None,
        "retries": s.retries,
        "backoff_s": s.backoff_s,
        "output_tokens": s.output_tokens,
        "estimated_token_requests": s.estimated_tokens,
        "ttft_cache_hit": dist_dict(s.cache_hit_ttft),
        "ttft_cache_miss": dist_dict(s.cache_miss_ttft),
        "phases": phases_dict(s.group.phases),
        "http_phases": phases_dict(s.group.http),
        "triage": {name: bucket.as_dict() for name, bucket in s.triage.items()},
        "server": server_json(s.group.group.members),
    }


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


def print_tables(out: Output, plan: Plan, stats: list[TargetStats], state: RunState) -> None:
    options, schedule = plan.options, plan.options.schedule
    workload, loads, slo = options.workload, schedule.levels, options.slo
    amount = (
        f"{schedule.requests} requests per target"
        if schedule.requests
        else f"{schedule.duration:g} s per load level"
    )
    mode = "stream" if workload.stream else "no stream"
    order = "sequential" if schedule.sequential else "interleaved"
    levels = ", ".join(load.label for load in loads)
    out.line(
        f"openai-latency bench: {len(plan.targets)} target(s), {amount}, {levels},"
        f" {mode}, max_tokens {workload.max_tokens}, {order}"
        + (f", {schedule.warmup} warm-up" if schedule.warmup else "")
        + (f", {schedule.workers} client processes" if schedule.workers > 1 else ""),
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
        text = render_text(level, slo, differs_most(level), markdown=options.format == "markdown")
        for line in text.split("\n"):
            style = "bold" if line.startswith("The phase that differs most") else None
            out.line(line, style)
        for line in split_lines((s.label, s.group.group.members) for s in level):
            out.line(line)  # the server's own account of the TTFT, when it sent one


def result_json(plan: Plan, stats: list[TargetStats], state: RunState) -> dict[str, Any]:
    options, schedule = plan.options, plan.options.schedule
    workload, loads, slo = options.workload, schedule.levels, options.slo
    differences = {load: differs_most(level) for load, level in _by_load(stats).items()}
    return {
        "tool": "openai-latency bench",
        "version": __version__,
        "config": {
            "targets": [{"name": t.name, "base_url": t.base_url, "model": t.model} for t in plan.targets],
            "unreachable": [
                {"name": t.name, "base_url": t.base_url, "reason": r} for t, r in plan.unreachable.items()
            ],
            "stream": workload.stream,
            "max_tokens": workload.max_tokens,
            "prompt_chars": len(workload.prompt),
            "loads": [load.label for load in loads],
            "requests_per_target": schedule.requests,
            "duration_s": schedule.duration,
            "warmup": schedule.warmup,
            "interleaved": not schedule.sequential,
            "slo": slo.bounds,
            "timeout_s": options.timeout,
            "max_retries": options.max_retries,
            "seed": schedule.seed,
            "workers": schedule.workers,
        },
        "interrupted": state.interrupted,
        "late_arrivals": state.late,
        "client": _client(stats, state),
        "results": [target_json(s, slo) for s in stats],
        "differs_most": {load: (d.as_dict() if d else None) for load, d in differences.items()},
        "out": options.out,
    }
