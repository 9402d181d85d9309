"""What openai-latency adds per non-stream call and per stream chunk (docs/ARCHITECTURE.md "Cost budget").

Method (docs/ARCHITECTURE.md "Cost budget"): the fake OpenAI server runs in its own process; every
mode runs in its own
worker process (``baseline`` = the uninstrumented SDK, ``detailed`` / ``off`` = ours with that
``phase_spans``); each round runs one short batch of every (mode, workload) pair in a freshly
shuffled order; the estimate is the median over rounds of (mode batch - baseline batch of the same
round), with a bootstrap confidence interval over rounds. Workers warm up, then ``gc.collect()``
and ``gc.freeze()``. Per-chunk overhead = (overhead of a 64-chunk stream - overhead of a 1-chunk
stream) / 63. Every worker has a SimpleSpanProcessor with an in-memory exporter (cleared after each
batch) and a MeterProvider with an InMemoryMetricReader. Every figure is given in wall time (what the budget
limits) and in the worker's CPU time (the client's own work: narrower intervals on a shared machine).
``--paced-ms N`` adds streams whose chunks arrive N ms apart (the path where chunk gaps are recorded);
a cProfile run of the ``detailed`` worker follows the rounds. See benchmarks/README.md.

    python benchmarks/overhead.py [--rounds N] [--batch N] [--json out.json] [--profile-calls N]

Not a test: it reports numbers and budget verdicts, it never fails on them.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import json
import os
import platform
import pstats
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

# --- what is measured -------------------------------------------------------------------------

BASELINE = "baseline"
OFFICIAL = "official"  # opentelemetry-instrumentation-genai-openai, in --official-python's environment
OFFICIAL_BASELINE = "official-baseline"  # the uninstrumented SDK in that environment, when it is another one
OURS = ("phases", "detailed", "off")
REPLAY = "replay"  # the uninstrumented SDK, then the OTel SDK calls of what `phases` emits (replay.py)
OWN = "own"  # phases - replay: our own code's share (a row of the report, not a worker)
ALL_MODES = (BASELINE, OFFICIAL, OFFICIAL_BASELINE, *OURS, REPLAY)
DEFAULT_MODES = (BASELINE, OFFICIAL, *OURS)

CALL = "call"  # non-stream chat completion
EMBED = "embed"  # embeddings, one input
STREAM_1 = "stream1"  # chat completion stream, 1 content chunk
STREAM_64 = "stream64"  # chat completion stream, 64 content chunks
WORKLOADS = (CALL, EMBED, STREAM_1, STREAM_64)
# Opt-in (--paced-ms): streams whose chunks the server spaces out, as a real model does. Every
# ``next`` then blocks, so each gap is observed (and recorded at the end of the stream): the
# loopback streams above arrive mostly already buffered and do not exercise that path.
PACED_1 = "paced1"
PACED_64 = "paced64"
PACED_WORKLOADS = (PACED_1, PACED_64)
PACED_BATCH = 1
CHUNKS = {STREAM_1: 1, STREAM_64: 64, PACED_1: 1, PACED_64: 64}

#: When the official package is not measured: what it adds per call on an idle machine (docs/ARCHITECTURE.md).
OFFICIAL_CALL_US = 423.0
#: docs/ARCHITECTURE.md: the uninstrumented SDK on an idle machine, for scale.
REFERENCE_BASELINE_CALL_US = 1900.0
#: Without the official package in the run: the per-chunk budget in µs (issue 12's).
CHUNK_BUDGET_US = 1.5
#: Issue 24's budget: (mode, workload) -> at most this factor x what the official package adds to the
#: same workload in the same run ("own" = phases - replay: our code, without the SDK's cost of what
#: we emit).
BUDGET_FACTOR = {
    ("off", CALL): 0.9,
    ("off", EMBED): 1.0,
    ("own", CALL): 0.5,
    ("own", EMBED): 0.5,
    ("phases", CALL): 1.3,
}
#: Issue 24: the per-chunk figure of the default mode at most this share of the official package's.
CHUNK_BUDGET_SHARE = 0.1

WARMUP_CALLS = 30
PROFILE_TOP = 10

WALL = "wall"  # time.perf_counter_ns(): what the caller waits, the primary figure (docs/ARCHITECTURE.md)
CPU = "cpu"  # time.process_time_ns() of the worker: the client's own work, less sensitive to load
CLOCKS = (WALL, CPU)
PACKAGE = "openai_latency"


# --- worker: one process per mode -------------------------------------------------------------


class Worker:
    """The SDK client of one mode, with the OTel SDK wired as docs/ARCHITECTURE.md says."""

    def __init__(self, mode: str, base_url: str, paced_ms: float = 0.0) -> None:
        import openai
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.mode = mode
        self.paced_ms = paced_ms
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.metric_reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.metric_reader])
        if mode == OFFICIAL:
            from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor

            OpenAIInstrumentor().instrument(
                tracer_provider=self.tracer_provider, meter_provider=self.meter_provider
            )
        elif mode in OURS:
            from openai_latency import OpenAILatencyInstrumentor

            OpenAILatencyInstrumentor().instrument(
                tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, phase_spans=mode
            )
        self.client = openai.OpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
        self.messages: list[Any] = [{"role": "user", "content": "hi"}]

    def call(self) -> None:
        self.client.chat.completions.create(model="gpt-4o-mini", messages=self.messages)

    def embed(self) -> None:
        self.client.embeddings.create(model="text-embedding-3-small", input="hi")

    def stream(self, chunks: int, delay_ms: float = 0.0) -> None:
        headers = {"x-fake-chunks": str(chunks)}
        if delay_ms:
            headers["x-fake-chunk-delay-ms"] = str(delay_ms)
        with self.client.chat.completions.create(
            model="gpt-4o-mini", messages=self.messages, stream=True, extra_headers=headers
        ) as stream:
            for _ in stream:
                pass

    def job(self, workload: str) -> Callable[[], None]:
        if self.mode == REPLAY:
            return self._replayed(workload)
        return self._job(workload)

    def _replayed(self, workload: str) -> Callable[[], None]:
        """The call, then the OTel SDK work of what ``phases`` emitted for it (captured once)."""
        import replay

        replayers = self.__dict__.setdefault("_replayers", {})
        if workload not in replayers:
            template = replay.capture(self._job(workload))
            replayers[workload] = replay.Replayer(template, self.tracer_provider, self.meter_provider)
        job, again = self._job(workload), replayers[workload].replay

        def replayed() -> None:
            job()
            again()

        return replayed

    def _job(self, workload: str) -> Callable[[], None]:
        if workload == CALL:
            return self.call
        if workload == EMBED:
            return self.embed
        chunks = CHUNKS[workload]
        delay = self.paced_ms if workload in PACED_WORKLOADS else 0.0
        return lambda: self.stream(chunks, delay)

    def batch(self, workload: str, n: int) -> dict[str, int]:
        """Run ``n`` calls back to back: their wall and CPU time (this process) in ns, spans exported."""
        job = self.job(workload)
        cpu = time.process_time_ns()
        start = time.perf_counter_ns()
        for _ in range(n):
            job()
        elapsed = time.perf_counter_ns() - start
        cpu = time.process_time_ns() - cpu
        spans = len(self.exporter.get_finished_spans())
        self.exporter.clear()
        return {WALL: elapsed, CPU: cpu, "spans": spans}

    def warm_up(self, calls: int) -> None:
        for workload in WORKLOADS:
            self.batch(workload, calls)
        if self.paced_ms:
            for workload in PACED_WORKLOADS:
                self.batch(workload, 2)
        gc.collect()
        gc.freeze()

    def profile(self, workload: str, n: int, path: str) -> dict[str, int]:
        job = self.job(workload)
        # CPU time of this thread: time lost to other processes or spent waiting on the server is not
        # charged to whichever function happened to be running (the machine is shared).
        profiler = cProfile.Profile(time.thread_time_ns, 1e-9)
        profiler.enable()
        for _ in range(n):
            job()
        profiler.disable()
        profiler.dump_stats(path)
        spans = len(self.exporter.get_finished_spans())
        self.exporter.clear()
        return {"spans": spans}


def worker_main(mode: str, base_url: str, warmup: int, paced_ms: float) -> None:
    """Line protocol on the original stdout: ``batch W N`` / ``profile W N PATH`` -> one JSON line."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = sys.stderr  # nothing else may write to the protocol channel
    worker = Worker(mode, base_url, paced_ms)
    worker.warm_up(warmup)
    out.write(json.dumps({"ready": mode}) + "\n")
    for line in sys.stdin:
        command, *args = line.split()
        if command == "batch":
            reply = worker.batch(args[0], int(args[1]))
        elif command == "profile":
            reply = worker.profile(args[0], int(args[1]), args[2])
        elif command == "quit":
            return
        else:
            raise SystemExit(f"unknown command {line!r}")
        out.write(json.dumps(reply) + "\n")


