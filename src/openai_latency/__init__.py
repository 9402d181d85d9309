"""openai-latency: where the time of every OpenAI SDK call goes, as OpenTelemetry spans and metrics.

    from openai_latency import OpenAILatencyInstrumentor
    OpenAILatencyInstrumentor().instrument()

or, with no code change, ``opentelemetry-instrument python app.py``.
"""

from .instrumentor import OpenAILatencyInstrumentor
from .version import __version__

__all__ = ["OpenAILatencyInstrumentor", "__version__"]
