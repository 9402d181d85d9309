"""``openai-latency bench`` against two real servers: the small model and a larger one (one thread
each, no prompt cache, so every request prefills its prompt). bench must rank them as their own
``timings`` rank them, and its TTFT and TPOT medians must match a plain client that only reads
``time.perf_counter()`` around a raw HTTP stream (no SDK, no instrumentation), each read against the
server's own account of its window (the server's pace drifts between the two clients' runs).
"""

from __future__ import annotations

import http.client
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

from tests.support.cli_runs import by_target, run_cli

from .llama import LlamaServer
from .tiny_model import prompt_of

PROMPT_TOKENS = 512  # a context long enough to decode above 2 ms per token (see test_timing)
MAX_TOKENS = 32
REQUESTS = 8
# bench's p50s against the plain client's, each over 8 requests per server, the two clients one
# after the other. The server's own pace drifts between the two runs when other work shares the
# 2 cores (its decode p50 moved 2.32 -> 1.93 ms between them once), so each client is first read
# against the server's account of its own requests:
# - TTFT - prefill (the client's overhead, the same quantity for both clients): bench's within
#   10 ms of the plain client's (measured 2-5 ms apart: bench's clock starts at create(), before the
#   SDK builds the request, the plain client's after http.client wrote it);
# - TPOT / the server's decode pace: bench's ratio within 0.20 of the plain client's (measured
#   0.989-0.998 for bench, 0.995-0.999 for the plain client since TPOT is measured across the window
#   when the caller is idle; 0.987-1.125 before, when at this ~2 ms pace it came from observed gaps).
# And the raw TTFT p50s, the plain client's scaled by the server's own prefill drift between the two
# windows: within 10 % (measured 0.3-1.3 % apart). Unscaled they once were 25.6 % apart (CI,
# 2026-12-06: the small server's own prefill p50 239.3 ms in the plain client's window, 298.8 ms in
# bench's, with overheads 4.2 / 1.9 ms); TPOT raw is not compared (the drift above alone moved it
# 15-40 %).
# (Measured on a quiet machine: overheads 5.4 / 2.3 and 5.6 / 2.4 ms. CI once measured 19.7 / 4.6:
# the server's RAM prompt cache copied each finished slot before the next prefill, 12-15 ms there,
# now off for every test server: tests/realserver/llama.py, `--cache-ram 0`.)
OVERHEAD_DIFF_S = 0.010
PACE_RATIO_DIFF = 0.20
TTFT_REL = 0.10


def plain_stream(server: LlamaServer, prompt: str) -> dict[str, Any]:
    """One stream read with http.client: TTFT (request written -> first content chunk), TPOT (first
    -> last content chunk over their count - 1), and the server's ``timings``."""
    body = {
        "model": server.shape.name,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": MAX_TOKENS,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        start = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", json.dumps(body), {"content-type": "application/json"})
        response = conn.getresponse()
        token_times: list[float] = []
        timings: dict[str, Any] = {}
        for raw in response:
            line = raw.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("choices") and chunk["choices"][0].get("delta", {}).get("content"):
                token_times.append(time.perf_counter())
            timings = chunk.get("timings") or timings
    finally:
        conn.close()
    first, last = token_times[0], token_times[-1]
    return {
        "ttft": first - start,
        "tpot": (last - first) / (len(token_times) - 1),
        "timings": timings,
    }


