"""JSON text of bounded length that stays valid JSON: for captured message content."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

TRUNCATION_MARKER = "...[truncated]"


def fit(value: Any, limit: int) -> str:
    """``value`` as JSON of at most ``limit`` characters, still valid JSON.

    Too long, the strings inside it are cut to the largest common length that fits (a binary
    search), each cut one ending in :data:`TRUNCATION_MARKER`. Only when the structure alone (every
    string empty) does not fit is the JSON text itself cut and marked, and no longer valid JSON.
    """
    text = _dumps(value)
    if len(text) <= limit:
        return text
    value = _cap_strings(value, limit)  # bounds the size of every trial below
    best: str | None = None
    low, high = 0, limit
    while low <= high:
        keep = (low + high) // 2
        candidate = _dumps(_cap_strings(value, keep))
        if len(candidate) <= limit:
            best, low = candidate, keep + 1
        else:
            high = keep - 1
    return best if best is not None else text[:limit] + TRUNCATION_MARKER


def _cap_strings(value: Any, keep: int) -> Any:
    """A copy of ``value`` whose strings longer than ``keep`` (+ the marker) are cut and marked."""
    if isinstance(value, str):
        return value[:keep] + TRUNCATION_MARKER if len(value) > keep + len(TRUNCATION_MARKER) else value
    if isinstance(value, Mapping):
        return {key: _cap_strings(item, keep) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_cap_strings(item, keep) for item in value]
    return value


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
