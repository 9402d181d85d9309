"""bench against a peer load tool (guidellm), both measured against the fake server's own log.

Each tool runs as its own process pinned to CPU 1, the fake server to CPU 0 (``--no-pin`` leaves
both free), at each closed-loop level (``-c``) and open-loop rate (``--rates``), interleaved: every
level runs each tool once per round, in an order that alternates. The truth server answers every
request the same way (50 ms to its headers, 20 ms more to the first token, 32 tokens 10 ms apart),
and every request a tool reports is matched to the server's log entry for it:
- ours by its ``x-request-id`` (bench's ``--out`` spans carry it);
- guidellm's by its response id (the fake server's ``chatcmpl-`` id is the request id's hex).

Printed per level and tool:
- TTFT error: the tool's TTFT minus the server's (request received -> first token written), each
  tool from its own origin; and from one origin, the request sent (ours: ``ttft_sent``; guidellm's
  clock starts at its request's write, so its two columns are the same);
- first-token lag: when the tool saw the first token minus when the server wrote it (the same
  origin for both tools: the server's write, clocks mapped through one monotonic -> epoch offset);
- TPOT (guidellm: inter-token latency, the same definition) against the server's pace, in %;
- how many requests got no TPOT;
- requests per second reached and the client's CPU per request (the tool's process and its children).

guidellm 0.8.1 is installed into its own virtual environment on first use (``--guidellm-venv``, default
under ~/.cache/openai-latency; several GB, as it brings torch); its data is a JSON-lines file with
output token counts, so no tokenizer is downloaded.

    python benchmarks/peer_bench.py [-c 1,16,64] [--rates 100,140,180,220] [-n 400] [--rounds 1]
        [--also='--sdk-parse construct']

After the table: per tool, the highest rate it kept (95 % of the arrivals asked) with its TTFT error
from the request sent within +5 ms at p50.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from openai_latency.cli.spans.collect import collect_calls
from openai_latency.cli.spans.files import read_spans
from openai_latency.cli.spans.span import ReadStats
from openai_latency.cli.stats.metric_table import METRIC
from openai_latency.fake_server import FakeServer
from openai_latency.fake_server.records import RequestRecord
from openai_latency.fake_server.server import SpawnedServer

GUIDELLM = "guidellm==0.8.1"
TRUTH = {"delay-ms": 50, "ttft-ms": 20, "chunks": 32, "chunk-delay-ms": 10}
OPENAI_LATENCY = [str(Path(sys.executable).parent / "openai-latency")]


@dataclass
class Sample:
    """One request as a tool saw it, and as the server logged it."""

    ttft_error: float  # s, the tool's TTFT minus the server's
    sent_error: float | None  # s, the same from the request sent (guidellm's origin; ours: ttft_sent)
    first_token_lag: float  # s, the tool's first-token time minus the server's write
    tpot_error: float | None  # ratio - 1, against the server's pace


@dataclass
class Result:
    samples: list[Sample] = field(default_factory=list)
    unmatched: int = 0
    requests: int = 0
    wall_s: float = 0.0
    """The server's view: first request received to last response finished."""
    arrivals_s: float = 0.0
    """The server's view: first request received to last request received (an open loop's rate kept)."""
    cpu_s: float = 0.0
    """The client's CPU during the load: bench's own figure (its JSON, without start-up and imports);
    guidellm's process and children, a 2-request run's CPU taken off (its start-up)."""
    cpu_in_run: bool = False
    bottleneck: bool = False
    """bench's own warning: its JSON's ``client.bottleneck`` (guidellm: always False)."""


def _served(records: list[RequestRecord]) -> float:
    ends = [r.finished_ns for r in records if r.finished_ns]
    return (max(ends) - min(r.received_ns for r in records)) / 1e9 if ends else 0.0


def _arrivals(records: list[RequestRecord]) -> float:
    received = [r.received_ns for r in records]
    return (max(received) - min(received)) / 1e9 if len(received) > 1 else 0.0


def _pace(record: RequestRecord) -> float:
    content = record.content_event_ns
    return (content[-1] - content[0]) / (len(content) - 1) / 1e9


def _server_ttft(record: RequestRecord) -> float:
    return ((record.first_content_ns or 0) - record.received_ns) / 1e9


