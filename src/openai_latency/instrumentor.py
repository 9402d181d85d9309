"""``OpenAILatencyInstrumentor``: what is patched, and the symmetric undo.

Everything patched is listed in :func:`_patch_table`; ``uninstrument()`` unwraps exactly what
``instrument()`` wrapped. A target that does not exist in the installed SDK version is skipped.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Collection
from typing import Any

import wrapt
from opentelemetry import _logs, metrics, trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.instrumentation.utils import unwrap

from .config import load_settings
from .hooks import arrival_stamps, dns, legacy_send
from .hooks.sdk_hooks import Hooks
from .metrics import Metrics
from .model import Telemetry, Wrapper
from .read.routing import CHAT, COMPLETIONS, EMBEDDINGS, RESPONSES
from .version import __version__
from .websocket import hooks as websocket_hooks

_log = logging.getLogger("openai_latency")

_INSTRUMENTS = ("openai >= 1.76, < 4",)

SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"


def _patch_table(hooks: Hooks) -> list[tuple[str, str, Wrapper]]:
    """(module, "Class.method", wrapper) for every SDK boundary we hook."""
    table: list[tuple[str, str, Wrapper]] = []
    resources = (
        ("openai.resources.chat.completions", "Completions", ("create", "parse"), CHAT),
        ("openai.resources.responses", "Responses", ("create", "parse", "retrieve"), RESPONSES),
        ("openai.resources.embeddings", "Embeddings", ("create",), EMBEDDINGS),
        ("openai.resources.completions", "Completions", ("create",), COMPLETIONS),
    )
    for module, cls, methods, kind in resources:
        for method in methods:
            table.append((module, f"{cls}.{method}", hooks.operation(kind)))
            table.append((module, f"Async{cls}.{method}", hooks.async_operation(kind)))
    base = "openai._base_client"
    table += [
        (base, "SyncAPIClient.request", hooks.request),
        (base, "AsyncAPIClient.request", hooks.async_request),
        (base, "SyncAPIClient._send_request", hooks.send),
        (base, "AsyncAPIClient._send_request", hooks.async_send),
        (base, "SyncAPIClient._sleep_for_retry", hooks.sleep_for_retry),
        (base, "AsyncAPIClient._sleep_for_retry", hooks.async_sleep_for_retry),
        (base, "BaseClient._calculate_retry_timeout", hooks.retry_timeout),
        ("openai._streaming", "Stream.__stream__", hooks.stream),
        ("openai._streaming", "AsyncStream.__stream__", hooks.async_stream),
    ]
    closers = (
        ("openai._streaming", ("Stream", "AsyncStream")),
        ("openai._response", ("APIResponse", "AsyncAPIResponse")),
        ("openai.lib.streaming.chat._completions", ("ChatCompletionStream", "AsyncChatCompletionStream")),
        ("openai.lib.streaming.responses._responses", ("ResponseStream", "AsyncResponseStream")),
    )
    for module, classes in closers:
        table += [(module, f"{cls}.close", hooks.close) for cls in classes]
    # the WebSocket transports (openai >= 2.22): responses.connect(), realtime.connect()
    table += websocket_hooks.patch_table(websocket_hooks.WsHooks(hooks))
    return table


class OpenAILatencyInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Phase-level latency spans and metrics for every OpenAI SDK call.

    ``instrument(tracer_provider=..., meter_provider=..., logger_provider=..., phase_spans=...,
    stall_threshold=..., stream_usage=..., server_metrics=..., trace_dns=..., propagate=...,
    capture_content=...,
    content_max_length=...)``;
    each setting also reads its environment variable (see README).
    """

    _patched: list[tuple[Any, str]]
    _hooks: Hooks | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return _INSTRUMENTS

    def _instrument(self, **kwargs: Any) -> None:
        settings = load_settings(kwargs)
        tracer = trace.get_tracer(
            "openai_latency",
            __version__,
            tracer_provider=kwargs.get("tracer_provider"),
            schema_url=SCHEMA_URL,
        )
        meter = metrics.get_meter(
            "openai_latency", __version__, meter_provider=kwargs.get("meter_provider"), schema_url=SCHEMA_URL
        )
        logger = None
        if settings.capture_content in ("event_only", "span_and_event"):
            provider = kwargs.get("logger_provider")
            logger = _logs.get_logger("openai_latency", __version__, provider, SCHEMA_URL)
        hooks = self._hooks = Hooks(
            Telemetry(tracer=tracer, metrics=Metrics(meter), settings=settings, logger=logger)
        )
        self._patched = []
        for module_name, path, wrapper in _patch_table(hooks):
            owner = _resolve_owner(module_name, path)
            if owner is None:
                continue
            wrapt.wrap_function_wrapper(owner, path.rsplit(".", 1)[1], wrapper)
            self._patched.append((owner, path.rsplit(".", 1)[1]))
        websocket_hooks.install(hooks)  # the Agents SDK's WebSocket model, when it is imported
        if settings.trace_dns:
            self._patched += dns.install()
        if legacy_send.needed(importlib.import_module("openai._base_client")):
            legacy_send.install(hooks)  # openai < 2.31: attempts are bracketed at httpx's send
        arrival_stamps.install()  # async streams: a read's bytes stamped where the event loop received them

    def _uninstrument(self, **kwargs: Any) -> None:
        if self._hooks is not None:
            # wrappers that SDK objects cached while instrumented (with_raw_response, partials)
            # stay reachable after unwrapping: they see this and only call through
            self._hooks.deactivate()
            self._hooks = None
        legacy_send.uninstall()
        arrival_stamps.uninstall()
        websocket_hooks.uninstall()
        for owner, attribute in reversed(getattr(self, "_patched", [])):
            unwrap(owner, attribute)
        self._patched = []


def _resolve_owner(module_name: str, path: str) -> Any:
    """The class that defines ``path``'s method, or None when this SDK version lacks it."""
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        _log.debug("openai-latency: %s not present in this openai version", module_name)
        return None
    class_name, method = path.split(".")
    owner = getattr(module, class_name, None)
    if owner is None or method not in vars(owner):
        _log.debug("openai-latency: %s.%s not present in this openai version", module_name, path)
        return None
    return owner