def test_bench_ranks_the_servers_as_their_own_timings_do(
    llama_pair: tuple[LlamaServer, LlamaServer], tmp_path: Path
) -> None:
    small, large = llama_pair
    prompt = prompt_of(PROMPT_TOKENS, salt=7)
    plain: dict[str, list[dict[str, Any]]] = {"small": [], "large": []}
    rng = random.Random(7)
    for _ in range(REQUESTS):  # interleaved, as bench does
        for name, server in (("small", small), ("large", large)):
            # the same request as bench's by default (--prefix-cache cold): a line of its own first,
            # so both clients send the same kind of request
            plain[name].append(plain_stream(server, f"bench-{rng.randrange(10**12):012d}\n{prompt}"))

    out = tmp_path / "bench.jsonl"
    result = run_cli(
        ["bench", "--target", f"small={small.base_url}", "--target", f"large={large.base_url}",
         "--model", "ignored", "--prompt", prompt, "--max-tokens", str(MAX_TOKENS), "-c", "1",
         "-n", str(REQUESTS), "--warmup", "1", "--format", "json", "--out", str(out)],
        timeout=300,
    )  # fmt: skip
    assert result.code == 0, result.err
    bench = by_target(result.json())

    def p50(values: list[float]) -> float:
        return statistics.median(values)

    server = {
        name: {
            "prefill": p50([r["timings"]["prompt_ms"] / 1e3 for r in runs]),
            "decode": p50([r["timings"]["predicted_per_token_ms"] / 1e3 for r in runs]),
        }
        for name, runs in plain.items()
    }
    for name in ("small", "large"):
        ours, theirs = bench[name], plain[name]
        ttft, tpot = p50([r["ttft"] for r in theirs]), p50([r["tpot"] for r in theirs])
        assert ours["tpot"] is not None, "bench measured no TPOT (docs/ARCHITECTURE.md: TPOT limitations)"
        split = ours["server"]
        assert split is not None and split["calls"] == REQUESTS and split["cached_tokens"] <= 1
        assert split["prefill"] == split["server_ttft"]
        assert 0 < split["overhead"] < split["ttft"]
        bench_overhead = ours["ttft"]["p50"] - split["prefill"]
        plain_overhead = ttft - server[name]["prefill"]
        bench_ratio = ours["tpot"]["p50"] / split["server_tpot"]
        plain_ratio = tpot / server[name]["decode"]
        print(
            f"\n  {name}: TTFT p50 bench {ours['ttft']['p50'] * 1e3:.1f} ms"
            f" (prefill {split['prefill'] * 1e3:.1f}),"
            f" plain {ttft * 1e3:.1f} ms (prefill {server[name]['prefill'] * 1e3:.1f}): overheads"
            f" {bench_overhead * 1e3:.1f} / {plain_overhead * 1e3:.1f} ms; TPOT p50 bench"
            f" {ours['tpot']['p50'] * 1e3:.2f} ms (server {split['server_tpot'] * 1e3:.2f}), plain"
            f" {tpot * 1e3:.2f} ms (server {server[name]['decode'] * 1e3:.2f}): ratios {bench_ratio:.3f} /"
            f" {plain_ratio:.3f}"
        )
        assert ours["requests"] == REQUESTS and ours["errors"] == 0
        assert abs(bench_overhead - plain_overhead) <= OVERHEAD_DIFF_S
        assert abs(bench_ratio - plain_ratio) <= PACE_RATIO_DIFF
        drifted = ttft * split["prefill"] / server[name]["prefill"]  # the plain TTFT at bench's pace
        assert abs(ours["ttft"]["p50"] - drifted) <= TTFT_REL * drifted, (ours["ttft"]["p50"], ttft, drifted)
    # the servers' own account ranks them: the large model is slower in prefill and in decode
    assert server["small"]["prefill"] < server["large"]["prefill"]
    assert server["small"]["decode"] < server["large"]["decode"]
    # and so does bench, on the client's numbers and on the server's account it joined
    assert bench["small"]["ttft"]["p50"] < bench["large"]["ttft"]["p50"]
    assert bench["small"]["tpot"]["p50"] < bench["large"]["tpot"]["p50"]
    assert bench["small"]["server"]["prefill"] < bench["large"]["server"]["prefill"]
    assert bench["small"]["server"]["server_tpot"] < bench["large"]["server"]["server_tpot"]

    table = run_cli(
        ["bench", "--target", f"small={small.base_url}", "--target", f"large={large.base_url}",
         "--model", "ignored", "--prompt", prompt, "--max-tokens", "8", "-c", "1", "-n", "2"],
        timeout=300,
    )  # fmt: skip
    assert table.code == 0, table.err
    split_lines = [line for line in table.out.splitlines() if " TTFT: " in line]
    print("\n  " + "\n  ".join(split_lines))
    assert [line.split(":")[0] for line in split_lines] == ["small", "large"]
    assert all(" prefill, " in line and "network, client and queue" in line for line in split_lines)
    report = run_cli(["report", str(out), "--by", "target"])
    assert report.code == 0, report.err
    assert sum("server: of " in line for line in report.out.splitlines()) == 2
