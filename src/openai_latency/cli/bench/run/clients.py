"""bench's SDK clients: ``AsyncOpenAI``, with each response model validated by pydantic's core instead
of built by the SDK's default ``construct_type`` (``--sdk-parse validate``, the default).

Why: at high concurrency one core's worth of client CPU sets how much load bench can drive, and the
SDK's default model construction is its largest part. ``construct_type`` walks the model's type hints
in Python, ~50 µs for a chat chunk; pydantic's validator builds the same model in Rust in ~2.5 µs
(the path the SDK itself takes with ``_strict_response_validation``). benchmarks/bench_instructions.py
splits a 32-token streamed request at c=64: the SDK's own work is ~31 M of bench's ~46 M
instructions, ``construct_type`` most of it.

Only pydantic model types take the fast path (chat chunks and completions, completions, non-stream
responses); a union of event types (the Responses stream's, and the WebSocket events, which the SDK
parses elsewhere) is left to the SDK, so ``--api responses`` and ``responses-ws`` still parse alike.
A body that does not validate (a server off the OpenAI schema: a missing field, another type) is
built the SDK's default way, as without this, and that type is not tried again in the run. The
models carry the same fields either way (validation may coerce a value the server sent as another
type, e.g. a number in a string). ``--sdk-parse construct`` keeps the SDK's default for every body:
what an application with default settings spends per chunk. With pydantic 1 (which the SDK still
accepts) bench uses the SDK's way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import openai
import pydantic

from ..plan import SdkParse, Target


class ValidatingAsyncOpenAI(openai.AsyncOpenAI):
    """``AsyncOpenAI`` whose response models are validated by pydantic (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        #: The response types that failed validation once: built the SDK's way for the rest of the run.
        self._unvalidated: set[Any] = set()

    def _process_response_data(self, *, data: object, cast_to: Any, response: Any) -> Any:
        if (
            isinstance(data, dict)
            and isinstance(cast_to, type)
            and issubclass(cast_to, pydantic.BaseModel)
            and cast_to not in self._unvalidated
        ):
            try:
                return cast_to.model_validate(data)
            except pydantic.ValidationError:
                self._unvalidated.add(cast_to)  # off the schema: the SDK's way from now on
        return super()._process_response_data(data=data, cast_to=cast_to, response=response)


def clients_for(
    targets: Sequence[Target],
    timeout: float,
    max_retries: int,
    headers: Mapping[str, str] | None = None,
    sdk_parse: SdkParse = "validate",
) -> list[openai.AsyncOpenAI]:
    """One client per target."""
    fast = sdk_parse == "validate" and hasattr(pydantic.BaseModel, "model_validate")  # pydantic 2
    kind = ValidatingAsyncOpenAI if fast else openai.AsyncOpenAI
    return [
        kind(
            base_url=target.base_url,
            api_key=target.api_key() or "-",
            timeout=timeout,
            max_retries=max_retries,
            default_headers=dict(headers) if headers else None,
        )
        for target in targets
    ]
