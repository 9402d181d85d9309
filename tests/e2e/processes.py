"""Child processes of the end-to-end test: the example backend under the real ``opentelemetry-instrument``.

Every process is started in its own session and stopped through :meth:`Backend.stop` (SIGTERM, which
lets uvicorn shut down and the OTel SDK flush, then SIGKILL of the group after a bounded wait).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from importlib.metadata import entry_points
from pathlib import Path
from types import TracebackType
from typing import IO

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# The instrumentations the trace is about: FastAPI makes the server span, ours the `chat ...` span.
WANTED_INSTRUMENTATIONS = ("fastapi", "openai_latency")


def installed_instrumentations() -> set[str]:
    return {ep.name for ep in entry_points(group="opentelemetry_instrumentor")}


def disabled_instrumentations() -> str:
    """Every other installed instrumentor (httpx, requests, ...): disabled so that nothing but ours
    can inject a ``traceparent`` into the LLM request, whatever else is installed in the venv."""
    return ",".join(sorted(installed_instrumentations() - set(WANTED_INSTRUMENTATIONS)))


def tool(name: str) -> str:
    """A console script of the running venv (not whatever is first on PATH)."""
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if found is None:
        raise RuntimeError(
            f"{name!r} not found next to {sys.executable} nor on PATH: pip install -e '.[test]'"
        )
    return found


_HANDED_OUT: set[int] = set()
_PICK = random.Random(os.getpid())


def _ephemeral_low() -> int:
    """The lowest port the kernel gives to outgoing connections and to bind(0) (Linux: 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A loopback port that nothing listens on, below the kernel's ephemeral range.

    A port from ``bind(0)`` is released before the service binds it, and in between the kernel may
    hand the same port to an outgoing connection (every collector and client makes some): a service
    then fails with "address already in use". Ports below the ephemeral range are never handed out
    that way, and this process never hands out the same one twice.
    """
    high = max(_ephemeral_low() - 1, 20_000)
    for _ in range(1000):
        port = _PICK.randint(15_000, high)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise RuntimeError("no free loopback port below the ephemeral range")


def http_get(
    port: int, path: str, headers: Mapping[str, str] | None = None, timeout: float = 15.0
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers=dict(headers or {}))
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


class Backend:
    """``opentelemetry-instrument uvicorn examples.backend.app:app`` on a loopback port."""

    def __init__(self, env: Mapping[str, str], log_path: Path, startup_timeout: float = 20.0) -> None:
        self.port = free_port()
        self.log_path = log_path
        base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_", "EXAMPLE_"))}
        base["PATH"] = os.pathsep.join([str(BIN), base.get("PATH", "")])
        base["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), base.get("PYTHONPATH")) if p)
        base["PYTHONUNBUFFERED"] = "1"
        self.command = [
            tool("opentelemetry-instrument"),
            tool("uvicorn"),
            "examples.backend.app:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "warning",
        ]
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            self.command,
            cwd=ROOT,
            env={**base, **env},
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            self._wait_healthy(startup_timeout)
        except BaseException:
            self.stop()
            raise

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last_error: object = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the example backend exited with {self.process.returncode} before /healthz answered:\n"
                    f"$ {' '.join(self.command)}\n{self.output()}"
                )
            try:
                status, _ = http_get(self.port, "/healthz", timeout=2)
                if status == 200:
                    return
                last_error = f"HTTP {status}"
            except OSError as exc:
                last_error = exc
            time.sleep(0.1)
        raise TimeoutError(
            f"the example backend did not answer GET /healthz within {timeout:.1f}s (last: {last_error}):\n"
            f"$ {' '.join(self.command)}\n{self.output()}"
        )

    def get(self, path: str, headers: Mapping[str, str] | None = None) -> tuple[int, bytes]:
        return http_get(self.port, path, headers)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM (graceful: uvicorn shutdown, SDK flush), SIGKILL of the group after ``timeout``.

        Idempotent; returns the exit code."""
        return stop_group(self.process, self._log, timeout)

    def __enter__(self) -> Backend:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def stop_group(process: subprocess.Popen[bytes], log: IO[bytes], timeout: float) -> int | None:
    """SIGTERM to the process group, SIGKILL after ``timeout``; closes its log. Idempotent."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)
    if not log.closed:
        log.close()
    return process.returncode
