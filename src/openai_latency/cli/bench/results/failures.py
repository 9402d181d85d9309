"""A target whose every request failed: said on stderr with the first error, and a hint for the usual
mistake (a base URL without ``/v1``: every request a 404)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ...spans import names
from ...spans.names import BENCH_TARGET
from ...spans.span import Span
from ..plan import Target
from .stats import TargetStats


@dataclass
class FirstErrors:
    """Per target: the HTTP statuses of its failed calls and the first failure (status, error type)."""

    statuses: dict[str, Counter[int | None]] = field(default_factory=dict)
    first: dict[str, tuple[int | None, str]] = field(default_factory=dict)
    #: The first failure's message per target, where the spans kept it (in-process runs).
    messages: dict[str, str] = field(default_factory=dict)

    def watch(self, spans: Iterable[Span]) -> Iterator[Span]:
        """The spans, unchanged, noting the failed operation spans on the way."""
        for span in spans:
            attributes = span.attributes
            if span.status_error and names.OPERATION_NAME in attributes:
                target = str(attributes.get(BENCH_TARGET, "-"))
                status = attributes.get(names.STATUS_CODE)
                code = int(status) if isinstance(status, (int, str)) and str(status).isdigit() else None
                self.statuses.setdefault(target, Counter())[code] += 1
                if target not in self.first:
                    self.first[target] = (code, str(attributes.get(names.ERROR_TYPE, "error")))
            yield span


def all_failed_lines(
    stats: Sequence[TargetStats], targets: Sequence[Target], errors: FirstErrors
) -> list[str]:
    """One line per target whose every finished request failed (none when a request succeeded)."""
    by_name = {t.name: t for t in targets}
    totals: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for s in stats:
        totals[s.label] += s.requests
        failed[s.label] += s.errors
    lines = []
    for name, total in totals.items():
        if total == 0 or failed[name] < total:
            continue
        status, error_type = errors.first.get(name, (None, "error"))
        text = f"openai-latency bench: target {name}: every request failed ({total} of {total})"
        first = f"HTTP {status}" if status else error_type
        if status and error_type != str(status):
            first += f" {error_type}"
        message = errors.messages.get(name)
        text += f"; the first: {first}" + (f": {message}" if message else "")
        statuses = errors.statuses.get(name, Counter())
        target = by_name.get(name)
        if target is not None and set(statuses) == {404} and not _has_v1(target.base_url):
            text += (
                f" (every request a 404: does the base URL lack /v1? try {target.base_url.rstrip('/')}/v1)"
            )
        lines.append(text)
    return lines


def _has_v1(url: str) -> bool:
    return "/v1" in urlsplit(url).path
