"""The ``openai-latency`` command: ``demo``, ``bench``, ``report`` and ``fake-server``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from ..version import __version__

#: Command -> the module whose ``main(argv)`` runs it.
COMMANDS = {
    "demo": "openai_latency.cli.demo",
    "bench": "openai_latency.cli.bench",
    "report": "openai_latency.cli.report",
    "fake-server": "openai_latency.fake_server.cli",
}
DEBUG_ENV = "OPENAI_LATENCY_DEBUG"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="openai-latency",
        description=f"Where the time of every OpenAI SDK call goes. Commands: {', '.join(COMMANDS)}.",
    )
    parser.add_argument("--version", action="version", version=f"openai-latency {__version__}")
    parser.add_argument("command", choices=tuple(COMMANDS), help="what to run")
    if not args or args[0].startswith("-"):
        parser.parse_args(args or ["--help"])
        return 2
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        parser.parse_args(args)  # prints the usage error and exits 2
        return 2
    run = importlib.import_module(COMMANDS[command]).main
    try:
        return int(run(rest))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug of ours: one line, the traceback on request
        if os.environ.get(DEBUG_ENV):
            raise
        print(
            f"openai-latency {command}: internal error: {type(exc).__name__}: {exc}"
            f" (set {DEBUG_ENV}=1 for the traceback, and please report it)",
            file=sys.stderr,
        )
        return 70