class WorkerProcess:
    def __init__(self, mode: str, base_url: str, warmup: int, paced_ms: float, python: str) -> None:
        self.mode = mode
        args = [python, __file__, "--worker", mode, "--base-url", base_url, "--warmup", str(warmup)]
        args += ["--paced-ms", str(paced_ms)]
        self.process = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.ready = False

    def _send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def _reply(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.mode!r} exited ({self.process.wait()}); see its stderr above")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def wait_ready(self) -> None:
        if not self.ready:
            self._reply()
            self.ready = True

    def batch(self, workload: str, n: int) -> dict[str, int]:
        self._send(f"batch {workload} {n}")
        return self._reply()

    def profile(self, workload: str, n: int, path: str) -> dict[str, int]:
        self._send(f"profile {workload} {n} {shlex.quote(path)}")
        return self._reply()

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                self._send("quit")
                self.process.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()


# --- statistics -------------------------------------------------------------------------------


@dataclass
class Estimate:
    median: float
    low: float
    high: float
    n: int

    def text(self) -> str:
        return f"{self.median:+8.1f}  [{self.low:+7.1f}, {self.high:+7.1f}]"


def estimate(values: Sequence[float], rng: random.Random, confidence: float = 0.95) -> Estimate:
    """Median of ``values`` with a percentile bootstrap interval over rounds: the CLI's
    (``cli/stats/bootstrap.py``, 2,000 resamples, each resampled median drawn exactly)."""
    from openai_latency.cli.stats.bootstrap import quantile_interval

    median = quantile_interval(sorted(values), 0.5, rng, confidence)
    return Estimate(median.estimate, median.low, median.high, len(values))


