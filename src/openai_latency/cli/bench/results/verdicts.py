"""The verdict of a bench run: at each load level, every target against the baseline target; and for
a sweep of one target, every load level against the baseline level.

The baseline is ``--baseline NAME`` (a target's name, or a load level's label such as ``c=1``), else
the first target given or the first level. The numbers are :func:`..stats.verdict.compare`'s, the
words :mod:`..render.verdict`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...render.verdict import method, method_json, sentences, verdict_json, verdict_rows
from ...stats.verdict import Verdict, compare
from .stats import TargetStats


def level_verdicts(level: Sequence[TargetStats], baseline: str | None) -> list[Verdict]:
    """One verdict per target other than the baseline, at one load level (none with one target)."""
    if len(level) < 2:
        return []
    base = next((s for s in level if s.label == baseline), level[0])
    return [
        compare(base.group.group.members, s.group.group.members, (base.label, s.label))
        for s in level
        if s is not base
    ]


def sweep_verdicts(stats: Sequence[TargetStats], baseline: str | None) -> list[Verdict]:
    """One target, several load levels: every level against the baseline level (none otherwise)."""
    if len({s.label for s in stats}) != 1 or len(stats) < 2:
        return []
    base = next((s for s in stats if s.group.key.get("load") == baseline), stats[0])
    label = base.group.key.get("load", "")
    return [
        compare(base.group.group.members, s.group.group.members, (label, s.group.key.get("load", "")))
        for s in stats
        if s is not base
    ]


#: A line of output and its style (``bold`` for a verdict's sentence, else None).
Styled = tuple[str, str | None]


def verdict_lines(verdicts: Sequence[Verdict]) -> tuple[list[Styled], list[list[str]]]:
    """The sentences (bold), the method's line, and the table's rows (empty without a verdict)."""
    if not verdicts:
        return [], []
    lines: list[Styled] = [(line, "bold") for verdict in verdicts for line in sentences(verdict)]
    rows = verdict_rows(verdicts)
    if len(rows) == 1:  # too few calls: nothing was compared
        return lines, []
    return [*lines, (f"({method()})", None)], rows


def verdicts_json(levels: Mapping[str, Sequence[Verdict]], across: Sequence[Verdict]) -> dict[str, Any]:
    """The verdicts as computed once (:mod:`.results`), as JSON."""
    return {
        **method_json(),
        "levels": {load: [verdict_json(v) for v in verdicts] for load, verdicts in levels.items()},
        "across_levels": [verdict_json(v) for v in across],
    }
