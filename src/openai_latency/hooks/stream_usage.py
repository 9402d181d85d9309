"""``OPENAI_LATENCY_STREAM_USAGE=inject``: ask chat streams for their token usage.

Without ``stream_options={"include_usage": True}`` a chat stream carries no usage, so output tokens
(and time per output token) can only be estimated from chunk counts. With ``inject`` the resource
wrapper adds the option when the caller did not set ``stream_options`` at all, and the stream
wrapper reads the extra final chunk (empty ``choices``, only ``usage``) and never hands it to the
caller, whose ``chunk.choices[0]`` keeps working. A request that sets ``stream_options`` itself
(as a kwarg or in ``extra_body``) is sent exactly as written, and its usage chunk is the caller's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._guard import guarded
from ..model import OperationKind
from ..read.attributes import is_given

INCLUDE_USAGE = {"include_usage": True}


@guarded()
def with_usage(kind: OperationKind, kwargs: Mapping[str, Any]) -> dict[str, Any] | None:
    """The kwargs to send with ``stream_options.include_usage`` added, or None to send them unchanged."""
    if kind.stream_kind != "chat" or kwargs.get("stream") is not True:
        return None
    if is_given(kwargs.get("stream_options")):
        return None
    extra_body = kwargs.get("extra_body")
    if isinstance(extra_body, Mapping) and "stream_options" in extra_body:
        return None
    return {**kwargs, "stream_options": dict(INCLUDE_USAGE)}


def is_usage_only(chunk: Any) -> bool:
    """The chunk ``include_usage`` adds at the end: no choices, only usage. Never raises."""
    return not getattr(chunk, "choices", True) and getattr(chunk, "usage", None) is not None
