"""``openai-latency compare BASELINE CURRENT``: two runs' calls, group by group, with the verdict.

``command`` (the parser and ``main``), ``inputs`` (files, bench results, Jaeger), ``conditions``
(``--fail-if``)."""
