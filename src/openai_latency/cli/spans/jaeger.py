"""Read spans from Jaeger's HTTP query API (what the Jaeger UI uses), as :class:`~.span.Span`.

``GET {url}/api/services`` lists the services; ``GET {url}/api/traces?service=S&start=..&end=..&limit=N``
returns ``{"data": [trace, ...], "errors": null}`` where a trace (Jaeger's ``model/json``) is::

    {"traceID": "...", "spans": [span, ...], "processes": {"p1": {"serviceName": "...", "tags": [...]}},
     "warnings": null}
    span = {"traceID", "spanID", "operationName", "references": [{"refType": "CHILD_OF", "traceID",
            "spanID"}], "startTime": µs since the epoch, "duration": µs, "tags": [{"key", "type", "value"}],
            "logs", "processID", "warnings"}

Tag types are ``string``, ``bool``, ``int64``, ``float64`` and ``binary``. OTLP arrays arrive as
strings of JSON text (Jaeger's translation has no array type): those of the attributes this package
writes as arrays (:data:`~.names.ARRAY_ATTRIBUTES`) are read back as lists; any other string stays a string.
The span status is the ``otel.status_code`` tag (and ``error=true``). ``start`` and ``end`` are unix
microseconds (the API ignores ``lookback``, a UI parameter). Times are microseconds, so durations
from Jaeger are truncated to the microsecond. Standard library only (``urllib``).
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

from .names import ARRAY_ATTRIBUTES
from .span import InputError, ReadStats, Span

DEFAULT_LIMIT = 1000
DEFAULT_LOOKBACK = "1h"
TIMEOUT_S = 10.0
#: Jaeger's own services, left out when every service is read.
OWN_SERVICES = frozenset({"jaeger", "jaeger-all-in-one", "jaeger-query", "jaeger-collector"})
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_lookback(text: str) -> float:
    """``90s``, ``30m``, ``1h``, ``2d``, ``1w`` or plain seconds -> seconds; ValueError otherwise."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if not match or float(match.group(1)) <= 0:
        raise ValueError(f"not a duration like 90s, 30m, 1h, 2d: {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


def read_jaeger(
    url: str,
    stats: ReadStats,
    service: str | None = None,
    lookback_s: float = 3600.0,
    limit: int = DEFAULT_LIMIT,
    now_s: float | None = None,
) -> Iterator[Span]:
    """The spans of the last ``lookback_s`` seconds (up to ``limit`` traces per service), streaming.

    Without ``service``: every service Jaeger knows except its own; a trace seen under two services
    is read once. :class:`InputError` when Jaeger cannot be reached or answers something else."""
    base = url.rstrip("/")
    if not re.match(r"https?://", base):
        raise InputError(f"--jaeger: not an http(s) URL: {url!r}")
    services = [service] if service else _services(base)
    end = int((time.time() if now_s is None else now_s) * 1e6)
    start = end - int(lookback_s * 1e6)
    stats.jaeger = base
    seen: set[str] = set()
    for name in services:
        query = urllib.parse.urlencode(
            {"service": name, "start": start, "end": end, "limit": limit, "lookback": "custom"}
        )
        traces = _data(_get(f"{base}/api/traces?{query}"), f"{base}/api/traces")
        stats.files.append(f"{base} service={name}")
        for trace in traces:
            if not isinstance(trace, dict):
                stats.skip(f"{base} service={name}", 0, "a trace that is not a JSON object")
                continue
            trace_id = str(trace.get("traceID", ""))
            if trace_id in seen:
                continue
            seen.add(trace_id)
            stats.lines += 1
            stats.trace_documents += 1
            yield from _trace_spans(trace, stats)


def _services(base: str) -> list[str]:
    names = _data(_get(f"{base}/api/services"), f"{base}/api/services")
    services = sorted(str(name) for name in names if isinstance(name, str) and name not in OWN_SERVICES)
    if not services:
        raise InputError(f"Jaeger at {base} knows no services (no traces stored yet?)")
    return services


def _get(url: str) -> Any:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        raise InputError(f"Jaeger answered HTTP {exc.code} for {url}{_error_detail(exc)}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise InputError(f"cannot reach Jaeger at {url}: {reason}") from None
    try:
        return json.loads(body)
    except ValueError as exc:
        raise InputError(f"Jaeger's answer for {url} is not JSON ({exc})") from None


def _error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        errors = json.loads(exc.read()).get("errors") or []
        return ": " + "; ".join(str(error.get("msg", error)) for error in errors) if errors else ""
    except (ValueError, AttributeError, OSError):
        return ""


def _data(document: Any, url: str) -> list[Any]:
    if not isinstance(document, dict):
        raise InputError(f"Jaeger's answer for {url} is not a JSON object")
    errors = document.get("errors")
    if errors:
        first = errors[0] if isinstance(errors, list) else errors
        message = first.get("msg", first) if isinstance(first, dict) else first
        raise InputError(f"Jaeger reported an error for {url}: {message}")
    data = document.get("data")
    if data is None:
        return []
    if not isinstance(data, list):
        raise InputError(f"Jaeger's answer for {url} has no list under 'data'")
    return data


def _trace_spans(trace: dict[str, Any], stats: ReadStats) -> Iterator[Span]:
    processes = trace.get("processes")
    services: dict[str, str] = {}
    if isinstance(processes, dict):
        for process_id, process in processes.items():
            if isinstance(process, dict) and isinstance(process.get("serviceName"), str):
                services[process_id] = process["serviceName"]
    for raw in trace.get("spans") or ():
        span = _span(raw, services) if isinstance(raw, dict) else None
        if span is None:
            stats.bad_spans += 1
            continue
        stats.spans += 1
        yield span


def _span(raw: dict[str, Any], services: dict[str, str]) -> Span | None:
    trace_id, span_id = raw.get("traceID"), raw.get("spanID")
    start, duration = raw.get("startTime"), raw.get("duration")
    if not isinstance(trace_id, str) or not isinstance(span_id, str) or not trace_id or not span_id:
        return None
    if not isinstance(start, int) or not isinstance(duration, int) or isinstance(start, bool):
        return None
    if isinstance(duration, bool) or duration < 0:
        return None
    parent = ""
    for reference in raw.get("references") or ():
        if isinstance(reference, dict) and reference.get("refType") == "CHILD_OF":
            parent = _hex(reference.get("spanID"), 16)
            break
    attributes = _tags(raw.get("tags"))
    status = attributes.get("otel.status_code")
    error = status == "ERROR" or (status is None and attributes.get("error") is True)
    return Span(
        trace_id=_hex(trace_id, 32),
        span_id=_hex(span_id, 16),
        parent_span_id=parent,
        name=str(raw.get("operationName", "")),
        start_ns=start * 1000,
        end_ns=(start + duration) * 1000,
        attributes=attributes,
        status_error=error,
        service=services.get(str(raw.get("processID"))),
    )


def _hex(value: Any, size: int) -> str:
    """Jaeger may drop leading zeros of an id (a 64-bit trace id): padded back, lowercase."""
    return str(value).lower().zfill(size) if isinstance(value, str) and value else ""


def _tags(tags: Any) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for tag in tags or ():
        if not isinstance(tag, dict) or not isinstance(tag.get("key"), str):
            continue
        key, value = tag["key"], _value(tag.get("type"), tag.get("value"))
        if key in ARRAY_ATTRIBUTES and isinstance(value, str):
            value = _array(value)
        result[key] = value
    return result


def _array(text: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, list) else text


def _value(kind: Any, value: Any) -> Any:
    try:
        if kind == "float64":
            return float(value)
        if kind == "int64":
            return int(value)
        if kind == "bool":
            return value if isinstance(value, bool) else str(value).lower() == "true"
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, (str, int, float, bool)) else str(value)
