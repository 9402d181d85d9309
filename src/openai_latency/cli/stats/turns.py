"""Turns aggregated over traces with the same root name: p50/p95 of the duration and of each
category of the critical path (seconds and share of the turn), the LLM calls' totals, and the slow
turns with what dominated each (``report --by trace``'s groups and triage, ``compare --by trace``'s
samples)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from .critical_path import CATEGORIES, Turn
from .percentiles import Dist, percentile
from .server_join import ServerSplit

#: The name of the group of traces whose root is missing.
NO_ROOT: Final = "(root missing)"
#: What ``compare --by trace --fail-if`` can gate on: seconds per turn.
TURN_METRICS: Final = ("duration", *CATEGORIES)


def root_name(turn: Turn) -> str:
    return turn.root if turn.root is not None else NO_ROOT


def metric_value(turn: Turn, metric: str) -> float:
    """One of :data:`TURN_METRICS` of a turn, in seconds."""
    return turn.duration if metric == "duration" else turn.path[metric]


@dataclass
class SlowTurn:
    turn: Turn
    #: The category with the most time on the path, its seconds and share of the turn.
    category: str
    seconds: float
    share: float
    #: For ``llm``: the phase with the most time on the path, and its seconds.
    phase: str | None = None
    phase_seconds: float = 0.0


@dataclass
class TurnGroup:
    root: str
    turns: list[Turn]
    duration: Dist
    #: Per category: seconds on the path and share of the turn, over every turn of the group.
    path: dict[str, Dist]
    share: dict[str, Dist]
    #: Per LLM phase: seconds on the path (0 in turns without it).
    llm_phases: dict[str, Dist]
    llm_calls: int = 0
    off_path_calls: int = 0
    calls_in_tools: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    retries: int = 0
    errors: int = 0
    #: The server's split of the calls on the path, summed over the group (None: no call joined).
    server_path: ServerSplit | None = None
    server_status: dict[str, int] = field(default_factory=dict)
    slow_threshold: float = 0.0
    slow_rule: str = "p95"
    slow: list[SlowTurn] = field(default_factory=list)


def _dist(values: Iterable[float]) -> Dist:
    dist = Dist.of(values)
    assert dist is not None  # a group has at least one turn
    return dist


def slow_turn(turn: Turn) -> SlowTurn:
    category = turn.dominant()
    seconds = turn.path[category]
    slow = SlowTurn(turn, category, seconds, seconds / turn.duration if turn.duration > 0 else 0.0)
    if category == "llm" and turn.llm_phases:
        slow.phase = max(turn.llm_phases, key=lambda name: turn.llm_phases[name])
        slow.phase_seconds = turn.llm_phases[slow.phase]
    return slow


def summarize_group(root: str, turns: Sequence[Turn], slow_threshold: float | None = None) -> TurnGroup:
    # one pass over the turns (73,000 of them on 1 M spans: a pass per number took 1.2 s)
    durations: list[float] = []
    path: dict[str, list[float]] = {name: [] for name in CATEGORIES}
    share: dict[str, list[float]] = {name: [] for name in CATEGORIES}
    llm_phases: dict[str, list[float]] = {}
    for index, turn in enumerate(turns):
        duration = (turn.end_ns - turn.start_ns) / 1e9
        durations.append(duration)
        for name, seconds in turn.path.items():
            path[name].append(seconds)
            share[name].append(seconds / duration if duration > 0 else 0.0)
        for name, seconds in turn.llm_phases.items():
            values = llm_phases.get(name)
            if values is None:  # a phase first seen now: 0 in the turns before
                values = llm_phases[name] = [0.0] * index
            values.append(seconds)
        for values in llm_phases.values():
            if len(values) == index:  # a phase this turn did not have
                values.append(0.0)
    group = TurnGroup(
        root,
        list(turns),
        _dist(durations),
        {name: _dist(values) for name, values in path.items()},
        {name: _dist(values) for name, values in share.items()},
        {name: _dist(llm_phases[name]) for name in sorted(llm_phases)},
    )
    for turn in turns:
        for call in turn.calls:
            group.llm_calls += 1
            group.off_path_calls += not call.on_path
            group.calls_in_tools += call.in_tool
            group.input_tokens += call.input_tokens or 0
            group.output_tokens += call.output_tokens or 0
            group.retries += call.retries
            group.errors += call.error_type is not None
            group.server_status[call.server_status] = group.server_status.get(call.server_status, 0) + 1
        if turn.server_path is not None:
            group.server_path = group.server_path or ServerSplit()
            group.server_path.add(turn.server_path)
    if slow_threshold is None:
        group.slow_threshold = percentile(sorted(durations), 0.95)
    else:
        group.slow_threshold, group.slow_rule = slow_threshold, "threshold"
    slow = [turn for turn in turns if turn.duration >= group.slow_threshold]
    slow.sort(key=lambda turn: turn.duration, reverse=True)
    group.slow = [slow_turn(turn) for turn in slow]
    return group


def group_turns(turns: Iterable[Turn], slow_threshold: float | None = None) -> list[TurnGroup]:
    """One group per root name, the groups with the most turns first."""
    by_root: dict[str, list[Turn]] = {}
    for turn in turns:
        by_root.setdefault(root_name(turn), []).append(turn)
    ordered = sorted(by_root.items(), key=lambda item: (-len(item[1]), item[0]))
    return [summarize_group(root, members, slow_threshold) for root, members in ordered]
