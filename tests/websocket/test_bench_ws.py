"""``openai-latency bench --api responses-ws``: Responses turns over one WebSocket per concurrency slot,
with the same numbers as ``--api responses``, and a new connection after one drops."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from tests.support.cli_runs import by_target, run_cli, servers
from tests.websocket.support import require_responses_ws

require_responses_ws()

STREAM = {"delay-ms": 20, "ttft-ms": 20, "chunks": 8, "chunk-delay-ms": 5}


def test_one_connection_per_slot_and_the_numbers_of_responses(tmp_path: Path) -> None:
    with ExitStack() as stack:
        [server] = servers(stack, STREAM)
        out = tmp_path / "spans.jsonl"
        result = run_cli(
            ["bench", "--target", f"ws={server.base_url}@gpt-4o-mini", "--api", "responses-ws",
             "-n", "24", "--warmup", "4", "-c", "3", "--format", "json", "--out", str(out)]
        )  # fmt: skip
        assert result.code == 0, result.err
        stats = by_target(result.json())["ws"]
        assert stats["requests"] == 24 and stats["errors"] == 0
        records = [r for r in server.records() if r.path == "/v1/responses"]
        assert len(records) == 28 and {r.method for r in records} == {"WS"}
        assert len({r.connection_id for r in records}) == 3  # one connection per concurrency slot
        spans = out.read_text()
        assert '"openai_latency.transport"' in spans and "websocket" in spans


def test_a_dropped_connection_is_replaced(tmp_path: Path) -> None:
    with ExitStack() as stack:
        [server] = servers(stack, {**STREAM, "every": "5:disconnect-after=2"})
        result = run_cli(
            ["bench", "--target", f"ws={server.base_url}@gpt-4o-mini", "--api", "responses-ws",
             "-n", "20", "-c", "2", "--format", "json"]
        )  # fmt: skip
        assert result.code == 0, result.err
        stats = by_target(result.json())["ws"]
        assert stats["requests"] == 20 and stats["errors"] == 4
        records = [r for r in server.records() if r.path == "/v1/responses"]
        # turns 5, 10, 15 and 20 drop their connection; the first three are replaced (the 20th is the last)
        assert len({r.connection_id for r in records}) == 2 + 3
