"""What a new user tripped over (issue 21, item 4), each as a user meets it (the console script as a
subprocess where the process is the subject: a closed pipe; else the command's ``main`` in this
process, tests.support.cli_runs.run_cli), against the real fake server on 127.0.0.1 where a server
is needed."""

from __future__ import annotations

import io
import os
import re
import socket
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli_runs import COMMAND, run_cli, servers
from tests.support.retry import retry_timing

COMMANDS = ("demo", "bench", "report", "compare", "fake-server")


def _options_without_help(text: str) -> list[str]:
    """The option lines of an argparse help text that have no help after them."""
    lines = text.splitlines()
    missing = []
    for index, line in enumerate(lines):
        if not re.match(r"^  -", line):
            continue
        same_line = re.match(r"^  -\S+(?: [^ ]+)?(?:, -\S+(?: [^ ]+)?)*\s{2,}\S", line)
        following = lines[index + 1] if index + 1 < len(lines) else ""
        next_line = re.match(r"^\s{20,}\S", following)  # argparse's help column, not the next option
        if not (same_line or next_line):
            missing.append(line.strip())
    return missing


def test_every_command_has_a_one_line_summary_and_every_option_help() -> None:
    top = run_cli(["--help"])
    assert top.code == 0
    for command in COMMANDS:
        summary = [line for line in top.out.splitlines() if line.startswith(f"  {command} ")]
        assert len(summary) == 1 and len(summary[0].split(None, 1)[1]) > 20, top.out
        helped = run_cli([command, "--help"])
        assert helped.code == 0, helped.err
        assert re.search(r"^options:", helped.out, re.M), helped.out
        assert _options_without_help(helped.out) == [], command
        assert "``" not in helped.out and ":func:" not in helped.out and ":mod:" not in helped.out, command
    bench = run_cli(["bench", "--help"]).out
    assert re.search(r"--target NAME=BASE_URL\[@MODEL\]\s+an endpoint to benchmark", bench)
    assert re.search(r"--format \{table,json,markdown,csv\}\s+output: table", bench)


@pytest.mark.parametrize("command", ["demo", "bench", "report", "compare"])
def test_usage_errors_and_help_go_to_the_commands_own_streams(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``main(argv, out, err)``: argparse's error line goes to ``err`` and ``--help`` to ``out``, never
    to the process's ``sys.stderr``/``sys.stdout`` (a caller that passes its own streams gets them)."""
    from openai_latency.cli import main
    from openai_latency.cli.args import EXIT_OK, EXIT_USAGE

    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exited:
        main([command, "--no-such-option"], out, err)
    assert exited.value.code == EXIT_USAGE
    line = err.getvalue()
    assert line.startswith(f"openai-latency {command}: error: ") and line.endswith("(see --help)\n"), line
    assert out.getvalue() == ""
    help_out, help_err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"], help_out, help_err)
    assert exited.value.code == EXIT_OK
    assert help_out.getvalue().startswith(f"usage: openai-latency {command}") and help_err.getvalue() == ""
    assert capsys.readouterr() == ("", "")


def test_fake_server_documents_every_and_the_x_fake_values() -> None:
    text = run_cli(["fake-server", "--help"]).out
    flat = " ".join(text.split())
    assert "--every VALUE x-fake-every: N:key=value,...: every Nth request" in flat
    assert "7:fail-attempts=1" in flat
    assert (
        "--usage VALUE x-fake-usage: auto (streams only with stream_options.include_usage), always, never"
        in flat
    )
    assert "--error VALUE x-fake-error: always fail with an OpenAI error body: invalid_api_key 401" in flat


def test_fake_server_problems_are_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        in_use = run_cli(["fake-server", "--port", str(port)], timeout=20)
    bad_port = run_cli(["fake-server", "--port", "70000"], timeout=20)
    no_cert = run_cli(["fake-server", "--port", "0", "--certfile", str(tmp_path / "missing.pem")], timeout=20)
    key_alone = run_cli(["fake-server", "--port", "0", "--keyfile", str(tmp_path / "k.pem")], timeout=20)
    expected = {
        "in_use": (in_use, f"cannot listen on 127.0.0.1:{port}:"),
        "bad_port": (bad_port, "argument --port: not a port number (0-65535): '70000'"),
        "no_cert": (no_cert, f"cannot read the certificate or key: {tmp_path / 'missing.pem'}: not found"),
        "key_alone": (key_alone, "--keyfile needs --certfile"),
    }
    for name, (result, message) in expected.items():
        assert result.code == 2, (name, result.err)
        assert len(result.err.strip().splitlines()) == 1, (name, result.err)
        assert result.err.startswith("openai-latency fake-server: error: ") and message in result.err, name
        assert "internal error" not in result.err and "please report" not in result.err
    assert "in use" in in_use.err


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A fake server's base URL and the spans of a bench run against it."""
    out = tmp_path_factory.mktemp("pipe") / "spans.jsonl"
    with ExitStack() as stack:
        (server,) = servers(stack, {"delay-ms": 2, "ttft-ms": 2, "chunks": 4})
        result = run_cli(
            ["bench", "--target", f"a={server.base_url}", "--model", "m", "-n", "30", "--out", str(out)]
        )
        assert result.code == 0, result.err
        yield server.base_url, out


@pytest.mark.parametrize(
    "args",
    [["report", "{spans}", "--waterfall", "30"], ["report", "{spans}", "--format", "json"],
     ["compare", "{spans}", "{spans}"], ["compare", "{spans}", "{spans}", "--format", "json"],
     ["bench", "--target", "a={url}", "--model", "m", "-n", "3"],
     ["bench", "--target", "a={url}", "--model", "m", "-n", "3", "--format", "csv"], ["--help"]],
)  # fmt: skip
def test_output_into_a_closed_pipe_ends_quietly(served: tuple[str, Path], args: list[str]) -> None:
    """``| head``: the reader is gone before the first write (its end closed before the command starts)."""
    url, spans = served
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [COMMAND, *(arg.format(spans=spans, url=url) for arg in args)],
            stdout=write, stderr=subprocess.PIPE, text=True, timeout=120, check=False,
            env={**os.environ, "OPENAI_API_KEY": "sk-test", "NO_COLOR": "1"},
        )  # fmt: skip
    finally:
        os.close(write)
    assert "BrokenPipeError" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert "internal error" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr


