"""The fake OpenAI server, driven over real loopback sockets by the openai SDK and by ``http.client``."""

from __future__ import annotations

import base64
import http.client
import json
import os
import random
import ssl
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai
import pytest

from openai_latency.fake_server import (
    DEFAULT_RATE_LIMITS,
    FakeServer,
    RequestRecord,
    ScriptError,
    SpawnedServer,
)
from openai_latency.fake_server.endpoints import ENDPOINTS, ID, route
from tests.support.fake_server_checks import (
    MESSAGES,
    MS,
    SRC,
    Lateness,
    fake,
    gaps_ms,
    raw,
    run_concurrently,
)
from tests.support.retry import retry_timing


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    with FakeServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def timing_server() -> Iterator[SpawnedServer]:
    with FakeServer.spawn() as srv:
        yield srv


@pytest.fixture
def client(server: FakeServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0) as sdk:
        yield sdk


# -- endpoints -------------------------------------------------------------------------------------


def test_chat_json(server: FakeServer, client: openai.OpenAI) -> None:
    raw_response = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=MESSAGES, n=2)
    completion = raw_response.parse()
    record = server.record(raw_response.headers["x-request-id"])
    assert completion.model == "gpt-4o"
    assert [c.message.content for c in completion.choices] == ["tok0 tok1 tok2 tok3 tok4"] * 2
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (3, 10)
    assert raw_response.headers["openai-version"] == "2020-10-01"
    assert int(raw_response.headers["openai-processing-ms"]) >= 0
    for key, value in DEFAULT_RATE_LIMITS.items():
        assert raw_response.headers[f"x-{key}"] == value
    assert record.method == "POST" and record.path == "/v1/chat/completions"
    assert record.body["model"] == "gpt-4o" and record.attempt == 0
    assert record.status == 200 and record.outcome == "ok"
    assert record.headers_sent_ns is not None and record.finished_ns is not None
    assert record.received_ns <= record.headers_sent_ns <= record.finished_ns
    assert [kind for kind, _ in record.events] == ["body"]
    assert "authorization" not in record.headers and record.headers["x-stainless-retry-count"] == "0"


def test_chat_stream_with_usage(server: FakeServer, client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "tok0 tok1 tok2 tok3 tok4"
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 5
    record = server.last_record()
    kinds = [kind for kind, _ in record.events]
    assert kinds == ["role", *["content"] * 5, "finish", "usage", "done"]
    assert len(record.content_event_ns) == 5 and record.first_content_ns == record.events[1][1]
    assert record.last_content_ns == record.events[5][1]
    assert record.outcome == "ok"


def test_chat_usage_modes_and_tool_call(client: openai.OpenAI) -> None:
    chunks = list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))
    assert all(c.usage is None for c in chunks)  # auto: no include_usage, no usage chunk
    headers = fake(usage="always", tool_call=1, chunks=3)
    chunks = list(
        client.chat.completions.create(model="m", messages=MESSAGES, stream=True, extra_headers=headers)
    )
    assert chunks[-1].usage is not None
    arguments = "".join(
        (call.function.arguments or "") if call.function else ""
        for c in chunks
        if c.choices
        for call in c.choices[0].delta.tool_calls or []
    )
    assert json.loads(arguments) == {"text": "tok0 tok1 tok2"}
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    completion = client.chat.completions.create(model="m", messages=MESSAGES, extra_headers=headers)
    call = completion.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert json.loads(call.function.arguments) == {"text": "tok0 tok1 tok2"}  # type: ignore[union-attr]
    never = client.chat.completions.create(model="m", messages=MESSAGES, extra_headers=fake(usage="never"))
    assert never.usage is None


