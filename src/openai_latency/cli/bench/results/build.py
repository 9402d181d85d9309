"""A bench run's results, computed once: every output (the table, Markdown, CSV, JSON, the bold
lines, the ``--html`` page) only reads them.

:func:`build` takes the per-target numbers (:mod:`.stats`) and the run's record (:class:`.run.RunState`)
and gives one :class:`BenchResult`: the numbers in output order, grouped by load level, each level's
verdicts (every target against the baseline target), the verdicts across levels (a sweep of one
target: every level against the baseline level), and what the client itself cost, in all and per
level.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...stats.percentiles import Dist
from ...stats.verdict import Verdict
from ..plan import Plan
from ..run.runner import LAG_WARNING_S, RunState
from .levels import level_client
from .stats import TargetStats
from .verdicts import level_verdicts, sweep_verdicts


@dataclass(frozen=True)
class Level:
    """One load level: its targets' numbers, their verdicts, the client's cost there."""

    load: str
    stats: list[TargetStats]
    verdicts: list[Verdict]
    #: The client's own cost at this level (None: run in worker processes).
    client: dict[str, Any] | None


@dataclass(frozen=True)
class BenchResult:
    #: Every (target, load level), by load level, then in the order the targets were given.
    stats: list[TargetStats]
    levels: list[Level]
    #: One target, several levels: every level against the baseline level (else empty).
    across: list[Verdict]
    #: What the bench client itself cost over the run, and whether it held the measured calls up.
    client: dict[str, Any]

    def level(self, load: str) -> Level | None:
        return next((level for level in self.levels if level.load == load), None)


def build(plan: Plan, stats: Sequence[TargetStats], state: RunState) -> BenchResult:
    """The results of a run (see the module docstring); the verdicts' bootstraps run here, once."""
    order = {t.name: i for i, t in enumerate(plan.targets)}
    ordered = sorted(stats, key=lambda s: (s.group.key.get("load", ""), order.get(s.group.key["target"], 0)))
    baseline = plan.options.baseline
    by_load: dict[str, list[TargetStats]] = {}
    for s in ordered:
        by_load.setdefault(s.group.key.get("load", ""), []).append(s)
    levels = [
        Level(load, level, level_verdicts(level, baseline), level_client(load, level, state))
        for load, level in by_load.items()
    ]
    return BenchResult(ordered, levels, sweep_verdicts(ordered, baseline), client_cost(ordered, state))


def client_cost(stats: Sequence[TargetStats], state: RunState) -> dict[str, Any]:
    """What the bench client itself cost, and whether it held the measured calls up."""
    requests = sum(s.requests + s.cancelled for s in stats)
    lag = Dist.of(state.loop_lag)
    return {
        "cpu_s": state.cpu_s,
        "cpu_per_request_s": state.cpu_s / requests if requests else None,
        "loop_lag": lag.as_dict() if lag else None,
        "bottleneck": bool(lag and lag.p95 > LAG_WARNING_S),
    }
