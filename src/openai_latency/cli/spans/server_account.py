"""The server's own account of a call (``openai_latency.server.*``, the client overhead), as the
instrumentation writes it on the operation span (:mod:`openai_latency.read.server_timing`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

SERVER_QUEUE_TIME: Final = "openai_latency.server.queue_time"
SERVER_PREFILL_TIME: Final = "openai_latency.server.prefill_time"
SERVER_TIME_TO_FIRST_TOKEN: Final = "openai_latency.server.time_to_first_token"
SERVER_TIME_PER_OUTPUT_TOKEN: Final = "openai_latency.server.time_per_output_token"
SERVER_CACHED_PROMPT_TOKENS: Final = "openai_latency.server.cached_prompt_tokens"
CLIENT_OVERHEAD_TIME_TO_FIRST_TOKEN: Final = "openai_latency.client_overhead.time_to_first_token"

#: Short name in a call's ``server`` dict -> the attribute it is read from.
FIELDS: Final = (
    ("queue", SERVER_QUEUE_TIME),
    ("prefill", SERVER_PREFILL_TIME),
    ("ttft", SERVER_TIME_TO_FIRST_TOKEN),
    ("tpot", SERVER_TIME_PER_OUTPUT_TOKEN),
    ("cached_tokens", SERVER_CACHED_PROMPT_TOKENS),
    ("overhead", CLIENT_OVERHEAD_TIME_TO_FIRST_TOKEN),
)


def server_account(get: Callable[[str], Any]) -> dict[str, float] | None:
    """The account's finite numbers by short name, or None when the span has none (most calls:
    two lookups)."""
    if get(SERVER_TIME_TO_FIRST_TOKEN) is None and get(SERVER_PREFILL_TIME) is None:
        return None
    out: dict[str, float] = {}
    for name, key in FIELDS:
        value = get(key)
        if isinstance(value, str):  # OTLP JSON's intValue is a string
            value = int(value) if value.isdigit() else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out[name] = float(value)
    return out
