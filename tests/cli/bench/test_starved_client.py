"""bench warns before it lies (issue 33): a client starved of CPU (a thread of the same process that
holds the GIL for 40 ms at a time, every 60 ms) makes bench's event loop late. Its
numbers are then the client's as much as the server's; bench says so per level, in words, in the text, the
JSON and the ``--html`` page, with the ``--workers`` count the measured CPU calls for. An open loop
whose arrivals start late says that first: the load was lighter than asked."""

from __future__ import annotations

import re
import time
from contextlib import ExitStack
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from openai_latency.cli.bench.plan import Load
from openai_latency.cli.bench.results.levels import client_verdict, workers_for
from openai_latency.cli.bench.run.arrivals import LATE_S, Arrivals
from openai_latency.cli.stats.percentiles import Dist
from tests.support.cli_runs import Result, run_cli, servers
from tests.support.retry import retry_timing
from tests.support.starved import gil_holder

STREAM = {"delay-ms": 5, "ttft-ms": 10, "chunks": 8, "chunk-delay-ms": 5}


def _bench(url: str, *extra: str) -> list[str]:
    return ["bench", "--target", f"a={url}", "--model", "m", *extra]


def test_a_starved_client_is_named_in_the_text_the_json_and_the_html(tmp_path: Path) -> None:
    page = tmp_path / "bench.html"

    def run() -> tuple[Result, Result]:
        with ExitStack() as stack:
            (server,) = servers(stack, STREAM)
            with gil_holder():
                load = ("-n", "24", "-c", "4", "--warmup", "0")
                text = run_cli(_bench(server.base_url, *load))
                data = run_cli(_bench(server.base_url, *load, "--format", "json", "--html", str(page)))
        assert text.code == 0 and data.code == 0, text.err + data.err
        return text, data

    def starved(runs: tuple[Result, Result]) -> None:
        """Both runs were starved enough to be flagged (the scheduler's part: another run if not)."""
        text, data = runs
        assert data.json()["client"]["bottleneck"] is True
        assert any(line.startswith("warning: the client") for line in text.out.splitlines())

    text, data = retry_timing(run, starved)
    (warning,) = [line for line in text.out.splitlines() if line.startswith("warning: the client")]
    assert "is the bottleneck here" in warning and "ms of CPU per request" in warning
    suggested = int(re.search(r"--workers (\d+)", warning).group(1))  # type: ignore[union-attr]
    assert suggested >= 2
    # the warning comes before the numbers it spoils
    assert text.out.index(warning) < text.out.index("ttft (first token, any channel)")

    client = data.json()["client"]
    assert client["bottleneck"] is True and client["loop_lag"]["p95"] > 0.010
    assert client["warning"].startswith("the client, not the server, is the bottleneck here")
    assert client["workers_suggested"] >= 2
    (level,) = client["levels"].values()
    assert level["bottleneck"] is True and level["warning"] and level["workers_suggested"] >= 2

    html = page.read_text(encoding="utf-8")
    assert "warning: the client, not the server, is the bottleneck here" in html


def test_an_open_loop_that_slipped_says_so_first() -> None:
    with ExitStack() as stack:
        (server,) = servers(stack, {"delay-ms": 1, "ttft-ms": 1, "chunks": 2})
        with gil_holder():  # arrivals due every 20 ms; two thirds of the time the loop waits for the GIL
            load = ("--rate", "50", "-n", "30", "--no-stream", "--warmup", "0")
            text = run_cli(_bench(server.base_url, *load))
            data = run_cli(_bench(server.base_url, *load, "--format", "json"))
    assert text.code == 0 and data.code == 0, text.err + data.err
    lines = text.out.splitlines()
    assert lines[0].startswith("openai-latency bench:")
    assert lines[1].startswith("warning: the schedule slipped at rate=50/s"), lines[:3]
    assert "arrivals started more than 10 ms late" in lines[1]
    report = data.json()
    (arrivals,) = report["arrivals"].values()
    assert arrivals["started"] == 30 and arrivals["late"] > 0 and arrivals["max_late_s"] > LATE_S
    assert report["late_arrivals"] == arrivals["late"]
    assert arrivals["rate_asked"] == pytest.approx(50.0, rel=1e-6)
    assert arrivals["warning"].startswith("the schedule slipped at rate=50/s")


def test_arrivals_count_what_started_late_whatever_held_it_up() -> None:
    arrivals = Arrivals()
    now = time.monotonic()
    arrivals.start(now + 1.0)  # early: not late
    arrivals.start(now - 0.030)  # woke 30 ms late
    arrivals.start(now - 0.050, capped=True)  # waited 50 ms for a slot
    assert (arrivals.started, arrivals.late, arrivals.capped) == (3, 2, 1)
    assert 0.050 <= arrivals.max_late_s < 0.5
    other = Arrivals()
    other.start(time.monotonic() + 2.0)
    arrivals.merge(other)
    assert (arrivals.started, arrivals.late) == (4, 2)
    assert arrivals.rate_asked == pytest.approx(3 / (2.0 + 0.050), rel=0.01)
    assert arrivals.slipped and "2 of 4 arrivals" in arrivals.sentence("rate=2/s")
    assert "1 found every slot busy: raise -c" in arrivals.sentence("rate=2/s")
    assert Arrivals().rate_kept is None and not Arrivals().slipped


def _level(requests: int, e2e_p50: float, ttft_unknown: int = 0) -> Any:
    """A level's numbers as client_verdict reads them (requests, errors, streams without a TTFT, e2e)."""
    e2e = Dist.of([e2e_p50] * 3)
    return SimpleNamespace(requests=requests, errors=0, ttft_unknown=ttft_unknown, e2e=e2e)


def test_the_workers_suggested_are_the_cores_the_cpu_per_request_calls_for() -> None:
    # open loop: 140/s x 10 ms of CPU = 1.4 cores, each worker at half a core -> 3
    assert workers_for(0.010, None, [_level(100, 0.2)], Load(64, 140.0)) == 3
    # closed loop: 64 in flight over calls of 0.45 s of which 0.1 s is the loop's own lag ->
    # 183 requests/s x 10 ms = 1.83 cores -> 4
    assert workers_for(0.010, Dist.of([0.1] * 3), [_level(100, 0.45)], Load(64)) == 4
    # a light load still gets 2 when the client was found to be the bottleneck
    assert workers_for(0.001, None, [_level(100, 0.5)], Load(1)) == 2


def test_the_client_is_named_when_its_streams_lose_their_ttft_even_if_its_loop_looked_fine() -> None:
    quiet = Dist.of([0.001] * 20)
    fine = client_verdict(1.0, 200, quiet, [_level(200, 0.2, ttft_unknown=2)], Load(8))
    assert fine["bottleneck"] is False and fine["warning"] is None and fine["workers_suggested"] is None
    starved = client_verdict(1.0, 200, quiet, [_level(200, 0.2, ttft_unknown=3)], Load(8))
    assert starved["bottleneck"] is True and starved["ttft_unknown_share"] == pytest.approx(0.015)
    assert "3 of 200 streams have no TTFT" in starved["warning"] and "event loop" not in starved["warning"]
    late = client_verdict(1.0, 200, Dist.of([0.02] * 20), [_level(200, 0.2)], Load(8))
    assert late["bottleneck"] is True and "its event loop ran late by 20.0 ms at p95" in late["warning"]
