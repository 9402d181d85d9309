"""``report --by trace --html FILE``: each slow turn's critical path as a waterfall, one page that
opens offline (HTML and CSS only: no script, no CDN).

Per root name, the group's sentence, then its slowest turns (:data:`MAX_TURNS`), each on its own
time axis: one row per piece of the path, in order, a bar from its start to its end coloured by
category (:data:`COLOURS`), then the LLM calls that ran off the path (overlapped), hatched, beside.
Every bar carries ``data-category`` and ``data-start``/``data-duration`` (seconds from the turn's
start), so a test or a browser can read what was drawn.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Final

from ..stats.critical_path import CATEGORIES, Turn
from ..stats.turns import TurnGroup
from .text import format_duration
from .turns import WORDS, sentence

MAX_TURNS: Final = 10
COLOURS: Final = {"llm": "#4e79a7", "tool": "#f28e2b", "other": "#76b7b2", "self": "#e15759"}
OFF_PATH: Final = "#9c9c9c"

_STYLE = """body{font-family:system-ui,sans-serif;margin:24px;color:#222}h1{font-size:20px}
h2{font-size:16px;margin-top:28px}h3{font-size:14px;margin:18px 0 6px;font-weight:600}
.row{display:flex;align-items:center;height:20px;font-size:12px}
.label{width:300px;overflow:hidden;white-space:nowrap;text-overflow:ellipsis;padding-right:8px}
.axis{position:relative;flex:1;height:14px;background:#f4f4f4}
.bar{position:absolute;top:0;height:14px;min-width:1px}
.off{background:repeating-linear-gradient(45deg,#9c9c9c 0 4px,#d0d0d0 4px 8px)}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}
.notes{color:#555;font-size:12px}footer{color:#777;font-size:12px;margin-top:24px}"""


def _bar(turn: Turn, start_ns: int, end_ns: int, category: str, label: str, off_path: bool = False) -> str:
    span = max(turn.end_ns - turn.start_ns, 1)
    left = (start_ns - turn.start_ns) / span * 100
    width = (end_ns - start_ns) / span * 100
    seconds = (end_ns - start_ns) / 1e9
    colour = OFF_PATH if off_path else COLOURS[category]
    title = html.escape(f"{label}: {format_duration(seconds)}" + (" (off the path)" if off_path else ""))
    return (
        f'<div class="row"><div class="label" title="{title}">{html.escape(label)}'
        f' {format_duration(seconds)}</div><div class="axis"><div class="bar{" off" if off_path else ""}"'
        f' data-category="{"off_path" if off_path else category}"'
        f' data-start="{(start_ns - turn.start_ns) / 1e9:.9f}" data-duration="{seconds:.9f}"'
        f' title="{title}" style="left:{left:.3f}%;width:{width:.3f}%;background-color:{colour}">'
        "</div></div></div>"
    )


def turn_section(turn: Turn) -> str:
    parts = [
        f'<section class="turn" data-trace-id="{turn.trace_id}">'
        f"<h3>{html.escape(turn.root or '(root missing)')} {format_duration(turn.duration)}"
        f" <small>trace {turn.trace_id}</small></h3>"
    ]
    shares = ", ".join(
        f"{WORDS[name]} {format_duration(turn.path[name])}" for name in CATEGORIES if turn.path[name] > 0
    )
    parts.append(f'<p class="notes">{html.escape(shares)}</p>')
    for segment in turn.segments:
        parts.append(_bar(turn, segment.start_ns, segment.end_ns, segment.category, segment.name))
    for call in turn.calls:
        if not call.on_path:
            start, end = max(call.start_ns, turn.start_ns), min(call.end_ns, turn.end_ns)
            parts.append(_bar(turn, start, end, "llm", f"{call.name} (overlapped)", off_path=True))
    parts += [f'<p class="notes">{html.escape(note)}</p>' for note in turn.notes]
    parts.append("</section>")
    return "\n".join(parts)


def turns_page(title: str, groups: Sequence[TurnGroup], version: str) -> str:
    legend = "".join(
        f'<span><i style="background:{COLOURS[name]}"></i>{WORDS[name]}</span>' for name in CATEGORIES
    )
    legend += f'<span><i style="background:{OFF_PATH}"></i>LLM call off the path (overlapped)</span>'
    body = []
    for group in groups:
        slowest = sorted(group.turns, key=lambda turn: turn.duration, reverse=True)[:MAX_TURNS]
        body.append(f"<h2>{html.escape(sentence(group))}</h2>")
        if len(group.turns) > len(slowest):
            body.append(f'<p class="notes">the {len(slowest)} slowest of {len(group.turns)} turns</p>')
        body += [turn_section(turn) for turn in slowest]
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style></head>\n<body><h1>{html.escape(title)}</h1>"
        f'<div class="legend">{legend}</div>\n' + "\n".join(body) + f"\n<footer>openai-latency {version};"
        " the critical path by Jaeger's rule (docs/REPORT.md).</footer></body></html>\n"
    )
