"""Fixtures of `make realserver-test`: llama.cpp's ``llama-server`` (built from source by
``scripts/build-llama-server.sh``) serving tiny random-weight models generated here, the real
openai SDK with our instrumentation, the real OTel SDK with in-memory exporters.

Server logs go to ``.cache/realserver-test/<UTC time>/`` and are kept; on a failure the end of each
is printed. Every server is stopped by PID by the fixture that started it; at the end of the session
none may be left (a leftover is stopped and fails the run). SIGTERM/SIGHUP to pytest become a
KeyboardInterrupt so that the same teardown runs; if pytest is killed outright, the servers die with
it (PR_SET_PDEATHSIG, tests/realstack/procs.py).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from tests.realstack.procs import ROOT, STARTED, tail

from .llama import LlamaServer, server_binary
from .tiny_model import ModelShape, write_model

RUN_DIR = ROOT / ".cache" / "realserver-test" / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())

SMALL = ModelShape()
"""The model of most tests (:class:`.tiny_model.ModelShape`'s default: embedding 384, 6 layers,
feed-forward 1,536; 14 M weights, 59 MB of f32). Measured here with one thread: prefill of 1,024
tokens ~350 ms, 256 tokens ~75 ms; decode ~1.6 ms per token at a short context, ~4 ms at 1,000."""
LARGE = ModelShape(embedding=512, layers=8, feed_forward=2048)
"""bench's second target: about 2.4x the weights of SMALL, slower in prefill and in decode."""


@pytest.fixture(scope="session")
def run_dir() -> Path:
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    return RUN_DIR


@pytest.fixture(scope="session")
def binary() -> Path:
    return server_binary()


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


def _model(model_dir: Path, shape: ModelShape) -> Path:
    path = model_dir / f"{shape.name}.gguf"
    if not path.exists():
        write_model(path, shape)
    return path


@pytest.fixture(scope="session")
def llama(binary: Path, model_dir: Path, run_dir: Path) -> Iterator[LlamaServer]:
    """The small model, one thread, warmed up."""
    server = LlamaServer.start(binary, _model(model_dir, SMALL), SMALL, run_dir)
    try:
        server.warm_up()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def llama_pair(binary: Path, model_dir: Path, run_dir: Path) -> Iterator[tuple[LlamaServer, LlamaServer]]:
    """Two servers for bench: the small model and the large one (one thread each), warmed up, without
    prompt caching (bench repeats one prompt: with the cache, every request after the first would
    measure a cache hit, whose prefill is one token on either model)."""
    small = LlamaServer.start(binary, _model(model_dir, SMALL), SMALL, run_dir, cache_prompt=False)
    try:
        large = LlamaServer.start(binary, _model(model_dir, LARGE), LARGE, run_dir, cache_prompt=False)
        try:
            small.warm_up()
            large.warm_up()
            yield small, large
        finally:
            large.stop()
    finally:
        small.stop()


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_previous_handlers: dict[int, object] = {}


def _interrupt(signum: int, frame: FrameType | None) -> None:
    for sig in _STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    raise KeyboardInterrupt(f"realserver-test: {signal.Signals(signum).name} received, stopping the servers")


def pytest_configure(config: pytest.Config) -> None:
    for sig in _STOP_SIGNALS:
        _previous_handlers[sig] = signal.signal(sig, _interrupt)


def pytest_unconfigure(config: pytest.Config) -> None:
    for sig, handler in _previous_handlers.items():
        signal.signal(sig, handler)  # type: ignore[arg-type]


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    left = [s for s in STARTED if s.running()]
    for service in left:
        service.stop()
    if left:
        names = ", ".join(f"{s.name} (pid {s.pid})" for s in left)
        print(f"\nrealserver-test: servers still running at the end: {names}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int) -> None:
    if not STARTED:
        return
    tr = terminalreporter
    if tr.stats.get("failed") or tr.stats.get("error"):
        for service in STARTED:
            tr.write_sep("-", f"end of {service.name}'s log ({service.log_path})")
            tr.write_line(tail(service.log_path, 25))
    tr.write_line(f"realserver-test: {len(STARTED)} servers started and stopped by pid; logs in {RUN_DIR}")
