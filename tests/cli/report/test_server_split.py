"""bench and report show where the time to first token went by the server's own account: "of 62 ms
TTFT: 30 ms queue, 20 ms prefill, 12 ms network and client". The fake servers send llama.cpp
``timings`` and vLLM ``metrics`` (asked for with OPENAI_LATENCY_SERVER_METRICS=request)."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import pytest

from openai_latency.cli.render.server_split import split_text
from openai_latency.cli.stats.server_split import ServerSplit
from tests.support.cli_runs import by_target, run_cli, servers

STREAM = {"chunks": 8, "chunk-delay-ms": 4}
LLAMA = {"server-timings": "llama", "ttft-ms": 40, **STREAM}
VLLM = {"server-metrics": "vllm", "server-queue-ms": 30, "delay-ms": 30, "ttft-ms": 20, **STREAM}
PLAIN = {"ttft-ms": 10, **STREAM}
ENV = {"OPENAI_LATENCY_SERVER_METRICS": "request"}


@pytest.mark.slow
def test_bench_and_report_split_the_ttft(tmp_path: Path) -> None:
    out = tmp_path / "spans.jsonl"
    with ExitStack() as stack:
        llama, vllm, plain = servers(stack, LLAMA, VLLM, PLAIN)
        targets = ["--target", f"llama={llama.base_url}", "--target", f"vllm={vllm.base_url}"]
        targets += ["--target", f"plain={plain.base_url}"]
        args = ["bench", *targets, "--model", "m", "-n", "6", "-c", "1"]
        result = run_cli([*args, "--format", "json", "--out", str(out)], env=ENV)
        assert result.code == 0, result.err
        results = by_target(result.json())
        a, b = results["llama"]["server"], results["vllm"]["server"]
        assert results["plain"]["server"] is None
        assert (a["calls"], a["prefill"], a["server_ttft"], a["queue"]) == (6, 0.04, 0.04, None)
        assert (a["server_tpot"], a["cached_tokens"]) == (0.004, 0)
        assert (b["calls"], b["queue"], b["prefill"], b["server_ttft"]) == (6, 0.03, 0.02, 0.05)
        for split in (a, b):
            assert split["overhead"] == pytest.approx(split["ttft"] - split["server_ttft"], abs=1e-6)
            assert 0 <= split["overhead"] < 0.05  # loopback

        table = run_cli([*args, "-n", "3"], env=ENV)
        assert table.code == 0, table.err
        lines = [line for line in table.out.splitlines() if "TTFT:" in line]
        assert len(lines) == 2, table.out
        assert lines[0].startswith("llama: of ") and "40.0 ms prefill, " in lines[0]
        assert "network, client and queue" in lines[0]  # llama.cpp reports no queue
        assert lines[1].startswith("vllm: of ") and "30.0 ms queue, 20.0 ms prefill, " in lines[1]
        assert "network and client; TPOT " in lines[1] and "4.0 ms in the server" in lines[1]

    report = run_cli(["report", str(out), "--by", "target"])
    assert report.code == 0, report.err
    assert sum("server: of " in line for line in report.out.splitlines()) == 2, report.out
    groups = {
        g["label"]: g
        for g in run_cli(["report", str(out), "--by", "target", "--format", "json"]).json()["groups"]
    }
    assert groups["vllm"]["server"]["queue"] == 0.03
    assert groups["plain"]["server"] is None


def test_the_split_in_words() -> None:
    split = ServerSplit(
        calls=12, ttft=0.412, queue=0.180, prefill=0.150, server_ttft=0.330, overhead=0.082,
        tpot=0.021, server_tpot=0.019, cached_tokens=None,
    )  # fmt: skip
    assert split_text(split) == (
        "of 412.0 ms TTFT: 180.0 ms queue, 150.0 ms prefill, 82.0 ms network and client;"
        " TPOT 21.0 ms here, 19.0 ms in the server (p50 of 12 calls with a server account)"
    )
    llama = ServerSplit(1, 0.2, None, 0.15, 0.15, 0.05, None, None, 900.0)
    assert split_text(llama) == (
        "of 200.0 ms TTFT: 150.0 ms prefill (900 cached tokens), 50.0 ms network, client and queue"
        " (p50 of 1 call with a server account)"
    )
