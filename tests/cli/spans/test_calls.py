"""An operation span's phases from its attributes (``calls.phases_of``): the phase keys of each set of
attribute keys are found once, the values are read from every span."""

from __future__ import annotations

import math
from typing import Any

import pytest

from openai_latency.cli.spans import calls
from openai_latency.cli.spans.calls import phases_of

PREFIX = "openai_latency.phase."


def _scan(attributes: dict[str, Any]) -> dict[str, float]:
    """The definition: every ``openai_latency.phase.*`` attribute with a finite number."""
    return {
        key[len(PREFIX) :]: float(value)
        for key, value in attributes.items()
        if key.startswith(PREFIX)
        and isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
    }


def test_same_keys_other_values() -> None:
    keys = [f"{PREFIX}network_wait", "gen_ai.operation.name", f"{PREFIX}first_token", "openai_latency.phases"]
    for values in ([0.5, "chat", 2, "x"], [math.nan, "chat", math.inf, 1.0], ["1.5", None, True, 3.0]):
        attributes = dict(zip(keys, values, strict=True))
        assert phases_of(attributes) == _scan(attributes)
    reordered = {f"{PREFIX}first_token": 1.0, f"{PREFIX}network_wait": 0.25}
    assert list(phases_of(reordered)) == ["first_token", "network_wait"]


def test_past_the_bound_keys_are_scanned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calls, "_PHASE_KEYS", {})
    monkeypatch.setattr(calls, "MAX_KEY_SETS", 2)
    for index in range(5):
        attributes = {f"k{index}": 1.0, f"{PREFIX}p{index}": float(index), f"{PREFIX}q": -1}
        assert phases_of(attributes) == _scan(attributes) == {f"p{index}": float(index), "q": -1.0}
    assert len(calls._PHASE_KEYS) == 2
