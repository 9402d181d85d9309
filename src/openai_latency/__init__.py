"""openai-latency: where the time of every OpenAI SDK call goes, as OpenTelemetry spans and metrics.

    from openai_latency import OpenAILatencyInstrumentor
    OpenAILatencyInstrumentor().instrument()

or, with no code change, ``opentelemetry-instrument python app.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .version import __version__

if TYPE_CHECKING:
    from .instrumentor import OpenAILatencyInstrumentor

__all__ = ["OpenAILatencyInstrumentor", "__version__"]


def __getattr__(name: str) -> Any:
    # Lazy, so that `openai_latency.fake_server` and the CLI load without the instrumentation.
    if name == "OpenAILatencyInstrumentor":
        from .instrumentor import OpenAILatencyInstrumentor

        return OpenAILatencyInstrumentor
    raise AttributeError(f"module 'openai_latency' has no attribute {name!r}")
