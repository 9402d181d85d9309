"""A stand-in stack that test_teardown.py runs in a pytest session of its own and then ends badly.

Not collected by `make stack-test` (the name does not match test_*.py); run only by naming the file.
STOP_PROBE_MODE says how the step ends: ``fail-in-test`` (an assertion after the stack is up),
``fail-in-setup`` (a service that exits before it is ready, part-way through starting the stack),
``hang`` (the step waits; the outer test signals or kills this pytest). The PIDs of every process
started, with their children, are written to STOP_PROBE_PIDS once the stack is up.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .procs import Stack, group_members, proc_stat, wait_until

MODE = os.environ.get("STOP_PROBE_MODE", "")
PIDS = Path(os.environ.get("STOP_PROBE_PIDS", "/nonexistent"))
LOGS = Path(os.environ.get("STOP_PROBE_LOGS", "/nonexistent"))

SLEEP = "import time; time.sleep(600)"
# Like a shell running a command: a process with a child of its own, in its process group.
WITH_CHILD = (
    f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {SLEEP!r}]); time.sleep(600)"
)


def start_time(pid: int) -> str:
    stat = proc_stat(pid)
    assert stat is not None, pid
    return stat[19]


@pytest.fixture(scope="module")
def probe_stack() -> Iterator[Stack]:
    with Stack(LOGS) as stack:
        services = [stack.start("sleeper", [sys.executable, "-c", SLEEP])]
        if MODE != "sigkill":  # a killed pytest stops only its own children (PR_SET_PDEATHSIG)
            services.append(stack.start("with-child", [sys.executable, "-c", WITH_CHILD]))
            pgid = services[-1].pid
            wait_until(lambda: len(group_members(pgid)) == 2, timeout=20, interval=0.1, what="child started")
        # (pid, start time) of each process: a PID taken again later is not mistaken for ours.
        PIDS.write_text(
            json.dumps({s.name: [[p, start_time(p)] for p in group_members(s.pid)] for s in services})
        )
        if MODE == "fail-in-setup":
            stack.start(
                "exits-at-once", [sys.executable, "-c", "raise SystemExit('bad config')"], ready=lambda: False
            )
        yield stack


def test_a_step(probe_stack: Stack) -> None:
    if MODE in ("hang", "sigkill"):
        time.sleep(600)
    raise AssertionError("this step fails part-way, with the stack running")
