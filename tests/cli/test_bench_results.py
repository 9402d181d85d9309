"""bench computes its results once (cli/bench/results/build.py): the verdicts' bootstraps run once per
pair, whatever the outputs asked for, and every output reads the same values; a verdict's sentence
is bold by its flag, not found again in the rendered text."""

from __future__ import annotations

import html
import json
from contextlib import ExitStack
from pathlib import Path

import pytest

from openai_latency.cli.bench.results import verdicts as verdicts_module
from openai_latency.cli.stats.verdict import Verdict, compare
from tests.support.cli_runs import run_cli, servers

STREAM = {"delay-ms": 5, "ttft-ms": 5, "chunks": 4, "chunk-delay-ms": 2}


def test_the_verdicts_are_computed_once_and_every_output_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two targets, one load level: one pair to compare. The table with ``--html`` used to compare it
    three times (the table, the bold lines, the page), the JSON twice."""
    pytest.importorskip("plotly")
    computed: list[Verdict] = []

    def counted(*args: object) -> Verdict:
        verdict = compare(*args)  # type: ignore[arg-type]
        computed.append(verdict)
        return verdict

    monkeypatch.setattr(verdicts_module, "compare", counted)
    with ExitStack() as stack:
        first, second = servers(stack, STREAM, STREAM)
        targets = ["--target", f"a={first.base_url}", "--target", f"b={second.base_url}", "--model", "m"]
        page = tmp_path / "run.html"
        table = run_cli(["bench", *targets, "-n", "6", "--html", str(page)])
        assert table.code == 0, table.err
        assert len(computed) == 1
        sentence = next(line for line in table.out.splitlines() if line.startswith("b vs a: "))
        assert html.escape(sentence) in page.read_text(encoding="utf-8")  # the page's note: the same
        computed.clear()
        document = run_cli(["bench", *targets, "-n", "6", "--format", "json"])
        assert document.code == 0, document.err
    assert len(computed) == 1
    (verdict,) = json.loads(document.out)["verdict"]["levels"]["c=1"]
    assert (verdict["baseline"]["label"], verdict["current"]["label"]) == ("a", "b")


def test_a_verdicts_sentences_are_bold_by_flag() -> None:
    """verdict_lines marks each sentence bold and the method's line plain: print_tables passes the
    style on, with no text matching."""
    from openai_latency.cli.spans.calls import Call

    def call(duration: float) -> Call:
        keys = {"target": "a", "load": "-", "endpoint": "e", "model": "m"}
        return Call("chat m", keys, duration, {}, {}, None, duration / 2, None, None, None)

    fast = [call(0.100 + i / 1000) for i in range(20)]
    slow = [call(0.300 + i / 1000) for i in range(20)]
    lines, rows = verdicts_module.verdict_lines([compare(fast, slow, ("a", "b"))])
    assert rows and lines[-1][1] is None and lines[-1][0].startswith("(")
    assert lines[:-1] and all(style == "bold" for _, style in lines[:-1])
    assert lines[0][0].startswith("b vs a")
