"""The wrapt wrappers placed at the SDK's boundaries (DESIGN §6), one method each.

- operation: the resource methods (``chat.completions.create`` ...) start an :class:`Operation`;
  ``SyncAPIClient.request`` is the fallback for every other call and for bound methods captured
  before instrumentation. A call made while an operation is active (helpers calling ``create``)
  joins it instead of opening a second span.
- attempt: ``_send_request`` brackets each HTTP attempt and installs the httpcore trace callback.
- backoff: ``_sleep_for_retry`` brackets the SDK's sleep; ``_calculate_retry_timeout`` tells the delay.
- stream: ``Stream.__stream__`` gets its generator wrapped; ``close()`` methods end a stream early.

Each wrapper calls the SDK outside any ``try`` of ours, so SDK exceptions pass through as the same
object, and our own work is ``guarded``: it can only be skipped, never raise into the caller.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

from . import attributes as attrs
from . import content, http_trace, stream_usage
from ._guard import guarded
from .operation import Operation, OperationKind, Telemetry
from .routing import OTHER, fallback_kind, path_template
from .streams import traced_async_stream, traced_stream
from .timeline import Attempt, Backoff, clock

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]

CURRENT: ContextVar[Operation | None] = ContextVar("openai_latency_operation", default=None)
"""The operation of the SDK call running in this context (thread or task), if any."""

BY_RESPONSE: weakref.WeakKeyDictionary[Any, Operation] = weakref.WeakKeyDictionary()
"""HTTP response -> its operation, for streams (the SDK builds the stream from the response)."""


class Hooks:
    def __init__(self, telemetry: Telemetry) -> None:
        self.telemetry = telemetry
        self.settings = telemetry.settings
        self.inject_usage = telemetry.settings.stream_usage == "inject"
        self.capture_content = telemetry.settings.capture_content != "no_content"

    # --- operations ---------------------------------------------------------------------------

    @guarded()
    def start(self, kind: OperationKind, client: Any, kwargs: Mapping[str, Any]) -> Operation | None:
        return self._open(clock(), kind, client, kwargs)

    @guarded()
    def start_fallback(self, client: Any, options: Any, stream: bool) -> Operation | None:
        start_ns = clock()
        method = str(getattr(options, "method", "")).upper()
        path = str(getattr(options, "url", ""))
        body = getattr(options, "json_data", None)
        kwargs: dict[str, Any] = dict(body) if isinstance(body, Mapping) else {}
        kwargs["stream"] = stream
        kind = fallback_kind(method, path)
        if kind is not OTHER:  # a chat/embeddings/... call that reached only the fallback
            return self._open(start_ns, kind, client, kwargs)
        template = path_template(path)
        http = {"http.request.method": method, "url.template": template}
        return self._open(start_ns, kind, client, kwargs, f"openai {method} {template}", http)

    def _open(
        self,
        start_ns: int,
        kind: OperationKind,
        client: Any,
        kwargs: Mapping[str, Any],
        name: str | None = None,
        http: dict[str, Any] | None = None,
    ) -> Operation:
        attributes = attrs.request_attributes(kwargs, kind.operation, kind.api_type)
        attributes.update(attrs.client_attributes(client))
        if http is not None:  # not a GenAI operation: an HTTP call of the SDK
            del attributes["gen_ai.operation.name"]
            attributes.update(http)
        if name is None:
            model = attributes.get("gen_ai.request.model")
            name = f"{kind.operation} {model}" if model else kind.operation
        op = Operation(self.telemetry, kind, name, attributes, start_ns)
        if self.capture_content:
            op.content = content.capture_request(self.telemetry, kind, kwargs)
        return op

    def run_sync(
        self, op: Operation, wrapped: Callable[..., Any], args: Any, kwargs: Any, stream: bool
    ) -> Any:
        token = CURRENT.set(op)
        context_token = otel_context.attach(op.context)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            op.failed(exc)
            raise
        finally:
            otel_context.detach(context_token)
            CURRENT.reset(token)
        self.returned(op, result, stream)
        return result

    async def run_async(self, op: Operation, coro: Awaitable[Any], stream: bool) -> Any:
        token = CURRENT.set(op)
        context_token = otel_context.attach(op.context)
        try:
            result = await coro
        except BaseException as exc:
            op.failed(exc)
            raise
        finally:
            otel_context.detach(context_token)
            CURRENT.reset(token)
        self.returned(op, result, stream)
        return result

    @guarded()
    def returned(self, op: Operation, result: Any, stream: bool) -> None:
        op.returned(result, stream)
        if stream and not op.finished:
            response = getattr(result, "response", None) or getattr(result, "http_response", None)
            if response is not None:
                # Nobody closes a stream that is dropped unread: only the collector notices.
                weakref.finalize(response, _abandon, op)

    def operation(self, kind: OperationKind) -> Wrapper:
        def wrapper(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
            if CURRENT.get() is not None:
                return wrapped(*args, **kwargs)
            op = self.start(kind, getattr(instance, "_client", None), kwargs)
            if op is None:
                return wrapped(*args, **kwargs)
            if self.inject_usage:
                injected = stream_usage.with_usage(kind, kwargs)
                if injected is not None:
                    kwargs, op.usage_injected = injected, True
            return self.run_sync(op, wrapped, args, kwargs, kwargs.get("stream") is True)

        return wrapper

    def async_operation(self, kind: OperationKind) -> Wrapper:
        def wrapper(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
            injected = None
            if self.inject_usage and CURRENT.get() is None:
                injected = stream_usage.with_usage(kind, kwargs)
            # argument errors stay raised at call time
            coro = wrapped(*args, **(kwargs if injected is None else injected))
            if CURRENT.get() is not None:
                return coro
            return self._await_operation(kind, instance, kwargs, coro, injected is not None)

        return wrapper

    async def _await_operation(
        self, kind: OperationKind, instance: Any, kwargs: Any, coro: Any, usage_injected: bool = False
    ) -> Any:
        op = (
            None
            if CURRENT.get() is not None
            else self.start(kind, getattr(instance, "_client", None), kwargs)
        )
        if op is None:
            return await coro
        op.usage_injected = usage_injected
        return await self.run_async(op, coro, kwargs.get("stream") is True)

    def request(self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        """Fallback: ``SyncAPIClient.request(cast_to, options, *, stream, stream_cls)``."""
        if CURRENT.get() is not None:
            return wrapped(*args, **kwargs)
        stream = kwargs.get("stream") is True
        op = self.start_fallback(instance, _options(args, kwargs), stream)
        if op is None:
            return wrapped(*args, **kwargs)
        return self.run_sync(op, wrapped, args, kwargs, stream)

    def async_request(self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        if CURRENT.get() is not None:
            return wrapped(*args, **kwargs)
        return self._await_request(wrapped, instance, args, kwargs)

    async def _await_request(self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        stream = kwargs.get("stream") is True
        op = self.start_fallback(instance, _options(args, kwargs), stream)
        if op is None:
            return await wrapped(*args, **kwargs)
        return await self.run_async(op, wrapped(*args, **kwargs), stream)

    # --- attempts -----------------------------------------------------------------------------

    @guarded()
    def begin_attempt(self, op: Operation, request: Any, is_async: bool) -> tuple[Attempt, Any] | None:
        """The attempt, and the context to send it in (its network_wait span's, else the operation's)."""
        attempt = op.timeline.begin_attempt(len(op.timeline.attempts))
        attempt.span = op.start_attempt_span(attempt.start_ns)
        context = op.context if attempt.span is None else trace.set_span_in_context(attempt.span, op.context)
        if self.settings.propagate:
            propagate.inject(request.headers, context=context)
        install = http_trace.install_async if is_async else http_trace.install_sync
        install(request.extensions, attempt)
        return attempt, context

    @guarded()
    def attempt_returned(self, op: Operation, attempt: Attempt, response: Any, stream: bool) -> None:
        now = clock()
        attempt.settle(now)
        attempt.status_code = response.status_code
        if not attempt.headers_ns:
            attempt.headers_ns = now
        version = getattr(response, "http_version", "")
        attempt.http_version = version.split("/", 1)[1] if "/" in version else version or None
        attempt.response_headers = response.headers
        if attempt.status_code >= 400:
            attempt.error_type = attrs.response_error_code(response) or str(attempt.status_code)
        if stream:
            BY_RESPONSE[response] = op

    @guarded()
    def attempt_raised(self, attempt: Attempt, exc: BaseException) -> None:
        attempt.settle(clock())
        attempt.error_type = attrs.qualified_name(type(exc))

    def send(self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        op = CURRENT.get()
        if op is None:
            return wrapped(*args, **kwargs)
        begun = self.begin_attempt(op, args[0] if args else kwargs["request"], False)
        if begun is None:
            return wrapped(*args, **kwargs)
        attempt, context = begun
        token = otel_context.attach(context)
        try:
            response = wrapped(*args, **kwargs)
        except BaseException as exc:
            self.attempt_raised(attempt, exc)
            raise
        finally:
            otel_context.detach(token)
        self.attempt_returned(op, attempt, response, kwargs.get("stream") is True)
        return response

    def async_send(self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        op = CURRENT.get()
        if op is None:
            return wrapped(*args, **kwargs)
        return self._await_send(op, wrapped, args, kwargs)

    async def _await_send(self, op: Operation, wrapped: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        begun = self.begin_attempt(op, args[0] if args else kwargs["request"], True)
        if begun is None:
            return await wrapped(*args, **kwargs)
        attempt, context = begun
        token = otel_context.attach(context)
        try:
            response = await wrapped(*args, **kwargs)
        except BaseException as exc:
            self.attempt_raised(attempt, exc)
            raise
        finally:
            otel_context.detach(token)
        self.attempt_returned(op, attempt, response, kwargs.get("stream") is True)
        return response

    # --- retries ------------------------------------------------------------------------------

    @guarded()
    def begin_backoff(self, op: Operation, kwargs: Mapping[str, Any]) -> Backoff:
        response = kwargs.get("response")
        attempts = op.timeline.attempts
        if response is not None:
            # the retried attempt's error.type: the provider's code when it sent one, else the status
            retried = attempts[-1].error_type if attempts else None
            reason = retried or str(response.status_code)
        else:
            exc = sys.exc_info()[1]
            reason = attrs.qualified_name(type(exc)) if exc is not None else "_OTHER"
        backoff = Backoff(start_ns=clock(), reason=reason)
        op.timeline.backoffs.append(backoff)
        return backoff

    def sleep_for_retry(self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        op = CURRENT.get()
        if op is None:
            return wrapped(*args, **kwargs)
        backoff = self.begin_backoff(op, kwargs)
        try:
            return wrapped(*args, **kwargs)
        finally:
            if backoff is not None:
                backoff.end_ns = clock()

    def async_sleep_for_retry(
        self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any
    ) -> Any:
        op = CURRENT.get()
        if op is None:
            return wrapped(*args, **kwargs)
        return self._await_sleep(self.begin_backoff(op, kwargs), wrapped(*args, **kwargs))

    async def _await_sleep(self, backoff: Backoff | None, coro: Awaitable[Any]) -> Any:
        try:
            return await coro
        finally:
            if backoff is not None:
                backoff.end_ns = clock()

    def retry_timeout(self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        delay = wrapped(*args, **kwargs)
        op = CURRENT.get()
        if op is not None and op.timeline.backoffs:
            _note_delay(op.timeline.backoffs[-1], delay, args, kwargs)
        return delay

    # --- streams ------------------------------------------------------------------------------

    def stream(self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        generator = wrapped(*args, **kwargs)
        op = _stream_operation(instance)
        return generator if op is None else traced_stream(generator, op)

    def async_stream(self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        generator = wrapped(*args, **kwargs)
        op = _stream_operation(instance)
        return generator if op is None else traced_async_stream(generator, op)

    def close(self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        _close_early(instance)
        return wrapped(*args, **kwargs)


def _options(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    return args[1] if len(args) > 1 else kwargs.get("options")


@guarded()
def _stream_operation(stream: Any) -> Operation | None:
    op = BY_RESPONSE.get(stream.response)
    return None if op is None or op.finished else op


def _response_of(obj: Any) -> Any:
    for name in ("response", "_response", "http_response"):
        response = getattr(obj, name, None)
        if response is not None:
            return response
    return None


@guarded()
def _close_early(obj: Any) -> None:
    response = _response_of(obj)
    op = BY_RESPONSE.get(response) if response is not None else None
    if op is not None:
        op.finish(end_ns=clock(), end_state="closed_early")


@guarded()
def _abandon(op: Operation) -> None:
    op.finish(end_ns=op.stream.last_activity_ns or clock(), end_state="abandoned")


@guarded()
def _note_delay(backoff: Backoff, delay: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    """Records the delay and whether it came from the server's retry-after(-ms) header."""
    backoff.delay_s = float(delay)
    headers = kwargs.get("response_headers", args[2] if len(args) > 2 else None)
    if headers is None:
        return
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            if abs(float(raw) / divisor - backoff.delay_s) < 1e-9:
                backoff.delay_source = name
        except ValueError:
            pass
        return
