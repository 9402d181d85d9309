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
        # the verdict's first sentence, whatever it says (two like servers: usually "no difference")
        sentence = next(line for line in table.out.splitlines() if line.startswith("b vs a"))
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


def test_a_level_key_is_a_load_and_a_turn_read_back_from_its_label() -> None:
    """The spans keep a level's label (``report --by load`` groups by it); bench reads it back once
    into a typed (load, turn) key, whatever the load's own label holds."""
    from openai_latency.cli.bench.plan import LevelKey, Load

    assert LevelKey.of("c=4 turn 2") == LevelKey("c=4", 2)
    assert LevelKey("c=4", 2).label == "c=4 turn 2"
    assert LevelKey.of("c=4") == LevelKey("c=4", None)
    for load in (Load(4), Load(1000, 2.5), Load(8, 0.5, poisson=True), Load(1, replay_speed=2.0)):
        assert LevelKey.of(load.label) == LevelKey(load.label)
        assert LevelKey.of(LevelKey(load.label, 12).label) == LevelKey(load.label, 12)
    assert LevelKey.of("c=1 turn x") == LevelKey("c=1 turn x")  # not a turn: all of it is the load


def test_the_results_are_keyed_by_load_and_turn_in_turn_order() -> None:
    """A conversation of 11 turns: one result per turn, turn 10 after turn 9 (the labels' text order
    put "turn 10" before "turn 2"), and each turn's client cost is its load level's."""
    with ExitStack() as stack:
        (server,) = servers(stack, STREAM)
        argv = ["bench", "--target", f"a={server.base_url}", "--model", "m", "-n", "1", "--turns", "11"]
        document = run_cli([*argv, "--format", "json"])
    assert document.code == 0, document.err
    data = json.loads(document.out)
    labels = [f"c=1 turn {turn}" for turn in range(1, 12)]
    assert [result["key"]["load"] for result in data["results"]] == labels
    assert list(data["client"]["levels"]) == labels
    costs = list(data["client"]["levels"].values())
    assert costs[0] is not None and all(cost == costs[0] for cost in costs)
    assert [result["requests"] for result in data["results"]] == [1] * 11


def test_no_code_but_the_level_key_splits_a_levels_label() -> None:
    """A level's label is read back into a LevelKey once (plan.LevelKey.of); nothing else in the CLI
    splits, partitions or slices a label at its turn."""
    import ast

    import openai_latency.cli as cli

    root = Path(cli.__file__).parent
    splitting = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in ("split", "rsplit", "partition", "rpartition", "removesuffix"):
                continue
            named = [arg for arg in node.args if isinstance(arg, ast.Name) and arg.id == "TURN"]
            literal = [arg for arg in node.args if isinstance(arg, ast.Constant) and "turn" in str(arg.value)]
            if named or literal:
                splitting.append(str(path.relative_to(root)))
    assert splitting == ["bench/plan.py"]  # LevelKey.of; results/levels.py split the label twice
