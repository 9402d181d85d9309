"""Which kind of operation a call is: by resource method, or by HTTP path for the fallback."""

from __future__ import annotations

import re

from .operation import OperationKind

CHAT = OperationKind(operation="chat", api_type="chat_completions", stream_kind="chat")
RESPONSES = OperationKind(operation="chat", api_type="responses", stream_kind="responses")
EMBEDDINGS = OperationKind(operation="embeddings", api_type=None, stream_kind="any")
COMPLETIONS = OperationKind(operation="text_completion", api_type="completions", stream_kind="completions")
OTHER = OperationKind(operation="openai", api_type=None, stream_kind="any")

_BY_PATH = {
    ("POST", "/chat/completions"): CHAT,
    ("POST", "/responses"): RESPONSES,
    ("POST", "/embeddings"): EMBEDDINGS,
    ("POST", "/completions"): COMPLETIONS,
}
_STATIC_SEGMENT = re.compile(r"[a-z_]+")


def fallback_kind(method: str, path: str) -> OperationKind:
    return _BY_PATH.get((method, _bare_path(path)), OTHER)


def path_template(path: str) -> str:
    """``/files/file-abc123/content?x=1`` -> ``/files/{id}/content``: ids and query strings removed."""
    segments = _bare_path(path).split("/")
    return "/".join(s if not s or _STATIC_SEGMENT.fullmatch(s) else "{id}" for s in segments)


def _bare_path(path: str) -> str:
    path = path.split("?", 1)[0]
    if "://" in path:
        path = "/" + path.split("://", 1)[1].split("/", 1)[-1]
    return path.rstrip("/") or "/"
