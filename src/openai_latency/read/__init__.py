"""SDK objects and HTTP answers -> attributes, pure reads: ``attributes`` (request kwargs, client,
response objects, usage), ``headers`` (the final response's headers), ``errors`` (exceptions and
provider error reports -> ``error.type`` and the category), ``routing`` (the ``OperationKind``s,
path templates), ``server_timing`` (the server's own account: llama.cpp ``timings``, vLLM
``metrics``). Internal; docs/ARCHITECTURE.md has the map.
"""