def test_responses(server: FakeServer, client: openai.OpenAI) -> None:
    response = client.responses.create(model="gpt-4.1-mini", input="one two three four")
    assert response.output_text == "tok0 tok1 tok2 tok3 tok4" and response.status == "completed"
    assert response.usage is not None and response.usage.input_tokens == 4
    events = list(client.responses.create(model="gpt-4.1-mini", input="hi", stream=True))
    types = [e.type for e in events]
    assert types == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * 5,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].response.usage is not None  # type: ignore[union-attr]
    record = server.last_record()
    assert [kind for kind, _ in record.events] == [f"event:{t}" for t in types]
    assert len(record.content_event_ns) == 5

    failed = list(
        client.responses.create(
            model="m", input="x", stream=True, extra_headers=fake(response_status="failed")
        )
    )
    assert failed[-1].type == "response.failed" and failed[-1].response.error is not None
    incomplete = client.responses.create(
        model="m", input="x", extra_headers=fake(response_status="incomplete")
    )
    assert incomplete.status == "incomplete"
    errored = list(
        client.responses.create(model="m", input="x", stream=True, extra_headers=fake(stream_error_after=2))
    )
    assert errored[-1].type == "error" and errored[-1].sequence_number == 6
    assert server.last_record().events[-1][0] == "error_event" and server.last_record().outcome == "error"

    assert client.responses.retrieve("resp_abc123").id == "resp_abc123"
    response_obj, body = raw(server, "GET", "/v1/responses/resp_abc123?stream=true")
    assert response_obj.getheader("content-type", "").startswith("text/event-stream")
    assert body.count(b"event: response.output_text.delta\n") == 5


def test_other_endpoints(server: FakeServer, client: openai.OpenAI) -> None:
    embeddings = client.embeddings.create(model="text-embedding-3-small", input=["a b", "c"], dimensions=4)
    assert len(embeddings.data) == 2 and len(embeddings.data[1].embedding) == 4
    assert server.last_record().body["encoding_format"] == "base64"  # the SDK's default; it decodes
    floats = client.embeddings.create(model="e", input="a", encoding_format="float")
    assert len(floats.data[0].embedding) == 8 and floats.usage.prompt_tokens == 1
    _, body = raw(server, "POST", "/v1/embeddings", {"model": "e", "input": "x", "encoding_format": "base64"})
    vector = json.loads(body)["data"][0]["embedding"]
    assert struct.unpack("<8f", base64.b64decode(vector)) == pytest.approx(floats.data[0].embedding)

    assert (
        client.completions.create(model="davinci-002", prompt="hi").choices[0].text
        == "tok0 tok1 tok2 tok3 tok4"
    )
    pieces = list(client.completions.create(model="davinci-002", prompt="hi", stream=True))
    assert "".join(p.choices[0].text for p in pieces) == "tok0 tok1 tok2 tok3 tok4"
    assert [k for k, _ in server.last_record().events] == [*["text"] * 5, "finish", "done"]

    assert "gpt-4o-mini" in [m.id for m in client.models.list()]
    assert client.models.retrieve("ft:gpt-4o:me").id == "ft:gpt-4o:me"
    image = client.images.generate(model="gpt-image-1", prompt="a cat")
    assert base64.b64decode(image.data[0].b64_json or "").startswith(b"\x89PNG")  # type: ignore[index]
    assert [f.id for f in client.files.list()] == ["file-fake0", "file-fake1"]
    with pytest.raises(openai.NotFoundError):
        client.post("/nowhere", cast_to=object)
    assert server.last_record().status == 404


def test_azure_deployment_path(server: FakeServer) -> None:
    azure = openai.AzureOpenAI(
        azure_endpoint=server.origin, api_version="2024-10-21", api_key="azure-secret", max_retries=0
    )
    completion = azure.chat.completions.create(model="my-deployment", messages=MESSAGES)
    record = server.last_record()
    assert record.path == "/openai/deployments/my-deployment/chat/completions"
    assert record.query == {"api-version": "2024-10-21"} and completion.model == "my-deployment"
    assert "api-key" not in record.headers


# -- scripted latency ------------------------------------------------------------------------------


