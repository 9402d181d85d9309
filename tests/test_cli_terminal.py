"""The CLI's terminal manners: colour only on a terminal without NO_COLOR; the instrumentation never
imports the terminal library; ``demo`` tells the whole story and leaves a file ``report`` rereads."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

from tests.bench_helpers import COMMAND, run_cli, servers

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _on_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """Run with stdout and stderr on a pseudo-terminal; what it printed."""
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            [COMMAND, *args], stdout=follower, stderr=follower, env={**os.environ, **env}
        )
        os.close(follower)
        chunks = []
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the terminal closed: the process has exited
                break
            if not data:
                break
            chunks.append(data)
        process.wait(timeout=60)
    finally:
        os.close(leader)
    assert process.returncode == 0
    return b"".join(chunks).decode(errors="replace")


def test_colour_only_on_a_terminal_and_never_with_no_color() -> None:
    with ExitStack() as stack:
        (server,) = servers(stack, {"delay-ms": 5, "chunks": 3})
        args = ["bench", "--target", f"a={server.base_url}", "--model", "m", "-n", "2"]
        env = {"OPENAI_API_KEY": "sk-test", "NO_COLOR": "", "TERM": "xterm-256color"}
        shown = _on_a_terminal([*args, "--rate", "4", "-n", "4"], env)  # ~1 s: the progress display draws
        assert ANSI.search(shown)  # a terminal: colour
        assert "a: " in shown and "done, 0 errors, rolling p50 ttft" in shown  # the live progress line
        assert not ANSI.search(_on_a_terminal(args, {**env, "NO_COLOR": "1"}))
        piped = run_cli(args, env={"NO_COLOR": ""})  # a pipe: none
        assert piped.code == 0 and "requests" in piped.out and not ANSI.search(piped.out + piped.err)


def test_the_instrumentation_never_imports_the_terminal_library() -> None:
    # openai 1.x/2.x import rich themselves when it is installed: only what we add counts
    code = (
        "import sys, openai\n"
        "def terminal(): return sorted(m for m in sys.modules if m.split('.')[0] in ('rich', 'pygments'))\n"
        "before = terminal()\n"
        "import openai_latency\n"
        "from openai_latency.fake_server import FakeServer\n"
        "openai_latency.OpenAILatencyInstrumentor().instrument()\n"
        "with FakeServer() as s:\n"
        "    client = openai.OpenAI(base_url=s.base_url, api_key='k')\n"
        "    client.chat.completions.create(model='m', messages=[])\n"
        "print(sorted(set(terminal()) - set(before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_demo_shows_percentiles_triage_and_a_waterfall_and_writes_a_file(tmp_path: Path) -> None:
    out = tmp_path / "demo.jsonl"
    result = run_cli(["demo", "--out", str(out)], timeout=120)
    assert result.code == 0, result.err
    text = result.out
    assert "p50 / p95 / p99" in text and "ttft (first content token)" in text
    assert "The phase that differs most between targets:" in text
    assert "triage:" in text and "fast failures:" in text and "invalid_api_key" in text
    assert "slow failures:" in text and "rate limited:" in text
    assert "waterfall:" in text and "network_wait" in text
    assert f"openai-latency report {out}" in text
    print(text.splitlines()[-1])  # the demo's own wall time, for the log (not asserted)
    reread = run_cli(["report", str(out), "--format", "json"])
    assert reread.code == 0, reread.err
    groups = {g["key"]["target"]: g for g in reread.json()["groups"]}
    assert set(groups) == {"slow-first-token", "slow-network"}
    assert all(g["calls"] == 26 for g in groups.values())


def test_demo_rejects_unknown_options() -> None:
    result = run_cli(["demo", "--colour"])
    assert result.code == 2 and len(result.err.strip().splitlines()) == 1
