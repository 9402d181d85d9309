"""An OpenAI-compatible fake HTTP server with scripted latency and a log of what it actually did.

It is the ground truth of the project's timing tests, the engine of the demo and the benchmark
target::

    from openai_latency.fake_server import FakeServer

    with FakeServer(defaults={"chunks": 8, "chunk-delay-ms": 20}) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test")
        client.chat.completions.create(model="gpt-4o-mini", messages=[...],
                                       extra_headers={"x-fake-ttft-ms": "150"})
        record = server.last_record()   # received_ns, headers_sent_ns, events [(kind, ns)], ...

See :mod:`openai_latency.fake_server.script` for the script keys.
"""

from .errors import ERRORS
from .payloads import Canned
from .records import RequestRecord
from .script import DEFAULT_RATE_LIMITS, SCRIPT_KEYS, ScriptError
from .server import FakeServer, SpawnedServer

__all__ = [
    "DEFAULT_RATE_LIMITS",
    "ERRORS",
    "SCRIPT_KEYS",
    "Canned",
    "FakeServer",
    "RequestRecord",
    "ScriptError",
    "SpawnedServer",
]
