"""Example FastAPI backend: one small agent turn per request, through the openai SDK.

Run it under auto-instrumentation so one trace shows the whole turn: the HTTP server span (FastAPI),
two ``chat {model}`` operation spans and their phases (openai-latency), the tool and the database
query (this app's own spans)::

    OPENAI_BASE_URL=http://127.0.0.1:8418/v1 OPENAI_API_KEY=sk-fake \\
    OTEL_SERVICE_NAME=example-backend \\
    opentelemetry-instrument uvicorn examples.backend.app:app --port 8080

Endpoints:

- ``GET|POST /ask?q=...&model=...&stream=true|false&tool_ms=...&db_ms=...``: one turn. A planning
  call offers the model the ``search_documents`` tool and asks it for a search; the tool runs
  (span ``execute_tool search_documents``: a search service's time, ``tool_ms``, default 120); the
  documents it found are loaded from the database (span ``SELECT documents``: a query on an
  in-memory SQLite and ``db_ms`` more, a database across the network, default 30); then the answer
  call, given the tool's result. With ``stream=true`` the answer is streamed back to the caller as
  plain text while it arrives. ``openai-latency report --by trace`` tells where the turn's time went.
- ``GET /healthz``: liveness, does not call the model.

Any request header starting with ``x-fake-`` is forwarded to both LLM calls unchanged: against the
fake server (``python -m openai_latency.fake_server``) this scripts the latency and failures of
those calls (``x-fake-ttft-ms``, ``x-fake-chunks``, ``x-fake-fail-attempts``, ...), and
``x-fake-tool-plan: search_documents`` makes its planning answer a call of the tool, as a model's
would be (without it the fake answers in words, and the search runs for the question itself). The
load generator (``python -m examples.loadgen``) uses it to mix fast, slow, retried and failing turns.

Under ``opentelemetry-instrument`` the FastAPI instrumentation is applied again, in code, with
``exclude_spans=["receive", "send"]``: one server span per request instead of one more span per
ASGI message (a streamed answer sends one per chunk). ``EXAMPLE_ASGI_MESSAGE_SPANS=true`` keeps
them. See README.md next to this file.
"""

from __future__ import annotations

import asyncio
import json
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
DEFAULT_QUESTION = "Why is the sky blue?"
TOOL_MS, DB_MS = 120.0, 30.0  # the tool's and the query's default time


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


SYSTEM = "Answer from the documents: search them first."
TOOL = "search_documents"
SEARCH_TOOL: Any = {  # a ChatCompletionFunctionToolParam (openai 1.x names it differently)
    "type": "function",
    "function": {
        "name": TOOL,
        "description": "Search the documents; the titles of the best matches.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "what to search for"}},
            "required": ["query"],
        },
    },
}
tracer = trace.get_tracer("examples.backend")

DOCUMENTS = ("Rayleigh scattering", "Why sunsets are red")
_documents = sqlite3.connect(":memory:", check_same_thread=False)
_documents.execute("CREATE TABLE documents (id INTEGER PRIMARY KEY, title TEXT)")
_documents.executemany("INSERT INTO documents (title) VALUES (?)", [(title,) for title in DOCUMENTS])


class AskBody(BaseModel):
    q: str = DEFAULT_QUESTION
    model: str | None = None
    stream: bool = False
    tool_ms: float = TOOL_MS
    db_ms: float = DB_MS


def forwarded_headers(request: Request) -> dict[str, str]:
    return {k: v for k, v in request.headers.items() if k.lower().startswith(FORWARDED_PREFIX)}


def error_response(exc: openai.APIError) -> JSONResponse:
    status = exc.status_code if isinstance(exc, openai.APIStatusError) else 502
    return JSONResponse(
        status_code=502 if status < 400 else status,
        content={"error": type(exc).__name__, "detail": str(exc)},
    )


