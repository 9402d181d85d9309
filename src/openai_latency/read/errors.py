"""Exceptions and provider error reports -> error.type, openai_latency.error.category and the
HTTP status; the provider's error code read from an error response body.

``error.type`` is the provider's code when it sent one (``rate_limit_exceeded``, ``invalid_api_key``,
``model_not_found``, ``context_length_exceeded``, ``insufficient_quota``...), else the HTTP status as a
string, else the exception's qualified name; ``_OTHER`` last.
"""

from __future__ import annotations

import json
from typing import Any

from .. import semconv as sc
from ..model import Attributes


class ProviderError(Exception):
    """An error the provider reported in a successful HTTP response: a Responses ``error`` event or
    ``response.failed`` in a stream, or a returned ``Response`` whose status is ``failed``. Never
    raised: the caller gets the SDK's own object; this only carries the provider's code and message
    to the operation span (``error.type``, status, exception event)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code


def stream_error(item: object) -> ProviderError:
    """The error an error item (``ResponseError``, ``ResponseErrorEvent``...) describes."""
    code = getattr(item, "code", None)
    message = getattr(item, "message", None)
    return ProviderError(
        code if isinstance(code, str) and code else "_OTHER", message if isinstance(message, str) else ""
    )


def failed_response_error(result: object) -> ProviderError | None:
    """The provider's error when a non-stream Responses call returned a ``failed`` Response (HTTP 200)."""
    if getattr(result, "object", None) != "response" or getattr(result, "status", None) != "failed":
        return None
    return stream_error(getattr(result, "error", None) or result)


_CATEGORY_BY_CODE = {
    "context_length_exceeded": "context_length",
    "insufficient_quota": "quota",
    "rate_limit_exceeded": "rate_limit",
    "invalid_api_key": "auth",
    "model_not_found": "not_found",
}
_CATEGORY_BY_STATUS = {
    400: "bad_request",
    401: "auth",
    403: "permission",
    404: "not_found",
    408: "timeout",
    409: "other",
    422: "bad_request",
    429: "rate_limit",
}


MAX_ERROR_BODY = 64 * 1024
"""Error bodies longer than this are not parsed for the provider's code (OpenAI's are < 1 KiB)."""


def response_error_code(response: Any) -> str | None:
    """The provider's error code (``error.code``) of an HTTP error response, read the way the SDK
    reads it, but only when the body is already in memory: a non-stream request's body is read by
    the HTTP client before the SDK sees the response. A streamed response's body is left unread
    (reading it would be an extra read on the connection the SDK is about to close)."""
    try:
        content = response.content  # httpx raises ResponseNotRead when the body was not read
    except Exception:
        return None
    if not isinstance(content, bytes) or not content or len(content) > MAX_ERROR_BODY:
        return None
    try:
        data = json.loads(content)
    except ValueError:
        return None
    if isinstance(data, dict):
        data = data.get("error", data)
    code = data.get("code") if isinstance(data, dict) else None
    return code if isinstance(code, str) and code else None


def qualified_name(exc_type: type[BaseException]) -> str:
    """``openai.APITimeoutError`` rather than ``openai._exceptions.APITimeoutError``."""
    module = exc_type.__module__
    if module == "builtins":
        return exc_type.__qualname__
    public = module.split("._", 1)[0] if "._" in module else module
    return f"{public}.{exc_type.__qualname__}"


def error_attributes(exc: BaseException, *, mid_stream: bool = False) -> Attributes:
    """error.type, openai_latency.error.category and, for HTTP errors, the status code."""
    status = getattr(exc, "status_code", None)
    code = getattr(exc, "code", None)
    code = code if isinstance(code, str) and code else None
    attributes: Attributes = {}
    if isinstance(status, int):
        attributes[sc.HTTP_RESPONSE_STATUS_CODE] = status
    error_type = code or (str(status) if isinstance(status, int) else qualified_name(type(exc)))
    attributes[sc.ERROR_TYPE] = error_type or "_OTHER"
    attributes[sc.OPENAI_LATENCY_ERROR_CATEGORY] = error_category(exc, status, code, mid_stream)
    return attributes


# httpx/httpx2 transport errors that older SDKs let through mid-stream unwrapped
_TRANSPORT_ERRORS = frozenset(
    {"ConnectError", "ReadError", "WriteError", "NetworkError", "RemoteProtocolError", "LocalProtocolError"}
)


def error_category(exc: BaseException, status: object, code: str | None, mid_stream: bool) -> str:
    name = type(exc).__name__
    if name == "CancelledError":
        return "cancelled"
    if code in _CATEGORY_BY_CODE:
        return _CATEGORY_BY_CODE[code]
    if isinstance(status, int):
        if status >= 500:
            return "server"
        return _CATEGORY_BY_STATUS.get(status, "other")
    if "Timeout" in name:
        return "timeout"
    if name in _TRANSPORT_ERRORS or "Connection" in name or isinstance(exc, ConnectionError):
        return "connection"
    if mid_stream:
        return "stream_error"
    return "other"
