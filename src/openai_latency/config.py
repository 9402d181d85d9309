"""Settings: environment variables, overridden by ``instrument(**kwargs)``.

Every setting has a default. An invalid value logs one warning that names the variable and the
accepted values, then the default is used: a typo in an env var must never break the application.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

_log = logging.getLogger("openai_latency")

PhaseSpans = Literal["detailed", "phases", "off"]
StreamUsage = Literal["off", "inject"]
ServerMetrics = Literal["off", "request"]
CaptureContent = Literal["no_content", "span_only", "event_only", "span_and_event"]
"""The values of the GenAI semantic conventions' ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``."""

PHASE_SPANS_MODES: tuple[PhaseSpans, ...] = get_args(PhaseSpans)
STREAM_USAGE_MODES: tuple[StreamUsage, ...] = get_args(StreamUsage)
SERVER_METRICS_MODES: tuple[ServerMetrics, ...] = get_args(ServerMetrics)
CONTENT_MODES: tuple[CaptureContent, ...] = get_args(CaptureContent)
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


@dataclass(frozen=True)
class Settings:
    phase_spans: PhaseSpans = "phases"
    """``phases``: the phase spans, the http.* sub-phases as attributes of each network_wait;
    ``detailed``: the http.* sub-phases as spans too; ``off``: the operation span only."""
    phase_metrics: bool = False
    """``openai_latency.phase.duration`` points (one per phase and http.* sub-phase of every call)."""
    stream_usage: StreamUsage = "off"
    """``inject``: add ``stream_options.include_usage`` to chat streams that do not set it."""
    server_metrics: ServerMetrics = "off"
    """``request``: add ``include_metrics: true`` to chat and completions requests (vLLM's per-request
    metrics); opt-in, since another server may reject the unknown field."""
    stall_threshold: float = 2.0
    """Seconds: a server-side gap between two chunks longer than this is a stall event."""
    trace_dns: bool = False
    propagate: bool = True
    capture_content: CaptureContent = "no_content"
    content_max_length: int = 4096

    # Read on every call: computed once per Settings (cached_property writes the instance's
    # __dict__ directly, which a frozen dataclass allows).

    @functools.cached_property
    def http_subphases(self) -> bool:
        """The http.* sub-phases are computed (as attributes in ``phases``, as spans in ``detailed``)."""
        return self.phase_spans != "off"

    @functools.cached_property
    def http_subphase_spans(self) -> bool:
        return self.phase_spans == "detailed"

    @functools.cached_property
    def any_phase_spans(self) -> bool:
        return self.phase_spans != "off"

    @functools.cached_property
    def stall_threshold_ns(self) -> int:
        return int(self.stall_threshold * 1e9)


def _choice(allowed: tuple[str, ...]) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in allowed:
            raise ValueError(raw)
        return value

    return parse


def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(raw)


def _positive_float(raw: str) -> float:
    value = float(raw)
    if not value > 0 or value == float("inf"):
        raise ValueError(raw)
    return value


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value <= 0:
        raise ValueError(raw)
    return value


# setting name -> (environment variable, parser, description of accepted values)
_FIELDS: dict[str, tuple[str, Callable[[str], object], str]] = {
    "phase_spans": ("OPENAI_LATENCY_PHASE_SPANS", _choice(PHASE_SPANS_MODES), "|".join(PHASE_SPANS_MODES)),
    "phase_metrics": ("OPENAI_LATENCY_PHASE_METRICS", _bool, "true|false"),
    "stream_usage": (
        "OPENAI_LATENCY_STREAM_USAGE",
        _choice(STREAM_USAGE_MODES),
        "|".join(STREAM_USAGE_MODES),
    ),
    "server_metrics": (
        "OPENAI_LATENCY_SERVER_METRICS",
        _choice(SERVER_METRICS_MODES),
        "|".join(SERVER_METRICS_MODES),
    ),
    "stall_threshold": ("OPENAI_LATENCY_STALL_THRESHOLD", _positive_float, "a number of seconds > 0"),
    "trace_dns": ("OPENAI_LATENCY_TRACE_DNS", _bool, "true|false"),
    "propagate": ("OPENAI_LATENCY_PROPAGATE", _bool, "true|false"),
    "capture_content": (
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        _choice(CONTENT_MODES),
        "|".join(CONTENT_MODES),
    ),
    "content_max_length": ("OPENAI_LATENCY_CONTENT_MAX_LENGTH", _positive_int, "a whole number > 0"),
}


def load_settings(
    overrides: Mapping[str, object] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Builds settings from ``environ`` (default ``os.environ``), then ``overrides`` (instrument kwargs).

    Unknown override keys are ignored here (BaseInstrumentor passes its own, e.g. tracer_provider).
    """
    env = os.environ if environ is None else environ
    defaults = Settings()
    values: dict[str, Any] = {}
    for name, (var, parse, accepted) in _FIELDS.items():
        raw: object = None
        source = var
        if overrides is not None and overrides.get(name) is not None:
            raw, source = overrides[name], f"instrument({name}=...)"
        elif env.get(var, "").strip():
            raw = env[var]
        if raw is None:
            continue
        try:
            values[name] = parse(str(raw))
        except (ValueError, TypeError):
            _log.warning(
                "openai-latency: invalid value %r for %s (accepted: %s); using the default %r",
                raw,
                source,
                accepted,
                getattr(defaults, name),
            )
    return Settings(**values)
