"""``openai-latency bench`` workloads (run_cli) against the fake server's prefix cache:
cache-honest prompts, the hits the servers report, every API, tools and headers.

What was sent is checked in the server's log (the request bodies it received)."""

from __future__ import annotations

import itertools
import json
import os
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from openai_latency.cli.bench.results.cache import WARNING
from openai_latency.fake_server.prefix_cache import prompt_words
from openai_latency.fake_server.records import RequestRecord
from tests.support.cli_runs import by_target, chat_records, run_cli, servers

CACHE = {"prompt-cache": 1, "ttft-ms": 120, "cached-ttft-ms": 20, "chunks": 3}


def _bench(*args: str) -> dict[str, Any]:
    result = run_cli(["bench", "--model", "m", "--format", "json", *args])
    assert result.code == 0, result.err
    assert WARNING not in result.err
    return result.json()


def _common_prefix(a: list[str], b: list[str]) -> int:
    count = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        count += 1
    return count


def _words(record: RequestRecord) -> list[str]:
    body = record.body
    return list(prompt_words(body.get("messages") or body.get("input") or body.get("prompt")))


def test_cold_by_default_warm_hits_after_priming_and_shared_splits_hits_from_misses() -> None:
    with ExitStack() as stack:
        (server,) = servers(stack, CACHE)
        cold = _bench("--target", f"a={server.base_url}", "-n", "6", "-c", "2")
        records = chat_records(server)
        assert len(records) == 6
        prompts = [_words(r) for r in records]
        # no two requests share a prefix: each starts with a line of its own, then the same prompt
        assert all(_common_prefix(a, b) == 0 for i, a in enumerate(prompts) for b in prompts[i + 1 :])
        assert len({tuple(p[1:]) for p in prompts}) == 1
        assert cold["results"][0]["prompt_cache"]["hits"] == 0
        assert cold["results"][0]["prompt_cache"]["misses"] == 6

        server.clear()
        warm = _bench("--target", f"a={server.base_url}", "-n", "4", "--prefix-cache", "warm")
        records = sorted(chat_records(server), key=lambda r: r.received_ns)
        assert len(records) == 5  # the priming request, then the same prompt 4 times
        assert all(_words(r) == _words(records[0]) for r in records)
        (entry,) = warm["results"]
        assert entry["requests"] == 4 and entry["prompt_cache"]["hits"] == 4  # priming not counted
        assert (entry["prompt_cache"]["expected_hits"], entry["prompt_cache"]["expected_of"]) == (4, 4)

        server.clear()
        shared = _bench("--target", f"a={server.base_url}", "-n", "12", "--prefix-cache", "shared:4")
        (entry,) = shared["results"]
        cache = entry["prompt_cache"]
        assert (cache["hits"], cache["misses"]) == (9, 3)
        records = sorted(chat_records(server), key=lambda r: r.received_ns)
        firsts = [_words(r)[0] for r in records]
        assert [len(set(firsts[i : i + 4])) for i in range(0, 12, 4)] == [1, 1, 1] and len(set(firsts)) == 3
        # the scripted prefill difference (120 ms - 20 ms) between misses and hits
        difference = cache["ttft_miss"]["p50"] - cache["ttft_hit"]["p50"]
        assert difference == pytest.approx(0.100, abs=0.005)
        phases = cache["prefill_phases_p50"]["first_token"]
        assert phases["miss"] - phases["hit"] == pytest.approx(0.100, abs=0.005)


def test_a_server_without_cache_fields_gets_the_one_warning() -> None:
    with ExitStack() as stack:
        silent, deepseek, openai = servers(
            stack, {**CACHE, "cache-fields": "none"}, {**CACHE, "cache-fields": "deepseek"}, CACHE
        )
        result = run_cli(
            ["bench", "--model", "m", "--format", "json", "-n", "4", "--prefix-cache", "shared:2",
             "--target", f"silent={silent.base_url}", "--target", f"deepseek={deepseek.base_url}",
             "--target", f"openai={openai.base_url}", "-c", "1,2"]
        )  # fmt: skip
        assert result.code == 0, result.err
        assert result.err.count(WARNING) == 1  # two load levels, three targets: one warning
        (line,) = [line for line in result.err.splitlines() if WARNING in line]
        assert line.startswith("openai-latency bench: warning: silent: the server reports no")
        targets = by_target({"results": [e for e in result.json()["results"] if e["key"]["load"] == "c=1"]})
        assert targets["silent"]["prompt_cache"]["hits"] == 0
        assert targets["silent"]["prompt_cache"]["unreported"] == 4
        # DeepSeek's prompt_cache_hit_tokens count as hits, like OpenAI's cached_tokens
        for name in ("deepseek", "openai"):
            assert (targets[name]["prompt_cache"]["hits"], targets[name]["prompt_cache"]["misses"]) == (2, 2)


