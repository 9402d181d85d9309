"""The wrapt wrappers placed at the SDK's boundaries, one method each (which SDK functions, and
why those: docs/ARCHITECTURE.md, "Where the SDK is hooked"; the list: :func:`.instrumentor._patch_table`).

- operation: the resource methods (``chat.completions.create`` ...) start an :class:`Operation`;
  ``SyncAPIClient.request`` is the fallback for every other call and for bound methods captured
  before instrumentation. A call made while an operation is active (helpers calling ``create``)
  joins it instead of opening a second span.
- attempt: ``_send_request`` brackets each HTTP attempt and installs the httpcore trace callback.
- backoff: ``_sleep_for_retry`` brackets the SDK's sleep; ``_calculate_retry_timeout`` tells the delay.
- stream: ``Stream.__stream__`` gets its generator wrapped; ``close()`` methods end a stream early.

Each wrapper calls the SDK outside any ``try`` of ours, so SDK exceptions pass through as the same
object, and our own work is ``guarded``: it can only be skipped, never raise into the caller. The
data an attempt or a backoff records is set by methods of :class:`.Attempt`, :class:`.Backoff` and
:class:`.Timeline`; the wrappers only find the call (:mod:`.registry`) and pick the SDK's arguments.

Nothing is recorded while ``suppress_instrumentation`` is set (checked where an operation would
start) or after ``uninstrument()`` (:meth:`Hooks.deactivate`, checked at every wrapper's entry).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled

from .. import semconv as sc
from .._guard import guarded, report
from ..call.operation import Operation
from ..call.timeline import Attempt, Backoff
from ..clock import clock
from ..content import capture as content
from ..model import Args, Attributes, Kwargs, OperationKind, Telemetry, Wrapped, Wrapper
from ..read import attributes as attrs
from ..read import server_timing
from ..read.routing import OTHER, fallback_kind, path_template
from . import http_trace, stream_usage
from .reads import count_reads
from .registry import BY_RESPONSE, CURRENT
from .streams import traced_async_stream, traced_stream


class Hooks:
    """The wrappers of one ``instrument()``. ``uninstrument()`` unwraps them and calls
    :meth:`deactivate`: a wrapper an SDK object still holds (``with_raw_response`` binds its methods
    at first use; a ``functools.partial`` of a resource method) then only calls through."""

    def __init__(self, telemetry: Telemetry) -> None:
        self.telemetry = telemetry
        self.settings = telemetry.settings
        self.inject_usage = telemetry.settings.stream_usage == "inject"
        self.request_metrics = telemetry.settings.server_metrics == "request"
        self.capture_content = telemetry.settings.capture_content != "no_content"
        self._active = True
        """Read once at each wrapper's entry (one attribute read): False after uninstrument()."""

    def deactivate(self) -> None:
        self._active = False

    # --- operations ---------------------------------------------------------------------------

    # The per-call hooks below catch their own errors (the rule of :func:`._guard.guarded`, without
    # the decorator's extra frame on the hot path).

    def start(self, kind: OperationKind, client: object, kwargs: Mapping[str, Any]) -> Operation | None:
        try:
            return self._open(clock(), kind, client, kwargs)
        except Exception:
            report("Hooks.start")
            return None

    @guarded()
    def start_fallback(self, client: object, options: object, stream: bool) -> Operation:
        start_ns = clock()
        method = str(getattr(options, "method", "")).upper()
        path = str(getattr(options, "url", ""))
        body = getattr(options, "json_data", None)
        kwargs: Kwargs = dict(body) if isinstance(body, Mapping) else {}
        kwargs["stream"] = stream
        kind = fallback_kind(method, path)
        if kind is not OTHER:  # a chat/embeddings/... call that reached only the fallback
            return self._open(start_ns, kind, client, kwargs)
        template = path_template(path)
        http: Attributes = {sc.HTTP_REQUEST_METHOD: method, sc.URL_TEMPLATE: template}
        return self._open(start_ns, kind, client, kwargs, f"openai {method} {template}", http)

    def _open(
        self,
        start_ns: int,
        kind: OperationKind,
        client: object,
        kwargs: Mapping[str, Any],
        name: str | None = None,
        http: Attributes | None = None,
    ) -> Operation:
        attributes = attrs.request_attributes(kwargs, kind.operation, kind.api_type)
        attributes.update(attrs.client_attributes(client))
        attributes[sc.OPENAI_LATENCY_TRANSPORT] = "http"  # "websocket": a turn of websocket/
        if http is not None:  # not a GenAI operation: an HTTP call of the SDK
            del attributes[sc.GEN_AI_OPERATION_NAME]
            attributes.update(http)
        if name is None:
            model = attributes.get(sc.GEN_AI_REQUEST_MODEL)
            name = f"{kind.operation} {model}" if model else kind.operation
        op = Operation(self.telemetry, kind, name, attributes, start_ns)
        if self.capture_content:
            op.content = content.capture_request(self.telemetry, kind, kwargs)
        return op

    def run_sync(self, op: Operation, wrapped: Wrapped, args: Args, kwargs: Kwargs, stream: bool) -> Any:
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
        op.returned(result, stream)
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
        op.returned(result, stream)
        return result

    # Entry checks, cheapest first: inactive (one attribute read), inside an operation already
    # (helpers calling create: one contextvar read), instrumentation suppressed: the public
    # is_instrumentation_enabled(), both keys that suppress_instrumentation() and the OTel SDK's
    # exporters set (two context lookups, ~0.2 µs, only where an operation would start).

    def operation(self, kind: OperationKind) -> Wrapper:
        def wrapper(wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
            if not self._active or CURRENT.get() is not None or not is_instrumentation_enabled():
                return wrapped(*args, **kwargs)
            op = self.start(kind, getattr(instance, "_client", None), kwargs)
            if op is None:
                return wrapped(*args, **kwargs)
            if self.inject_usage:
                injected = stream_usage.with_usage(kind, kwargs)
                if injected is not None:
                    kwargs, op.usage_injected = injected, True
            if self.request_metrics:
                kwargs = server_timing.with_metrics(kind, kwargs) or kwargs
            return self.run_sync(op, wrapped, args, kwargs, kwargs.get("stream") is True)

        return wrapper

    def async_operation(self, kind: OperationKind) -> Wrapper:
        def wrapper(wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
            if not self._active or CURRENT.get() is not None or not is_instrumentation_enabled():
                return wrapped(*args, **kwargs)
            injected = stream_usage.with_usage(kind, kwargs) if self.inject_usage else None
            sent = kwargs if injected is None else injected
            if self.request_metrics:
                sent = server_timing.with_metrics(kind, sent) or sent
            # argument errors stay raised at call time
            coro = wrapped(*args, **sent)
            return self._await_operation(kind, instance, kwargs, coro, injected is not None)

        return wrapper

    async def _await_operation(
        self, kind: OperationKind, instance: object, kwargs: Kwargs, coro: Awaitable[Any], injected: bool
    ) -> Any:
        # awaited inside another operation (created outside it): that one's call, no second span
        op = (
            None
            if CURRENT.get() is not None
            else self.start(kind, getattr(instance, "_client", None), kwargs)
        )
        if op is None:
            return await coro
        op.usage_injected = injected
        return await self.run_async(op, coro, kwargs.get("stream") is True)

    def request(self, wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        """Fallback: ``SyncAPIClient.request(cast_to, options, *, stream, stream_cls)``."""
        if not self._active or CURRENT.get() is not None or not is_instrumentation_enabled():
            return wrapped(*args, **kwargs)
        stream = kwargs.get("stream") is True
        op = self.start_fallback(instance, _options(args, kwargs), stream)
        if op is None:
            return wrapped(*args, **kwargs)
        return self.run_sync(op, wrapped, args, kwargs, stream)

    def async_request(self, wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        if not self._active or CURRENT.get() is not None or not is_instrumentation_enabled():
            return wrapped(*args, **kwargs)
        return self._await_request(wrapped, instance, args, kwargs)

    async def _await_request(self, wrapped: Wrapped, instance: object, args: Args, kwargs: Kwargs) -> Any:
        stream = kwargs.get("stream") is True
        op = self.start_fallback(instance, _options(args, kwargs), stream)
        if op is None:
            return await wrapped(*args, **kwargs)
        return await self.run_async(op, wrapped(*args, **kwargs), stream)

    # --- attempts -----------------------------------------------------------------------------

    def begin_attempt(self, op: Operation, request: Any, is_async: bool) -> tuple[Attempt, Any] | None:
        """The attempt, and the context to send it in: its network_wait span's, or None to stay in
        the operation's (already current: the send runs inside :meth:`run_sync` / :meth:`run_async`)."""
        try:
            now = clock()
            attempt = op.timeline.begin_attempt(now, op.start_attempt_span(now))
            span = attempt.span
            context = None if span is None else trace.set_span_in_context(span, op.context)
            if self.settings.propagate:
                propagate.inject(request.headers, context=op.context if context is None else context)
            install = http_trace.install_async if is_async else http_trace.install_sync
            install(request.extensions, attempt)
            return attempt, context
        except Exception:
            report("Hooks.begin_attempt")
            return None

    def send(self, wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        op = CURRENT.get()
        if op is None or not self._active:
            return wrapped(*args, **kwargs)
        begun = self.begin_attempt(op, args[0] if args else kwargs["request"], False)
        if begun is None:
            return wrapped(*args, **kwargs)
        attempt, context = begun
        token = None if context is None else otel_context.attach(context)
        try:
            response = wrapped(*args, **kwargs)
        except BaseException as exc:
            attempt.record_error(exc, clock())
            raise
        finally:
            if token is not None:
                otel_context.detach(token)
        attempt.record_response(response, clock())
        if kwargs.get("stream") is True:
            _register_stream(response, op)
        return response

    def async_send(self, wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        op = CURRENT.get()
        if op is None or not self._active:
            return wrapped(*args, **kwargs)
        return self._await_send(op, wrapped, args, kwargs)

    async def _await_send(self, op: Operation, wrapped: Wrapped, args: Args, kwargs: Kwargs) -> Any:
        begun = self.begin_attempt(op, args[0] if args else kwargs["request"], True)
        if begun is None:
            return await wrapped(*args, **kwargs)
        attempt, context = begun
        token = None if context is None else otel_context.attach(context)
        try:
            response = await wrapped(*args, **kwargs)
        except BaseException as exc:
            attempt.record_error(exc, clock())
            raise
        finally:
            if token is not None:
                otel_context.detach(token)
        attempt.record_response(response, clock())
        if kwargs.get("stream") is True:
            _register_stream(response, op)
        return response

    # --- retries ------------------------------------------------------------------------------

    def sleep_for_retry(self, wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        """``_sleep_for_retry(*, retries_taken, max_retries, options, response)``, called inside the
        SDK's ``except`` when no response came (so ``sys.exc_info()`` is the retried error)."""
        op = CURRENT.get()
        if op is None or not self._active:
            return wrapped(*args, **kwargs)
        backoff = op.timeline.begin_backoff(clock(), kwargs.get("response"), sys.exc_info()[1])
        try:
            return wrapped(*args, **kwargs)
        finally:
            if backoff is not None:
                backoff.end(clock())

    def async_sleep_for_retry(self, wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        op = CURRENT.get()
        if op is None or not self._active:
            return wrapped(*args, **kwargs)
        backoff = op.timeline.begin_backoff(clock(), kwargs.get("response"), sys.exc_info()[1])
        return _await_sleep(backoff, wrapped(*args, **kwargs))

    def retry_timeout(self, wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        """``_calculate_retry_timeout(remaining_retries, options, response_headers)``: the delay."""
        delay = wrapped(*args, **kwargs)
        op = CURRENT.get()
        if op is not None and self._active and op.timeline.backoffs:
            headers = kwargs.get("response_headers", args[2] if len(args) > 2 else None)
            op.timeline.backoffs[-1].note_delay(delay, headers)
        return delay

    # --- streams ------------------------------------------------------------------------------

    def stream(self, wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        generator = wrapped(*args, **kwargs)
        op = _stream_operation(instance) if self._active else None
        if op is None:
            return generator
        count_reads(instance.response, op.stream, False)
        return traced_stream(generator, op)

    def async_stream(self, wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        generator = wrapped(*args, **kwargs)
        op = _stream_operation(instance) if self._active else None
        if op is None:
            return generator
        count_reads(instance.response, op.stream, True, op.timeline.headers_ns)
        return traced_async_stream(generator, op)

    def close(self, wrapped: Wrapped, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        if self._active:
            _close_early(instance)
        return wrapped(*args, **kwargs)


def _options(args: Args, kwargs: Kwargs) -> object:
    return args[1] if len(args) > 1 else kwargs.get("options")


async def _await_sleep(backoff: Backoff | None, coro: Awaitable[Any]) -> Any:
    try:
        return await coro
    finally:
        if backoff is not None:
            backoff.end(clock())


@guarded()
def _register_stream(response: object, op: Operation) -> None:
    BY_RESPONSE[response] = op


@guarded()
def _stream_operation(stream: Any) -> Operation | None:
    op = BY_RESPONSE.get(stream.response)
    return None if op is None or op.finished else op


def _response_of(obj: object) -> object:
    for name in ("response", "_response", "http_response"):
        response = getattr(obj, name, None)
        if response is not None:
            return response
    return None


@guarded()
def _close_early(obj: object) -> None:
    response = _response_of(obj)
    op = BY_RESPONSE.get(response) if response is not None else None
    if op is not None:
        op.finish(end_ns=clock(), end_state="closed_early")
