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
from ..plan import LevelKey, Load, Plan
from ..run.runner import RunState
from .levels import client_verdict, level_client
from .stats import TargetStats
from .verdicts import level_verdicts, sweep_verdicts


@dataclass(frozen=True)
class Level:
    """One load level: its targets' numbers, their verdicts, the client's cost there."""

    #: The load level and turn (``level.label``: what the outputs print, ``"c=4 turn 2"``).
    key: LevelKey
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

    def warnings(self) -> list[tuple[str, str]]:
        """(load level, words) of each level where the client was the bottleneck; the run's own
        warning when no level has one (``--workers``: the levels ran in other processes)."""
        found = [(level.key.label, level.client["warning"]) for level in self.levels if level.client]
        found = [(load, text) for load, text in found if text]
        return found or ([("", self.client["warning"])] if self.client["warning"] else [])


def build(plan: Plan, stats: Sequence[TargetStats], state: RunState) -> BenchResult:
    """The results of a run (see the module docstring); the verdicts' bootstraps run here, once."""
    order = {t.name: i for i, t in enumerate(plan.targets)}
    ordered = sorted(stats, key=lambda s: (s.level.load, s.level.turn or 0, order.get(s.label, 0)))
    baseline = plan.options.baseline
    by_level: dict[LevelKey, list[TargetStats]] = {}
    for s in ordered:
        by_level.setdefault(s.level, []).append(s)
    ran = state.sweep.levels if state.sweep else plan.options.schedule.levels
    shapes = {load.label: load for load in ran}
    levels = [
        Level(
            key,
            level,
            level_verdicts(level, baseline),
            level_client(key, level, state, shapes.get(key.load)),
        )
        for key, level in by_level.items()
    ]
    only = next(iter(shapes.values())) if len(shapes) == 1 else None
    client = client_cost(ordered, state, only, [level.client for level in levels])
    return BenchResult(ordered, levels, sweep_verdicts(ordered, baseline), client)


def client_cost(
    stats: Sequence[TargetStats],
    state: RunState,
    shape: Load | None,
    levels: Sequence[dict[str, Any] | None] = (),
) -> dict[str, Any]:
    """What the bench client itself cost over the run, and whether it held the measured calls up
    (:func:`.levels.client_verdict`; over several levels, the ``--workers`` the most demanding
    level calls for)."""
    requests = sum(s.requests + s.cancelled for s in stats)
    lag = Dist.of(state.loop_lag)
    workers = max((level["workers_suggested"] or 0 for level in levels if level), default=0)
    client = client_verdict(state.cpu_s, requests, lag, stats, shape, workers or None)
    return {**client, "loop_lag": lag.as_dict() if lag else None}
