"""Where the SDK is hooked: what runs while a call runs, and only stores marks and references.

``sdk_hooks`` (``Hooks``: every wrapt wrapper, the entry checks, the operation, attempt, backoff and
stream plumbing), ``streams`` (the chunk loop, the chunk observers per stream kind), ``stream_usage``
(``stream_usage=inject``), ``http_trace`` (httpcore's ``trace`` callbacks), ``dns`` (name resolution
timing), ``registry`` (the call running in this context, HTTP response -> call), ``legacy_send``
(openai < 2.31: attempts at httpx's ``send``). Internal: the public face is the package's
``OpenAILatencyInstrumentor``; docs/ARCHITECTURE.md has the map.
"""
