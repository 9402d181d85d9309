"""Numbers only (no text, no argparse): ``metric_table`` (every metric's meaning, unit, value of a
call and which calls count), ``percentiles`` (the one percentile, :class:`Dist`), ``sketch``
(distributions in bounded memory), ``groups`` (calls -> groups that keep their calls -> per-group
numbers), ``triage`` (why the failed and slow calls went wrong), ``bootstrap`` and ``verdict`` (two
sets of calls compared, with intervals), ``server_split`` (the server's account of TTFT and TPOT)."""
