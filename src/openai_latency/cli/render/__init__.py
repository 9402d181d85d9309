"""Text for people: ``text`` (durations, shares, p50/p95/p99), ``tables`` (aligned and Markdown),
``triage`` (the triage section), ``waterfall`` (phases as bars), ``span_tree`` (spans as a tree),
``terminal`` (colour and live progress). Where the HTML output will go."""