def test_a_target_whose_every_request_fails_exits_1_with_the_first_error_and_a_v1_hint() -> None:
    with ExitStack() as stack:
        (server,) = servers(stack, {"delay-ms": 1})
        root = server.base_url.removesuffix("/v1")  # the usual mistake: the base URL without /v1
        no_v1 = run_cli(["bench", "--target", f"gw={root}", "--target", f"ok={server.base_url}",
                         "--model", "m", "-n", "4", "--max-retries", "0"])  # fmt: skip
        # --workers: the spans come back through files (no message kept): the status still says it
        workers = run_cli(["bench", "--target", f"gw={root}", "--model", "m", "-n", "4", "--workers", "2",
                           "--max-retries", "0"])  # fmt: skip
    assert no_v1.code == 1, no_v1.err
    (line,) = [line for line in no_v1.err.splitlines() if "every request failed" in line]
    assert line.startswith(
        "openai-latency bench: target gw: every request failed (4 of 4); the first: HTTP 404"
    )
    assert "Error code: 404" in line and "Invalid URL (POST /chat/completions)" in line  # the SDK's message
    assert f"does the base URL lack /v1? try {root}/v1" in line
    assert "target ok" not in no_v1.err  # the healthy target is not named
    assert workers.code == 1, workers.err
    (line,) = [line for line in workers.err.splitlines() if "every request failed" in line]
    assert "every request failed (4 of 4); the first: HTTP 404" in line and f"try {root}/v1" in line


def test_the_phase_table_says_how_many_calls_had_a_phase_and_a_sweep_csv_has_load_and_unit() -> None:
    with ExitStack() as stack:
        (server,) = servers(stack, {"delay-ms": 5, "ttft-ms": 5, "chunks": 4, "every": "4:fail-attempts=1",
                                    "retry-after-ms": 20})  # fmt: skip
        common = ["bench", "--target", f"a={server.base_url}", "--model", "m", "-n", "8"]
        table = run_cli([*common, "-c", "1"])
        sweep = run_cli([*common, "-c", "1,2", "--format", "csv"])
    assert table.code == 0 and sweep.code == 0, table.err + sweep.err
    (backoff,) = [line for line in table.out.splitlines() if line.startswith("retry_backoff")]
    assert backoff.endswith("(2 of 8 calls)"), backoff  # every 4th request waited on a 429's backoff
    (build,) = [line for line in table.out.splitlines() if line.startswith("request_build")]
    assert "calls)" not in build  # every call had it
    rows = sweep.out.splitlines()
    assert rows[0] == "target,load,metric,statistic,value,unit"
    assert {row.split(",")[1] for row in rows[1:]} == {"c=1", "c=2"}
    units = {
        row.split(",")[2]: row.split(",")[5] for row in rows[1:] if row.split(",")[3] in ("p50", "value")
    }
    assert units["e2e"] == "s" and units["requests"] == "count" and units["error_rate"] == "ratio"
    assert units["throughput_tokens_per_s"] == "tokens/s" and units["requests_per_s"] == "requests/s"
    for row in rows[1:]:
        value = row.split(",")[4]
        assert len(value.partition(".")[2]) <= 6, row  # nothing finer than the clock's microsecond