def test_scripted_timings(timing_server: SpawnedServer) -> None:
    """All the timing scenarios at once, each on its own client: the log shows what was scripted.

    The server runs in its own process, so the client threads cannot delay its writes.
    """
    server = timing_server

    def sdk() -> openai.OpenAI:
        return openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)

    # Each scenario: one run with its lower bounds (the server never writes early: deterministic,
    # checked once), then the upper bounds (scheduling noise on a shared machine: a few runs, one
    # must be tight), by tests.support.retry.
    def delay_before_headers() -> Lateness:
        response = sdk().chat.completions.with_raw_response.create(
            model="m", messages=MESSAGES, extra_headers=fake(delay_ms=100)
        )
        record = server.record(response.headers["x-request-id"])
        assert record.headers_sent_ns is not None
        late = Lateness()
        late.at_least((record.headers_sent_ns - record.received_ns) / MS, 100, "headers")
        late.at_least(int(response.headers["openai-processing-ms"]), 100, "openai-processing-ms")
        return late

    def stream_pacing() -> Lateness:
        headers = fake(ttft_ms=120, chunks=4, chunk_delay_ms=40, stall_after=2, stall_ms=80)
        with sdk().chat.completions.with_streaming_response.create(
            model="m", messages=MESSAGES, stream=True, extra_headers=headers
        ) as response:
            assert len(list(response.parse())) == 6
            record = server.record(response.headers["x-request-id"])
        role_ns = record.event_ns("role")[0]
        late = Lateness()
        late.at_least((record.content_event_ns[0] - role_ns) / MS, 120, "ttft")
        first, stalled, last = gaps_ms(record.content_event_ns)
        late.at_least(first, 40, "first gap")
        late.at_least(last, 40, "last gap")
        late.at_least(stalled, 120, "chunk delay + stall")
        return late

    def jitter_is_reproducible() -> Lateness:
        headers = fake(chunks=6, chunk_delay_ms=40, jitter_ms=30, seed=7)
        runs = []
        for _ in range(2):
            with sdk().chat.completions.with_streaming_response.create(
                model="m", messages=MESSAGES, stream=True, extra_headers=headers
            ) as response:
                list(response.parse())
                runs.append(gaps_ms(server.record(response.headers["x-request-id"]).content_event_ns))
        rng = random.Random(7)  # documented: each chunk delay += uniform(-jitter, +jitter), seeded
        expected = [max(0.0, 40 + rng.uniform(-30, 30)) for _ in range(5)]
        late = Lateness()
        for gaps in runs:
            for got, want in zip(gaps, expected, strict=True):
                late.at_least(got, want, f"jittered gaps {gaps}", below=0.5)
        return late

    def body_delay_checked() -> Lateness:
        response = sdk().chat.completions.with_raw_response.create(
            model="m", messages=MESSAGES, extra_headers=fake(body_delay_ms=90)
        )
        record = server.record(response.headers["x-request-id"])
        assert record.headers_sent_ns is not None
        late = Lateness()
        late.at_least((record.event_ns("body")[0] - record.headers_sent_ns) / MS, 90, "body after headers")
        return late

    start = time.monotonic()
    scenarios = (delay_before_headers, stream_pacing, jitter_is_reproducible, body_delay_checked)
    run_concurrently(*(lambda s=s: retry_timing(s, Lateness.check) for s in scenarios))
    assert time.monotonic() - start < 10


def test_concurrent_requests_do_not_queue(server: FakeServer) -> None:
    sdk = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    server.clear()

    def call(_: int) -> None:
        sdk.chat.completions.create(model="m", messages=MESSAGES, extra_headers=fake(delay_ms=300))

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(call, range(6)))
    records = server.records()
    assert len(records) == 6 and len({r.connection_id for r in records}) == 6
    # every request was in the server before the first one was answered
    assert max(r.received_ns for r in records) < min(r.headers_sent_ns or 0 for r in records)


def test_keep_alive_reuse(server: FakeServer, client: openai.OpenAI) -> None:
    client.models.list()
    client.models.list()
    first, second = server.records()[-2:]
    assert first.connection_id == second.connection_id
    assert second.connection_request_index == first.connection_request_index + 1
    with openai.OpenAI(base_url=server.base_url, api_key="sk-test") as other:
        other.models.list()
    assert server.last_record().connection_id != second.connection_id
    assert server.last_record().connection_request_index == 0


# -- failures --------------------------------------------------------------------------------------


