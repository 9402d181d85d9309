"""Bad input to ``openai-latency report``, as the command a user runs: one line on stderr, a non-zero
exit status, no traceback. The commands run concurrently (each is a fresh interpreter)."""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.e2e.processes import tool


def _closed_port() -> int:
    with socket.socket() as sock:  # bound, never listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("bad")
    (folder / "empty").mkdir()
    metrics = folder / "metrics.jsonl"
    metrics.write_text(json.dumps({"resourceMetrics": []}) + "\nnot json\n")
    broken = folder / "broken.jsonl.gz"
    broken.write_bytes(gzip.compress(b'{"resourceSpans": []}\n' * 50)[:40])  # cut short
    other = folder / "other.jsonl"
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "GET /", "startTimeUnixNano": "1",
            "endTimeUnixNano": "2"}  # fmt: skip
    other.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}) + "\n")
    return {"folder": folder, "metrics": metrics, "broken": broken, "other": other}


CASES = {
    # what the user typed -> (exit status, a part of the one line)
    "missing file": (["{folder}/nope.jsonl"], 1, "no such file or directory: "),
    "no trace files": (["{folder}/empty"], 1, "no trace files in "),
    "no glob match": (["{folder}/*.nothing"], 1, "no files match "),
    "unreadable gzip": (["{broken}"], 1, "found no spans at all"),
    "no spans, only metrics": (["{metrics}"], 1, "held metrics or logs, not traces"),
    "spans, none of ours": (["{other}"], 1, "no operation spans found"),
    "jaeger unreachable": (["--jaeger", "http://127.0.0.1:{port}"], 1, "cannot reach Jaeger at "),
    "jaeger not a URL": (["--jaeger", "localhost:16686"], 1, "not an http(s) URL"),
    "unknown option": (["--bogus"], 2, "unrecognized arguments: --bogus"),
    "bad --by": (["{other}", "--by", "colour"], 2, "unknown key 'colour'"),
    "bad --slow-threshold": (["{other}", "--slow-threshold", "-1"], 2, "positive number of seconds"),
    "bad --waterfall": (["{other}", "--waterfall", "0"], 2, "--waterfall: must be a whole number"),
    "bad --format": (["{other}", "--format", "xml"], 2, "invalid choice: 'xml'"),
    "bad --lookback": (["--jaeger", "http://127.0.0.1:1", "--lookback", "5x"], 2, "not a duration like"),
    "bad --limit": (["--jaeger", "http://127.0.0.1:1", "--limit", "-3"], 2, "--limit: must be at least 1"),
    "--service without --jaeger": (["{other}", "--service", "a"], 2, "--service needs --jaeger URL"),
    "files and --jaeger": (["{other}", "--jaeger", "http://127.0.0.1:1"], 2, "not both"),
}


def test_bad_input_is_one_line(files: dict[str, Path]) -> None:
    values = {**{name: str(path) for name, path in files.items()}, "port": str(_closed_port())}
    command = tool("openai-latency")

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        args = [arg.format(**values) for arg in argv]
        return subprocess.run(
            [command, "report", *args], capture_output=True, text=True, timeout=60, check=False
        )

    with ThreadPoolExecutor(4) as pool:
        results = dict(zip(CASES, pool.map(run, [argv for argv, _, _ in CASES.values()]), strict=True))
    for name, (_, status, text) in CASES.items():
        done = results[name]
        assert done.returncode == status, (name, done.stderr)
        assert done.stdout == "", name
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and text in lines[0], (name, done.stderr)
        assert lines[0].startswith("openai-latency report: "), name
        assert "Traceback" not in done.stderr, name
