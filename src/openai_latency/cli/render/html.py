"""``--html FILE``: the calls as one self-contained page of charts that opens offline.

Plotly (MIT; the ``plotly`` package of the ``cli`` extra) draws them: its JavaScript is read from the
installed package's data (``plotly/package_data/plotly.min.js``) and inlined, so the page needs no CDN
and no network, and nothing of it is kept in this repository. The charts, per group (target):

- ``ttft``, ``e2e``: the distributions as empirical CDFs on a log time axis (a 429 tail, a bimodal TTFT);
- ``phases``: each phase's p50 stacked (over the calls that had it), a p95 marker on each;
- ``sweep``: latency (p50, p95) and throughput against the load level, when there are several; a
  ``--sweep``'s knee marked (a line at its level, and how it was found);
- ``timeline``: each request's start against its duration, errors and retried calls marked;
- ``waterfall``: the slowest calls phase by phase, with their target and each attempt's outcome.

The page records script errors and how many marks each chart drew (``data-marks``; ``data-shapes``:
the lines drawn over the plot, such as the knee's), so a headless browser can check it
(tests/cli/test_html.py).
"""

from __future__ import annotations

import html
import importlib.resources
import json
from collections.abc import Sequence
from typing import TextIO

from ..spans.calls import Call
from .charts import Knee, chart_data


class MissingPlotly(Exception):
    """The ``plotly`` package (the ``cli`` extra) is not installed."""


def plotly_js() -> str:
    try:
        return (importlib.resources.files("plotly") / "package_data" / "plotly.min.js").read_text("utf-8")
    except (ModuleNotFoundError, FileNotFoundError):
        raise MissingPlotly("--html needs plotly: pip install 'openai-latency[cli]'") from None


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font-family:system-ui,sans-serif;margin:24px;color:#222}}h1{{font-size:20px}}
.chart{{border:1px solid #ddd;margin:14px 0;padding:4px}}ul{{line-height:1.5}}#failures:empty{{display:none}}
#failures{{color:#b00;white-space:pre-wrap}}footer{{color:#777;font-size:12px}}</style>
<script>window.pageFailures=[];
window.addEventListener("error",e=>pageFailures.push(String(e.message)));
const shownError=console.error;
console.error=(...a)=>{{pageFailures.push(a.join(" "));shownError(...a)}};</script>
<script>{plotly}</script></head>
<body><h1>{title}</h1><ul>{notes}</ul><pre id="failures"></pre>{divs}
<footer>openai-latency {version}; phases as docs/BENCH.md defines them;
drawn with plotly.js, inlined.</footer>
<script>const charts={charts};
const options={{displaylogo:false,responsive:true}};
Promise.all(Object.entries(charts).map(([id,c])=>Plotly.newPlot(id,c.data,c.layout,options)
.then(el=>{{el.dataset.marks=String(el.querySelectorAll(".point,.js-line").length);
el.dataset.shapes=String(el.querySelectorAll(".shapelayer path").length)}})))
.then(()=>{{document.body.dataset.rendered=String(Object.keys(charts).length)}})
.catch(e=>pageFailures.push(String(e)))
.finally(()=>{{document.getElementById("failures").textContent=pageFailures.join("\\n")}});</script>
</body></html>
"""


def html_page(
    title: str, notes: Sequence[str], calls: Sequence[Call], version: str, knee: Knee | None = None
) -> str:
    """The whole page; :class:`MissingPlotly` without the ``cli`` extra's plotly."""
    js = plotly_js()
    charts = chart_data(calls, knee=knee)
    divs = "".join(f'<div class="chart" id="{name}"></div>' for name in charts)
    figures = json.dumps({name: {"data": c["data"], "layout": c["layout"]} for name, c in charts.items()})
    return _PAGE.format(
        title=html.escape(title),
        notes="".join(f"<li>{html.escape(note)}</li>" for note in notes),
        divs=divs,
        plotly=js,
        charts=figures.replace("</", "<\\/"),
        version=html.escape(version),
    )


def write_html(
    path: str, title: str, notes: Sequence[str], calls: Sequence[Call], version: str, knee: Knee | None = None
) -> None:
    """The page to ``path``; OSError when it cannot be written."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(html_page(title, notes, calls, version, knee))


def write_page(
    command: str,
    path: str,
    title: str,
    notes: Sequence[str],
    calls: Sequence[Call],
    version: str,
    err: TextIO,
    knee: Knee | None = None,
) -> bool:
    """``--html`` of every command (bench, report, compare): the page to ``path``, and one line on
    ``err`` saying where it is, or why it was not written (no plotly, a path that cannot be written)."""
    try:
        write_html(path, title, notes, calls, version, knee)
    except MissingPlotly as exc:
        print(f"openai-latency {command}: {exc}", file=err)
    except OSError as exc:
        print(f"openai-latency {command}: --html: cannot write {path}: {exc.strerror or exc}", file=err)
    else:
        print(f"charts: {path} (one self-contained page, opens offline)", file=err)
        return True
    return False
