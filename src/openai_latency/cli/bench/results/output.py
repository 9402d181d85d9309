"""``openai-latency bench`` results as a side-by-side table, Markdown, CSV or JSON."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from ....version import __version__
from ...render.server_split import split_lines
from ...render.tables import Rows, markdown_table, table
from ...render.terminal import Output
from ...render.text import format_duration, triple
from ...render.triage import triage_lines
from ...spans.names import HTTP_PHASES, phase_rank
from ...stats.groups import phases_dict
from ...stats.percentiles import Dist, dist_dict, json_number
from ...stats.server_split import server_json
from ...stats.verdict import Verdict
from ..plan import Plan, Slo
from ..run.runner import LAG_WARNING_S, RunState
from .build import BenchResult
from .cache import as_dict as cache_dict
from .cache import expectation_note
from .csv_units import csv_unit, csv_value
from .levels import level_client_lines, sweep_lines
from .stats import TargetStats
from .verdicts import Styled, verdict_lines, verdicts_json


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
    add("ttft (first token, any channel)", [triple(s.ttft) for s in stats])
    if any(s.reasoning for s in stats):  # the same as ttft without reasoning: shown when it differs
        add("ttft_answer (first answer token)", [triple(s.ttft_answer) for s in stats])
        add("reasoning (thinking time)", [triple(s.reasoning) for s in stats])
    add("ttfc (first chunk)", [triple(s.ttfc) for s in stats])
    if any(s.cache and s.cache.reported for s in stats):
        add("prompt cache hits (server)", [_hits(s) for s in stats])
    if any(s.cache_hit_ttft for s in stats):
        add("ttft, prompt cache hit", [triple(s.cache_hit_ttft) for s in stats])
        add("ttft, prompt cache miss", [triple(s.cache_miss_ttft) for s in stats])
        for name in ("http.server_wait", "first_token"):
            cells = [_hit_miss(s, name) for s in stats]
            if any(cell != "-" for cell in cells):
                add(f"{name} p50, hit / miss", cells)
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


def _hits(s: TargetStats) -> str:
    if s.cache is None or not s.cache.reported:
        return "not reported"
    text = f"{s.cache.hits}/{s.cache.reported}"
    return text + (f" (planned {s.cache_expected[0]}/{s.cache_expected[1]})" if s.cache_expected else "")


def _hit_miss(s: TargetStats, name: str) -> str:
    hit, miss = s.cache.phases.get(name, (None, None)) if s.cache else (None, None)
    if hit is None and miss is None:
        return "-"
    return " / ".join("-" if v is None else format_duration(v) for v in (hit, miss))


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
    rows: Rows = [["phase p50 / p95 (calls with it, when not all)", *(s.label for s in stats)]]
    for name in names:
        cells = []
        for s in stats:
            phases = s.group.http if name.startswith("  http.") else s.group.phases
            key = name.removeprefix("  http.")
            found = next((p.dist for p in phases if p.name == key), None)
            cells.append(_phase_cell(found, s.requests))
        rows.append([name, *cells])
    return rows


def _phase_cell(found: Dist | None, calls: int) -> str:
    """``p50 / p95`` over the calls that had the phase, and how many they were when not all."""
    if found is None:
        return "-"
    text = f"{format_duration(found.p50)} / {format_duration(found.p95)}"
    return text if found.n >= calls else f"{text} ({found.n} of {calls} calls)"


def _phase_order(name: str) -> tuple[int, int]:
    """Phases in call order, each http.* sub-phase right after network_wait, in its own order."""
    if name.startswith("  http."):
        return (phase_rank("network_wait"), 1 + phase_rank(name.removeprefix("  http."), HTTP_PHASES))
    return (phase_rank(name), 0)


def _plain_table(rows: Rows) -> list[str]:
    return table(rows, indent="")


PREFILL_NOTE = (
    "Prompt cache: a hit skips the prefill of its cached tokens; the saving shows in http.server_wait"
    " when the server prefills before it sends the response headers, in first_token when it sends them"
    " at once."
)


def notes(stats: Sequence[TargetStats], prefix_label: str = "cold") -> list[str]:
    lines = []
    if any(s.cache_hit_ttft for s in stats):
        lines.append(PREFILL_NOTE)
    for s in stats:
        if s.cache is not None:
            note = expectation_note(s.label, s.cache, s.cache_expected, prefix_label)
            if note:
                lines.append(note)
    lines += [s.input_check.line(s.label) for s in stats if s.input_check]
    for s in stats:
        if s.short_outputs and s.short_outputs[0]:
            short, of = s.short_outputs
            lines.append(
                f"{s.label}: {short} of {of} requests got fewer output tokens than --output-tokens asked:"
                " the server stopped at its end-of-sequence token (no ignore_eos support?)"
            )
    for s in stats:
        if s.estimated_tokens:
            lines.append(
                f"{s.label}: {s.estimated_tokens} of {s.requests - s.errors} successful requests had no"
                " usage from the server: their output tokens are counted content chunks."
            )
        if s.ttft_unknown:
            lines.append(
                f"{s.label}: {s.ttft_unknown} of {s.requests - s.errors} successful requests have no ttft:"
                " their first token arrived while the client was busy elsewhere (its arrival time is"
                " unknown; the client is falling behind: fewer in flight, or --workers)."
            )
    return lines


def styled_text(
    stats: Sequence[TargetStats],
    slo: Slo,
    verdicts: Sequence[Verdict] = (),
    markdown: bool = False,
    prefix_label: str = "cold",
) -> list[Styled]:
    """One load level's text: its verdicts (computed once, :mod:`.results`; their sentences bold), the
    tables, the notes, each target's triage."""
    table = markdown_table if markdown else _plain_table
    verdict, rows = verdict_lines(verdicts)
    lines = [*verdict]
    plain = [*(["", *table(rows), ""] if rows else [])]
    plain += [*table(summary_rows(stats, slo)), "", *table(phase_rows(stats)), ""]
    plain += notes(stats, prefix_label)
    for s in stats:
        calls = s.requests
        plain += ["", f"{s.label}:" if not markdown else f"**{s.label}**", ""]
        plain += triage_lines(s.triage, calls)
    return [*lines, *((line, None) for line in plain)]


