"""The wheel as a user installs it (``make dist-check``; collected only when OPENAI_LATENCY_DIST names
the folder ``make dist`` filled): a fresh virtual environment, ``pip install`` of the wheel with its
extras from the package index, then its console scripts and an app under its
``opentelemetry-instrument``, and ``openai-latency demo``. Catches modules, entry points and extras
missing from the package."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import time
import urllib.request
import zipfile
from pathlib import Path

from tests.e2e.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / os.environ.get("OPENAI_LATENCY_DIST", "dist")
APP = """
import openai, os
client = openai.OpenAI(base_url=os.environ["FAKE_BASE_URL"], api_key="sk-test", max_retries=0)
for _ in range(3):
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
"""


def _one(pattern: str) -> Path:
    (found,) = DIST.glob(pattern)
    return found


def _run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{argv}: {done.stderr[-2000:]}"
    return done  # type: ignore[no-any-return]


def test_the_archives_hold_every_module() -> None:
    modules = {p.relative_to(ROOT / "src").as_posix() for p in (ROOT / "src").rglob("*.py")}
    with zipfile.ZipFile(_one("*.whl")) as wheel:
        names = set(wheel.namelist())
        entry_points = wheel.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert modules <= names, sorted(modules - names)
    for line in (
        "openai-latency = openai_latency.cli:main",
        "openai_latency = openai_latency:OpenAILatencyInstrumentor",
        "openai_latency_file = openai_latency.file_exporter:FileSpanExporter",
    ):
        assert line in entry_points
    with tarfile.open(_one("*.tar.gz")) as sdist:
        members = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {f"src/{m}" for m in modules} | {"README.md", "pyproject.toml", "CHANGELOG.md"} <= members


def test_installed_wheel_runs(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    bin_dir = venv / "bin"
    wheel = _one("*.whl")
    _run([str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
          f"{wheel}[file,demo,cli]"])  # fmt: skip
    for command in (["report", "--help"], ["fake-server", "--help"], ["--version"]):
        done = _run([str(bin_dir / "openai-latency"), *command], cwd=tmp_path)
        assert done.stdout.strip()
    assert "--jaeger" in _run([str(bin_dir / "openai-latency"), "report", "--help"]).stdout

    # the README's "run it" story, from the installed package: percentiles, triage, a waterfall, a file
    demo = _run([str(bin_dir / "openai-latency"), "demo"], cwd=tmp_path).stdout
    assert "p50 / p95 / p99" in demo and "triage:" in demo and "waterfall: the 1 slowest call" in demo
    written = re.search(r"(/\S+\.jsonl)", demo)
    assert written, demo[-2000:]
    reread = _run([str(bin_dir / "openai-latency"), "report", written.group(1), "--format", "json"])
    assert json.loads(reread.stdout)["input"]["operation_spans"] > 0

    port = free_port()
    server = subprocess.Popen(
        [str(bin_dir / "openai-latency"), "fake-server", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2):
                    break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "fake server did not start"
                time.sleep(0.2)
        app = tmp_path / "app.py"
        app.write_text(APP)
        env = {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOME": os.environ.get("HOME", str(tmp_path)),
            "FAKE_BASE_URL": f"http://127.0.0.1:{port}/v1",
            "OTEL_TRACES_EXPORTER": "openai_latency_file",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
            "OTEL_SERVICE_NAME": "from-the-wheel",
        }
        instrument = [str(bin_dir / "opentelemetry-instrument"), str(bin_dir / "python"), str(app)]
        _run(instrument, env=env, cwd=tmp_path)
        traces = list((tmp_path / "out" / "otlp").glob("traces-*.jsonl"))
        assert len(traces) == 1  # the exporter's default file, under ./out/otlp
        # `openai-latency report` with no path reads ./out/otlp
        done = _run([str(bin_dir / "openai-latency"), "report", "--format", "json"], cwd=tmp_path)
        report = json.loads(done.stdout)
        assert report["input"]["operation_spans"] == 3 and report["input"]["phase_spans"] >= 9
        assert [group["key"]["model"] for group in report["groups"]] == ["gpt-4o-mini"]
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)


OLDEST_APP = """
import json
import openai
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from openai_latency import OpenAILatencyInstrumentor
from openai_latency.fake_server import SpawnedServer

