"""bench's command line -> a typed plan: ``parser`` (the parser, ``options_from``), ``result_options``
(``--target``'s help, ``--baseline``, ``--format``, ``--html``), ``sources`` (the workload's
conversations: replay, dataset, synthetic lengths; ``--header``, ``--tools``), ``dataset``
(``--dataset`` formats, sampling, large files item by item)."""
