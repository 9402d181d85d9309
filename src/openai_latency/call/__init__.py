"""One call as data: its marks, phases and numbers, computed once when it ends.

``timeline`` (the marks of the call, its attempts and backoffs; marks -> phases), ``token_times``
(TTFT, time to first answer token, thinking time, TPOT), ``summary`` (the finished call's summary
attributes and metric values), ``operation`` (``Operation``: one call's lifecycle, ``finish()``
exactly once), ``deferred`` (ends that a finalizer starts, run on a worker thread). Internal: the
public face is the package's ``OpenAILatencyInstrumentor``; docs/ARCHITECTURE.md has the map.
"""