def test_fail_attempts_then_retry(server: FakeServer) -> None:
    sdk = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=2)
    headers = fake(fail_attempts=1, retry_after_ms=60)
    completion = sdk.chat.completions.with_raw_response.create(
        model="m", messages=MESSAGES, extra_headers=headers
    )
    assert completion.retries_taken == 1
    failed, succeeded = server.records()[-2:]
    assert (failed.attempt, failed.status, failed.outcome) == (0, 429, "error")
    assert (succeeded.attempt, succeeded.status, succeeded.outcome) == (1, 200, "ok")
    assert failed.finished_ns is not None
    # the SDK obeyed retry-after-ms (less a little: the server logs a moment after the client has the bytes)
    assert (succeeded.received_ns - failed.finished_ns) / MS >= 50
    response_obj, _ = raw(
        server, "POST", "/v1/chat/completions", {"model": "m"}, fake(fail_attempts=1, retry_after=2)
    )
    assert response_obj.status == 429 and response_obj.getheader("retry-after") == "2"


@pytest.mark.parametrize(
    ("error", "exception", "status"),
    [
        ("invalid_api_key", openai.AuthenticationError, 401),
        ("model_not_found", openai.NotFoundError, 404),
        ("context_length_exceeded", openai.BadRequestError, 400),
        ("rate_limit_exceeded", openai.RateLimitError, 429),
        ("insufficient_quota", openai.RateLimitError, 429),
        ("server_error", openai.InternalServerError, 500),
        ("overloaded", openai.InternalServerError, 503),
    ],
)
def test_error_bodies(
    server: FakeServer, client: openai.OpenAI, error: str, exception: type[openai.APIStatusError], status: int
) -> None:
    with pytest.raises(exception) as info:
        client.chat.completions.create(model="gpt-4o", messages=MESSAGES, extra_headers=fake(error=error))
    assert info.value.status_code == status and info.value.code == error
    assert info.value.request_id == server.last_record().request_id
    assert isinstance(info.value.body, dict) and set(info.value.body) == {"message", "type", "param", "code"}


def test_forced_status_and_bad_script(client: openai.OpenAI) -> None:
    with pytest.raises(openai.APIStatusError) as info:
        client.models.list(extra_headers=fake(status=418))
    assert info.value.status_code == 418
    with pytest.raises(openai.BadRequestError, match="x-fake-delay-ms"):
        client.models.list(extra_headers=fake(delay_ms="soon"))
    with pytest.raises(openai.BadRequestError, match="unknown script key"):
        client.models.list(extra_headers={"x-fake-no-such-key": "1"})


def test_stream_faults(server: FakeServer, client: openai.OpenAI) -> None:
    received: list[str] = []
    # openai 3 wraps the transport's error in APIConnectionError; 1.x/2.x let httpx's through
    with pytest.raises(Exception, match=r"Connection error|peer closed connection") as raised:
        for chunk in client.chat.completions.create(
            model="m", messages=MESSAGES, stream=True, extra_headers=fake(disconnect_after=2)
        ):
            received.append(chunk.choices[0].delta.content or "")
    assert type(raised.value).__name__ in ("APIConnectionError", "RemoteProtocolError")
    assert received == ["", "tok0", " tok1"]
    record = server.last_record()
    assert record.outcome == "disconnected" and [k for k, _ in record.events][-1] == "disconnect"
    assert len(record.content_event_ns) == 2

    with pytest.raises(json.JSONDecodeError):
        list(
            client.chat.completions.create(
                model="m", messages=MESSAGES, stream=True, extra_headers=fake(malformed_after=1)
            )
        )
    assert server.last_record().events[-1][0] == "malformed" and server.last_record().outcome == "error"

    with pytest.raises(openai.APIError, match="server had an error"):
        list(
            client.chat.completions.create(
                model="m", messages=MESSAGES, stream=True, extra_headers=fake(stream_error_after=3)
            )
        )
    assert server.last_record().events[-1][0] == "error_event"


def test_client_closing_mid_stream_is_noticed(server: FakeServer, client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="m", messages=MESSAGES, stream=True, extra_headers=fake(chunks=20, chunk_delay_ms=300)
    )
    next(stream), next(stream)
    closed_ns = time.perf_counter_ns()
    stream.close()
    record = server.last_record(wait=2.0)
    assert record.outcome == "client_closed" and len(record.content_event_ns) == 1
    # noticed while sleeping before the next chunk, not when that chunk's write fails
    assert record.finished_ns is not None and (record.finished_ns - closed_ns) / MS < 150


