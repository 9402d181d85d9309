"""Which kind of operation a call is: by resource method, or by HTTP path for the fallback.

The fallback at ``SyncAPIClient.request`` sees the SDK's request path (``/chat/completions``,
``/files/file-abc``, or whatever a user passes to ``client.post``). Paths are matched without their
query string and without the prefixes OpenAI-compatible servers put in front of the API path:
``/v1``, Azure's ``/openai`` and ``/openai/deployments/{deployment}``.
"""

from __future__ import annotations

import re

from ..model import OperationKind

CHAT = OperationKind(operation="chat", api_type="chat_completions", stream_kind="chat")
RESPONSES = OperationKind(operation="chat", api_type="responses", stream_kind="responses")
EMBEDDINGS = OperationKind(operation="embeddings", api_type=None, stream_kind="any")
COMPLETIONS = OperationKind(operation="text_completion", api_type="completions", stream_kind="completions")
OTHER = OperationKind(operation="openai", api_type=None, stream_kind="any")

_BY_PATH = {
    ("POST", "/chat/completions"): CHAT,
    ("POST", "/responses"): RESPONSES,
    ("GET", "/responses/{id}"): RESPONSES,
    ("POST", "/embeddings"): EMBEDDINGS,
    ("POST", "/completions"): COMPLETIONS,
}
_STATIC_SEGMENT = re.compile(r"[a-z_]+|v\d+")
"""API path words (``chat``, ``vector_stores``, ``v1``); anything else is an id."""
_ID_AFTER = frozenset({"deployments", "models"})
"""Collections whose next segment is always an id, even a word-like one (``/models/davinci``)."""
_API_PREFIX = re.compile(r"(?:/openai(?=/))?(?:/v\d+(?=/))?(?:/deployments/[^/]+(?=/))?")


def fallback_kind(method: str, path: str) -> OperationKind:
    return _BY_PATH.get((method, path_template(api_path(path))), OTHER)


def api_path(path: str) -> str:
    """``/openai/deployments/gpt4/chat/completions?api-version=x`` -> ``/chat/completions``."""
    bare = _bare_path(path)
    rest = bare[_API_PREFIX.match(bare).end() :]  # type: ignore[union-attr]  # all-optional: always matches
    return rest if rest.startswith("/") else bare


def path_template(path: str) -> str:
    """``/files/file-abc123/content?x=1`` -> ``/files/{id}/content``: ids and query strings removed."""
    segments = _bare_path(path).split("/")
    out: list[str] = []
    previous = ""
    for segment in segments:
        if segment and (previous in _ID_AFTER or not _STATIC_SEGMENT.fullmatch(segment)):
            segment = "{id}"
        out.append(segment)
        previous = segment
    return "/".join(out)


def _bare_path(path: str) -> str:
    path = path.split("?", 1)[0].split("#", 1)[0]
    if "://" in path:
        path = "/" + path.split("://", 1)[1].partition("/")[2]
    return path.rstrip("/") or "/"
