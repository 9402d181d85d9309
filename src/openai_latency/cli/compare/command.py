"""``openai-latency compare BASELINE CURRENT``: did TTFT get worse? Two runs, group by group, with the
verdict of ``bench`` (95 % bootstrap intervals, the phases that moved), and ``--fail-if`` conditions
that a CI job can gate on (exit 1)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TextIO

from ...version import __version__
from ..args import EXIT_FAILED, EXIT_OK, Parser, add_by_option, by_keys, write_output
from ..render.tables import table
from ..render.verdict import method, method_json, ms, sentences, verdict_json, verdict_rows
from ..spans.calls import Call
from ..spans.collect import collect_calls
from ..spans.files import without_gc
from ..spans.names import GROUP_KEYS
from ..spans.span import InputError, ReadStats
from ..stats.groups import DEFAULT_BY_TEXT, Group, default_by, group
from ..stats.verdict import Verdict, compare
from .conditions import Condition, find_estimate, parse_condition
from .inputs import Source, open_side


def _parser(out: TextIO | None = None, err: TextIO | None = None) -> Parser:
    parser = Parser(
        prog="openai-latency compare",
        out=out,
        err=err,
        description=(
            "Compare two runs (a stored baseline and the current one): per group, the difference of TTFT,"
            " time to first answer token, e2e and TPOT at p50 and p95 and of the error rate, with 95 %"
            " bootstrap intervals and the phases that moved; --fail-if gates a CI job."
        ),
        epilog=(
            "BASELINE and CURRENT: OTLP JSON files, directories or globs (bench --out, the file exporter),"
            " a bench --format json result (its --out spans are read), or"
            " jaeger:http://HOST:16686?service=NAME&lookback=1h&limit=N. Exit status: 0 no condition"
            " failed, 1 a --fail-if condition held with its interval excluding zero (or an input failed),"
            " 2 bad usage."
        ),
    )
    parser.add_argument("baseline", metavar="BASELINE", help="the run to compare against")
    parser.add_argument("current", metavar="CURRENT", help="the run under test")
    add_by_option(parser, GROUP_KEYS, DEFAULT_BY_TEXT)
    parser.add_argument(
        "--fail-if",
        action="append",
        type=parse_condition,
        default=[],
        metavar="CONDITION",
        help=(
            "exit 1 when this holds and its 95%% interval excludes zero, repeatable: 'ttft.p95>+10%%',"
            " 'e2e.p50>+50ms', 'tpot.p50>+2ms', 'error_rate>+1pp' (METRIC: ttft, ttft_answer, e2e, tpot)"
        ),
    )
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (default: text)"
    )
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="also write charts of both runs (distributions, phases, time, slowest calls): one offline page",
    )
    return parser


def _read(name: str, text: str, err: TextIO) -> tuple[list[Call], Source] | None:
    stats = ReadStats()
    try:
        spans, source = open_side(text, stats)
        with without_gc():
            calls = collect_calls(spans).calls
    except InputError as exc:
        print(f"openai-latency compare: {name} {text}: {exc}", file=err)
        return None
    if not calls:
        print(
            f"openai-latency compare: {name} {text}: no operation spans found ({stats.spans} spans read)",
            file=err,
        )
        return None
    return calls, source


def _pairs(base: list[Group], current: list[Group]) -> tuple[list[tuple[Group, Group]], list[str]]:
    """Groups with the same keys; one group each side is compared whatever its keys."""
    if len(base) == 1 and len(current) == 1:
        return [(base[0], current[0])], []
    by_key = {tuple(g.key.values()): g for g in base}
    pairs, notes = [], []
    for entry in current:
        match = by_key.pop(tuple(entry.key.values()), None)
        if match is None:
            notes.append(f"only in the current run: {entry.label} ({len(entry.members)} calls)")
        else:
            pairs.append((match, entry))
    notes += [f"only in the baseline: {g.label} ({len(g.members)} calls)" for g in by_key.values()]
    return pairs, notes


def _label(base: Group, current: Group) -> str:
    if base.key == current.key:
        return current.label
    return f"{base.label} -> {current.label}"


def _check(condition: Condition, label: str, verdict: Verdict) -> dict[str, Any]:
    estimate = find_estimate(verdict, condition)
    if estimate is None:
        why = f"not checked (no {condition.metric} values on both sides)"
        return {
            "condition": condition.text, "group": label, "failed": False, "checked": False,
            "text": f"{condition.text} in {label}: {why}",
        }  # fmt: skip
    failed = condition.holds(estimate)
    i = estimate.interval
    if condition.metric == "error_rate":
        change = f"{i.estimate * 100:+.1f} pp [{i.low * 100:+.1f}..{i.high * 100:+.1f}]"
    else:
        share = f", {i.estimate / estimate.baseline:+.1%}" if estimate.baseline > 0 else ""
        change = f"{ms(i.estimate, True)}{share} [{ms(i.low, True)}..{ms(i.high, True)}]"
    text = f"{'FAILED' if failed else 'ok'}: {condition.text} in {label}: {change}"
    moved = estimate.phases[0] if estimate.phases else None
    if failed and moved is not None:
        text += f"; phase moved most: {moved.phase} ({ms(moved.change, True)} per call near {estimate.stat})"
    return {
        "condition": condition.text, "group": label, "failed": failed, "checked": True,
        "difference": i.estimate, "ci_low": i.low, "ci_high": i.high,
        "threshold": condition.threshold(estimate.baseline),
        "phase_moved": moved.phase if moved is not None else None, "text": text,
    }  # fmt: skip


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = _parser(out, err)
    args = parser.parse_args(argv)
    keys = by_keys(parser, args.by, GROUP_KEYS)
    sides = [_read("baseline", args.baseline, err), _read("current", args.current, err)]
    if sides[0] is None or sides[1] is None:
        return EXIT_FAILED
    (base_calls, base_source), (current_calls, current_source) = sides[0], sides[1]
    by = keys if keys is not None else default_by([*base_calls, *current_calls])
    pairs, notes = _pairs(group(base_calls, by), group(current_calls, by))
    if not pairs:
        print("openai-latency compare: no group is in both runs: " + "; ".join(notes), file=err)
        return EXIT_FAILED
    results = []
    for base, current in pairs:
        label = _label(base, current)
        verdict = compare(base.members, current.members, ("baseline", "current"))
        checks = [_check(condition, label, verdict) for condition in args.fail_if]
        results.append((label, base, current, verdict, checks))
    failed = any(check["failed"] for *_, checks in results for check in checks)
    if args.format == "json":
        text = json.dumps(_json(base_source, current_source, by, results, notes, failed), indent=2)
    else:
        text = "\n".join(_text(base_source, current_source, by, results, notes))
    for *_, checks in results:
        for check in checks:
            if check["failed"] or not check["checked"]:
                print(f"openai-latency compare: {check['text']}", file=err)
    if args.html:
        _write_html(args.html, results, err)
    write_output(out, text)
    return EXIT_FAILED if failed else EXIT_OK


Result = tuple[str, Group, Group, Verdict, list[dict[str, Any]]]


def _text(
    base: Source, current: Source, by: Sequence[str], results: list[Result], notes: list[str]
) -> list[str]:
    lines = [
        f"openai-latency compare: baseline {base.described}, current {current.described}",
        f"grouped by: {', '.join(by) or 'none'}; {method()}",
        *notes,
    ]
    for label, base_group, current_group, verdict, checks in results:
        lines += [
            "",
            f"== {label} ({len(base_group.members)} baseline calls,"
            f" {len(current_group.members)} current calls)",
        ]
        lines += sentences(verdict)
        rows = verdict_rows([verdict])
        if len(rows) > 1:
            lines += ["", *table(rows, indent="")]
        lines += [check["text"] for check in checks]
    return lines


def _json(
    base: Source, current: Source, by: Sequence[str], results: list[Result], notes: list[str], failed: bool
) -> dict[str, Any]:
    return {
        "tool": "openai-latency compare",
        "version": __version__,
        "baseline": base.described,
        "current": current.described,
        "by": list(by),
        **method_json(),
        "notes": notes,
        "groups": [
            {
                "label": label,
                "baseline_key": b.key,
                "current_key": c.key,
                "verdict": verdict_json(verdict),
                "conditions": checks,
            }
            for label, b, c, verdict, checks in results
        ],
        "failed": failed,
    }


def _write_html(path: str, results: list[Result], err: TextIO) -> None:
    """Both runs' calls on one page, each group's side named ``baseline``/``current`` as its target."""
    from ..render.html import write_page

    calls: list[Call] = []
    notes: list[str] = []
    for label, base, current, verdict, _ in results:
        prefix = f"{label} " if len(results) > 1 else ""
        for side, members in (("baseline", base.members), ("current", current.members)):
            calls += [replace(c, keys={**c.keys, "target": prefix + side, "load": "-"}) for c in members]
        notes += [prefix + line for line in sentences(verdict)]
    title = "openai-latency compare: baseline and current"
    write_page("compare", path, title, notes, calls, __version__, err)
