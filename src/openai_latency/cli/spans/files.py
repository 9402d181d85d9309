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

import contextlib
import gc
import glob
import gzip
import json
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from pathlib import Path
from typing import IO, Any, TypeVar, cast

from .decode import attributes, fast_span, objects
from .names import SERVICE_NAME
from .span import InputError, ReadStats, Span, SpanMaker, remade

T = TypeVar("T")

# Parsers, fastest first, same results: msgspec (the ``cli`` extra) decodes the usual lines straight
# into spans; orjson, when installed, parses what the general reader reads; else the standard library.
_loads: Callable[[bytes], Any]
try:
    import orjson

    _loads = orjson.loads
    JSON_PARSER = "orjson"
except ImportError:  # pragma: no cover - depends on the environment
    _loads = json.loads
    JSON_PARSER = "json"
_decode_line: Callable[[bytes, SpanMaker[Any], bool], list[Any] | None] | None
try:
    from .decode_msgspec import decode_line as _decode_line

    JSON_PARSER = "msgspec"
except ImportError:  # pragma: no cover - depends on the environment
    _decode_line = None

SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")


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
    return read_spans_as(paths, stats, Span)


def read_spans_as(
    paths: Iterable[str | Path], stats: ReadStats, make: SpanMaker[T], lazy_values: bool = False
) -> Iterator[T]:
    """:func:`read_spans`, each span as ``make`` makes it from its fields (:data:`~.span.SpanMaker`):
    the msgspec reader calls ``make`` without a :class:`Span` in between, and with ``lazy_values``
    hands it attributes whose values are decoded when read (:class:`~.decode_msgspec.LazyAttributes`:
    for a ``make`` that reads few of them)."""
    files = find_files(paths)
    return chain.from_iterable(_read_files(files, stats, make, lazy_values))


def _read_files(
    files: list[Path], stats: ReadStats, make: SpanMaker[T], lazy_values: bool
) -> Iterator[list[T]]:
    """The spans line by line (a list per line: flattened in C by ``chain``, cheaper than a
    generator per span)."""
    for path in files:
        stats.files.append(str(path))
        yield from _read_file(path, stats, make, lazy_values)


#: The read buffer of a plain file (bytes).
READ_BUFFER = 4 << 20


def _open(path: Path) -> IO[bytes]:
    if path.name.endswith(".gz"):
        return cast(IO[bytes], gzip.open(path, "rb"))
    # lines of an exporter's batch run to hundreds of kB: with the default 8 kB buffer, reading them
    # took 0.46 s of CPU per 900 MB, with 4 MB 0.08 s
    return path.open("rb", buffering=READ_BUFFER)


def _parse(data: bytes) -> Any:
    """One JSON value (orjson when installed, else the standard library). Bytes that are not UTF-8
    are read with replacement characters, as a text reader would."""
    try:
        return _loads(data)
    except ValueError:
        return json.loads(data.decode("utf-8", "replace"))


def _made(spans: list[Span], make: SpanMaker[T]) -> list[T]:
    """The general reader's spans as ``make`` makes them."""
    return cast("list[T]", spans) if make is Span else list(remade(spans, make))


def _read_file(path: Path, stats: ReadStats, make: SpanMaker[T], lazy_values: bool) -> Iterator[list[T]]:
    name = str(path)
    if not path.name.endswith((".jsonl", ".jsonl.gz")) and _is_single_document(path):
        try:
            with _open(path) as handle:
                document = _parse(handle.read())
        except (OSError, ValueError, EOFError):
            pass  # not one document after all: read it line by line below
        else:
            stats.lines += 1
            yield _made(_read_document(document, name, 1, stats), make)
            return
    try:
        with _open(path) as handle:
            decode_line = _decode_line
            for number, line in enumerate(handle, 1):
                stats.lines += 1
                if decode_line is not None:
                    spans = decode_line(line, make, lazy_values)
                    if spans is not None:
                        stats.trace_documents += 1
                        stats.spans += len(spans)
                        yield spans
                        continue
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
                yield _made(_read_document(document, name, number, stats), make)
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
        for resource_span in objects(resource_spans):
            resource = resource_span.get("resource")
            resource_attributes = attributes(resource.get("attributes")) if isinstance(resource, dict) else {}
            service = resource_attributes.get(SERVICE_NAME)
            service = service if isinstance(service, str) else None
            for scope_span in objects(resource_span.get("scopeSpans", resource_span.get("scope_spans"))):
                spans = scope_span.get("spans")
                if not isinstance(spans, list):
                    continue
                for raw in spans:
                    span = fast_span(raw, service) if isinstance(raw, dict) else None
                    if span is None:
                        stats.bad_spans += 1
                        continue
                    result.append(span)
    stats.spans += len(result)
    return result