@dataclass
class Results:
    config: dict[str, Any]
    environment: dict[str, Any]
    #: rounds[clock][r][mode][workload] = µs per call of that batch, clock = "wall" or "cpu"
    rounds: dict[str, list[dict[str, dict[str, float]]]] = field(default_factory=dict)
    #: spans exported per call, by mode and workload (from the first round)
    spans_per_call: dict[str, dict[str, float]] = field(default_factory=dict)
    #: baseline_us[clock]["call" | "chunk"]
    baseline_us: dict[str, dict[str, float]] = field(default_factory=dict)
    #: estimates[clock][mode]["call_us" | "stream1_us" | "chunk_us"]
    estimates: dict[str, dict[str, dict[str, Estimate]]] = field(default_factory=dict)
    budgets: list[dict[str, Any]] = field(default_factory=list)
    profile: dict[str, Any] = field(default_factory=dict)


def analyse(results: Results, modes: Sequence[str], seed: int) -> None:
    for clock in CLOCKS:
        analyse_clock(results, clock, modes, random.Random(seed))


def _baseline_of(mode: str, modes: Sequence[str]) -> str:
    """The uninstrumented worker of ``mode``'s environment."""
    return OFFICIAL_BASELINE if mode == OFFICIAL and OFFICIAL_BASELINE in modes else BASELINE


