"""The ``openai-latency`` command: ``demo``, ``bench``, ``report``, ``compare`` and ``fake-server``.

Every command is a ``main(argv, out, err) -> int`` in its own package (``report.command``,
``bench.command``, ``compare.command``, ``demo.command``; ``serve`` adapts the fake server's),
imported only when it runs.
The exit statuses are the same for all (:mod:`.args`): 0 done, 1 nothing to report or a failed
target or input, 2 bad input (argparse's errors and :class:`~.args.UsageError`, as one line), 70 a bug
of ours (one line; the traceback with ``OPENAI_LATENCY_DEBUG=1``), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import TextIO

from ..version import __version__
from .args import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UsageError, quiet

#: Command -> what it does, in one line (``openai-latency --help``).
SUMMARIES = {
    "demo": "the whole story on three local fake endpoints, in half a minute (no key, no network)",
    "bench": "benchmark OpenAI-compatible endpoints or models side by side, every phase of every request",
    "report": "p50/p95/p99 per phase, triage and waterfall from exported traces (files or Jaeger)",
    "compare": "compare two runs with confidence intervals; --fail-if gates a CI job",
    "fake-server": "an OpenAI-compatible server with scripted latency and failures, on 127.0.0.1",
}
#: Command -> the module whose ``main(argv, out, err)`` runs it.
COMMANDS = {
    "demo": "openai_latency.cli.demo.command",
    "bench": "openai_latency.cli.bench.command",
    "report": "openai_latency.cli.report.command",
    "compare": "openai_latency.cli.compare.command",
    "fake-server": "openai_latency.cli.serve",
}
DEBUG_ENV = "OPENAI_LATENCY_DEBUG"


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    err = err or sys.stderr
    parser = argparse.ArgumentParser(
        prog="openai-latency",
        description="Where the time of every OpenAI SDK call goes.\n\ncommands:\n"
        + "\n".join(f"  {name:<13}{SUMMARIES[name]}" for name in COMMANDS)
        + "\n\nopenai-latency COMMAND --help: the command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"openai-latency {__version__}")
    parser.add_argument("command", choices=tuple(COMMANDS), help="what to run")
    if not args or args[0].startswith("-"):
        parser.parse_args(args or ["--help"])
        return EXIT_USAGE
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        parser.parse_args(args)  # prints the usage error and exits 2
        return EXIT_USAGE
    run = importlib.import_module(COMMANDS[command]).main
    try:
        return int(run(rest, out, err))
    except BrokenPipeError:  # `openai-latency ... | head`: the reader has gone, which is fine
        quiet(sys.stdout)  # so that the interpreter's last flush does not fail again
        return EXIT_OK
    except UsageError as exc:
        print(f"openai-latency {command}: error: {exc}", file=err)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug of ours: one line, the traceback on request
        if os.environ.get(DEBUG_ENV):
            raise
        print(
            f"openai-latency {command}: internal error: {type(exc).__name__}: {exc}"
            f" (set {DEBUG_ENV}=1 for the traceback, and please report it)",
            file=err,
        )
        return EXIT_INTERNAL
