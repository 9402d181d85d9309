"""bench's options of its SDK client: ``--timeout``, ``--max-retries``, ``--sdk-parse``."""

from __future__ import annotations

import argparse

from ... import args as arguments


def add_client_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--timeout", type=arguments.duration, default=60.0, metavar="S", help="default 60 s")
    group.add_argument(
        "--max-retries", type=arguments.non_negative_count, default=2, help="SDK retries (default 2)"
    )
    group.add_argument(
        "--sdk-parse",
        choices=("validate", "construct"),
        default="validate",
        help=(
            "how the SDK builds each response model: validate (default: pydantic's validator, ~20x less"
            " client CPU per chunk; a body off the schema falls back to the SDK's way) or construct (the"
            " SDK's default, what an application spends)"
        ),
    )
