"""pytest plugin (``-p tests.support.legacy_httpx_plugin``): every OpenAI client built by the suite
gets a legacy ``httpx.Client`` / ``httpx.AsyncClient`` unless the test passes its own ``http_client``.

Used by the ``openai3-httpx`` leg of ``scripts/test-matrix.sh``: the whole suite on openai 3 with the
legacy HTTP stack a user can still hand to the SDK (``OpenAI(http_client=httpx.Client())``).
"""

from __future__ import annotations

import os
from typing import Any

import httpx
import pytest
import wrapt

from tests.support.network import LEGACY_ENV


def _sync_init(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    if kwargs.get("http_client") is None:
        kwargs["http_client"] = httpx.Client(follow_redirects=True)
    return wrapped(*args, **kwargs)


def _async_init(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    if kwargs.get("http_client") is None:
        kwargs["http_client"] = httpx.AsyncClient(follow_redirects=True)
    return wrapped(*args, **kwargs)


def pytest_configure(config: pytest.Config) -> None:
    os.environ[LEGACY_ENV] = "1"
    wrapt.wrap_function_wrapper("openai._base_client", "SyncAPIClient.__init__", _sync_init)
    wrapt.wrap_function_wrapper("openai._base_client", "AsyncAPIClient.__init__", _async_init)
