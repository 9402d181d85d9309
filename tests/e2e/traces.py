"""Reading one received trace as a tree, and the W3C ``traceparent`` the LLM server received."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .otlp_receiver import Span

TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


@dataclass(frozen=True)
class TraceParent:
    trace_id: str
    parent_id: str
    flags: str

    @classmethod
    def parse(cls, header: str) -> TraceParent:
        match = TRACEPARENT.match(header.strip())
        assert match, f"not a W3C traceparent: {header!r}"
        return cls(*match.groups())


@dataclass(frozen=True)
class Trace:
    trace_id: str
    spans: list[Span]

    def by_id(self, span_id: str) -> Span | None:
        return next((s for s in self.spans if s.span_id == span_id), None)

    def named(self, name: str) -> list[Span]:
        return [s for s in self.spans if s.name == name]

    def one(self, name: str, **where: Any) -> Span:
        found = [s for s in self.named(name) if all(getattr(s, k) == v for k, v in where.items())]
        assert len(found) == 1, f"expected one {name!r} {where or ''}, got {len(found)}: {self.outline()}"
        return found[0]

    def children(self, span: Span) -> list[Span]:
        return [s for s in self.spans if s.parent_span_id == span.span_id]

    def ancestors(self, span: Span) -> list[Span]:
        """Parent, grandparent, ... up to the root (or to a parent that was not received)."""
        out: list[Span] = []
        current: Span | None = span
        while current is not None and current.parent_span_id:
            current = self.by_id(current.parent_span_id)
            if current is not None:
                out.append(current)
        return out

    def subtree(self, span: Span) -> list[Span]:
        out: list[Span] = []
        todo = [span]
        while todo:
            current = todo.pop()
            out.append(current)
            todo.extend(self.children(current))
        return out

    def roots(self) -> list[Span]:
        return [s for s in self.spans if not s.parent_span_id or self.by_id(s.parent_span_id) is None]

    def outline(self) -> str:
        """An indented tree of span names, for assertion messages."""
        lines: list[str] = []

        def walk(span: Span, depth: int) -> None:
            lines.append(f"{'  ' * depth}{span.name} [{span.kind}] {span.span_id}")
            for child in self.children(span):
                walk(child, depth + 1)

        for root in self.roots():
            walk(root, 0)
        return "\n" + "\n".join(lines)
