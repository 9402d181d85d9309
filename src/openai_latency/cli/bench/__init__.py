"""``openai-latency bench``: one workload against several endpoints or models, side by side.

``command`` (``main``: options -> run -> results), ``options`` (the command line -> typed
:class:`~.plan.BenchOptions`), ``plan`` (targets, workload, load levels, SLO), ``run`` (the load
generator in one process), ``workers`` (``--workers``: the load over several processes),
``record`` (the spans of the run, tagged), ``stats`` (per-target numbers: TTFT, TPOT, goodput),
``output`` (table, Markdown, CSV, JSON)."""
