"""tests/support/retry.py: only the timing comparison gets another run."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.retry import ATTEMPTS, retry_timing, retry_timing_async


class Flaky(Exception):
    pass


def test_a_deterministic_miss_fails_at_once() -> None:
    runs: list[int] = []

    def run() -> int:
        runs.append(1)
        raise AssertionError("a logic bug")

    with pytest.raises(AssertionError, match="a logic bug"):
        retry_timing(run, lambda _: None)
    assert len(runs) == 1


def test_a_timing_miss_gets_another_run_and_the_last_miss_is_reported() -> None:
    runs: list[int] = []

    def run() -> int:
        runs.append(len(runs))
        return runs[-1]

    def timing(n: int) -> None:
        assert n == 1, f"run {n} was late"

    assert retry_timing(run, timing) == 1 and runs == [0, 1]
    runs.clear()

    def always_late(n: int) -> None:
        raise AssertionError(f"run {n} was late")

    with pytest.raises(AssertionError, match=f"run {ATTEMPTS - 1} was late"):
        retry_timing(run, always_late)
    assert len(runs) == ATTEMPTS


def test_only_the_named_exceptions_of_a_run_get_another_run() -> None:
    runs: list[int] = []

    def run() -> str:
        runs.append(1)
        if len(runs) < 3:
            raise Flaky
        return "done"

    assert retry_timing(run, lambda _: None, attempts=3, also=(Flaky,)) == "done"
    runs.clear()
    with pytest.raises(Flaky):
        retry_timing(run, lambda _: None, attempts=3)
    assert len(runs) == 1


def test_the_async_helper_behaves_alike() -> None:
    runs: list[int] = []

    async def run() -> int:
        runs.append(len(runs))
        if runs[-1] == 0:
            raise Flaky
        return runs[-1]

    def timing(n: int) -> None:
        assert n >= 2

    assert asyncio.run(retry_timing_async(run, timing, also=(Flaky,))) == 2

    async def broken() -> int:
        raise AssertionError("a logic bug")

    with pytest.raises(AssertionError, match="a logic bug"):
        asyncio.run(retry_timing_async(broken, timing))
