"""Numbers -> text and pictures for people: ``text`` (durations, shares, p50/p95/p99), ``tables``
(aligned and Markdown), ``triage`` (the triage section), ``waterfall`` (phases as bars),
``span_tree`` (spans as a tree), ``terminal`` (colour and live progress), ``verdict`` (a verdict in
sentences, rows and JSON), ``server_split`` (TTFT split by the server's account), ``charts`` and
``html`` (``--html``: Plotly figures and the offline page)."""
