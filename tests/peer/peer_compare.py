"""Compares the plain and instrumented runs of the peer suite (called by ``scripts/peer-suite.sh``).

``python peer_compare.py candidates OUT SRC`` writes ``OUT/regressed.txt``: the node ids of the
tests that passed plain but not instrumented (JUnit XML ``OUT/plain.xml``, ``OUT/instrumented.xml``).

``python peer_compare.py verdict OUT SRC VERSION RC_PLAIN RC_INSTRUMENTED`` prints the comparison and
the summary line, and exits 1 when the instrumentation changed an outcome or a run is unusable.
A candidate is *confirmed* unless the reruns (``OUT/rerun-plain-*.xml``,
``OUT/rerun-instrumented-*.xml``, written by the script) show it is flaky: it failed a plain rerun,
or it passed every instrumented rerun. Flaky candidates are listed but do not fail the run.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

RANK = {"passed": 0, "skipped": 1, "failed": 2}


def outcomes(path: Path, src: Path) -> dict[str, str]:
    """Node id -> passed/skipped/failed (the worst of a test's reports: a teardown error fails it)."""
    result: dict[str, str] = {}
    if not path.exists():
        return result
    for case in ET.parse(path).iter("testcase"):
        test_id = node_id(case.get("classname") or "", case.get("name") or "", src)
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
            elif child.tag == "skipped" and outcome == "passed":
                outcome = "skipped"
        if RANK[outcome] >= RANK[result.get(test_id, "passed")]:
            result[test_id] = outcome
    return result


def node_id(classname: str, name: str, src: Path) -> str:
    """JUnit ``tests.test_client.TestOpenAI`` + ``test_x``: ``tests/test_client.py::TestOpenAI::test_x``.

    The module is the longest dotted prefix of ``classname`` that is a file under ``src``.
    """
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if (src / path).is_file():
            return "::".join([path, *parts[cut:], name])
    return f"{classname}::{name}"


def regressions(plain: dict[str, str], instrumented: dict[str, str]) -> list[str]:
    return sorted(t for t, o in plain.items() if o == "passed" and instrumented.get(t, "passed") != "passed")


def candidates(out: Path, src: Path) -> int:
    found = regressions(outcomes(out / "plain.xml", src), outcomes(out / "instrumented.xml", src))
    (out / "regressed.txt").write_text("".join(f"{test}\n" for test in found))
    return 0


def verdict(out: Path, src: Path, version: str, rc_plain: int, rc_instrumented: int) -> int:
    plain = outcomes(out / "plain.xml", src)
    instrumented = outcomes(out / "instrumented.xml", src)
    problems = []
    for mode, rc, results in (("plain", rc_plain, plain), ("instrumented", rc_instrumented, instrumented)):
        counts = Counter(results.values())
        print(f"== {mode}: {len(results)} tests: " + ", ".join(f"{counts[k]} {k}" for k in RANK))
        if not results:
            problems.append(f"the {mode} run executed no test")
        if rc not in (0, 1):
            problems.append(f"pytest exited {rc} in the {mode} run (see {out / (mode + '.log')})")

    regressed = regressions(plain, instrumented)
    reruns = {
        mode: [outcomes(path, src) for path in sorted(out.glob(f"rerun-{mode}-*.xml"))]
        for mode in ("plain", "instrumented")
    }
    flaky, confirmed = [], []
    for test in regressed:
        plain_reruns = [run.get(test, "missing") for run in reruns["plain"]]
        instrumented_reruns = [run.get(test, "missing") for run in reruns["instrumented"]]
        history = f"reruns plain {plain_reruns}, instrumented {instrumented_reruns}"
        if any(o != "passed" for o in plain_reruns) or (
            instrumented_reruns and all(o == "passed" for o in instrumented_reruns)
        ):
            flaky.append(f"{test} ({history})")
        else:
            confirmed.append(f"{test} ({history})" if instrumented_reruns else test)

    improved = sorted(t for t, o in plain.items() if o != "passed" and instrumented.get(t) == "passed")
    only_plain = sorted(plain.keys() - instrumented.keys())
    only_instrumented = sorted(instrumented.keys() - plain.keys())
    changed = sorted(t for t in plain.keys() & instrumented.keys() if plain[t] != instrumented[t])
    for title, tests in (
        ("passed plain, not instrumented (confirmed by reruns)", confirmed),
        ("passed plain, not instrumented, but flaky on rerun", flaky),
        ("not passed plain, passed instrumented (flaky?)", improved),
        ("ran only plain", only_plain),
        ("ran only instrumented", only_instrumented),
    ):
        if tests:
            print(f"== {title}: {len(tests)}")
            for test in tests[:50]:
                print(f"   {test}")
    if confirmed:
        problems.append(f"{len(confirmed)} tests pass plain but not instrumented")
    if only_plain or only_instrumented:
        problems.append(
            f"the runs ran different tests ({len(only_plain)} only plain, "
            f"{len(only_instrumented)} only instrumented)"
        )
    report = out / "plugin.json"
    if not report.exists():
        problems.append("the instrumented run wrote no plugin report: was the plugin loaded?")
    elif not json.loads(report.read_text()).get("ok"):
        problems.append("the instrumented run exported no operation span: the instrumentation was not active")

    differ = len(changed) + len(only_plain) + len(only_instrumented)
    passed_plain = sum(1 for o in plain.values() if o == "passed")
    passed_instrumented = sum(1 for o in instrumented.values() if o == "passed")
    print(
        f"peer suite (openai {version}): {passed_plain} passed plain, "
        f"{passed_instrumented} passed instrumented, {differ} differ"
        + (f" ({len(flaky)} flaky on rerun)" if flaky else "")
    )
    for problem in problems:
        print(f"peer-suite: FAIL: {problem}", file=sys.stderr)
    return 1 if problems else 0


def main(argv: list[str]) -> int:
    command, out, src = argv[0], Path(argv[1]), Path(argv[2])
    if command == "candidates":
        return candidates(out, src)
    return verdict(out, src, argv[3], int(argv[4]), int(argv[5]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
