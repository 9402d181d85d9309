"""One line of text for :class:`~..stats.server_split.ServerSplit`: "of 412 ms TTFT: 180 ms queue,
150 ms prefill, 82 ms network and client" (medians; the parts need not add up exactly)."""

from __future__ import annotations

from collections.abc import Iterable

from ..spans.calls import Call
from ..stats.server_split import ServerSplit, server_split
from .text import format_duration


def split_text(split: ServerSplit) -> str:
    """The server's account in words, or what of it there is."""
    parts: list[str] = []
    if split.queue is not None:
        parts.append(f"{format_duration(split.queue)} queue")
    if split.prefill is not None:
        cached = f" ({split.cached_tokens:.0f} cached tokens)" if split.cached_tokens else ""
        parts.append(f"{format_duration(split.prefill)} prefill{cached}")
    elif split.server_ttft is not None:
        parts.append(f"{format_duration(split.server_ttft)} in the server")
    if split.overhead is not None:
        rest = "network and client" if split.queue is not None else "network, client and queue"
        parts.append(f"{format_duration(split.overhead)} {rest}")
    head = f"of {format_duration(split.ttft)} TTFT" if split.ttft is not None else "server's account"
    line = f"{head}: {', '.join(parts)}" if parts else head
    if split.server_tpot is not None:
        client = f"{format_duration(split.tpot)} here, " if split.tpot is not None else ""
        line += f"; TPOT {client}{format_duration(split.server_tpot)} in the server"
    return f"{line} (p50 of {split.calls} call{'s' if split.calls != 1 else ''} with a server account)"


def split_lines(labelled: Iterable[tuple[str, Iterable[Call]]], indent: str = "") -> list[str]:
    """One line per (label, calls) whose calls carry a server account; none for the others."""
    lines = []
    for label, calls in labelled:
        split = server_split(calls)
        if split is not None:
            lines.append(f"{indent}{label + ': ' if label else ''}{split_text(split)}")
    return lines