def analyse_clock(results: Results, clock: str, modes: Sequence[str], rng: random.Random) -> None:
    rounds = results.rounds[clock]
    results.baseline_us[clock] = {
        CALL: statistics.median(r[BASELINE][CALL] for r in rounds),
        EMBED: statistics.median(r[BASELINE][EMBED] for r in rounds),
        STREAM_64: statistics.median(r[BASELINE][STREAM_64] for r in rounds),
        "chunk": statistics.median((r[BASELINE][STREAM_64] - r[BASELINE][STREAM_1]) / 63 for r in rounds),
    }
    estimates = results.estimates.setdefault(clock, {})
    for mode in modes:
        if mode in (BASELINE, OFFICIAL_BASELINE):
            continue
        base = _baseline_of(mode, modes)

        def added(r: dict[str, dict[str, float]], workload: str, mode: str = mode, base: str = base) -> float:
            return r[mode][workload] - r[base][workload]

        estimates[mode] = {
            "call_us": estimate([added(r, CALL) for r in rounds], rng),
            "embed_us": estimate([added(r, EMBED) for r in rounds], rng),
            "stream1_us": estimate([added(r, STREAM_1) for r in rounds], rng),
            "stream64_us": estimate([added(r, STREAM_64) for r in rounds], rng),
            "chunk_us": estimate([(added(r, STREAM_64) - added(r, STREAM_1)) / 63 for r in rounds], rng),
        }
        if PACED_64 in rounds[0][mode]:
            paced = [(added(r, PACED_64) - added(r, PACED_1)) / 63 for r in rounds]
            estimates[mode]["paced_chunk_us"] = estimate(paced, rng)
    if REPLAY in modes and "phases" in modes:  # our own code: phases minus the SDK work it causes
        own: dict[str, Estimate] = {}
        for key, workload in (
            ("call_us", CALL),
            ("embed_us", EMBED),
            ("stream1_us", STREAM_1),
            ("stream64_us", STREAM_64),
        ):
            own[key] = estimate([r["phases"][workload] - r[REPLAY][workload] for r in rounds], rng)
        own["chunk_us"] = estimate(
            [
                (
                    (r["phases"][STREAM_64] - r[REPLAY][STREAM_64])
                    - (r["phases"][STREAM_1] - r[REPLAY][STREAM_1])
                )
                / 63
                for r in rounds
            ],
            rng,
        )
        estimates[OWN] = own
    official = estimates.get(OFFICIAL)
    keys = {CALL: "call_us", EMBED: "embed_us", STREAM_64: "stream64_us"}
    for (mode, workload), factor in BUDGET_FACTOR.items():
        if mode not in estimates:
            continue
        if official is not None:
            reference, source = official[keys[workload]].median, "official, this run"
        elif workload == CALL:
            reference, source = OFFICIAL_CALL_US, "official, reference figure"
        else:
            continue
        _verdict(
            results,
            clock,
            mode,
            workload,
            factor * reference,
            estimates[mode][keys[workload]],
            f"{factor} x {reference:.0f} µs ({source})",
        )
    if "phases" in estimates:
        if official is not None:
            budget = CHUNK_BUDGET_SHARE * official["chunk_us"].median
            rule = f"{CHUNK_BUDGET_SHARE} x {official['chunk_us'].median:.1f} µs (official, this run)"
        else:
            budget, rule = CHUNK_BUDGET_US, f"{CHUNK_BUDGET_US} µs"
        _verdict(results, clock, "phases", "chunk", budget, estimates["phases"]["chunk_us"], rule)


def _verdict(
    results: Results, clock: str, mode: str, what: str, budget: float, est: Estimate, rule: str
) -> None:
    verdict = "PASS" if est.median <= budget else "OVER"
    if est.low <= budget < est.high:
        verdict += " (CI crosses the budget)"
    results.budgets.append(
        {
            "clock": clock,
            "mode": mode,
            "what": what,
            "budget_us": budget,
            "rule": rule,
            "median_us": est.median,
            "verdict": verdict,
        }
    )


# --- profile ----------------------------------------------------------------------------------


def _group(filename: str) -> str:
    norm = filename.replace("\\", "/")
    for marker, name in (
        ("/openai_latency/", PACKAGE),
        ("/opentelemetry/", "opentelemetry"),
        ("/wrapt/", "wrapt"),
        ("/openai/", "openai"),
        ("/httpx2/", "httpx2"),
        ("/httpcore2/", "httpcore2"),
        ("/pydantic", "pydantic"),
    ):
        if marker in norm:
            return name
    return "other (stdlib, builtins, ...)"


