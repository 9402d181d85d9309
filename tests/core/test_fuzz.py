"""Fuzzing: random response and chunk shapes never give the caller an exception (or a result) that
the uninstrumented SDK would not give, and the operation span always ends, exactly once (the OTel
SDK logs no "ended span" warning: no second ``end()``, no attribute set after the end).

A fixed seed (``derandomize``) and a bounded number of examples keep the suite deterministic and
short; ``scripts/fuzz.py`` runs the same property with many more examples and a random seed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from openai_latency import OpenAILatencyInstrumentor
from openai_latency.fake_server import FakeServer
from tests.support import fuzz_cases
from tests.support.span_checks import Captured

EXAMPLES = 60


@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@pytest.mark.slow
@given(case=fuzz_cases.cases())
def test_random_shapes_change_nothing_for_the_caller(
    instrument: Callable[..., Captured], server: FakeServer, case: fuzz_cases.Case
) -> None:
    captured: list[Captured] = []

    def on() -> None:
        captured[:] = [instrument()]

    def spans() -> list[Any]:
        return captured[0].operations()

    fuzz_cases.check(server, case, on, OpenAILatencyInstrumentor().uninstrument, spans)
