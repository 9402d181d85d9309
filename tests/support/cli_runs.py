"""Running ``openai-latency`` (in this process, or as a user does: a subprocess) and reading what the
fake servers saw."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openai_latency.fake_server import FakeServer, SpawnedServer
from openai_latency.fake_server.records import RequestRecord

COMMAND = str(Path(sys.executable).with_name("openai-latency"))


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.out)
        return data


class CommandTimeout(BaseException):
    """Raised in a command run in this process that outlived its timeout; a BaseException, so that the
    dispatcher's catch-all (exit status 70) does not turn it into an output."""


def run_cli(
    args: Sequence[str], timeout: float = 120, env: dict[str, str] | None = None, *, process: bool = False
) -> Result:
    """``openai-latency ARGS`` with ``OPENAI_API_KEY`` and ``NO_COLOR`` set (and ``env`` on top).

    By default in this process: the dispatcher's ``main(argv, out, err)``, what the console script
    calls, with ``os.environ`` and ``sys.stdout``/``sys.stderr`` swapped for the call (a subprocess
    spends most of a short run importing the SDK again). The installed console script runs as a
    subprocess instead with ``process=True`` (the tests of the entry point itself), for a ``--workers``
    run (it forks its client processes, which this multi-threaded test process should not) and off
    the main thread (runs side by side: the environment and the standard streams are the process's).
    Every command also has tests of its console script as a subprocess: ``demo`` (test_terminal),
    ``bench``, ``report`` and ``compare`` (test_new_user's closed pipe, bench's Ctrl-C and terminal
    colour), ``fake-server`` (test_default_port).
    """
    # COLUMNS/LINES: what a subprocess whose output is a pipe gets (argparse's and rich's width), unless set
    environment = {"COLUMNS": "80", "LINES": "24"} if not process else {}
    environment.update({**os.environ, "OPENAI_API_KEY": "sk-test-bench", "NO_COLOR": "1", **(env or {})})
    if process or "--workers" in args or threading.current_thread() is not threading.main_thread():
        done = subprocess.run(
            [COMMAND, *args], capture_output=True, text=True, timeout=timeout, env=environment, check=False
        )
        return Result(done.returncode, done.stdout, done.stderr)
    return _in_process(list(args), timeout, environment)


def _in_process(args: list[str], timeout: float, environment: dict[str, str]) -> Result:
    from openai_latency.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(environment)

    def too_long(signum: int, frame: object) -> None:
        raise CommandTimeout(f"openai-latency {' '.join(args)}: still running after {timeout:g} s")

    # a hung command fails its test, as subprocess.run's timeout would
    previous = signal.signal(signal.SIGALRM, too_long)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(args, out, err)
            except SystemExit as exc:  # argparse: --help, usage errors
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
                if isinstance(exc.code, str):  # sys.exit("message") prints it, as the interpreter would
                    print(exc.code, file=err)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        os.environ.clear()
        os.environ.update(saved)
    return Result(code, out.getvalue(), err.getvalue())


def servers(stack: ExitStack, *defaults: dict[str, object]) -> list[SpawnedServer]:
    """One fake server subprocess per script (off the bench client's CPU), started side by side (each
    start is ~0.1 s of a new interpreter's imports); every one that started is stopped by ``stack``."""
    if len(defaults) == 1:
        return [stack.enter_context(FakeServer.spawn(defaults[0]))]
    with ThreadPoolExecutor(len(defaults)) as pool:
        starts = [pool.submit(FakeServer.spawn, d) for d in defaults]
        wait(starts)
    started = [stack.enter_context(s.result()) for s in starts if s.exception() is None]
    for start in starts:
        error = start.exception()
        if error is not None:
            raise error
    return started


def chat_records(server: SpawnedServer) -> list[RequestRecord]:
    return [r for r in server.records(wait=5.0) if r.path.endswith("/chat/completions")]


def by_target(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["key"]["target"]: entry for entry in report["results"]}


def percentiles(values: Sequence[float]) -> tuple[float, float, float]:
    """p50/p95/p99 by linear interpolation between closest ranks, written out independently."""
    ordered = sorted(values)

    def at(q: float) -> float:
        h = (len(ordered) - 1) * q
        low = int(h)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (h - low) * (ordered[high] - ordered[low])

    return at(0.5), at(0.95), at(0.99)


def max_in_flight(records: Sequence[RequestRecord]) -> int:
    """Most requests the server held at once (arrival to the end of its answer)."""
    events = []
    for record in records:
        assert record.finished_ns is not None
        events += [(record.received_ns, 1), (record.finished_ns, -1)]
    level = peak = 0
    for _, step in sorted(events, key=lambda e: (e[0], e[1])):
        level += step
        peak = max(peak, level)
    return peak
