"""Processes of the real stack: started in their own session, probed until ready, stopped by PID.

A process that exits before it is ready fails the start at once with the end of its own log (e.g.
the collector's "invalid configuration" message), not with a timeout. Every started process is
registered in :data:`STARTED`; ``conftest.py`` checks at the end of the session that none is left.

Three layers make sure nothing outlives the run, whatever ends it:
- a failing step: the fixtures' ``with Stack(...)`` stops their services by PID (SIGTERM to the
  process group, SIGKILL after a timeout), and ``conftest.py`` stops and reports any leftover;
- SIGTERM/SIGHUP to pytest (CI cancelling a job, ``timeout``): ``conftest.py`` turns the first one
  into a KeyboardInterrupt, so the same teardown runs;
- pytest itself killed (SIGKILL, a crash): every service is started with ``PR_SET_PDEATHSIG``, so
  the kernel sends it SIGKILL when pytest's main thread is gone (the stack's processes do not fork
  workers, so that covers them; the load generator's and backend's own children would need their
  group stopped, which the two layers above do).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from tests.e2e.processes import stop_group

ROOT = Path(__file__).resolve().parents[2]
LOG_TAIL_LINES = 40

# Every process started by this package, in start order (pid, name, log path).
STARTED: list[Service] = []


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def _die_with_parent(parent: int) -> Callable[[], None]:
    """``preexec_fn`` (runs in the child between fork and exec; survives the exec): SIGKILL to the
    child when the thread that started it, pytest's main thread, is gone."""

    def preexec() -> None:
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # pytest died between fork and prctl: nobody would stop us
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


class ServiceFailed(RuntimeError):
    """A process exited before it was ready, or did not become ready in time."""


def http_ok(url: str, timeout: float = 2.0) -> bool:
    """True when ``url`` answers 2xx."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return 200 <= int(response.status) < 300
    except (urllib.error.URLError, OSError):
        return False


def proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first, then ppid, pgrp, ...;
    [19] is the start time), or None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def running_pid(pid: int) -> bool:
    """The process exists and is not a zombie (one that only waits for its parent to reap it)."""
    stat = proc_stat(pid)
    return stat is not None and stat[0] not in "ZX"


def group_members(pgid: int) -> list[int]:
    """The running (not zombie) processes of a process group, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = proc_stat(int(entry.name))
            if stat is not None and stat[0] not in "ZX" and int(stat[2]) == pgid:
                found.append(int(entry.name))
    return sorted(found)


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    if not path.exists():
        return "(no log)"
    text = path.read_text(errors="replace").splitlines()
    return "\n".join(text[-lines:])


class Service:
    """One process of the stack (collector, Jaeger, Prometheus, backend, load generator)."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_dir: Path,
        env: Mapping[str, str] | None = None,
        ready: Callable[[], bool] | None = None,
        startup_timeout: float = 30.0,
        cwd: Path = ROOT,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_dir / f"{name}.log"
        self.env = dict(env or {})
        if threading.current_thread() is not threading.main_thread():
            # PR_SET_PDEATHSIG fires when the starting *thread* ends: a worker thread would take
            # the service with it when it finishes.
            raise RuntimeError(f"start {name} from the main thread")
        full_env = dict(os.environ)
        full_env.update(env or {})
        self._log = self.log_path.open("ab")
        self._log.write(f"$ {' '.join(self.argv)}\n".encode())
        self._log.flush()
        self.process = subprocess.Popen(
            self.argv,
            cwd=cwd,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent(os.getpid()),
        )
        STARTED.append(self)
        if ready is not None:
            try:
                self._wait_ready(ready, startup_timeout)
            except BaseException:
                self.stop()
                raise

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def _wait_ready(self, ready: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                raise ServiceFailed(
                    f"{self.name} exited with code {code} before it was ready; end of its log "
                    f"({self.log_path}):\n{tail(self.log_path)}"
                )
            if ready():
                return
            time.sleep(0.2)
        raise ServiceFailed(
            f"{self.name} was not ready within {timeout:.0f}s; end of its log ({self.log_path}):\n"
            f"{tail(self.log_path)}"
        )

    def running(self) -> bool:
        return self.process.poll() is None

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM to the process group (graceful: flush and shut down), SIGKILL after ``timeout``.

        Idempotent; returns the exit code."""
        return stop_group(self.process, self._log, timeout)


class Stack:
    """Services started together and stopped together, last started first."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        self.services: dict[str, Service] = {}

    def start(self, name: str, argv: Sequence[str], **kwargs: object) -> Service:
        service = Service(name, argv, self.log_dir, **kwargs)  # type: ignore[arg-type]
        self.services[name] = service
        return service

    def stop(self) -> None:
        for service in reversed(list(self.services.values())):
            service.stop()

    def __enter__(self) -> Stack:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def wait_until(
    probe: Callable[[], object], timeout: float, interval: float = 1.0, what: str = "condition"
) -> object:
    """Call ``probe`` until it returns something truthy; its last value, or TimeoutError."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: not reached within {timeout:.0f}s (last: {value!r})")
        time.sleep(interval)
