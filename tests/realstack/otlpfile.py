"""The collector file exporter's OTLP JSON lines, read span by span with where each span came from.

Each line is one export the exporter received, so the lines a trace's spans are spread over show
that they left the app (and the agent) in several batches.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STATUS_ERROR = 2


@dataclass(frozen=True)
class FileSpan:
    file: str
    line: int
    trace_id: str
    span_id: str
    name: str
    attributes: dict[str, Any]
    status_code: int
    duration_ns: int


def _value(v: dict[str, Any]) -> Any:
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    if "intValue" in v:
        return int(v["intValue"])
    return v


def read(paths: list[Path]) -> list[FileSpan]:
    spans = []
    for path in paths:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            for rs in json.loads(line).get("resourceSpans", []):
                for ss in rs.get("scopeSpans", []):
                    for s in ss.get("spans", []):
                        spans.append(
                            FileSpan(
                                path.name,
                                number,
                                s["traceId"],
                                s["spanId"],
                                s["name"],
                                {a["key"]: _value(a["value"]) for a in s.get("attributes", [])},
                                int(s.get("status", {}).get("code", 0)),
                                int(s["endTimeUnixNano"]) - int(s["startTimeUnixNano"]),
                            )
                        )
    return spans


def by_trace(spans: list[FileSpan]) -> dict[str, list[FileSpan]]:
    traces: dict[str, list[FileSpan]] = defaultdict(list)
    for span in spans:
        traces[span.trace_id].append(span)
    return dict(traces)
