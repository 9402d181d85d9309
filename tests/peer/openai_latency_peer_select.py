"""Selection for the openai SDK's own tests run as a peer suite (``scripts/peer-suite.sh``).

Loaded in *both* runs (``-p openai_latency_peer_select``) so that they select the same tests.
Deselects the tests that compare against inline-snapshot ``external()`` files: the SDK's source
distribution does not ship ``.inline-snapshot/external/``, so those tests cannot pass offline.
A test is one of them when its function's code (or code nested in it: lambdas, inner functions)
names ``external``; this follows the source instead of a list of test ids, so it keeps working
when tests are added, renamed or parametrized in another openai release.
"""

from __future__ import annotations

import inspect
import types
from typing import Any

import pytest

_NAME = "external"
_COUNT = pytest.StashKey[int]()


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _uses_external(item: pytest.Item) -> bool:
    function: Any = getattr(item, "function", None)
    function = inspect.unwrap(function) if function is not None else None
    code = getattr(function, "__code__", None)
    return code is not None and _NAME in _names(code)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    selected: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    for item in items:
        (deselected if _uses_external(item) else selected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected
    config.stash[_COUNT] = len(deselected)


def pytest_report_collectionfinish(config: pytest.Config) -> str:
    count = config.stash.get(_COUNT, 0)
    return f"openai-latency peer select: deselected {count} tests that need inline-snapshot external() files"
