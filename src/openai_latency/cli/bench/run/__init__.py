"""bench's run: ``runner`` (the load generator: ``Runner``, ``RunState``, ``supervise``), ``loops``
(closed and open loop), ``sweep`` (``--sweep``), ``workers`` (``--workers``), ``record`` (the run's
spans, tagged), ``api`` (``--api``: the SDK resource, ``send``), ``replay`` (``--replay``: recorded
calls, their arrivals), ``calibrate`` (``--replay``'s input lengths per target)."""