def _child(cmd: list[str], pin: bool, env: dict[str, str] | None = None) -> tuple[float, bytes]:
    """Runs a client to its end: the CPU seconds of it and its children, and its standard output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    preexec = (lambda: os.sched_setaffinity(0, {1})) if pin else None
    done = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, env=env, preexec_fn=preexec)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def run_ours(
    server: SpawnedServer, load: str, requests: int, pin: bool, offset_ns: int, extra: list[str]
) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "spans.jsonl"
        level = ["--rate", load[5:]] if load.startswith("rate=") else ["-c", load[2:]]
        cmd = [*OPENAI_LATENCY, "bench", "--target", f"truth={server.base_url}", "--model", "m",
               "-n", str(requests), "--max-tokens", "32", *level, "--out", str(out), "--format", "json",
               *extra]  # fmt: skip
        _, output = _child(cmd, pin)
        calls = collect_calls(read_spans([str(out)], ReadStats())).calls
    client = json.loads(output)["client"]
    levels = client["levels"]
    records = server.records()
    result = Result(
        requests=len(calls),
        wall_s=_served(records),
        arrivals_s=_arrivals(records),
        cpu_in_run=True,
        bottleneck=bool(client["bottleneck"]),
    )
    result.cpu_s = sum(level["cpu_s"] for level in levels.values())
    for call in calls:
        record = server.record(call.request_id) if call.request_id else None
        if record is None or record.first_content_ns is None or call.ttft is None:
            result.unmatched += 1
            continue
        seen = call.start_ns + call.ttft * 1e9
        tpot = call.tpot / _pace(record) - 1 if call.tpot else None
        lag = (seen - (record.first_content_ns + offset_ns)) / 1e9
        sent = METRIC["ttft_sent"].of(call)
        sent_error = None if sent is None else sent - _server_ttft(record)
        result.samples.append(Sample(call.ttft - _server_ttft(record), sent_error, lag, tpot))
    return result


def run_guidellm(
    server: SpawnedServer, load: str, requests: int, pin: bool, offset_ns: int, guidellm: str
) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "data.jsonl", Path(tmp) / "out.json"
        prompt = {
            "prompt": "Why is the first token slow?",
            "prompt_tokens_count": 8,
            "output_tokens_count": 32,
        }
        data.write_text("".join(json.dumps(prompt) + "\n" for _ in range(requests)))
        profile = (
            f"kind=constant,rate={load[5:]}"
            if load.startswith("rate=")
            else f"kind=concurrent,streams={load[2:]}"
        )
        root = server.base_url.removesuffix("/v1")
        backend = f"kind=openai_http,target={root},model=m,validate_backend=false"
        cmd = [guidellm, "run", "--backend", backend,
               "--data", f"kind=json_file,path={data}", "--profile", profile,
               "--constraint", f"kind=max_requests,count={requests}", "--output", f"kind=json,path={out}",
               "--disable-progress", "--disable-console"]  # fmt: skip
        cpu, _ = _child(cmd, pin, {**os.environ, "HF_HUB_OFFLINE": "1"})  # no model hub
        (benchmark,) = json.loads(out.read_text())["benchmarks"]
    successful = benchmark["requests"]["successful"]
    logged = server.records()
    records = {r.request_id.removeprefix("req_")[:24]: r for r in logged}
    result = Result(requests=len(successful), wall_s=_served(logged), arrivals_s=_arrivals(logged), cpu_s=cpu)
    for request in successful:
        record = records.get(str(request.get("response_id", "")).removeprefix("chatcmpl-"))
        timings = request["info"]["timings"]
        if record is None or record.first_content_ns is None or timings.get("first_token_iteration") is None:
            result.unmatched += 1
            continue
        ttft = timings["first_token_iteration"] - timings["request_start"]
        itl = request.get("inter_token_latency_ms")
        tpot = itl / 1e3 / _pace(record) - 1 if itl else None
        lag = (timings["first_token_iteration"] * 1e9 - (record.first_content_ns + offset_ns)) / 1e9
        error = ttft - _server_ttft(record)  # its clock starts at the request's write: both origins
        result.samples.append(Sample(error, error, lag, tpot))
    return result


def _q(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _row(tool: str, load: str, results: list[Result]) -> str:
    samples = [s for r in results for s in r.samples]
    ttft = [s.ttft_error * 1e3 for s in samples]
    sent = [s.sent_error * 1e3 for s in samples if s.sent_error is not None]
    lag = [s.first_token_lag * 1e3 for s in samples]
    tpot = [s.tpot_error * 100 for s in samples if s.tpot_error is not None]
    requests = sum(r.requests for r in results)
    no_tpot = len(samples) - len(tpot) + sum(r.unmatched for r in results)
    if load.startswith("rate="):  # the arrivals kept: the tail of the last requests is not the load
        rate = sum(r.requests - 1 for r in results) / sum(r.arrivals_s for r in results)
    else:
        rate = requests / sum(r.wall_s for r in results)
    cpu_ms = sum(r.cpu_s for r in results) / max(requests, 1) * 1e3
    cells = [
        f"{statistics.median(ttft):+.1f} / {_q(ttft, 0.95):+.1f}" if ttft else "-",
        f"{statistics.median(sent):+.1f} / {_q(sent, 0.95):+.1f}" if sent else "-",
        f"{statistics.median(lag):+.1f} / {_q(lag, 0.95):+.1f}" if lag else "-",
        f"{statistics.median(tpot):+.2f} / {_q(tpot, 0.95):+.2f}" if tpot else "-",
        str(no_tpot), f"{rate:.1f}", f"{cpu_ms:.1f}",
    ]  # fmt: skip
    return f"| {load} | {tool} | " + " | ".join(cells) + " |"


def _max_rate(tool: str, loads: list[str], results: dict[tuple[str, str], list[Result]]) -> str:
    """The highest open-loop rate the tool kept (>= 95 % of the asked arrivals per second reached the
    server) with its TTFT error at p50 within +5 ms, from the request sent (the origin both tools
    share)."""
    kept = "-"
    for load in loads:
        if not load.startswith("rate="):
            continue
        runs = results[load, tool]
        sent = [s.sent_error for r in runs for s in r.samples if s.sent_error is not None]
        reached = sum(r.requests - 1 for r in runs) / sum(r.arrivals_s for r in runs)
        if sent and statistics.median(sent) <= 0.005 and reached >= 0.95 * float(load[5:]):
            kept = f"{load[5:]}/s"
    return kept


def _guidellm(venv: Path) -> str:
    exe = venv / "bin" / "guidellm"
    if not exe.exists():
        print(f"installing {GUIDELLM} into {venv} (several GB, once)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", GUIDELLM], check=True)
    return str(exe)


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("-c", default="1,16,64", help="closed-loop concurrencies")
    parser.add_argument(
        "--rates", default="100,140,180,220", help="open-loop rates (requests/s); empty: none"
    )
    parser.add_argument("-n", type=int, default=400, help="requests per level and tool (c=1: 1/8 of it)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-pin", action="store_true")
    parser.add_argument("--workers", type=int, default=1, help="also run bench with this many --workers")
    parser.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="ARGS",
        help="also run bench with these options, e.g. --also='--sdk-parse construct' (repeatable)",
    )
    cache = (
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "openai-latency" / "guidellm-0.8.1"
    )
    parser.add_argument("--guidellm-venv", type=Path, default=cache)
    args = parser.parse_args()
    guidellm = _guidellm(args.guidellm_venv)
    pin = not args.no_pin
    loads = [f"c={c}" for c in args.c.split(",") if c] + [f"rate={r}" for r in args.rates.split(",") if r]
    variants = [*args.also, *([f"--workers {args.workers}"] if args.workers > 1 else [])]
    tools = ("bench", *(f"bench {options}" for options in variants), "guidellm")
    results: dict[tuple[str, str], list[Result]] = {}
    with FakeServer.spawn(TRUTH) as server:
        if pin:
            os.sched_setaffinity(server.process.pid, {0})
        offset_ns = time.time_ns() - time.monotonic_ns()

        def run(tool: str, load: str, n: int) -> Result:
            server.clear()
            if tool.startswith("bench"):
                return run_ours(server, load, n, pin, offset_ns, tool.split()[1:])
            return run_guidellm(server, load, n, pin, offset_ns, guidellm)

        # Each tool's start-up (imports, its workers) is not a request's cost: a 2-request run each.
        startup = {"guidellm": run("guidellm", "c=1", 2).cpu_s}  # bench reports its own in-run CPU
        for round_index in range(args.rounds):
            for i, load in enumerate(loads):
                order = list(tools) if (i + round_index) % 2 == 0 else list(reversed(tools))
                n = max(args.n // 8, 20) if load == "c=1" else args.n
                for tool in order:
                    result = run(tool, load, n)
                    if not result.cpu_in_run:
                        result.cpu_s = max(result.cpu_s - startup.get(tool, 0.0), 0.0)
                    results.setdefault((load, tool), []).append(result)
                    print(
                        f"  {load} {tool}: {result.requests} requests in {result.wall_s:.1f} s",
                        file=sys.stderr,
                    )
    print(f"truth: {TRUTH}; {args.rounds} round(s); pinned: {pin}; load at the end {os.getloadavg()[0]:.2f}")
    print(f"guidellm's start-up CPU taken off each of its runs: {startup['guidellm']:.2f} s")
    print("| level | tool | TTFT error p50 / p95 (ms) | from request sent | first-token lag p50 / p95 (ms) "
          "| TPOT error p50 / p95 (%) | no TPOT | req/s (rate=: arrivals/s kept) "
          "| client CPU per request (ms) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for load in loads:
        for tool in tools:
            print(_row(tool, load, results[load, tool]))
    if any(load.startswith("rate=") for load in loads):
        rates = ", ".join(f"{tool} {_max_rate(tool, loads, results)}" for tool in tools)
        print(f"\nmax rate kept with the TTFT error (from request sent) p50 within +5 ms: {rates}")


if __name__ == "__main__":
    main()
