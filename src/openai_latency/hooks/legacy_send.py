"""Attempt bracketing for openai < 2.31, which has no ``_send_request`` (docs/ARCHITECTURE.md,
"Where the SDK is hooked").

Those versions call ``self._client.send(request, stream=...)`` on an ``httpx.Client`` /
``httpx.AsyncClient`` directly, so the attempt hooks go on ``httpx.Client.send`` and
``httpx.AsyncClient.send`` instead. We never import httpx ourselves (importing it changes the SDK's
retryable exceptions): a post-import hook wraps the classes when, and if, httpx gets imported. The
wrappers act only inside an SDK call (the ``CURRENT`` operation); every other httpx request passes
straight through.

wrapt cannot unregister an import hook, so the hook is registered once per process and consults
the active :class:`Hooks`; :func:`uninstall` unwraps what was wrapped and deactivates the hook.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import wrapt
from opentelemetry.instrumentation.utils import unwrap

from .._guard import guarded
from .sdk_hooks import Hooks

_state: dict[str, Any] = {"hooks": None, "registered": False, "wrapped": []}


def needed(base_client: ModuleType) -> bool:
    """True when this openai has no ``_send_request`` to hook."""
    sync_client = getattr(base_client, "SyncAPIClient", None)
    return sync_client is not None and "_send_request" not in vars(sync_client)


def install(hooks: Hooks) -> None:
    _state["hooks"] = hooks
    if not _state["registered"]:
        _state["registered"] = True
        wrapt.register_post_import_hook(_on_import, "httpx")  # runs now if httpx is already loaded
    else:
        module = sys.modules.get("httpx")
        if module is not None:
            _on_import(module)


@guarded()
def _on_import(httpx: ModuleType) -> None:
    hooks: Hooks | None = _state["hooks"]
    if hooks is None or _state["wrapped"]:
        return
    for class_name, wrapper in (("Client", hooks.send), ("AsyncClient", hooks.async_send)):
        owner = getattr(httpx, class_name, None)
        if owner is None or "send" not in vars(owner):
            continue
        wrapt.wrap_function_wrapper(owner, "send", wrapper)
        _state["wrapped"].append(owner)


def uninstall() -> None:
    _state["hooks"] = None
    for owner in _state["wrapped"]:
        unwrap(owner, "send")
    _state["wrapped"] = []
