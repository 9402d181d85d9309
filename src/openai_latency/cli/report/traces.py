"""``openai-latency report --by trace``: where each turn's time went (DESIGN.md §12).

Reads the same inputs as the per-call report (files, globs, directories, ``--jaeger``), assembles
whole traces (:mod:`..spans.traces`), walks each one's critical path (:mod:`..stats.critical_path`)
and prints, per root name, a sentence, the p50/p95 table, the calls' totals, the server's split and
the slow turns; ``--format json`` gives every trace and every group.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from ...version import __version__
from ..args import EXIT_FAILED, EXIT_OK, write_output
from ..render.turns import RULE, group_json, group_lines, turn_json
from ..spans.files import without_gc
from ..spans.span import InputError, ReadStats
from ..spans.traces import TraceReadStats, assemble_traces
from ..stats.critical_path import Turn, analyze
from ..stats.turns import group_turns
from .output import source_text
from .sources import open_spans

#: Options of the per-call report that mean nothing for turns.
CALL_OPTIONS = ("compare", "http", "waterfall", "client_timeout")


def wants_traces(values: list[str] | None) -> bool:
    """``--by trace`` (alone: a trace is not a key of a call)."""
    return any(part.strip() == "trace" for value in values or () for part in value.split(","))


def run(
    parser: argparse.ArgumentParser, args: argparse.Namespace, default: str, out: TextIO, err: TextIO
) -> int:
    keys = [part.strip() for value in args.by for part in value.split(",") if part.strip()]
    if keys != ["trace"] and set(keys) != {"trace"}:
        parser.error("--by trace groups whole traces: give it alone")
    for name in CALL_OPTIONS:
        if getattr(args, name):
            parser.error(f"--{name.replace('_', '-')} is for calls, not with --by trace")
    stats, trace_stats = ReadStats(), TraceReadStats()
    turns: list[Turn] = []
    try:
        spans = open_spans(parser, args, default, stats)
        with without_gc():
            for trace in assemble_traces(spans, trace_stats):
                turns.append(analyze(trace))
    except InputError as exc:
        print(f"openai-latency report: {exc}", file=err)
        return EXIT_FAILED
    if not turns:
        print(f"openai-latency report: no spans found in {source_text(stats)}", file=err)
        return EXIT_FAILED
    groups = group_turns(turns, args.slow_threshold)
    header = (
        f"openai-latency report --by trace: {len(turns)} trace(s) in {stats.spans} spans,"
        f" {source_text(stats)}"
    )
    notes = []
    if trace_stats.late_spans:
        notes.append(
            f"{trace_stats.late_spans} span(s) of {len(trace_stats.late_traces)} trace(s) came more than"
            " the window after their root and were left out"
        )
    if stats.skipped_count:
        notes.append(f"skipped {stats.skipped_count} unreadable line(s); first: {stats.skipped[0]}")
    if args.format == "json":
        document: dict[str, Any] = {
            "tool": "openai-latency report",
            "version": __version__,
            "by": "trace",
            "source": source_text(stats),
            "spans": stats.spans,
            "critical_path_rule": RULE,
            "notes": notes,
            "groups": [group_json(group) for group in groups],
            "traces": [turn_json(turn) for turn in turns],
        }
        text = json.dumps(document, indent=2)
    else:
        lines = [header, RULE, *notes]
        for group in groups:
            lines += ["", *group_lines(group)]
        text = "\n".join(lines)
    if args.html:
        _write_html(args.html, turns, source_text(stats), err)
    write_output(out, text)
    return EXIT_OK


def _write_html(path: str, turns: list[Turn], source: str, err: TextIO) -> None:
    print(f"openai-latency report: --html with --by trace is not written yet ({path} not written)", file=err)
