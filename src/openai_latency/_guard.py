"""The rule "our code never breaks the application", as one decorator.

A hook body that raises is logged once per function (with the traceback) and its ``default`` is
returned; exceptions of the wrapped SDK are never caught here: hooks call the SDK outside ``guarded``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar, cast

log = logging.getLogger("openai_latency")

F = TypeVar("F", bound=Callable[..., Any])

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


def guarded(default: Any = None) -> Callable[[F], F]:
    def decorate(function: F) -> F:
        where = function.__qualname__

        @functools.wraps(function)
        def guard(*args: Any, **kwargs: Any) -> Any:
            try:
                return function(*args, **kwargs)
            except Exception:
                report(where)
                return default

        return cast(F, guard)

    return decorate