def search_call(plan: Any) -> Any:
    """The planning answer's call of the tool (``.id``, ``.function.arguments``), or None when the
    model answered in words."""
    message = plan.choices[0].message if plan.choices else None
    for call in (message.tool_calls if message else None) or ():
        function = getattr(call, "function", None)  # openai >= 2 also has custom tool calls
        if function is not None and function.name == TOOL:
            return call
    return None


def search_query(call: Any, question: str) -> str:
    """The query the model wrote, or the question itself."""
    try:
        arguments = json.loads(call.function.arguments) if call is not None else None
    except json.JSONDecodeError:
        arguments = None
    query = arguments.get("query") if isinstance(arguments, dict) else None
    return query if isinstance(query, str) and query else question


async def search_documents(query: str, tool_ms: float, call_id: str | None) -> list[int]:
    """The tool: a search service's time (``tool_ms``), and the ids of the documents it found (this
    stand-in finds every document, whatever the query)."""
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": TOOL,
        "gen_ai.tool.type": "function",
    }
    if call_id:
        attributes["gen_ai.tool.call.id"] = call_id
    with tracer.start_as_current_span(f"execute_tool {TOOL}", attributes=attributes):
        await asyncio.sleep(tool_ms / 1000)
    return list(range(1, len(DOCUMENTS) + 1))


async def load_documents(ids: list[int], db_ms: float) -> list[str]:
    """The documents' titles from the database: the query on SQLite, and ``db_ms`` more (a database
    across the network)."""
    sql = f"SELECT title FROM documents WHERE id IN ({', '.join('?' * len(ids))})"
    attributes = {
        "db.system.name": "sqlite",
        "db.operation.name": "SELECT",
        "db.collection.name": "documents",
        "db.query.text": sql,
    }
    with tracer.start_as_current_span("SELECT documents", kind=SpanKind.CLIENT, attributes=attributes):
        titles = [title for (title,) in _documents.execute(sql, ids)]
        await asyncio.sleep(db_ms / 1000)
    return titles


def tool_result(call: Any, titles: list[str]) -> list[dict[str, Any]]:
    """The messages that hand the tool's result to the answer call."""
    content = json.dumps({"documents": titles})
    if call is None:  # the model did not ask (a server that ignores tool_choice): the result as context
        return [{"role": "user", "content": f"Documents found: {content}"}]
    asked = {
        "id": call.id,
        "type": "function",
        "function": {"name": TOOL, "arguments": call.function.arguments},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [asked]},
        {"role": "tool", "tool_call_id": call.id, "content": content},
    ]


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


async def turn(
    request: Request, question: str, model: str | None, stream: bool, tool_ms: float, db_ms: float
) -> Any:
    """Plan (a model call that asks for a search), search (the tool), read (a database query), then
    answer (a second model call, given the tool's result). Every ``x-fake-*`` header goes to both
    calls; a failed planning call ends the turn."""
    model = model or DEFAULT_MODEL
    headers = forwarded_headers(request)
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    try:
        plan = await client().chat.completions.create(
            model=model, messages=messages, tools=[SEARCH_TOOL], tool_choice="required", extra_headers=headers
        )
    except openai.APIError as exc:
        return error_response(exc)
    call = search_call(plan)
    ids = await search_documents(search_query(call, question), tool_ms, call.id if call else None)
    titles = await load_documents(ids, db_ms)
    messages += tool_result(call, titles)
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
        "documents": titles,
        "usage": completion.usage.model_dump() if completion.usage else None,
    }


@app.get("/ask")
async def ask_get(
    request: Request,
    q: str = DEFAULT_QUESTION,
    model: str | None = None,
    stream: bool = False,
    tool_ms: float = TOOL_MS,
    db_ms: float = DB_MS,
) -> Any:
    return await turn(request, q, model, stream, tool_ms, db_ms)


@app.post("/ask")
async def ask_post(request: Request, body: AskBody) -> Any:
    return await turn(request, body.q, body.model, body.stream, body.tool_ms, body.db_ms)


@app.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}
