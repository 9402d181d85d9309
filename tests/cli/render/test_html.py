"""``--html FILE`` of bench, report and compare, opened in real headless Chromium (Debian's package,
``scripts/install-browser.sh``): the page loads without a script error, every chart drew its data,
and a screenshot is not blank. The pages come from real bench runs against fake servers.

Without chromium the browser checks skip, except under ``CI`` (``make test`` installs it), where a
missing browser fails them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.support.cli_runs import run_cli, servers

STREAM = {"ttft-ms": 20, "chunks": 8, "chunk-delay-ms": 4}
CHARTS = ("ttft", "e2e", "phases", "sweep", "timeline", "waterfall")


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("chromium is missing: scripts/install-browser.sh installs it (make browser)")
    pytest.skip("chromium is not installed: run scripts/install-browser.sh (make browser) for this check")


def _browser(page: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    argv = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--no-first-run", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=20000",
            # offline: no name resolves, so a page that fetched anything would fail and say so
            "--host-resolver-rules=MAP * ~NOTFOUND", "--disable-background-networking",
            f"--user-data-dir={page.parent / 'profile'}", *flags, page.as_uri()]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def _checked(page: Path, charts: tuple[str, ...], *flags: str) -> dict[str, int]:
    """Loads the page; asserts no script error; returns each chart's marks."""
    return _loaded(page, charts, *flags)[0]


def _loaded(page: Path, charts: tuple[str, ...], *flags: str) -> tuple[dict[str, int], str]:
    """Loads the page (with ``flags`` besides ``--dump-dom``, e.g. a screenshot of the same load);
    asserts no script error; returns each chart's marks and the drawn DOM."""
    assert page.stat().st_size > 1_000_000  # plotly.js inlined, not fetched
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"<(script|link)[^>]+(src|href)=", text)  # every script inline
    loaded = _browser(page, "--dump-dom", *flags)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    dom = loaded.stdout
    console = [line for line in loaded.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == [], console
    failures = re.search(r'<pre id="failures">(.*?)</pre>', dom, re.S)
    assert failures is not None and failures.group(1).strip() == "", failures
    assert f'data-rendered="{len(charts)}"' in dom, dom[-3000:]
    marks = {name: int(value) for name, value in re.findall(r'id="([a-z0-9]+)" data-marks="(\d+)"', dom)}
    assert tuple(marks) == charts
    assert all(count > 0 for count in marks.values()), marks
    return marks, dom


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A sweep of two targets (one with a 429 on every 5th request and a 500 on every 7th): bench --html."""
    folder = tmp_path_factory.mktemp("html")
    with ExitStack() as stack:
        fast, flaky = servers(
            stack,
            {"delay-ms": 20, **STREAM},
            {
                "delay-ms": 40,
                **STREAM,
                "every": "5:fail-attempts=1,7:error=server_error",
                "retry-after-ms": 60,
            },
        )
        result = run_cli(["bench", "--target", f"fast={fast.base_url}", "--target", f"flaky={flaky.base_url}",
                          "--model", "m", "-n", "14", "-c", "1,3", "--out", str(folder / "spans.jsonl"),
                          "--html", str(folder / "bench.html")])  # fmt: skip
        assert result.code == 0, result.err
        assert f"charts: {folder / 'bench.html'}" in result.err
    yield folder


@pytest.mark.slow
def test_bench_html_loads_offline_and_draws_every_chart(run: Path) -> None:
    page = run / "bench.html"
    shot = run / "bench.png"
    # one load of the page: its DOM and a screenshot (a browser start is ~2 s)
    marks = _checked(page, CHARTS, "--window-size=1300,2900", f"--screenshot={shot}")
    text = page.read_text(encoding="utf-8")
    assert "flaky vs fast" in text and "c=1: " in text and "c=3: " in text  # the verdict per level
    assert "429" in text and "server_error" in text  # attempts and failures labelled
    assert marks["waterfall"] >= 10
    assert shot.exists()
    from PIL import Image

    with Image.open(shot) as image:
        rgb = image.convert("RGB").resize((260, 580))
        colors = rgb.getcolors(maxcolors=1 << 16) or []
        ink = sum(count for count, color in colors if sum(color) < 600)  # not white or near white
    assert len(colors) > 50 and ink > 0.05 * 260 * 580, (len(colors), ink)


@pytest.mark.slow
def test_report_and_compare_html(run: Path) -> None:
    spans = str(run / "spans.jsonl")
    # a folder per page: each browser's profile is made next to its page
    (run / "report").mkdir()
    (run / "compare").mkdir()
    report = run_cli(["report", spans, "--html", str(run / "report" / "report.html")])
    compare = run_cli(["compare", spans, spans, "--html", str(run / "compare" / "compare.html")])
    assert report.code == 0 and compare.code == 0, report.err + compare.err
    # the two pages in two browsers at once (each mostly waits), each in its own profile folder
    with ThreadPoolExecutor(2) as pool:
        pages = [
            pool.submit(_checked, run / "report" / "report.html", CHARTS),
            # compare: each group's two runs as two series, baseline and current (no load levels)
            pool.submit(
                _checked, run / "compare" / "compare.html", ("ttft", "e2e", "phases", "timeline", "waterfall")
            ),
        ]
        for done in pages:
            done.result()
    text = (run / "compare" / "compare.html").read_text(encoding="utf-8")
    for group in ("fast c=1", "fast c=3", "flaky c=1", "flaky c=3"):
        assert f'"name": "{group} baseline"' in text and f'"name": "{group} current"' in text, group


@pytest.mark.slow
def test_a_sweep_page_marks_the_knee(tmp_path: Path) -> None:
    """``--sweep --html``: the chart of latency and throughput against load has a line at the knee's
    level, labelled with it, and says how the knee was found; checked in the figure and as drawn."""
    page = tmp_path / "sweep.html"
    with ExitStack() as stack:
        (server,) = servers(stack, {"capacity": 2, "delay-ms": 40, "chunks": 3})
        result = run_cli(["bench", "--model", "m", "--target", f"a={server.base_url}", "-n", "8",
                          "--sweep", "1", "--format", "json", "--html", str(page)])  # fmt: skip
    assert result.code == 0, result.err
    knee = result.json()["sweep"]["knee"]
    assert knee and knee.startswith("c=")
    found = re.search(r"const charts=(.*?);\nconst options", page.read_text(encoding="utf-8"), re.S)
    assert found is not None
    layout = json.loads(found.group(1).replace("<\\/", "</"))["sweep"]["layout"]
    levels = layout["xaxis"]["categoryarray"]
    assert layout["xaxis"]["categoryorder"] == "array" and knee in levels and len(levels) >= 3
    (line,) = layout["shapes"]
    assert line["type"] == "line" and line["x0"] == line["x1"] == levels.index(knee)
    assert (line["yref"], line["y0"], line["y1"]) == ("paper", 0, 1)  # across the whole plot
    (label,) = layout["annotations"]
    assert label["text"] == f"knee: {knee}" and label["x"] == levels.index(knee)
    assert (
        "knee: the lowest concurrency whose steady throughput is within 10% of the highest"
        in (layout["title"]["text"])
    )
    _, dom = _loaded(page, CHARTS)
    shapes = re.search(r'id="sweep" data-marks="\d+" data-shapes="(\d+)"', dom)
    assert shapes is not None and int(shapes.group(1)) == 1, shapes
    assert f">knee: {knee}<" in dom  # the label, drawn as SVG text
