"""``openai-latency compare BASELINE CURRENT --by trace``: the turns of two runs, root name by root
name: p50 and p95 of the turn's duration and of each category of its critical path (``llm``, ``tool``,
``other``, ``self``), with the 95 % bootstrap interval of each difference; ``--fail-if
'duration.p95>+20%'`` or ``'self.p50>+50ms'`` fails the run (exit 1) when the change crosses the
threshold and its interval excludes zero, as for calls."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from ...version import __version__
from ..args import EXIT_FAILED, EXIT_OK, write_output
from ..render.tables import table
from ..render.text import format_duration
from ..render.verdict import ms
from ..spans.files import without_gc
from ..spans.span import InputError, ReadStats
from ..spans.traces import assemble_traces
from ..stats.bootstrap import quantile_difference
from ..stats.critical_path import Turn, analyze
from ..stats.percentiles import percentile
from ..stats.turns import TURN_METRICS, metric_value, root_name
from ..stats.verdict import RATIO_FLOOR_S, Estimate
from .conditions import Condition
from .inputs import Source, open_side

STATS = (("p50", 0.50), ("p95", 0.95))


def _read(name: str, text: str, err: TextIO) -> tuple[dict[str, list[Turn]], Source] | None:
    stats = ReadStats()
    groups: dict[str, list[Turn]] = {}
    try:
        spans, source = open_side(text, stats)
        with without_gc():
            for trace in assemble_traces(spans):
                turn = analyze(trace)
                groups.setdefault(root_name(turn), []).append(turn)
    except InputError as exc:
        print(f"openai-latency compare: {name} {text}: {exc}", file=err)
        return None
    if not groups:
        print(f"openai-latency compare: {name} {text}: no spans found", file=err)
        return None
    return groups, source


def _estimates(base: list[Turn], current: list[Turn], metric: str) -> list[Estimate]:
    a = sorted(metric_value(turn, metric) for turn in base)
    b = sorted(metric_value(turn, metric) for turn in current)
    out = []
    for stat, q in STATS:
        interval = quantile_difference(a, b, q)
        low, high = percentile(a, q), percentile(b, q)
        ratio = high / low if low >= RATIO_FLOOR_S and high >= RATIO_FLOOR_S else None
        out.append(Estimate(stat, low, high, interval, interval.excludes_zero, ratio))
    return out


def _check(condition: Condition, label: str, estimates: dict[str, list[Estimate]]) -> dict[str, Any]:
    estimate = next(e for e in estimates[condition.metric] if e.stat == condition.stat)
    failed = condition.holds(estimate)
    i = estimate.interval
    share = f", {i.estimate / estimate.baseline:+.1%}" if estimate.baseline > 0 else ""
    change = f"{ms(i.estimate, True)}{share} [{ms(i.low, True)}..{ms(i.high, True)}]"
    return {
        "condition": condition.text, "group": label, "failed": failed, "checked": True,
        "difference": i.estimate, "ci_low": i.low, "ci_high": i.high,
        "threshold": condition.threshold(estimate.baseline),
        "text": f"{'FAILED' if failed else 'ok'}: {condition.text} in {label}: {change}",
    }  # fmt: skip


def run(parser: argparse.ArgumentParser, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    for condition in args.fail_if:
        if condition.metric not in TURN_METRICS:
            parser.error(
                f"--fail-if {condition.text!r}: with --by trace the metrics are {', '.join(TURN_METRICS)}"
            )
    if args.html:
        parser.error("--html is not written for --by trace yet")
    sides = [_read("baseline", args.baseline, err), _read("current", args.current, err)]
    if sides[0] is None or sides[1] is None:
        return EXIT_FAILED
    (base, base_source), (current, current_source) = sides[0], sides[1]
    if len(base) == 1 and len(current) == 1:
        pairs = [(next(iter(base)), next(iter(current)))]
    else:
        pairs = [(name, name) for name in current if name in base]
    notes = [
        f"only in the current run: {name} ({len(current[name])} turns)"
        for name in current
        if name not in base
    ]
    notes += [
        f"only in the baseline: {name} ({len(base[name])} turns)" for name in base if name not in current
    ]
    if not pairs:
        print("openai-latency compare: no root name is in both runs: " + "; ".join(notes), file=err)
        return EXIT_FAILED
    results = []
    for base_name, current_name in pairs:
        label = current_name if base_name == current_name else f"{base_name} -> {current_name}"
        estimates = {
            metric: _estimates(base[base_name], current[current_name], metric) for metric in TURN_METRICS
        }
        checks = [_check(condition, label, estimates) for condition in args.fail_if]
        results.append((label, len(base[base_name]), len(current[current_name]), estimates, checks))
    failed = any(check["failed"] for *_, checks in results for check in checks)
    if args.format == "json":
        text = json.dumps(_json(base_source, current_source, results, notes, failed), indent=2)
    else:
        text = "\n".join(_text(base_source, current_source, results, notes))
    for *_, checks in results:
        for check in checks:
            if check["failed"]:
                print(f"openai-latency compare: {check['text']}", file=err)
    write_output(out, text)
    return EXIT_FAILED if failed else EXIT_OK


Result = tuple[str, int, int, dict[str, list[Estimate]], list[dict[str, Any]]]


def _text(base: Source, current: Source, results: list[Result], notes: list[str]) -> list[str]:
    lines = [
        f"openai-latency compare --by trace: baseline {base.described}, current {current.described}",
        "per root name: the turn's duration and its critical path's categories (seconds per turn);"
        " 95 % bootstrap intervals of the difference",
        *notes,
    ]
    for label, n_base, n_current, estimates, checks in results:
        lines += ["", f"== {label} ({n_base} baseline turns, {n_current} current turns)"]
        rows = [["metric", "baseline", "current", "change", "95% interval"]]
        for metric in TURN_METRICS:
            for e in estimates[metric]:
                i = e.interval
                mark = " *" if e.significant else ""
                rows.append(
                    [f"{metric}.{e.stat}", format_duration(e.baseline), format_duration(e.current),
                     ms(i.estimate, True) + mark, f"{ms(i.low, True)}..{ms(i.high, True)}"]
                )  # fmt: skip
        lines += table(rows, indent="  ")
        lines += [check["text"] for check in checks]
    return lines


def _json(
    base: Source, current: Source, results: list[Result], notes: list[str], failed: bool
) -> dict[str, Any]:
    groups = []
    for label, n_base, n_current, estimates, checks in results:
        metrics = {
            f"{metric}.{e.stat}": {
                "baseline": e.baseline,
                "current": e.current,
                "difference": e.interval.estimate,
                "ci_low": e.interval.low,
                "ci_high": e.interval.high,
                "significant": e.significant,
            }
            for metric in TURN_METRICS
            for e in estimates[metric]
        }
        groups.append(
            {
                "root": label,
                "baseline_turns": n_base,
                "current_turns": n_current,
                "metrics": metrics,
                "conditions": checks,
            }
        )
    return {
        "tool": "openai-latency compare", "version": __version__, "by": "trace",
        "baseline": base.described, "current": current.described, "notes": notes, "groups": groups,
        "failed": failed,
    }  # fmt: skip