# -- process, clocks, transport --------------------------------------------------------------------


def test_spawned_server_shares_the_clock() -> None:
    with FakeServer.spawn(defaults={"chunks": 3, "chunk-delay-ms": 20}) as handle:
        sdk = openai.OpenAI(base_url=handle.base_url, api_key="sk-secret-value", max_retries=0)
        before = time.perf_counter_ns()
        with sdk.chat.completions.with_streaming_response.create(
            model="m", messages=MESSAGES, stream=True
        ) as response:
            texts = [c.choices[0].delta.content for c in response.parse() if c.choices]
            request_id = response.headers["x-request-id"]
        after = time.perf_counter_ns()
        assert texts == ["", "tok0", " tok1", " tok2", None]
        record = handle.record(request_id)
        assert isinstance(record, RequestRecord) and handle.records()[-1] == record
        assert before < record.received_ns < record.content_event_ns[-1] < after
        assert gaps_ms(record.content_event_ns)[0] >= 20
        assert "authorization" not in record.headers
        _, log_json = raw_spawned(handle.port, "/_fake/log")
        assert b"sk-secret-value" not in log_json
        handle.clear()
        assert handle.records() == []


def raw_spawned(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path)
    response = conn.getresponse()
    return response.status, response.read()


def test_raw_http_details(server: FakeServer) -> None:
    headers = {
        **fake(processing_ms=1234, ratelimit_remaining_tokens=42, chunks=2),
        "authorization": "Bearer sk-secret",
        "cookie": "a=b",
    }
    response, body = raw(server, "POST", "/v1/chat/completions", {"model": "m", "stream": True}, headers)
    assert response.status == 200 and response.getheader("transfer-encoding") == "chunked"
    assert response.getheader("openai-processing-ms") == "1234"
    assert response.getheader("x-ratelimit-remaining-tokens") == "42"
    assert response.getheader("x-request-id", "").startswith("req_")
    assert body.endswith(b"data: [DONE]\n\n")
    record = server.last_record()
    assert "cookie" not in record.headers and "authorization" not in record.headers
    assert "sk-secret" not in json.dumps([r.to_dict() for r in server.records()])
    response, body = raw(server, "DELETE", "/v1/chat/completions")
    assert response.status == 404 and json.loads(body)["error"]["message"].startswith("Invalid URL")
    response, _ = raw(server, "GET", "/_fake/log/req_unknown")
    assert response.status == 404


def test_defaults_and_clear() -> None:
    with FakeServer(defaults={"chunks": 2, "finish_reason": "length"}) as srv:
        sdk = openai.OpenAI(base_url=srv.base_url, api_key="sk-test", max_retries=0)
        completion = sdk.chat.completions.create(model="m", messages=MESSAGES)
        assert completion.choices[0].message.content == "tok0 tok1"
        assert completion.choices[0].finish_reason == "length"
        chunked = sdk.chat.completions.create(model="m", messages=MESSAGES, extra_headers=fake(chunks=3))
        assert chunked.choices[0].message.content == "tok0 tok1 tok2"
        assert len(srv.records()) == 2
        srv.clear()
        assert srv.records() == []
        with pytest.raises(LookupError):
            srv.last_record()
    with pytest.raises(ScriptError):
        FakeServer(defaults={"delay-ms": "-1"})
    with pytest.raises(ScriptError):
        FakeServer(defaults={"bogus": 1})


def test_tls(tmp_path: Any) -> None:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with FakeServer(ssl_context=server_context) as srv:
        assert srv.base_url.startswith("https://")
        http_client = openai.DefaultHttpxClient(verify=ssl.create_default_context(cafile=str(ca_file)))
        sdk = openai.OpenAI(base_url=srv.base_url, api_key="sk-test", http_client=http_client, max_retries=0)
        chunks = list(sdk.chat.completions.create(model="m", messages=MESSAGES, stream=True))
        assert len(chunks) == 7 and srv.last_record().outcome == "ok"


