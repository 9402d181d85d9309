"""bench's results: ``stats`` (``TargetStats``), ``verdicts``, ``build`` (``BenchResult``: the results
computed once), ``levels`` (the client per level, the sweep table), ``cache`` (prompt-cache hits),
``failures`` (a target whose every request failed), ``output`` and ``csv_units`` (table, Markdown,
CSV, JSON)."""
