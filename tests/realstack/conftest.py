"""Fixtures of `make stack-test`: the real stack on loopback, its logs, and the leftover check.

Logs of every process go to ``.cache/stack-test/<UTC time>/`` (ignored by git) and are kept; on a
failure the end of each log is printed. At the end of the session, after pytest's own teardown of
the fixtures, every process started here must have exited: a leftover is stopped and fails the run.
A SIGTERM or SIGHUP to pytest becomes a KeyboardInterrupt, so that the same teardown stops the stack
(pytest's default for those signals is to die at once and leave the stack running); if pytest is
killed outright, the services die with it (PR_SET_PDEATHSIG, see procs.py).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from .components import Binaries
from .procs import ROOT, STARTED, group_members, tail

RUN_DIR = ROOT / ".cache" / "stack-test" / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


@pytest.fixture(scope="session")
def binaries() -> Binaries:
    return Binaries.from_build_script()


@pytest.fixture(scope="session")
def run_dir() -> Path:
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    return RUN_DIR


@pytest.fixture(scope="module")
def module_dir(run_dir: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    path = run_dir / request.module.__name__.rsplit(".", 1)[-1]
    path.mkdir(parents=True, exist_ok=True)
    yield path


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_previous_handlers: dict[int, object] = {}


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # Once only: a second signal ends pytest at once (the services then die with it).
    for sig in _STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    raise KeyboardInterrupt(
        f"stack-test: {signal.Signals(signum).name} received, stopping the processes started"
    )


def pytest_configure(config: pytest.Config) -> None:
    for sig in _STOP_SIGNALS:
        _previous_handlers[sig] = signal.signal(sig, _interrupt)


def pytest_unconfigure(config: pytest.Config) -> None:
    for sig, handler in _previous_handlers.items():
        signal.signal(sig, handler)  # type: ignore[arg-type]


def _group_alive(pgid: int) -> bool:
    """Any process left running in the group (each service is started as the leader of its own).
    Zombies do not count: a child whose parent was stopped first waits there for init to reap it."""
    if Path("/proc/self/stat").exists():
        return bool(group_members(pgid))
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.hookimpl(trylast=True)  # after pytest's own teardown of the remaining fixtures
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    left = [s for s in STARTED if s.running() or _group_alive(s.pid)]
    for service in left:  # a fixture did not stop it (should not happen): stop it, then fail
        service.stop()
    if left:
        names = ", ".join(f"{s.name} (pid {s.pid})" for s in left)
        print(f"\nstack-test: processes still running at the end: {names}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int) -> None:
    if not STARTED:
        return
    tr = terminalreporter
    failed = bool(tr.stats.get("failed") or tr.stats.get("error"))
    if failed:
        for service in STARTED:
            tr.write_sep("-", f"end of {service.name}'s log ({service.log_path})")
            tr.write_line(tail(service.log_path, 25))
    tr.write_line(f"stack-test: {len(STARTED)} processes started and stopped by pid; logs kept in {RUN_DIR}")
