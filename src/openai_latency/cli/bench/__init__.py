"""``openai-latency bench``: one workload against several endpoints or models, side by side.

``command`` (``main``: options -> run -> results), ``options`` and ``result_options`` (the command
line -> typed :class:`~.plan.BenchOptions`), ``plan`` (targets, workload, load levels, SLO); the
workload: ``sources``, ``workload``, ``dataset``, ``lengths``, ``replay``, ``calibrate``, ``api``;
the run: ``run`` (the load generator in one process), ``loops`` (closed and open loop), ``sweep``
(``--sweep``), ``workers`` (``--workers``: the load over several processes), ``record`` (the spans
of the run, tagged); the results: ``stats`` (per-target numbers: the metric table's, throughput,
goodput), ``verdicts``, ``levels``, ``cache``, ``failures``, ``output`` and ``csv_units`` (table,
Markdown, CSV, JSON). docs/ARCHITECTURE.md ("The CLI") says what each owns."""