def test_the_waterfall_names_the_target_each_attempts_outcome_and_a_trace_id_without_request_id(
    tmp_path: Path,
) -> None:
    out = tmp_path / "spans.jsonl"
    with ExitStack() as stack:
        # every 3rd request hangs past the client timeout (no response: no request id), twice;
        # every 4th gets a 429, then succeeds
        (server,) = servers(stack, {"delay-ms": 5, "chunks": 3, "every": "3:delay-ms=1500,4:fail-attempts=1",
                                    "retry-after-ms": 30})  # fmt: skip
        bench = run_cli(["bench", "--target", f"edge={server.base_url}", "--model", "m", "-n", "8",
                         "--timeout", "0.4", "--max-retries", "1", "--out", str(out)])  # fmt: skip
    assert bench.code == 0, bench.err
    report = run_cli(["report", str(out), "--waterfall", "8"])
    assert report.code == 0, report.err
    headers = [line for line in report.out.splitlines() if re.match(r"\d+\. chat m ", line)]
    assert len(headers) == 8 and all("  target edge  " in line for line in headers), headers
    timed_out = [line for line in headers if " trace " in line]
    assert len(timed_out) == 2 and all(re.search(r" trace [0-9a-f]{32}$", line) for line in timed_out)
    text = report.out
    assert re.search(r"attempts \S*Timeout\S* -> \S*Timeout", text), text  # both attempts timed out
    assert "attempts 429 -> ok" in text
    assert re.search(r"network_wait .* -> 429$", text, re.M) and re.search(
        r"network_wait .* -> ok$", text, re.M
    )
    data = run_cli(["report", str(out), "--waterfall", "8", "--format", "json"]).json()["waterfall"]
    assert {entry["target"] for entry in data} == {"edge"}
    assert sum(1 for entry in data if entry["request_id"] is None and len(entry["trace_id"]) == 32) == 2
    assert ["429", "ok"] in [entry["attempts"] for entry in data]


def test_triage_calls_no_call_of_a_healthy_uniform_run_slow_but_a_stalled_one() -> None:
    def run() -> dict[str, Any]:
        with ExitStack() as stack:
            healthy, stalled = servers(
                stack,
                {"delay-ms": 40, "chunks": 3},
                {"delay-ms": 40, "chunks": 3, "every": "20:delay-ms=400"},
            )
            result = run_cli(["bench", "--target", f"healthy={healthy.base_url}", "--target",
                              f"stalled={stalled.base_url}", "--model", "m", "-n", "20", "-c", "2",
                              "--warmup", "2", "--format", "json"])  # fmt: skip
        assert result.code == 0, result.err
        targets = {entry["key"]["target"]: entry for entry in result.json()["results"]}
        # the server's 20th request (the 18th measured) took 400 ms: clearly apart from the p95
        assert targets["stalled"]["triage"]["slow_success"]["calls"] == 1
        return targets

    def quiet(targets: dict[str, Any]) -> None:
        # the slowest of 20 calls of ~40 ms is above the p95 by a hair: not "slow" (a loaded
        # machine can make one call slow for real: triage then rightly names it, so this is retried)
        assert "slow_success" not in targets["healthy"]["triage"], targets["healthy"]["triage"]

    retry_timing(run, quiet)
    with ExitStack() as stack:
        (healthy,) = servers(stack, {"delay-ms": 40, "chunks": 3})
        threshold = run_cli(["bench", "--target", f"healthy={healthy.base_url}", "--model", "m", "-n", "5",
                             "--slow-threshold", "0.01", "--format", "json"])  # fmt: skip
    assert threshold.code == 0, threshold.err
    # above --slow-threshold is slow, whatever the spread
    assert threshold.json()["results"][0]["triage"]["slow_success"]["calls"] == 5


ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_install_what_exists_today_and_put_install_and_use_first() -> None:
    # the package is not on PyPI yet: every pip install in bench's and the README's docs installs a
    # clone or a wheel, never the bare name
    for doc in ("docs/BENCH.md", "README.md"):
        for line in (ROOT / doc).read_text(encoding="utf-8").splitlines():
            found = re.search(r"pip install (?:-e )?['\"]?([^'\"\s]+)", line)
            # "openai-latency[cli]" from a registry does not exist yet
            assert not (found and re.fullmatch(r"openai-latency(\[[a-z,]+\])?", found.group(1))), (doc, line)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    headings = [line for line in readme.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Install and use" and headings.index("## Development") > headings.index(
        "## Phases"
    )
    assert readme.index("Go >= 1.24.6") > readme.index("## Development")  # the Go toolchain: contributors'
    see = readme.index("### See your spans now")
    assert (
        readme.index("## Install and use")
        < see
        < readme.index("OTEL_TRACES_EXPORTER=console")
        < readme.index("## Phases")
    )
