"""Spans in, calls out: the only part of the CLI that knows OTLP JSON, Jaeger and our attribute names.

``names`` (attribute keys, phases and their order, group keys), ``span`` (the :class:`Span` every
reader produces), ``decode`` and ``decode_msgspec`` (OTLP JSON span objects, checked and fast),
``files`` and ``jaeger`` (where spans are read from), ``write`` (finished SDK spans -> span files),
``calls`` and ``collect`` (operation spans joined with their phase spans -> :class:`Call`),
``server_account`` (the server's own account on an operation span).
"""
