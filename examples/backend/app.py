"""Example FastAPI backend that calls an OpenAI-compatible server through the openai SDK.

Run it under auto-instrumentation so one trace shows the HTTP server span (FastAPI), the
``chat {model}`` operation span and its phases (openai-latency)::

    OPENAI_BASE_URL=http://127.0.0.1:8418/v1 OPENAI_API_KEY=sk-fake \\
    OTEL_SERVICE_NAME=example-backend \\
    opentelemetry-instrument uvicorn examples.backend.app:app --port 8080

Endpoints:

- ``GET|POST /ask?q=...&model=...&stream=true|false``: one chat completion. With ``stream=true``
  the answer is streamed back to the caller as plain text while it arrives.
- ``GET /turn?q=...&model=...&stream=...&tool_ms=...&db_ms=...``: a small agent turn: a planning
  call, a tool (``execute_tool search_documents``, ``tool_ms`` long), a database query (``SELECT
  documents`` on an in-memory SQLite, ``db_ms`` long), then the answer as ``/ask`` gives it.
  ``openai-latency report --by trace`` tells where its time went.
- ``GET /healthz``: liveness, does not call the model.

Any request header starting with ``x-fake-`` is forwarded to the LLM server unchanged: against
the fake server (``python -m openai_latency.fake_server``) this scripts the latency and failures
of that one call (``x-fake-ttft-ms``, ``x-fake-chunks``, ``x-fake-fail-attempts``, ...). The
load generator (``python -m examples.loadgen``) uses it to mix fast, slow, retried and failing
calls.

Under ``opentelemetry-instrument`` the FastAPI instrumentation is applied again, in code, with
``exclude_spans=["receive", "send"]``: one server span per request instead of one more span per
ASGI message (a streamed answer sends one per chunk). ``EXAMPLE_ASGI_MESSAGE_SPANS=true`` keeps
them. See README.md next to this file.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator
from typing import Any

import fastapi
import openai
from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse, StreamingResponse
from opentelemetry import trace
from opentelemetry.trace import SpanKind
from pydantic import BaseModel

DEFAULT_MODEL = os.environ.get("EXAMPLE_DEFAULT_MODEL", "gpt-4o-mini")
FORWARDED_PREFIX = "x-fake-"


def without_asgi_message_spans() -> None:
    """Re-applies ``opentelemetry-instrument``'s FastAPI instrumentation without the ASGI
    ``http send`` / ``http receive`` spans, before the app is created.

    Those spans (one per ASGI message: a streamed answer sends one per chunk) would outnumber the
    LLM call's own spans in the trace, and Jaeger's critical path would run through them. Nothing
    happens when the FastAPI instrumentation is not active (plain ``uvicorn``, or disabled with
    ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=fastapi``), nor with ``EXAMPLE_ASGI_MESSAGE_SPANS=true``.
    """
    if os.environ.get("EXAMPLE_ASGI_MESSAGE_SPANS", "").strip().lower() == "true":
        return
    try:
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
    except ImportError:
        return
    instrumentor = FastAPIInstrumentor()  # the instance opentelemetry-instrument used (a singleton)
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()
        instrumentor.instrument(exclude_spans=["receive", "send"])


without_asgi_message_spans()
# fastapi.FastAPI looked up now: the class the instrumentation put there, with its current settings
app = fastapi.FastAPI(title="openai-latency example backend")

_client: openai.AsyncOpenAI | None = None


def client() -> openai.AsyncOpenAI:
    """One shared async client (connection pool reuse shows up as connection.reused=true)."""
    global _client
    if _client is None:
        _client = openai.AsyncOpenAI(
            base_url=os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8418/v1"),
            api_key=os.environ.get("OPENAI_API_KEY", "sk-fake-demo"),
            max_retries=int(os.environ.get("EXAMPLE_MAX_RETRIES", "2")),
            timeout=float(os.environ.get("EXAMPLE_TIMEOUT_S", "60")),
        )
    return _client


class AskBody(BaseModel):
    q: str = "Why is the sky blue?"
    model: str | None = None
    stream: bool = False


def forwarded_headers(request: Request) -> dict[str, str]:
    return {k: v for k, v in request.headers.items() if k.lower().startswith(FORWARDED_PREFIX)}


def error_response(exc: openai.APIError) -> JSONResponse:
    status = exc.status_code if isinstance(exc, openai.APIStatusError) else 502
    return JSONResponse(
        status_code=502 if status < 400 else status,
        content={"error": type(exc).__name__, "detail": str(exc)},
    )


async def stream_answer(stream: Any) -> AsyncIterator[bytes]:
    """Relay the chunks of an already started stream to the HTTP caller."""
    try:
        async for chunk in stream:
            for choice in chunk.choices:
                if choice.delta and choice.delta.content:
                    yield choice.delta.content.encode()
    except openai.APIError as exc:  # failure mid-stream: tell the caller in-band
        yield f"\n[stream error: {type(exc).__name__}]".encode()
    finally:
        await stream.close()


async def answer(request: Request, question: str, model: str | None, stream: bool) -> Any:
    model = model or DEFAULT_MODEL
    headers = forwarded_headers(request)
    messages: list[Any] = [{"role": "user", "content": question}]
    try:
        if stream:
            started = await client().chat.completions.create(
                model=model, messages=messages, stream=True, extra_headers=headers
            )
            return StreamingResponse(stream_answer(started), media_type="text/plain; charset=utf-8")
        completion = await client().chat.completions.create(
            model=model, messages=messages, extra_headers=headers
        )
    except openai.APIError as exc:
        return error_response(exc)
    if not completion.choices:
        raise HTTPException(status_code=502, detail="no choices in the completion")
    return {
        "model": completion.model,
        "answer": completion.choices[0].message.content,
        "usage": completion.usage.model_dump() if completion.usage else None,
    }


@app.get("/ask")
async def ask_get(
    request: Request, q: str = "Why is the sky blue?", model: str | None = None, stream: bool = False
) -> Any:
    return await answer(request, q, model, stream)


@app.post("/ask")
async def ask_post(request: Request, body: AskBody) -> Any:
    return await answer(request, body.q, body.model, body.stream)


_documents = sqlite3.connect(":memory:", check_same_thread=False)
_documents.executescript(
    "CREATE TABLE documents (id INTEGER PRIMARY KEY, title TEXT);"
    "INSERT INTO documents (title) VALUES ('Rayleigh scattering'), ('Why sunsets are red');"
)
SEARCH = "SELECT id, title FROM documents WHERE title LIKE ?"


@app.get("/turn")
async def turn(
    request: Request,
    q: str = "Why is the sky blue?",
    model: str | None = None,
    stream: bool = False,
    tool_ms: float = 120.0,
    db_ms: float = 30.0,
) -> Any:
    """A small agent turn: plan (a model call), a tool, a query, then the answer (a second call).
    Every ``x-fake-*`` header goes to both calls."""
    tracer = trace.get_tracer("examples.backend")
    messages: list[Any] = [{"role": "system", "content": "Plan a search."}, {"role": "user", "content": q}]
    try:
        await client().chat.completions.create(
            model=model or DEFAULT_MODEL, messages=messages, extra_headers=forwarded_headers(request)
        )
    except openai.APIError as exc:
        return error_response(exc)
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_documents"}
    with tracer.start_as_current_span("execute_tool search_documents", attributes=tool):
        await asyncio.sleep(tool_ms / 1000)  # a search service's time
    query = {"db.system.name": "sqlite", "db.operation.name": "SELECT", "db.query.text": SEARCH}
    with tracer.start_as_current_span("SELECT documents", kind=SpanKind.CLIENT, attributes=query):
        titles = [row[1] for row in _documents.execute(SEARCH, ("%%",))]
        await asyncio.sleep(db_ms / 1000)  # a database across the network
    return await answer(request, f"{q} (documents: {'; '.join(titles)})", model, stream)


@app.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}
