"""``capacity``: at most K requests answered at once, the rest queued in arrival order."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import openai

from openai_latency.fake_server import FakeServer


def test_requests_beyond_capacity_wait_in_arrival_order() -> None:
    with FakeServer.spawn({"capacity": 2, "delay-ms": 100, "chunks": 1}) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-x", max_retries=0)

        def call(number: int) -> None:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": str(number)}])

        with ThreadPoolExecutor(6) as pool:
            list(pool.map(call, range(6)))
        records = sorted(server.records(wait=5.0), key=lambda r: r.received_ns)
        assert len(records) == 6
        # never more than 2 answered at once: headers (after the 100 ms delay) come two by two
        waits = [(r.headers_sent_ns - records[0].received_ns) / 1e9 for r in records]  # type: ignore[operator]
        assert sorted(round(w / 0.1) for w in waits) == [1, 1, 2, 2, 3, 3]
        starts = sorted((r.headers_sent_ns or 0) - 100_000_000 for r in records)
        ends = sorted(r.finished_ns or 0 for r in records)
        assert all(start >= end - 2_000_000 for start, end in zip(starts[2:], ends, strict=False))
