"""What ``instrument()`` wraps, listed from the instrumentor's own table (never called)."""

from __future__ import annotations

from typing import Any

from openai_latency.hooks.sdk_hooks import Hooks
from openai_latency.instrumentor import _patch_table, _resolve_owner


def patched_targets() -> list[tuple[Any, str]]:
    """Every (owner, attribute) that ``instrument()`` wraps in the installed SDK."""
    hooks = Hooks.__new__(Hooks)  # only to list the table; never called
    targets = []
    for module, path, _wrapper in _patch_table(hooks):
        owner = _resolve_owner(module, path)
        if owner is not None:
            targets.append((owner, path.split(".")[1]))
    return targets
