"""The OpenAI-shaped errors the fake sends (the ``error`` and ``fail-error`` script keys' values)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class ErrorSpec:
    """An OpenAI-shaped error: HTTP status and the fields of the ``error`` object."""

    status: int
    type: str
    code: str | None
    param: str | None
    message: str

    def body(self, model: str) -> dict[str, object]:
        return {
            "error": {
                "message": self.message.format(model=model),
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


#: The ``error`` script key's values, with bodies shaped like the ones OpenAI sends.
ERRORS: Final[Mapping[str, ErrorSpec]] = {
    "invalid_api_key": ErrorSpec(
        401,
        "invalid_request_error",
        "invalid_api_key",
        None,
        "Incorrect API key provided: sk-fake***. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
    ),
    "model_not_found": ErrorSpec(
        404,
        "invalid_request_error",
        "model_not_found",
        None,
        "The model `{model}` does not exist or you do not have access to it.",
    ),
    "context_length_exceeded": ErrorSpec(
        400,
        "invalid_request_error",
        "context_length_exceeded",
        "messages",
        "This model's maximum context length is 128000 tokens. However, your messages resulted in "
        "130000 tokens. Please reduce the length of the messages.",
    ),
    "rate_limit_exceeded": ErrorSpec(
        429,
        "requests",
        "rate_limit_exceeded",
        None,
        "Rate limit reached for {model} in organization org-fake on requests per min (RPM): "
        "Limit 10000, Used 10000, Requested 1. Please try again in 6ms.",
    ),
    "insufficient_quota": ErrorSpec(
        429,
        "insufficient_quota",
        "insufficient_quota",
        None,
        "You exceeded your current quota, please check your plan and billing details.",
    ),
    "server_error": ErrorSpec(
        500,
        "server_error",
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    "overloaded": ErrorSpec(
        503,
        "server_error",
        "overloaded",
        None,
        "The engine is currently overloaded, please try again later.",
    ),
}


def error_for_status(status: int) -> ErrorSpec:
    """The body sent for a scripted status (``status``, ``fail-status``) without a named error."""
    for spec in ERRORS.values():
        if spec.status == status and spec.code in ("rate_limit_exceeded", "server_error", "overloaded"):
            return spec
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return ErrorSpec(status, kind, None, None, f"Fake server: scripted status {status}.")
