"""The ``openai-latency`` command: ``demo``, ``bench``, ``report`` and ``fake-server``."""

from __future__ import annotations

import argparse
import sys

from ..version import __version__


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="openai-latency",
        description="Where the time of every OpenAI SDK call goes. Commands: demo, bench, report, fake-server.",
    )
    parser.add_argument("--version", action="version", version=f"openai-latency {__version__}")
    parser.add_argument("command", choices=("demo", "bench", "report", "fake-server"), help="what to run")
    if not args or args[0].startswith("-"):
        parser.parse_args(args or ["--help"])
        return 2
    command, rest = args[0], args[1:]
    if command == "fake-server":
        from ..fake_server.cli import main as fake_server_main

        return fake_server_main(rest)
    if command == "demo":
        from .demo import main as demo_main

        return demo_main(rest)
    if command == "bench":
        from .bench import main as bench_main

        return bench_main(rest)
    if command == "report":
        from .report import main as report_main

        return report_main(rest)
    parser.parse_args(args)  # prints the usage error and exits 2
    return 2
