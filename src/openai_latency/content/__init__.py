"""Opt-in message content: ``capture`` (``ContentCapture``: request values, stream text, the span
attributes and the log record), ``messages`` (SDK objects -> the GenAI conventions' message schema),
``bounded_json`` (JSON of bounded length that stays valid JSON). Nothing here runs unless
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` asks for it. Internal; docs/ARCHITECTURE.md
has the map.
"""
