"""Nothing is left running when a step fails part-way, nor when pytest itself is stopped or killed.

Each case runs tests/realstack/stop_probe.py (a stand-in stack of plain processes, some with a
child of their own, started by the same procs.py and conftest.py as the real stack) in a pytest
session of its own, ends it badly, and then looks in /proc for every PID it had started.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .procs import ROOT, proc_stat, wait_until

PROBE = Path(__file__).with_name("stop_probe.py")


def alive(pid: int, started: str) -> bool:
    """Running (a zombie is not: it is only waiting for its parent to read its exit code)."""
    stat = proc_stat(pid)
    return stat is not None and stat[0] not in "ZX" and stat[19] == started


Started = dict[str, list[list[Any]]]  # service -> [pid, start time] of it and its children


def run_probe(tmp_path: Path, mode: str, stop: signal.Signals | None) -> tuple[int, str, Started]:
    pids = tmp_path / "pids.json"
    env = {
        **os.environ,
        "STOP_PROBE_MODE": mode,
        "STOP_PROBE_PIDS": str(pids),
        "STOP_PROBE_LOGS": str(tmp_path / "logs"),
    }
    inner = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-s", str(PROBE)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # so that killing it leaves this session's pytest alone
    )
    try:
        if stop is not None:
            wait_until(pids.exists, timeout=60, interval=0.2, what="the probe's stack started")
            time.sleep(0.5)  # in the step's sleep by now
            os.kill(inner.pid, stop)
        output, _ = inner.communicate(timeout=90)
    finally:
        if inner.poll() is None:
            inner.kill()
            inner.wait(10)
    return inner.returncode, output, json.loads(pids.read_text())


@pytest.mark.parametrize(
    ("mode", "stop", "exit_code"),
    [
        ("fail-in-test", None, pytest.ExitCode.TESTS_FAILED),
        ("fail-in-setup", None, pytest.ExitCode.TESTS_FAILED),
        ("hang", signal.SIGTERM, pytest.ExitCode.INTERRUPTED),
        ("hang", signal.SIGHUP, pytest.ExitCode.INTERRUPTED),
        ("sigkill", signal.SIGKILL, -signal.SIGKILL),
    ],
    ids=["step-fails", "start-fails-part-way", "pytest-sigterm", "pytest-sighup", "pytest-sigkill"],
)
def test_no_process_is_left(tmp_path: Path, mode: str, stop: signal.Signals | None, exit_code: int) -> None:
    code, output, started = run_probe(tmp_path, mode, stop)
    processes = [(name, pid, t) for name, pids in started.items() for pid, t in pids]
    try:
        assert code == exit_code, output
        # the sleeper; unless pytest was killed, also the one with a child and that child
        assert len(processes) == (1 if mode == "sigkill" else 3), started
        # stopped by pid, or SIGKILL from the kernel (PR_SET_PDEATHSIG): gone within moments
        wait_until(
            lambda: not [p for p in processes if alive(p[1], p[2])],
            timeout=10,
            interval=0.2,
            what="every process of the probe gone",
        )
    finally:
        for _, pid, t in processes:  # do not leave them behind when this test fails
            if alive(pid, t):
                os.kill(pid, signal.SIGKILL)
    if stop in (signal.SIGTERM, signal.SIGHUP):
        assert f"{stop.name} received" in output, output
    if stop != signal.SIGKILL:
        assert "processes started and stopped by pid" in output, output
        assert "processes still running at the end" not in output, output
    print(f"{mode} ({stop.name if stop else 'no signal'}): {len(processes)} processes started, none left")
