"""``openai-latency demo``: bench and report on two fake endpoints, and (``--trees``) four calls as
span trees. ``command`` (the parser and ``main``), ``trees`` (the span-tree scenarios)."""
