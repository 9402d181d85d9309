"""Read spans from OTLP/JSON files: the collector's file exporter output (the report's input).

Accepted input, standard library only:

- JSON lines (``.jsonl``, what the collector's ``file`` exporter writes): one
  ``ExportTraceServiceRequest`` object (``{"resourceSpans": [...]}``) per line, read line by line;
- a single JSON document (``.json``, pretty-printed or not): one request object or a list of them;
- ``.gz`` variants of both, several files, directories (searched recursively for those names), or
  glob patterns (``'out/otlp/traces-2026-12-*.jsonl*'``, quoted so that the shell leaves them).

Encoding (OTLP spec, "JSON Protobuf Encoding"): lowerCamelCase keys, ``traceId``/``spanId`` as
case-insensitive hex, 64-bit integers (``startTimeUnixNano``, ``intValue``) as decimal strings (numbers
accepted too), enums as integers. Plain protobuf JSON (``MessageToJson``: base64 ids, enum names) is
accepted as well. Unknown fields are ignored. Blank lines are skipped; lines that are not JSON or not
an OTLP object are counted in :class:`ReadStats` and never stop the read.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import gc
import glob
import gzip
import json
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import IO, Any, cast

_loads: Callable[[bytes], Any]
try:  # the ``cli`` extra: a faster parser (about 2x on these documents), same results
    import orjson

    _loads = orjson.loads
    JSON_PARSER = "orjson"
except ImportError:  # pragma: no cover - depends on the environment
    _loads = json.loads
    JSON_PARSER = "json"

SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")
#: Stored per read; the count in :attr:`ReadStats.skipped_count` is complete.
MAX_SKIPPED_KEPT = 20
_STATUS_ERROR = 2


class InputError(Exception):
    """The input cannot be read at all (no files, a missing path): the message is for the user."""


@dataclass(slots=True)
class Span:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_error: bool = False
    service: str | None = None

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


@dataclass(frozen=True, slots=True)
class Skipped:
    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass
class ReadStats:
    files: list[str] = field(default_factory=list)
    lines: int = 0
    blank_lines: int = 0
    trace_documents: int = 0
    #: Valid OTLP objects without spans (``resourceMetrics``/``resourceLogs`` lines of a shared directory).
    other_documents: int = 0
    spans: int = 0
    #: Spans without ids or timestamps, left out.
    bad_spans: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    skipped_count: int = 0
    #: The Jaeger query URL when the spans came from Jaeger (then ``files`` names the services read
    #: and ``lines`` counts traces).
    jaeger: str | None = None

    def skip(self, file: str, line: int, reason: str) -> None:
        self.skipped_count += 1
        if len(self.skipped) < MAX_SKIPPED_KEPT:
            self.skipped.append(Skipped(file, line, reason))


@contextlib.contextmanager
def without_gc() -> Iterator[None]:
    """Cyclic garbage collection off while reading: parsing makes millions of containers and no cycles,
    and the collector's passes over them cost a quarter of the read."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def find_files(paths: Iterable[str | Path]) -> list[Path]:
    """Files to read, in a stable order; :class:`InputError` when a path is missing or none is found."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            matches = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES))
            if not matches:
                raise InputError(
                    f"no trace files in {path}/ (looked for {', '.join('*' + s for s in SUFFIXES)})"
                )
            found.extend(matches)
        elif path.is_file():
            found.append(path)
        elif any(char in str(raw) for char in "*?["):  # a pattern the shell did not expand (quoted)
            matches = sorted(Path(name) for name in glob.glob(str(raw), recursive=True))
            if not any(match.is_file() for match in matches):
                raise InputError(f"no files match {raw}")
            found.extend(match for match in matches if match.is_file())
        else:
            raise InputError(f"no such file or directory: {path}")
    if not found:
        raise InputError("no trace files given")
    unique: dict[Path, None] = dict.fromkeys(found)
    return list(unique)


def read_spans(paths: Iterable[str | Path], stats: ReadStats) -> Iterator[Span]:
    """Every span of every file, streaming; counts what was read and skipped in ``stats``.

    :class:`InputError` at once (not on the first ``next``) when a path is missing."""
    files = find_files(paths)
    return chain.from_iterable(_read_files(files, stats))


def _read_files(files: list[Path], stats: ReadStats) -> Iterator[list[Span]]:
    """The spans line by line (a list per line: flattened in C by ``chain``, cheaper than a
    generator per span)."""
    for path in files:
        stats.files.append(str(path))
        yield from _read_file(path, stats)


def _open(path: Path) -> IO[bytes]:
    if path.name.endswith(".gz"):
        return cast(IO[bytes], gzip.open(path, "rb"))
    return path.open("rb")


def _parse(data: bytes) -> Any:
    """One JSON value; orjson when installed (the ``cli`` extra), else the standard library. Bytes
    that are not UTF-8 are read with replacement characters, as a text reader would."""
    try:
        return _loads(data)
    except ValueError:
        return json.loads(data.decode("utf-8", "replace"))


def _read_file(path: Path, stats: ReadStats) -> Iterator[list[Span]]:
    name = str(path)
    if not path.name.endswith((".jsonl", ".jsonl.gz")) and _is_single_document(path):
        try:
            with _open(path) as handle:
                document = _parse(handle.read())
        except (OSError, ValueError, EOFError):
            pass  # not one document after all: read it line by line below
        else:
            stats.lines += 1
            yield _read_document(document, name, 1, stats)
            return
    try:
        with _open(path) as handle:
            for number, line in enumerate(handle, 1):
                stats.lines += 1
                try:
                    document = _loads(line)
                except ValueError:
                    if not line.strip():
                        stats.blank_lines += 1
                        continue
                    try:
                        document = _parse(line)
                    except ValueError as exc:
                        reason = f"not JSON ({exc.__class__.__name__}: {_short(str(exc))})"
                        stats.skip(name, number, reason)
                        continue
                yield _read_document(document, name, number, stats)
    except (OSError, EOFError) as exc:
        stats.skip(name, stats.lines + 1, f"unreadable: {exc}")


def _is_single_document(path: Path) -> bool:
    """True when the first non-blank line does not parse on its own but opens a JSON value."""
    try:
        with _open(path) as handle:
            for line in handle:
                if not line.strip():
                    continue
                if not line.lstrip().startswith((b"{", b"[")):
                    return False
                try:
                    _parse(line)
                except ValueError:
                    return True
                return False
    except (OSError, EOFError):
        return False
    return False


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _read_document(document: Any, file: str, line: int, stats: ReadStats) -> list[Span]:
    result: list[Span] = []
    documents = document if isinstance(document, list) else [document]
    strays = [item for item in documents if not isinstance(item, dict)]
    if strays:  # one count per line, however many stray values it holds
        stats.skip(file, line, f"not an OTLP object (a JSON {type(strays[0]).__name__})")
    for item in documents:
        if not isinstance(item, dict):
            continue
        resource_spans = item.get("resourceSpans", item.get("resource_spans"))
        if resource_spans is None:
            if any(key in item for key in ("resourceMetrics", "resourceLogs", "resourceProfiles")):
                stats.other_documents += 1
            else:
                keys = ", ".join(sorted(item)[:5]) or "empty object"
                stats.skip(file, line, f"no resourceSpans ({keys})")
            continue
        stats.trace_documents += 1
        for resource_span in _objects(resource_spans):
            resource = resource_span.get("resource")
            resource_attributes = (
                _attributes(resource.get("attributes")) if isinstance(resource, dict) else {}
            )
            service = resource_attributes.get("service.name")
            service = service if isinstance(service, str) else None
            for scope_span in _objects(resource_span.get("scopeSpans", resource_span.get("scope_spans"))):
                spans = scope_span.get("spans")
                if not isinstance(spans, list):
                    continue
                for raw in spans:
                    span = _fast_span(raw, service) if isinstance(raw, dict) else None
                    if span is None:
                        stats.bad_spans += 1
                        continue
                    result.append(span)
    stats.spans += len(result)
    return result


def _objects(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, dict))


def _fast_span(raw: dict[str, Any], service: str | None) -> Span | None:
    """:func:`_span` for the usual shape (what the collector and the SDK's encoders write), without
    its checks; anything unexpected falls back to :func:`_span`, so both give the same result."""
    try:
        trace_id: str = raw["traceId"]
        span_id: str = raw["spanId"]
        parent: str = raw.get("parentSpanId") or ""
        if len(trace_id) != 32 or len(span_id) != 16 or (parent and len(parent) != 16):
            return _span(raw, service)
        start = int(raw["startTimeUnixNano"])
        end = int(raw["endTimeUnixNano"])
        if end < start:
            return None
        attributes: dict[str, Any] = {}
        for item in raw.get("attributes") or ():
            encoded = item["value"]
            value = encoded.get("stringValue")  # any_value's first choice too
            if value.__class__ is not str:
                ((kind, value),) = encoded.items()
                if kind == "intValue" and value.__class__ is str:  # int64: a decimal string
                    value = int(value)
                elif not (kind == "doubleValue" and value.__class__ is float) and not (
                    kind == "boolValue" and value.__class__ is bool
                ):
                    value = any_value(encoded)
            attributes[item["key"]] = value
        status = raw.get("status")
        code = status.get("code") if status else None
        name = raw.get("name", "")
        return Span(
            trace_id.lower(),
            span_id.lower(),
            parent.lower(),
            name if isinstance(name, str) else str(name),
            start,
            end,
            attributes,
            code == _STATUS_ERROR or code == "STATUS_CODE_ERROR",
            service,
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return _span(raw, service)


def _span(raw: dict[str, Any], service: str | None) -> Span | None:
    trace_id = _id(raw.get("traceId"), 16)
    span_id = _id(raw.get("spanId"), 8)
    start = _int(raw.get("startTimeUnixNano"))
    end = _int(raw.get("endTimeUnixNano"))
    if not trace_id or not span_id or start is None or end is None or end < start:
        return None
    status = raw.get("status")
    code = status.get("code") if isinstance(status, dict) else None
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=_id(raw.get("parentSpanId"), 8),
        name=str(raw.get("name", "")),
        start_ns=start,
        end_ns=end,
        attributes=_attributes(raw.get("attributes")),
        status_error=code == _STATUS_ERROR or code == "STATUS_CODE_ERROR",
        service=service,
    )


def _id(value: Any, size: int) -> str:
    """Lowercase hex; hex (OTLP/JSON) or base64 (plain protobuf JSON) in. Empty when absent."""
    if not isinstance(value, str) or not value:
        return ""
    if len(value) == 2 * size:
        try:
            bytes.fromhex(value)
        except ValueError:
            pass
        else:
            return value.lower()
    try:
        decoded = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value.lower()
    return decoded.hex() if len(decoded) == size else value.lower()


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, (str, float)):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def _attributes(value: Any) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for item in _objects(value):
        key = item.get("key")
        if isinstance(key, str):
            result[key] = any_value(item.get("value"))
    return result


def any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` object -> str, int, float, bool, list, dict or None."""
    if not isinstance(value, dict):
        return None
    if "stringValue" in value:
        return str(value["stringValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return _int(value["intValue"])
    if "doubleValue" in value:
        return _double(value["doubleValue"])
    if "arrayValue" in value:
        array = value["arrayValue"]
        values = array.get("values") if isinstance(array, dict) else None
        return [any_value(item) for item in values] if isinstance(values, list) else []
    if "kvlistValue" in value:
        kvlist = value["kvlistValue"]
        return _attributes(kvlist.get("values")) if isinstance(kvlist, dict) else {}
    if "bytesValue" in value:
        return str(value["bytesValue"])
    return None


def _double(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)  # also "NaN", "Infinity", "-Infinity"
        except ValueError:
            return None
    return None


def finite(value: Any) -> float | None:
    """A finite float from an attribute value, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None
