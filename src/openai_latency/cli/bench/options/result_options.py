"""bench's options of what it prints and writes: ``--baseline`` (the verdict), ``--format``, ``--html``;
the help of ``--target``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ...args import UsageError

TARGET = "NAME=BASE_URL[@MODEL]"
TARGET_HELP = "an endpoint to benchmark, repeatable: a name, its base URL (with /v1), optionally @model"


def add_result_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--baseline",
        metavar="NAME",
        help=(
            "what the verdict compares with: a target's name (default: the first --target), or, for a"
            " sweep of one target, a load level such as c=1 (default: the first level)"
        ),
    )
    group.add_argument(
        "--format",
        choices=("table", "json", "markdown", "csv"),
        default="table",
        help="output: table (default), json (everything), markdown, csv (long format, one row per number)",
    )
    group.add_argument(
        "--html",
        metavar="FILE",
        help="also write charts (distributions, phases, load levels, time, slowest calls): one offline page",
    )


def check_baseline(baseline: str | None, targets: Sequence[str], levels: Sequence[str]) -> None:
    """:class:`UsageError` when ``--baseline`` names neither a target nor a load level."""
    if baseline is not None and baseline not in (*targets, *levels):
        raise UsageError(
            f"--baseline: no target or load level named {baseline!r} (targets: {', '.join(targets)};"
            f" levels: {', '.join(levels)})"
        )
