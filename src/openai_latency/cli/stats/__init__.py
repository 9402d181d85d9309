"""Numbers only (no text, no argparse): ``percentiles`` (the one percentile, :class:`Dist`),
``groups`` (calls -> groups that keep their calls -> per-group numbers), ``triage`` (why the failed
and slow calls went wrong)."""