exporter = InMemorySpanExporter()
tracer_provider = TracerProvider()
tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
reader = InMemoryMetricReader()
OpenAILatencyInstrumentor().instrument(
    tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader])
)
server = SpawnedServer()
try:
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    messages = [{"role": "user", "content": "hi"}]
    client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    for _ in client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True):
        pass
    client.embeddings.create(model="text-embedding-3-small", input="hi")
finally:
    server.stop()
data = reader.get_metrics_data()
print(json.dumps({
    "spans": [
        {"name": s.name, "parent": s.parent.span_id if s.parent else None, "id": s.context.span_id,
         "attributes": dict(s.attributes)}
        for s in exporter.get_finished_spans()
    ],
    "metrics": sorted(
        {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    ),
}, default=list))
"""


def _floors(wheel: Path, names: tuple[str, ...]) -> dict[str, str]:
    """The ``>=`` floor the wheel declares for each named requirement (its own or an extra's)."""
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA")))
    floors: dict[str, str] = {}
    for line in metadata.decode().splitlines():
        found = re.fullmatch(r"Requires-Dist: ([A-Za-z0-9_.-]+)([^;]*)(;.*)?", line.strip())
        floor = re.search(r">=([^,\s]+)", found.group(2)) if found else None
        if found and floor and found.group(1) in names:
            floors.setdefault(found.group(1), floor.group(1))
    assert set(floors) == set(names), floors
    return floors


def test_installed_wheel_works_at_its_oldest_declared_opentelemetry(tmp_path: Path) -> None:
    """Every requirement of the package at the floor it declares, and openai at the oldest release it
    supports (the OTel SDK at the API's floor): a chat call, a stream and an embeddings call record
    their full telemetry, with no internal error. A floor below what the code imports (a
    semantic-conventions constant it does not have yet) fails here: every call would lose its
    telemetry to a logged AttributeError."""
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = str(venv / "bin" / "python")
    wheel = _one("*.whl")
    names = (
        "opentelemetry-api",
        "opentelemetry-instrumentation",
        "opentelemetry-semantic-conventions",
        "wrapt",
        "openai",
    )
    floors = _floors(wheel, names)
    pins = [f"{name}=={version}" for name, version in floors.items()]
    _run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel), *pins,
          f"opentelemetry-sdk=={floors['opentelemetry-api']}"])  # fmt: skip
    app = tmp_path / "app.py"
    app.write_text(OLDEST_APP)
    done = _run([python, str(app)], cwd=tmp_path)
    assert "internal error" not in done.stderr, done.stderr[-3000:]
    recorded = json.loads(done.stdout)
    operations = [s for s in recorded["spans"] if s["parent"] is None]
    names_seen = [s["name"] for s in operations]
    assert names_seen == ["chat gpt-4o-mini", "chat gpt-4o-mini", "embeddings text-embedding-3-small"]
    for operation in operations:
        phases = {s["name"] for s in recorded["spans"] if s["parent"] == operation["id"]}
        assert {"openai.request_build", "openai.network_wait"} <= phases, phases
        attributes = operation["attributes"]
        assert attributes["gen_ai.provider.name"] == "openai"
        assert "openai_latency.dominant_phase" in attributes
    chat, stream, embeddings = (o["attributes"] for o in operations)
    assert chat["gen_ai.usage.input_tokens"] > 0 and embeddings["gen_ai.usage.input_tokens"] > 0
    assert chat["gen_ai.request.stream"] is False and stream["gen_ai.request.stream"] is True
    assert chat["openai.api.type"] == "chat_completions" and "gen_ai.usage.reasoning.output_tokens" in chat
    assert stream["openai_latency.stream.chunks"] > 1 and stream["openai_latency.usage.estimated"] is True
    assert {"gen_ai.client.operation.duration", "gen_ai.client.token.usage"} <= set(recorded["metrics"])
