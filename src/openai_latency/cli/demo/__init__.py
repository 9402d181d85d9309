"""``openai-latency demo``: bench and report on three fake endpoints (one a reasoning model), and
(``--trees``) four calls as span trees. ``command`` (the parser and ``main``), ``trees`` (the
span-tree scenarios)."""