def _by_group(stats: pstats.Stats, calls: int) -> dict[str, tuple[float, float]]:
    """Package -> (self µs, Python/builtin function calls) per SDK call."""
    groups: dict[str, tuple[float, float]] = {}
    for (filename, _line, _name), (_cc, nc, tottime, _cum, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        group = _group(filename)
        us, count = groups.get(group, (0.0, 0.0))
        groups[group] = (us + tottime * 1e6 / calls, count + nc / calls)
    return groups


def analyse_profile(baseline_path: str, detailed_path: str, calls: int) -> dict[str, Any]:
    """Our own functions (top by self time and by inclusive time) and µs per call by package."""
    base = pstats.Stats(baseline_path)
    ours = pstats.Stats(detailed_path)
    rows: list[dict[str, Any]] = []
    for (filename, line, name), (cc, nc, tottime, cumtime, _callers) in ours.stats.items():  # type: ignore[attr-defined]
        if _group(filename) != PACKAGE:
            continue
        module = filename.replace("\\", "/").split("/openai_latency/", 1)[1]
        rows.append(
            {
                "function": f"{module}:{line}({name})",
                "calls_per_call": nc / calls,
                "self_us": tottime * 1e6 / calls,
                "inclusive_us": cumtime * 1e6 / calls,
                "primitive": cc,
            }
        )
    base_groups = _by_group(base, calls)
    our_groups = _by_group(ours, calls)
    zero = (0.0, 0.0)
    groups = {
        g: {
            "baseline_us": base_groups.get(g, zero)[0],
            "detailed_us": our_groups.get(g, zero)[0],
            "baseline_calls": base_groups.get(g, zero)[1],
            "detailed_calls": our_groups.get(g, zero)[1],
        }
        for g in sorted(set(base_groups) | set(our_groups), key=lambda g: -our_groups.get(g, zero)[0])
    }
    return {
        "calls": calls,
        "total_us": {"baseline": base.total_tt * 1e6 / calls, "detailed": ours.total_tt * 1e6 / calls},  # type: ignore[attr-defined]
        "by_self": sorted(rows, key=lambda r: -r["self_us"])[:PROFILE_TOP],
        "by_inclusive": sorted(rows, key=lambda r: -r["inclusive_us"])[: PROFILE_TOP + 5],
        "by_package": groups,
    }


# --- coordinator ------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> Results:
    from openai_latency.fake_server import FakeServer

    modes: list[str] = [BASELINE] + [m for m in args.modes if m != BASELINE]
    if OFFICIAL in modes and args.official_python and OFFICIAL_BASELINE not in modes:
        modes.append(OFFICIAL_BASELINE)  # the official package's overhead is against its own environment
    rng = random.Random(args.seed)
    environment: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        "versions": _versions(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    config = {
        "rounds": args.rounds,
        "batch": args.batch,
        "modes": modes,
        "seed": args.seed,
        "warmup": args.warmup,
        "profile_calls": args.profile_calls,
        "paced_ms": args.paced_ms,
    }
    results = Results(config=config, environment=environment)
    started = time.monotonic()
    with FakeServer.spawn() as server:
        workers = {
            mode: WorkerProcess(mode, server.base_url, args.warmup, args.paced_ms, _python(mode, args))
            for mode in modes
        }
        try:
            for worker in workers.values():
                worker.wait_ready()
            workloads, order = list(WORKLOADS), list(modes)
            if args.paced_ms:
                workloads += PACED_WORKLOADS
            for index in range(args.rounds):
                server.clear()  # the server's request log grows with every call
                rng.shuffle(workloads)
                pairs: list[tuple[str, str]] = []
                for workload in workloads:  # same-workload batches of all modes back to back, shuffled
                    rng.shuffle(order)
                    pairs += [(mode, workload) for mode in order]
                rows: dict[str, dict[str, dict[str, float]]] = {c: {m: {} for m in modes} for c in CLOCKS}
                for mode, workload in pairs:
                    size = PACED_BATCH if workload in PACED_WORKLOADS else args.batch
                    reply = workers[mode].batch(workload, size)
                    for clock in CLOCKS:
                        rows[clock][mode][workload] = reply[clock] / 1000 / size
                    if index == 0:
                        results.spans_per_call.setdefault(mode, {})[workload] = reply["spans"] / size
                for clock in CLOCKS:
                    results.rounds.setdefault(clock, []).append(rows[clock])
                if not args.quiet and (index + 1) % max(1, args.rounds // 10) == 0:
                    elapsed = time.monotonic() - started
                    print(f"  round {index + 1}/{args.rounds}  ({elapsed:.0f} s)", file=sys.stderr)
            if args.profile_calls > 0 and "detailed" in workers:
                server.clear()
                with tempfile.TemporaryDirectory() as tmp:
                    folder = args.profile_dir or Path(tmp)
                    folder.mkdir(parents=True, exist_ok=True)
                    paths = {m: str(folder.resolve() / f"{m}.prof") for m in (BASELINE, "detailed")}
                    for mode, path in paths.items():
                        workers[mode].profile(CALL, args.profile_calls, path)
                    results.profile = analyse_profile(paths[BASELINE], paths["detailed"], args.profile_calls)
        finally:
            for worker in workers.values():
                worker.stop()
    environment["loadavg_end"] = os.getloadavg()
    environment["seconds"] = round(time.monotonic() - started, 1)
    analyse(results, modes, args.seed)
    return results


def _official_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("opentelemetry.instrumentation.genai.openai") is not None


def _python(mode: str, args: argparse.Namespace) -> str:
    if mode in (OFFICIAL, OFFICIAL_BASELINE) and args.official_python:
        return str(args.official_python)
    return sys.executable


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str] = {}
    for name in (
        "openai",
        "openai-latency",
        "opentelemetry-sdk",
        "opentelemetry-instrumentation-genai-openai",
        "wrapt",
        "httpx2",
    ):
        with contextlib.suppress(PackageNotFoundError):
            found[name] = version(name)
    return found


# --- report -----------------------------------------------------------------------------------


def report(results: Results, out: IO[str]) -> None:
    env, cfg = results.environment, results.config
    load_start = "/".join(f"{x:.1f}" for x in env["loadavg_start"])
    load_end = "/".join(f"{x:.1f}" for x in env["loadavg_end"])
    print(
        f"\nopenai-latency overhead: {cfg['rounds']} rounds x batch {cfg['batch']}, {env['seconds']} s, "
        f"{env['cpus']} CPUs, load {load_start} -> {load_end}",
        file=out,
    )
    print(f"versions: {', '.join(f'{k} {v}' for k, v in env['versions'].items())}", file=out)
    for clock in CLOCKS:
        report_clock(results, clock, out)
    if results.profile:
        report_profile(results.profile, out)


CLOCK_TITLES = {
    WALL: "WALL time (perf_counter): what the caller waits; the figure the budget limits",
    CPU: "CPU time of the worker process (process_time): the client's own work, less hit by load",
}


def report_clock(results: Results, clock: str, out: IO[str]) -> None:
    base = results.baseline_us[clock]
    print(f"\n== {CLOCK_TITLES[clock]}", file=out)
    reference = ""
    if clock == WALL:
        slower = base[CALL] / REFERENCE_BASELINE_CALL_US
        reference = f" (reference, idle machine: ~1,900 µs/call; here {slower:.1f}x that)"
    print(
        f"baseline (uninstrumented SDK): {base[CALL]:.0f} µs/call, {base[EMBED]:.0f} µs/embeddings call, "
        f"{base[STREAM_64]:.0f} µs/64-chunk stream, {base['chunk']:.1f} µs/chunk{reference}",
        file=out,
    )
    print("added by the instrumentation, µs: median over rounds [95% bootstrap CI] (x official)", file=out)
    estimates = results.estimates[clock]
    official = estimates.get(OFFICIAL)
    columns = (("non-stream chat", "call_us"), ("embeddings", "embed_us"), ("64-chunk stream", "stream64_us"))
    header = f"{'mode':<9}" + "".join(f" {title:>36}" for title, _ in columns)
    header += f" {'per chunk':>26} {'spans/call':>10}"
    print(header, file=out)
    print("-" * len(header), file=out)
    for mode, est in estimates.items():
        cells = []
        for _, key in columns:
            ratio = ""
            if official is not None and mode != OFFICIAL and official[key].median > 0:
                ratio = f"({est[key].median / official[key].median:.2f}x)"
            cells.append(f" {est[key].text():>28} {ratio:>7}")
        spans = results.spans_per_call.get(mode, {}).get(CALL, 0)
        print(f"{mode:<9}" + "".join(cells) + f" {est['chunk_us'].text():>26} {spans:>10.1f}", file=out)
    paced_ms = results.config.get("paced_ms")
    if paced_ms:
        print(f"paced streams (a chunk every {paced_ms:g} ms, batch of {PACED_BATCH}), µs/chunk:", file=out)
        for mode, est in estimates.items():
            print(f"{mode:<10} {est['paced_chunk_us'].text():>30}", file=out)
    print(f"budget (issue 24), {clock} time:", file=out)
    for b in results.budgets:
        if b["clock"] != clock:
            continue
        print(
            f"  {b['mode']:<9} {b['what']:<9} <= {b['budget_us']:7.1f} µs ({b['rule']}): "
            f"{b['median_us']:+8.1f} µs  {b['verdict']}",
            file=out,
        )


def report_profile(profile: dict[str, Any], out: IO[str]) -> None:
    calls = profile["calls"]
    total = profile["total_us"]
    print(
        f"\n== cProfile (thread CPU time), non-stream call, {calls} calls; cProfile inflates every Python "
        f"call: compare rows, not with the tables above\n  profiled time per call: baseline "
        f"{total['baseline']:.0f} µs, "
        f"detailed {total['detailed']:.0f} µs",
        file=out,
    )
    print(
        f"\n  {'per SDK call, by package':<30} {'self µs: baseline':>18} {'detailed':>9} {'added':>8}"
        f"   {'function calls: baseline':>25} {'detailed':>9} {'added':>7}",
        file=out,
    )
    for group, v in profile["by_package"].items():
        added = v["detailed_us"] - v["baseline_us"]
        more = v["detailed_calls"] - v["baseline_calls"]
        print(
            f"  {group:<30} {v['baseline_us']:>18.1f} {v['detailed_us']:>9.1f} {added:>+8.1f}"
            f"   {v['baseline_calls']:>25.0f} {v['detailed_calls']:>9.0f} {more:>+7.0f}",
            file=out,
        )
    for key, title in (("by_self", "self time"), ("by_inclusive", "inclusive time")):
        print(f"\n  our functions by {title} (µs per SDK call)", file=out)
        print(f"  {'function':<60} {'calls':>6} {'self':>7} {'incl':>8}", file=out)
        for row in profile[key]:
            print(
                f"  {row['function']:<60} {row['calls_per_call']:>6.1f} {row['self_us']:>7.1f} "
                f"{row['inclusive_us']:>8.1f}",
                file=out,
            )


def to_json(results: Results) -> dict[str, Any]:
    data = asdict(results)
    return data


# --- CLI --------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=120, help="rounds (default 120)")
    parser.add_argument("--batch", type=int, default=3, help="calls per batch, every workload (default 3)")
    parser.add_argument("--json", type=Path, help="write config, raw rounds and estimates here")
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=ALL_MODES,
        default=None,
        help="modes (baseline always runs)",
    )
    parser.add_argument("--seed", type=int, default=1, help="shuffle and bootstrap seed")
    parser.add_argument("--warmup", type=int, default=WARMUP_CALLS, help="warm-up calls per workload")
    parser.add_argument(
        "--profile-calls",
        type=int,
        default=300,
        help="cProfile this many non-stream calls after the rounds (0: skip)",
    )
    parser.add_argument(
        "--paced-ms",
        type=float,
        default=0.0,
        help="also run 1- and 64-chunk streams with a chunk every N ms (e.g. 3; adds ~0.6 s per round)",
    )
    parser.add_argument("--profile-dir", type=Path, help="keep the .prof files (pstats) here")
    parser.add_argument(
        "--official-python",
        help="interpreter of an environment with opentelemetry-instrumentation-genai-openai, when it "
        "does not install next to ours (default: this one; its own baseline is measured too)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument("--worker", choices=ALL_MODES, help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.modes is None:
        args.modes = [
            m for m in DEFAULT_MODES if m != OFFICIAL or args.official_python or _official_installed()
        ]
    if args.worker:
        worker_main(args.worker, args.base_url, args.warmup, args.paced_ms)
        return
    results = run(args)
    report(results, sys.stdout)
    if args.json:
        args.json.write_text(json.dumps(to_json(results), indent=1) + "\n")
        print(f"\nraw data: {args.json}")


if __name__ == "__main__":
    main()
