"""Where the time to first token went, by the server's own account: its queue, its prefill, and
the rest (network and client), as medians over the calls whose server sent an account."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from ..spans.calls import Call
from .percentiles import percentile


@dataclass(frozen=True)
class ServerSplit:
    """Medians (seconds) over the ``calls`` with an account; None where none reported the part."""

    calls: int
    ttft: float | None
    """The client's time to first token (streams)."""
    queue: float | None
    prefill: float | None
    server_ttft: float | None
    overhead: float | None
    """Client TTFT - server TTFT: network and client (and any queue the server does not report)."""
    tpot: float | None
    server_tpot: float | None
    cached_tokens: float | None

    def as_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def _median(values: Iterable[float | None]) -> float | None:
    present = sorted(v for v in values if v is not None)
    return round(percentile(present, 0.5), 9) if present else None


def server_split(calls: Iterable[Call]) -> ServerSplit | None:
    """None when no call carries an account."""
    accounted = [call for call in calls if call.server]
    if not accounted:
        return None
    accounts = [call.server or {} for call in accounted]
    return ServerSplit(
        calls=len(accounted),
        ttft=_median(call.ttft for call in accounted),
        queue=_median(a.get("queue") for a in accounts),
        prefill=_median(a.get("prefill") for a in accounts),
        server_ttft=_median(a.get("ttft") for a in accounts),
        overhead=_median(a.get("overhead") for a in accounts),
        tpot=_median(call.tpot for call in accounted),
        server_tpot=_median(a.get("tpot") for a in accounts),
        cached_tokens=_median(a.get("cached_tokens") for a in accounts),
    )


def server_json(calls: Iterable[Call]) -> dict[str, float | int | None] | None:
    """:meth:`ServerSplit.as_dict` of the calls' split, or None (JSON null) when none has an account."""
    split = server_split(calls)
    return None if split is None else split.as_dict()
