"""The API endpoints the fake serves, in one table: the route of each, its body, its stream.

To add an endpoint: a payload builder (:mod:`.payloads`, :mod:`.responses_payloads`) and one
:class:`Endpoint` in :data:`ENDPOINTS`; routing (``/v1/...``, Azure ``/openai/deployments/{name}/...``)
follows from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from . import payloads, responses_payloads
from .payloads import JSON, Output, StreamPlan

ID: Final = "/{id}"
"""Suffix of a route that ends with an id (``GET /v1/models/{id}``): the route's argument."""


@dataclass(frozen=True, slots=True)
class Call:
    """What an endpoint's body is made of."""

    out: Output
    body: JSON  # the request's JSON object ({} when none)
    model: str
    argument: str | None  # the id of an ``{id}`` route, the deployment of an Azure one
    n: int  # choices asked for (``n``, at least 1)


def _messages(body: JSON) -> object:
    return body.get("messages")


def _prompt(body: JSON) -> object:
    return body.get("prompt")


def _instructions_and_input(body: JSON) -> object:
    return [body.get("instructions"), body.get("input")]


def _response(call: Call) -> JSON:
    return responses_payloads.response_json(call.out)


def _responses_stream(out: Output, include_usage: bool) -> StreamPlan:
    return responses_payloads.responses_stream(out)  # no stream_options: usage is in the closing event


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One API endpoint: its route, how its JSON body is made, and its stream if it has one."""

    method: str
    path: str  # below /v1/; ending in ``/{id}`` for a route with an id
    json: Callable[[Call], JSON]
    stream: Callable[[Output, bool], StreamPlan] | None = None
    """The stream plan, for an endpoint that streams (given the output and ``include_usage``)."""
    prompt: Callable[[JSON], object] = _instructions_and_input
    """The part of the request body that is the prompt (token count, ``prompt-cache`` key)."""
    stream_in_query: bool = False
    """Streams on ``?stream=true`` rather than on ``"stream": true`` in the body."""
    output_id_from_argument: bool = False
    """The output keeps the id the route names (``resp_<id>``) instead of a fresh one."""

    def streams(self, body: JSON, query: Mapping[str, str]) -> bool:
        if self.stream is None:
            return False
        return query.get("stream") == "true" if self.stream_in_query else body.get("stream") is True


ENDPOINTS: Final[Mapping[str, Endpoint]] = {
    "chat": Endpoint(
        "POST",
        "chat/completions",
        lambda c: payloads.chat_json(c.out, c.n),
        payloads.chat_stream,
        prompt=_messages,
    ),
    "completions": Endpoint(
        "POST",
        "completions",
        lambda c: payloads.completion_json(c.out, c.n),
        payloads.completion_stream,
        prompt=_prompt,
    ),
    "responses": Endpoint("POST", "responses", _response, _responses_stream),
    "response_get": Endpoint(
        "GET",
        "responses" + ID,
        _response,
        _responses_stream,
        stream_in_query=True,
        output_id_from_argument=True,
    ),
    "embeddings": Endpoint("POST", "embeddings", lambda c: payloads.embeddings_json(c.body, c.model)),
    "images": Endpoint("POST", "images/generations", lambda c: payloads.images_json(c.body)),
    "model": Endpoint("GET", "models" + ID, lambda c: payloads.model_json(c.argument or c.model)),
    "models": Endpoint("GET", "models", lambda c: payloads.models_json()),
    "files": Endpoint("GET", "files", lambda c: payloads.files_json()),
}
"""Endpoint name (what the script and the record speak of) -> endpoint."""

_EXACT: Final = {(e.method, e.path): name for name, e in ENDPOINTS.items() if not e.path.endswith(ID)}
_WITH_ID: Final = {
    (e.method, e.path.removesuffix(ID)): name for name, e in ENDPOINTS.items() if e.path.endswith(ID)
}


def route(method: str, path: str) -> tuple[str, str | None] | None:
    """``(endpoint, argument)`` for a path, or ``None``. The argument is an Azure deployment or an id."""
    if path.startswith("/openai/v1/"):
        path = path[len("/openai") :]
    if path.startswith("/openai/deployments/"):
        deployment, _, rest = path[len("/openai/deployments/") :].partition("/")
        endpoint = _EXACT.get((method, rest)) if method == "POST" else None
        return (endpoint, deployment) if endpoint and deployment else None
    if not path.startswith("/v1/"):
        return None
    rest = path[len("/v1/") :].rstrip("/")
    if endpoint := _EXACT.get((method, rest)):
        return endpoint, None
    prefix, _, ident = rest.partition("/")
    if ident and "/" not in ident and (endpoint := _WITH_ID.get((method, prefix))):
        return endpoint, ident
    return None
