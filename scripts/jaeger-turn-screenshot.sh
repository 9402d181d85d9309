#!/usr/bin/env bash
# docs/images/jaeger-ask-turn.png: one /ask turn of the example backend in the real Jaeger UI.
#
#   JAEGER_UI_BUILD=<jaeger-ui>/packages/jaeger-ui/build bash scripts/jaeger-turn-screenshot.sh [out.png]
#
# Needs: .venv with the otlp extra and examples/requirements.txt, the source-built Jaeger
# (scripts/build-stack.sh), a jaeger-ui build (docs/STACK.md, "The Jaeger UI for the source-built
# Jaeger") and Debian's chromium. Everything runs on loopback on free ports and is stopped at the
# end: the fake server, Jaeger (OTLP straight in, no collector) and the backend under
# opentelemetry-instrument, with detailed phase spans as the compose stack runs it and with only the
# instrumentations its image has (ours and FastAPI's; .venv also has the official openai and httpx ones).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-docs/images/jaeger-ask-turn.png}")
py=.venv/bin/python
[[ -d ${JAEGER_UI_BUILD:-} && -f $JAEGER_UI_BUILD/index.html ]] ||
    { echo "set JAEGER_UI_BUILD to a jaeger-ui build/ folder (docs/STACK.md)" >&2; exit 2; }
command -v chromium >/dev/null || { echo "chromium is missing (make browser)" >&2; exit 2; }
eval "$(bash scripts/build-stack.sh)"

port() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
fake=$(port) query=$(port) otlp=$(port) app=$(port)
work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; [[ -n ${keep:-} ]] || rm -rf "$work"; }
trap cleanup EXIT
wait_http() {  # wait_http URL: up to 30 s
    for _ in $(seq 300); do curl -fs -o /dev/null "$1" && return 0; sleep 0.1; done
    echo "not up: $1 (logs in $work)" >&2; exit 1
}

.venv/bin/openai-latency fake-server --host 127.0.0.1 --port "$fake" >"$work/fake.log" 2>&1 &
pids+=($!)
JAEGER_UI_ASSETS_PATH=$(cd "$JAEGER_UI_BUILD" && pwd) JAEGER_QUERY_HTTP_ENDPOINT=127.0.0.1:$query \
    JAEGER_QUERY_GRPC_ENDPOINT=127.0.0.1:$(port) JAEGER_OTLP_GRPC_ENDPOINT=127.0.0.1:$(port) \
    JAEGER_OTLP_HTTP_ENDPOINT=127.0.0.1:$otlp JAEGER_HEALTH_ENDPOINT=127.0.0.1:$(port) \
    JAEGER_TELEMETRY_HOST=127.0.0.1 JAEGER_TELEMETRY_PORT=$(port) \
    "$JAEGER_BIN" --config deploy/jaeger/config.yaml >"$work/jaeger.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$query/"
OPENAI_BASE_URL=http://127.0.0.1:$fake/v1 OPENAI_API_KEY=sk-fake OTEL_SERVICE_NAME=example-backend \
    OTEL_TRACES_EXPORTER=otlp OTEL_METRICS_EXPORTER=none OTEL_LOGS_EXPORTER=none \
    OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$otlp \
    OTEL_BSP_SCHEDULE_DELAY=200 OPENAI_LATENCY_PHASE_SPANS=detailed \
    OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=openai,openai_agents,httpx,httpx2 \
    .venv/bin/opentelemetry-instrument .venv/bin/uvicorn examples.backend.app:app \
    --host 127.0.0.1 --port "$app" >"$work/app.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$app/healthz"

# One streamed turn, as the load generator sends them (its planning call asks for the tool).
curl -fsN "http://127.0.0.1:$app/ask?q=where+did+my+time+go&stream=true" \
    -H 'x-fake-tool-plan: search_documents' -H 'x-fake-ttft-ms: 400' -o /dev/null

api="http://127.0.0.1:$query/api/traces?service=example-backend&operation=GET%20%2Fask&limit=1"
trace=
for _ in $(seq 100); do
    trace=$(curl -fs "$api" | "$py" -c 'import json, sys
data = json.load(sys.stdin)["data"]
print(data[0]["traceID"] if data and len(data[0]["spans"]) > 10 else "")') && [[ -n $trace ]] && break
    sleep 0.2
done
[[ -n $trace ]] || { keep=1; echo "no /ask trace in Jaeger (logs in $work)" >&2; exit 1; }
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1600,780 \
    --virtual-time-budget=8000 --screenshot="$out" \
    "http://127.0.0.1:$query/trace/$trace?uiEmbed=v0" >"$work/chromium.log" 2>&1
echo "wrote $out (trace $trace)"
