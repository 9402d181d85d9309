"""``openai-latency report --by trace``: where each turn's time went (DESIGN.md §12).

Reads the same inputs as the per-call report (files, globs, directories, ``--jaeger``), assembles
whole traces (:mod:`..spans.traces`), walks each one's critical path (:mod:`..stats.critical_path`)
and prints, per root name, a sentence, the p50/p95 table, the calls' totals, the server's split and
the slow turns; ``--format json`` gives every trace and every group.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any, TextIO

from ...version import __version__
from ..args import EXIT_FAILED, EXIT_OK, quiet, write_output
from ..render.html import save_page
from ..render.turn_html import turns_page
from ..render.turns import RULE, group_json, group_lines, turn_json
from ..spans.files import without_gc
from ..spans.span import InputError, ReadStats
from ..spans.traces import NodeMaker, TraceReadStats, assemble_nodes
from ..stats.critical_path import Turn, analyze
from ..stats.turns import TurnGroup, group_turns
from .output import source_text
from .sources import open_spans_as

try:  # the cli extra (the reader imports it too)
    import msgspec
except ImportError:  # pragma: no cover - depends on the environment
    msgspec = None  # type: ignore[assignment]
#: One trace's JSON line (73,000 of them on 1 M spans): msgspec's encoder, looked up once.
_encode: Callable[[Any], bytes] | None = None if msgspec is None else msgspec.json.Encoder().encode

#: Options of the per-call report that mean nothing for turns.
CALL_OPTIONS = ("compare", "http", "waterfall", "client_timeout")


def run(
    parser: argparse.ArgumentParser, args: argparse.Namespace, default: str, out: TextIO, err: TextIO
) -> int:
    for name in CALL_OPTIONS:
        if getattr(args, name):
            parser.error(f"--{name.replace('_', '-')} is for calls, not with --by trace")
    stats, trace_stats = ReadStats(), TraceReadStats()
    turns: list[Turn] = []
    # --format json: each trace's JSON written as soon as its turn is known, one compact line; the
    # turn is then kept slim (its numbers, not its path) unless --html draws it: memory per trace
    # stays small, and the document is never held whole
    lines_out = TraceLines(out) if args.format == "json" else None
    try:
        # a node reads few of a span's attribute values: the others are never decoded
        nodes = open_spans_as(parser, args, default, stats, NodeMaker().node, lazy_values=True)
        with without_gc():
            for trace in assemble_nodes(nodes, trace_stats):
                turn = analyze(trace)
                if lines_out is not None:
                    lines_out.add(compact(turn_json(turn)))
                if not args.html:
                    turn.slim()
                turns.append(turn)
    except InputError as exc:
        print(f"openai-latency report: {exc}", file=err)
        return EXIT_FAILED
    if not turns:
        print(f"openai-latency report: no spans found in {source_text(stats)}", file=err)
        return EXIT_FAILED
    lone = [turn for turn in turns if turn.server_only]
    if lone and len(lone) < len(turns):  # the server's traces of their own are not the app's turns
        turns = [turn for turn in turns if not turn.server_only]
    else:
        lone = []
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
    if lone:
        notes.append(
            f"{len(lone)} server span(s) ({lone[0].root}) in a trace of their own: the server did not"
            " continue the caller's traceparent (dropped it, or a stale context); the calls they served"
            " get no server split"
        )
    if stats.skipped_count:
        notes.append(f"skipped {stats.skipped_count} unreadable line(s); first: {stats.skipped[0]}")
    if lines_out is not None:
        document: dict[str, Any] = {
            "tool": "openai-latency report",
            "version": __version__,
            "by": "trace",
            "source": source_text(stats),
            "spans": stats.spans,
            "input": {
                "spans": stats.spans,
                "traces": trace_stats.traces,
                "late_spans": trace_stats.late_spans,
                "max_open_spans": trace_stats.max_open_nodes,
            },
            "critical_path_rule": RULE,
            "notes": notes,
            "groups": [group_json(group) for group in groups],
        }
        if args.html:
            _write_html(args.html, groups, source_text(stats), err)
        lines_out.finish(dumps(document))
        return EXIT_OK
    lines = [header, RULE, *notes]
    for group in groups:
        lines += ["", *group_lines(group)]
    if args.html:
        _write_html(args.html, groups, source_text(stats), err)
    write_output(out, "\n".join(lines))
    return EXIT_OK


class TraceLines:
    """``--format json`` written as it comes: ``{"traces": [`` one line per trace as each is read,
    then ``],`` and the rest of the document (indented) once every trace is known. A reader that has
    gone (``| head``) is fine, as for :func:`~..args.write_output`."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.count = 0
        self.gone = False

    def add(self, line: str) -> None:
        self._write(('{\n  "traces": [\n    ' if self.count == 0 else ",\n    ") + line)
        self.count += 1

    def finish(self, rest: str) -> None:
        """``rest``: the document of the other keys, indented (``{`` ... ``}``)."""
        inner = rest.strip()
        assert inner.startswith("{") and inner.endswith("}")
        self._write(("\n  ]," if self.count else '{\n  "traces": [],') + inner[1:] + "\n")
        if not self.gone:
            try:
                self.out.flush()
            except BrokenPipeError:
                quiet(self.out)

    def _write(self, text: str) -> None:
        if self.gone:
            return
        try:
            self.out.write(text)
        except BrokenPipeError:
            self.gone = True
            quiet(self.out)


def dumps(document: dict[str, Any]) -> str:
    """``json.dumps(document, indent=2)``; by msgspec when installed (the ``cli`` extra): the standard
    library indents in Python (40 % of a run on 100,000 spans when every trace was indented)."""
    if msgspec is None:  # pragma: no cover - depends on the environment
        return json.dumps(document, indent=2)
    return msgspec.json.format(msgspec.json.encode(document), indent=2).decode()


def compact(value: dict[str, Any]) -> str:
    """One line of JSON."""
    if _encode is None:  # pragma: no cover - depends on the environment
        return json.dumps(value, separators=(",", ":"))
    return _encode(value).decode()


def _write_html(path: str, groups: list[TurnGroup], source: str, err: TextIO) -> None:
    title = f"openai-latency report --by trace: {source}"
    page = lambda: turns_page(title, groups, __version__)  # noqa: E731
    save_page("report", path, page, err, "turn waterfalls: {path} (one page, opens offline)")