def test_responses_and_completions_apis_tools_and_headers_reach_the_server(tmp_path: Path) -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "d",
            "parameters": {"type": "object", "properties": {}},
        },
    }
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([tool]))
    with ExitStack() as stack:
        (server,) = servers(stack, {"ttft-ms": 5, "chunks": 3})
        base = ["--target", f"a={server.base_url}", "-n", "2", "--prompt", "say it"]
        responses = _bench(*base, "--api", "responses", "--tools", str(tools), "--header", "X-Team=latency")
        completions = _bench(*base, "--api", "completions", "--no-stream")
        chat = _bench(*base, "--tools", str(tools), "--header", "x-fake-tool-call=1")  # answers with a call
        records = server.records(wait=5.0)
        by_path: dict[str, list[RequestRecord]] = {}
        for record in records:
            by_path.setdefault(record.path, []).append(record)
        (response_body, _) = [r.body for r in by_path["/v1/responses"]]
        assert response_body["input"][0]["content"].endswith("\nsay it")
        assert response_body["max_output_tokens"] == 64 and response_body["stream"] is True
        assert response_body["tools"] == [{"type": "function", **tool["function"]}]  # the Responses shape
        assert all(r.headers.get("x-team") == "latency" for r in by_path["/v1/responses"])
        (completion_body, _) = [r.body for r in by_path["/v1/completions"]]
        assert completion_body["prompt"].endswith("\nsay it") and "stream" not in completion_body
        chat_bodies = [r.body for r in by_path["/v1/chat/completions"]]
        assert all(body["tools"] == [tool] for body in chat_bodies)
        assert all("x-team" not in r.headers for r in by_path["/v1/chat/completions"])
        for report in (responses, completions, chat):
            (entry,) = report["results"]
            assert entry["requests"] == 2 and entry["errors"] == 0 and entry["output_tokens"] == 6
        assert responses["results"][0]["ttft"]["n"] == 2  # streamed Responses events: TTFT measured
        # the answer was a tool call: its first arguments delta is the first token
        assert chat["results"][0]["ttft"]["n"] == 2 and chat["results"][0]["chunk_gaps"]["n"] == 4


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--prefix-cache", "shared:1"], "shared:N with N >= 2"),
        (["--api", "completions", "--tools", "{tools}"], "completions API has no tools"),
        (["--tools", "{bad}"], "not JSON"),
        (["--header", "bad header=1"], "--header: expected NAME=VALUE"),
        # why, and what to do instead
        (["--sweep", "--workers", "2"], "--sweep runs in one client process: it picks each next level"),
        (["--sweep", "-c", "2"], "--sweep chooses the load itself: leave out -c and --rate"),
    ],
)
def test_bad_workload_options_are_one_line(argv: list[str], message: str, tmp_path: Path) -> None:
    (tmp_path / "tools.json").write_text('[{"type": "function", "function": {"name": "f"}}]')
    (tmp_path / "bad.json").write_text("[{")
    argv = [a.format(tools=tmp_path / "tools.json", bad=tmp_path / "bad.json") for a in argv]
    result = run_cli(["bench", "--target", "a=http://127.0.0.1:9/v1", "--model", "m", *argv])
    assert result.code == 2 and message in result.err and len(result.err.strip().splitlines()) <= 3