def render_text(
    stats: Sequence[TargetStats],
    slo: Slo,
    verdicts: Sequence[Verdict] = (),
    markdown: bool = False,
    prefix_label: str = "cold",
) -> str:
    return "\n".join(line for line, _ in styled_text(stats, slo, verdicts, markdown, prefix_label))


def render_csv(stats: Sequence[TargetStats], slo: Slo) -> str:
    """Long format: one row per (target, load level, metric, statistic), with the value's unit."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["target", "load", "metric", "statistic", "value", "unit"])
    for s in stats:
        load = s.group.key.get("load", "")
        for metric, value in _flat(s, slo):
            name, _, statistic = metric.rpartition(".")
            unit = csv_unit(name, statistic)
            writer.writerow([s.label, load, name, statistic, csv_value(value, unit), unit])
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
        "ttft_answer": dist_dict(s.ttft_answer),
        "reasoning": dist_dict(s.reasoning),
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
        "ttft_unknown_requests": s.ttft_unknown,
        "ttft_cache_hit": dist_dict(s.cache_hit_ttft),
        "ttft_cache_miss": dist_dict(s.cache_miss_ttft),
        "prompt_cache": cache_dict(s.cache, s.cache_expected) if s.cache else None,
        "output_length_short": None if s.short_outputs is None else s.short_outputs[0],
        "input_tokens_as_recorded": s.input_check.as_dict() if s.input_check else None,
        "phases": phases_dict(s.group.phases),
        "http_phases": phases_dict(s.group.http),
        "triage": {name: bucket.as_dict() for name, bucket in s.triage.items()},
        "server": server_json(s.group.group.members),
    }


def _client_lines(client: dict[str, Any], state: RunState) -> list[Styled]:
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


def print_tables(out: Output, plan: Plan, result: BenchResult, state: RunState) -> None:
    """The text (or Markdown) output: it reads ``result``, computed once, and computes nothing."""
    stats = result.stats
    options, schedule = plan.options, plan.options.schedule
    workload, loads, slo = options.workload, schedule.levels, options.slo
    amount = (
        f"{schedule.requests} requests per target"
        if schedule.requests
        else f"{schedule.duration:g} s per load level"
    )
    mode = "stream" if workload.stream else "no stream"
    order = "sequential" if schedule.sequential else "interleaved"
    levels = "sweep" if state.sweep else ", ".join(load.label for load in loads)
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
    for line, style in _client_lines(result.client, state):
        out.line(line, style)
    across, rows = verdict_lines(result.across)
    if across:  # one target, several load levels: each level against the baseline level
        out.line()
        for line, style in across:
            out.line(line, style)
        if rows:
            table = markdown_table if options.format == "markdown" else _plain_table
            out.line()
            for line in table(rows):
                out.line(line)
    for level in result.levels:
        if len(result.levels) > 1:
            out.line(f"\n== {level.load}", style="bold")
            for line, style in level_client_lines(level.client):
                out.line(line, style)
        out.line()
        markdown = options.format == "markdown"
        for line, style in styled_text(level.stats, slo, level.verdicts, markdown, workload.prefix.label):
            out.line(line, style)
        for line in split_lines((s.label, s.group.group.members) for s in level.stats):
            out.line(line)  # the server's own account of the TTFT, when it sent one

    if state.sweep is not None:
        out.line()
        clients = {level.load: level.client for level in result.levels}
        for line, style in sweep_lines(state.sweep, stats, clients, options.format == "markdown"):
            out.line(line, style)


def result_json(plan: Plan, result: BenchResult, state: RunState) -> dict[str, Any]:
    """The JSON document: it reads ``result``, computed once."""
    options, schedule = plan.options, plan.options.schedule
    workload, loads, slo = options.workload, schedule.levels, options.slo
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
            "api": workload.api,
            "prefix_cache": workload.prefix.label,
            "turns": workload.turns,
            "output_tokens": workload.output_tokens.text if workload.output_tokens else None,
            "tools": len(workload.tools),
            "loads": [load.label for load in (state.sweep.levels if state.sweep else loads)],
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
        "client": {**result.client, "levels": {level.load: level.client for level in result.levels}},
        "results": [target_json(s, slo) for s in result.stats],
        "verdict": verdicts_json({level.load: level.verdicts for level in result.levels}, result.across),
        "sweep": state.sweep.as_dict() if state.sweep else None,
        "out": options.out,
    }
