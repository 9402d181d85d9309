"""``openai-latency report``: exported traces -> p50/p95/p99 per phase and group, triage, waterfall.

``command`` (the parser and ``main``), ``sources`` (files or ``--jaeger``), ``output`` (the text
tables and the JSON document)."""
