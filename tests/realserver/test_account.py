"""The span tree, usage and the server's own account against llama.cpp's ``llama-server``.

Every number is compared with the ``timings`` the server sent with that very response. These are
exact checks (the join copies the server's numbers, converted to seconds), no tolerance.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support.span_checks import Captured

from .calls import call, client
from .llama import LlamaServer


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "non-stream"])
def test_span_tree_usage_and_the_servers_account(
    instrument: Callable[..., Captured], llama: LlamaServer, stream: bool
) -> None:
    captured = instrument()
    seen = call(
        captured, client(llama), llama, prompt_tokens=120, salt=1 + stream, max_tokens=24, stream=stream
    )
    a, t = seen.attributes, seen.timings
    tail = ["first_token", "stream_drain"] if stream else ["response_read"]
    assert seen.phase_names == ["request_build", "network_wait", *tail]
    assert a["openai_latency.attempts"] == 1
    # usage: the prompt's 120 words and <s>, all generated tokens (EOS can never win: max_tokens)
    assert a["gen_ai.usage.input_tokens"] == 121 == t["prompt_n"] + t["cache_n"]
    assert a["gen_ai.usage.output_tokens"] == 24 == t["predicted_n"]
    assert a["gen_ai.response.finish_reasons"] == ("length",)
    assert a.get("gen_ai.usage.cache_read.input_tokens", 0) == t["cache_n"]
    assert "openai_latency.usage.estimated" not in a
    # the server's account, exactly as it sent it
    assert a["openai_latency.server.cached_prompt_tokens"] == t["cache_n"]
    assert a["openai_latency.server.prefill_time"] == round(t["prompt_ms"] / 1e3, 9)
    assert a["openai_latency.server.time_to_first_token"] == round(t["prompt_ms"] / 1e3, 9)
    assert a["openai_latency.server.decode_time"] == round(t["predicted_ms"] / 1e3, 9)
    tpot = a["openai_latency.server.time_per_output_token"]
    assert tpot == pytest.approx(t["predicted_per_token_ms"] / 1e3, abs=1e-9)  # ms / (n - 1), as ours
    assert "openai_latency.server.queue_time" not in a  # llama.cpp reports none
    if stream:
        overhead = a["openai_latency.client_overhead.time_to_first_token"]
        assert overhead == pytest.approx(
            a["openai_latency.time_to_first_token"] - t["prompt_ms"] / 1e3, abs=2e-9
        )
        assert overhead > 0
    else:
        assert "openai_latency.client_overhead.time_to_first_token" not in a
    print(f"\n  {'stream' if stream else 'non-stream'}: timings {t}")


def test_the_server_metrics_points(instrument: Callable[..., Captured], llama: LlamaServer) -> None:
    captured = instrument()
    seen = call(captured, client(llama), llama, prompt_tokens=120, salt=3, max_tokens=8, stream=True)
    data = captured.metric_reader.get_metrics_data()
    sums = {
        metric.name: [point.sum for point in metric.data.data_points]
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
    }
    assert sums["openai_latency.server.prefill_time"] == [
        seen.attributes["openai_latency.server.prefill_time"]
    ]
    assert sums["openai_latency.server.time_to_first_token"] == [round(seen.timings["prompt_ms"] / 1e3, 9)]
    overhead = seen.attributes["openai_latency.client_overhead.time_to_first_token"]
    assert sums["openai_latency.client_overhead.time_to_first_token"] == [overhead]
    assert "openai_latency.server.queue_time" not in sums