def _without_header(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    first = dict(messages[0])
    line, _, rest = first["content"].partition("\n")
    assert line.startswith("bench-")
    return [{**first, "content": rest}, *messages[1:]]


def test_a_jsonl_dataset_is_sent_as_the_file_says(tmp_path: Path) -> None:
    system = {"role": "system", "content": "You are terse."}
    lines = [
        json.dumps("First prompt."),
        json.dumps({"prompt": "Second prompt."}),
        json.dumps({"messages": [system, {"role": "user", "content": "Third."}]}),
    ]
    data = tmp_path / "prompts.jsonl"
    data.write_text("\n".join(lines) + "\n")
    with ExitStack() as stack:
        (server,) = servers(stack, {"ttft-ms": 5, "chunks": 2})
        _bench("--target", f"a={server.base_url}", "-n", "4", "--dataset", str(data))
        records = sorted(chat_records(server), key=lambda r: r.received_ns)
        sent = [_without_header(r.body["messages"]) for r in records]
        assert sent == [
            [{"role": "user", "content": "First prompt."}],
            [{"role": "user", "content": "Second prompt."}],
            [system, {"role": "user", "content": "Third."}],
            [{"role": "user", "content": "First prompt."}],  # cycled
        ]


def test_sharegpt_conversations_grow_turn_by_turn_and_later_turns_hit_the_cache(tmp_path: Path) -> None:
    def item(topic: str) -> dict[str, Any]:
        return {
            "id": topic,
            "conversations": [
                {"from": "system", "value": f"About {topic}."},
                {"from": "human", "value": f"What is {topic}?"},
                {"from": "gpt", "value": "A recorded answer that is not sent."},
                {"from": "human", "value": f"Why {topic}?"},
            ],
        }

    data = tmp_path / "sharegpt.json"
    data.write_text(json.dumps([item("tea"), item("rain")], indent=1))
    with ExitStack() as stack:
        (server,) = servers(stack, CACHE)
        report = _bench("--target", f"a={server.base_url}", "-n", "2", "--dataset", str(data), "--turns", "3")
        records = sorted(chat_records(server), key=lambda r: r.received_ns)
        assert len(records) == 6
        answer = {"role": "assistant", "content": "tok0 tok1 tok2"}  # the server's own answer
        for topic, conversation in zip(("tea", "rain"), (records[:3], records[3:]), strict=True):
            turns = [_without_header(r.body["messages"]) for r in conversation]
            assert turns[0] == [
                {"role": "system", "content": f"About {topic}."},
                {"role": "user", "content": f"What is {topic}?"},
            ]
            assert turns[1] == [*turns[0], answer, {"role": "user", "content": f"Why {topic}?"}]
            assert turns[2][: len(turns[1])] == turns[1] and turns[2][-2] == answer
            assert turns[2][-1]["role"] == "user"  # the data has no third question: a follow-up
            bodies = [r.body["messages"] for r in conversation]  # the header line included
            assert all(b[: len(a)] == a for a, b in itertools.pairwise(bodies))  # each prefix grows
        by_turn = {entry["key"]["load"]: entry for entry in report["results"]}
        assert sorted(by_turn) == ["c=1 turn 1", "c=1 turn 2", "c=1 turn 3"]
        first, later = by_turn["c=1 turn 1"], [by_turn["c=1 turn 2"], by_turn["c=1 turn 3"]]
        assert first["prompt_cache"]["hits"] == 0 and first["prompt_cache"]["expected_hits"] == 0
        assert all(e["prompt_cache"]["hits"] == 2 == e["prompt_cache"]["expected_hits"] for e in later)
        # per-turn TTFT shows what the cache saves (scripted: 120 ms miss, 20 ms hit)
        assert all(e["ttft"]["p50"] + 0.08 < first["ttft"]["p50"] for e in later)


def test_prompt_and_output_length_distributions_and_output_length_not_met() -> None:
    with ExitStack() as stack:
        (server,) = servers(stack, {"ttft-ms": 5, "chunks": 4})
        base = ["--target", f"a={server.base_url}", "-n", "12", "--seed", "3"]
        exact = _bench(*base, "--prompt-tokens", "13,65", "--output-tokens", "4,7")
        records = chat_records(server)
        assert len(records) == 12
        words = {len(r.body["messages"][0]["content"].split("\n", 1)[1].split()) for r in records}
        assert words == {10, 50}  # ~1.3 tokens a word
        asked = [r.body["max_tokens"] for r in records]
        assert set(asked) == {4, 7}
        assert all(r.body["ignore_eos"] is True for r in records)  # the hint, in the body
        (entry,) = exact["results"]
        # the fake honours ignore_eos as vLLM does: every request got exactly what it asked for
        assert entry["output_length_short"] == 0 and entry["output_tokens"] == sum(asked)
        server.clear()
        result = run_cli(
            ["bench", "--model", "m", *base, "--output-tokens", "4,6", "--no-ignore-eos",
             "--prompt-tokens", "20:5"]
        )  # fmt: skip
        assert result.code == 0, result.err
        records = chat_records(server)
        assert all("ignore_eos" not in r.body for r in records)
        assert len({len(r.body["messages"][0]["content"].split()) for r in records}) > 3  # a spread
        # without the hint the fake stops at its 4 tokens: the requests that asked for 6 say so
        short = [r.body["max_tokens"] for r in records].count(6)
        assert short > 0
        assert f"a: {short} of 12 requests got fewer output tokens than --output-tokens asked" in result.out


@pytest.mark.slow
def test_sweep_finds_the_knee_of_a_server_with_a_capacity() -> None:
    """The fake answers 4 requests at a time and queues the rest: throughput stops growing at c=4.
    50 ms a request: a level's steady rate spans two 50 ms waves, and the client's jitter on a wave's
    last end (a few ms on a slow or loaded CPU, the bench client running in the test's process) stays
    well inside the sweep's 10 % growth rule. At 25 ms the same jitter reached 10 % of the span and
    the search went on to c=32 on a 2-core Xeon (issue 33)."""
    with ExitStack() as stack:
        (server,) = servers(stack, {"capacity": 4, "delay-ms": 50, "chunks": 3})
        result = run_cli(
            ["bench", "--model", "m", "--target", f"a={server.base_url}", "-n", "16", "--sweep", "2",
             "--format", "json"]
        )  # fmt: skip
        assert result.code == 0, result.err
        sweep = result.json()["sweep"]
        search = [entry["load"] for entry in sweep["search"]]
        assert search[:3] == ["c=1", "c=2", "c=4"] and len(search) <= 5  # stops once it stops growing
        assert sweep["knee"] in ("c=2", "c=4", "c=8")  # c=4, within one level
        # the server never answered more than 4 at once, and the rate levels end at the highest rate
        # the client's own cost per level, each level of the search and of the rates
        levels = result.json()["client"]["levels"]
        assert set(levels) == {*search, *sweep["rates"]} and all(v["cpu_s"] > 0 for v in levels.values())
        rates = sweep["rates"]
        assert len(rates) == 2 and rates[-1].startswith(f"rate={sweep['max_requests_per_s']:.3f}"[:9])
        table = run_cli(
            ["bench", "--model", "m", "--target", f"a={server.base_url}", "-n", "8", "--sweep", "1"]
        )
        assert table.code == 0, table.err
        assert "<- knee" in table.out and "knee: c=" in table.out


SPILLING = """
import sys
from openai_latency.cli.bench.run import record
from openai_latency.cli import main
record.SPILL_SPANS = 30
held = []
spill = record.Recorder.spill
def watched(self):
    held.append(len(self.spans))
    spill(self)
record.Recorder.spill = watched
code = main(sys.argv[1:])
print("held:", ",".join(map(str, held)), file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.slow
def test_a_long_run_spills_its_spans_between_levels_and_loses_none(tmp_path: Path) -> None:
    """Spans beyond a bound are written out between load levels (bounded lowered to 30 here)."""
    import subprocess
    import sys

    out = tmp_path / "spans.jsonl"
    with ExitStack() as stack:
        (server,) = servers(stack, {"ttft-ms": 2, "chunks": 2})
        done = subprocess.run(
            [sys.executable, "-c", SPILLING, "bench", "--target", f"a={server.base_url}", "--model", "m",
             "-n", "8", "-c", "1,2,4", "--format", "json", "--out", str(out)],
            capture_output=True, text=True, timeout=120, env={**os.environ, "OPENAI_API_KEY": "sk-x"},
            check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        held = [int(n) for n in done.stderr.rsplit("held: ", 1)[1].split(",")]
        # each level's spans cross the bound: written after each level; then the rest (none) at the end
        # (a level that opens one more connection has one more http.connect span)
        assert len(held) == 4 and all(n > 30 for n in held[:3]) and held[3] == 0, held
        results = json.loads(done.stdout)["results"]
        assert [r["requests"] for r in results] == [8, 8, 8]  # every call, read back from the file
        lines = out.read_text().splitlines()
        assert sum(line.count('"chat m"') for line in lines) == 24
