"""The rule "our code never breaks the application", as one decorator.

A hook body that raises is logged once per function (with the traceback) and its ``default`` is
returned; exceptions of the wrapped SDK are never caught here: hooks call the SDK outside ``guarded``.
The types say so: a guarded function that returns ``R`` returns ``R | None`` (``R | D`` with a
``default`` of type ``D``), and every caller handles the default.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import ParamSpec, TypeVar, overload

log = logging.getLogger("openai_latency")

P = ParamSpec("P")
R = TypeVar("R")
D = TypeVar("D")

_reported: set[str] = set()


def report(where: str) -> None:
    """Logs the exception being handled, once per ``where``; call only inside ``except``."""
    if where in _reported:
        log.debug("openai-latency: internal error in %s", where, exc_info=True)
        return
    _reported.add(where)
    log.warning(
        "openai-latency: internal error in %s; the call proceeds, its telemetry may be incomplete",
        where,
        exc_info=True,
    )


@overload
def guarded() -> Callable[[Callable[P, R]], Callable[P, R | None]]: ...


@overload
def guarded(default: D) -> Callable[[Callable[P, R]], Callable[P, R | D]]: ...


def guarded(default: object = None) -> Callable[[Callable[P, R]], Callable[P, object]]:
    def decorate(function: Callable[P, R]) -> Callable[P, object]:
        where = function.__qualname__

        @functools.wraps(function)
        def guard(*args: P.args, **kwargs: P.kwargs) -> object:
            try:
                return function(*args, **kwargs)
            except Exception:
                report(where)
                return default

        return guard

    return decorate
