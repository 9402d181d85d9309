"""``openai-latency fake-server``: the fake server's own command line, under the commands' contract."""

from __future__ import annotations

import contextlib
import sys
from typing import TextIO


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Serves until SIGINT/SIGTERM; what the fake server prints goes to ``out`` and ``err``."""
    from ..fake_server.cli import main as serve

    with contextlib.redirect_stdout(out or sys.stdout), contextlib.redirect_stderr(err or sys.stderr):
        return serve(argv, prog="openai-latency fake-server")