async def test_async_client_stream(server: FakeServer) -> None:
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0) as sdk:
        stream = await sdk.chat.completions.create(
            model="m", messages=MESSAGES, stream=True, extra_headers=fake(chunk_delay_ms=5)
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream])
    assert text == "tok0 tok1 tok2 tok3 tok4"


def test_cli_rejects_bad_values() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "openai_latency.fake_server", "--port", "0", "--chunks", "many"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])},
    )
    assert result.returncode == 2 and "x-fake-chunks" in result.stderr


def test_records_are_copies_and_thread_safe(server: FakeServer, client: openai.OpenAI) -> None:
    stop = threading.Event()
    seen: list[int] = []

    def reader() -> None:
        while not stop.is_set():
            seen.append(len(server.records(wait=0)))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(5):
            list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))
    finally:
        stop.set()
        thread.join()
    record = server.last_record()
    record.events.clear()
    assert len(server.last_record().events) == 8 and seen


def test_every_nth_request_gets_the_override_and_so_do_its_retries() -> None:
    defaults = {"every": "2:fail-attempts=2,7:error=invalid_api_key", "retry-after-ms": "1"}
    with FakeServer(defaults=defaults) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-x", max_retries=3)
        outcomes = []
        for number in range(1, 5):
            traceparent = f"00-{number:032x}-{number:016x}-01"
            try:
                raw = client.chat.completions.with_raw_response.create(
                    model="m",
                    messages=[{"role": "user", "content": "hi"}],
                    extra_headers={"traceparent": traceparent},
                )
                outcomes.append(raw.retries_taken)
            except openai.AuthenticationError:
                outcomes.append("401")
        # requests 2 and 4: both failing attempts (the retries matched by trace id)
        assert outcomes == [0, 2, 0, 2]
        # without a traceparent a retry is not matched to its request: it gets no override
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])  # number 5
        raw = client.chat.completions.with_raw_response.create(
            model="m", messages=[{"role": "user", "content": "x"}]
        )
        assert raw.retries_taken == 1  # number 6: only its first attempt failed
        with pytest.raises(openai.AuthenticationError):  # number 7
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])


def test_every_rejects_bad_rules() -> None:
    for value in (
        "x:delay-ms=1",
        "0:delay-ms=1",
        "2:nope=1",
        "2:delay-ms=abc",
        "2:every=1:delay-ms=1",
        "2delay",
    ):
        with pytest.raises(ScriptError):
            FakeServer(defaults={"every": value})


def test_prompt_cache_reports_cached_tokens_for_a_repeated_prompt() -> None:
    with FakeServer(defaults={"prompt-cache": "1"}) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-x")
        usage = []
        for content in ("one two three", "one two three", "other"):
            result = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": content}]
            )
            assert result.usage is not None and result.usage.prompt_tokens_details is not None
            usage.append((result.usage.prompt_tokens, result.usage.prompt_tokens_details.cached_tokens))
        # the repeated prompt is a hit: all of its input tokens cached; a new prompt is a miss
        assert usage[0][1] == 0 and usage[1] == (usage[0][0], usage[0][0]) and usage[2][1] == 0


def test_the_endpoint_table_is_the_routing(server: FakeServer) -> None:
    """Every endpoint of the table is reached at its route (and, for POST, under an Azure deployment),
    and only with its method; each answers a 200 JSON body."""
    for name, endpoint in ENDPOINTS.items():
        path = endpoint.path.replace(ID, "/resp_x1")
        argument = "resp_x1" if endpoint.path.endswith(ID) else None
        assert route(endpoint.method, f"/v1/{path}") == (name, argument), name
        assert route(endpoint.method, f"/v1/{path}/") == (name, argument), name
        other = "GET" if endpoint.method == "POST" else "POST"
        assert route(other, f"/v1/{path}") is None, name
        if endpoint.method == "POST":
            assert route("POST", f"/openai/deployments/dep/{path}") == (name, "dep"), name
        response, data = raw(
            server, endpoint.method, f"/v1/{path}", {"model": "m"} if other == "GET" else None
        )
        assert response.status == 200, (name, data)
        assert response.getheader("content-type") == "application/json", name
    assert route("GET", "/v1/models/a/b") is None and route("DELETE", "/v1/models") is None
