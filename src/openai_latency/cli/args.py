"""What every command shares: its exit statuses, :class:`UsageError`, the parser whose errors are one
line on stderr (never a traceback), and the option value parsers."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

#: Exit statuses of every command (the policy is ``cli.main``'s: it maps what a command raises).
EXIT_OK = 0
#: The command ran and found nothing to report, or a target or an input failed.
EXIT_FAILED = 1
#: Bad input: an unknown option, a value out of range (:class:`UsageError`, argparse's errors).
EXIT_USAGE = 2
#: A bug of ours (``EX_SOFTWARE``): one line, the traceback with ``OPENAI_LATENCY_DEBUG=1``.
EXIT_INTERNAL = 70
#: Ctrl-C (128 + SIGINT): bench still prints what finished.
EXIT_INTERRUPTED = 130

_UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"^\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(us|µs|ms|s|m|h)?\s*$")


class UsageError(Exception):
    """Bad input found after parsing (a file that cannot be read, a conflicting option): the command
    stops, ``cli.main`` prints ``openai-latency COMMAND: error: MESSAGE`` and exits 2."""


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line: ``PROG: error: MESSAGE`` (exit status 2), on
    the command's ``err``; ``--help`` goes to its ``out`` (both default to the process's streams)."""

    def __init__(self, *args: Any, out: TextIO | None = None, err: TextIO | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.out, self.err = out, err

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see --help)", file=self.err or sys.stderr)
        raise SystemExit(EXIT_USAGE)

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        """argparse's one writer (help, usage, version): stdout means ``out``, stderr ``err``."""
        if file is None or file is sys.stdout:
            file = self.out or sys.stdout
        elif file is sys.stderr:
            file = self.err or sys.stderr
        super()._print_message(message, file)


def duration(text: str, default_unit: str = "s") -> float:
    """``500ms``, ``2s``, ``1.5`` (in ``default_unit``), ``1m``: seconds, finite and > 0."""
    match = _DURATION.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"not a duration (like 500ms or 2s): {text!r}")
    value = float(match.group(1)) * _UNITS[match.group(2) or default_unit]
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds (or 500ms, 2m): {text!r}")
    return value


def seconds_or_zero(text: str) -> float:
    """A :func:`duration`, or ``0``."""
    try:
        if float(text) == 0:
            return 0.0
    except ValueError:
        pass
    return duration(text)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value


def count(text: str, minimum: int = 1) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be at least {minimum}: {text!r}")
    return value


def non_negative_count(text: str) -> int:
    return count(text, 0)


def count_list(text: str) -> list[int]:
    """``1,4,16`` -> [1, 4, 16] (each >= 1, no repeats)."""
    values = [count(part.strip()) for part in text.split(",") if part.strip()]
    if not values:
        raise argparse.ArgumentTypeError(f"expected numbers like 1,4,16: {text!r}")
    if len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"a value is repeated: {text!r}")
    return values


def add_by_option(parser: argparse.ArgumentParser, keys: Sequence[str], default: str) -> None:
    """``--by``, report's and compare's: grouping keys, comma-separated or repeated, or ``none``."""
    parser.add_argument(
        "--by",
        action="append",
        metavar="KEYS",
        help=(
            f"group calls by these keys, comma-separated or repeated: {', '.join(keys)}, or 'none' for"
            f" one group (default: {default})"
        ),
    )


def by_keys(
    parser: argparse.ArgumentParser, values: list[str] | None, keys: Sequence[str]
) -> list[str] | None:
    """The ``--by`` keys, checked (a usage error names the unknown one); None when not given: the
    command's default applies (:func:`..stats.groups.default_by`)."""
    if values is None:
        return None
    chosen: list[str] = []
    for value in values:
        for item in (part.strip() for part in value.split(",")):
            if not item or item == "none":
                continue
            if item not in keys:
                parser.error(f"--by: unknown key {item!r} (choose from {', '.join(keys)}, none)")
            if item not in chosen:
                chosen.append(item)
    return chosen


def write_output(out: TextIO, text: str) -> None:
    """A command's output and a newline, flushed. A reader that has gone (``... | head``) is fine:
    the output then goes to /dev/null, so that no later flush fails again, and the command's exit
    code stays its own."""
    try:
        out.write(text + "\n")
        out.flush()
    except BrokenPipeError:
        quiet(out)


def quiet(out: TextIO) -> None:
    """``out``'s file descriptor to /dev/null (after a broken pipe)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, out.fileno())
    finally:
        os.close(devnull)  # dup2 made its own copy
