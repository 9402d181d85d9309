"""Processes of the real stack: started in their own session, probed until ready, stopped by PID.

A process that exits before it is ready fails the start at once with the end of its own log (e.g.
the collector's "invalid configuration" message), not with a timeout. Every started process is
registered in :data:`STARTED`; ``conftest.py`` checks at the end of the session that none is left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

ROOT = Path(__file__).resolve().parents[2]
LOG_TAIL_LINES = 40

# Every process started by this package, in start order (pid, name, log path).
STARTED: list[Service] = []


class ServiceFailed(RuntimeError):
    """A process exited before it was ready, or did not become ready in time."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_ok(url: str, timeout: float = 2.0) -> bool:
    """True when ``url`` answers 2xx."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return 200 <= int(response.status) < 300
    except (urllib.error.URLError, OSError):
        return False


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
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
        if not self._log.closed:
            self._log.close()
        return self.process.returncode


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
