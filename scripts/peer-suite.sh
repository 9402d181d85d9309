#!/usr/bin/env bash
# Runs the openai SDK's own offline tests twice, plain and with openai-latency instrumenting the
# SDK, and fails when the instrumentation changes any outcome (docs/ARCHITECTURE.md, "Testing").
#
# Usage: scripts/peer-suite.sh [PYTHON]      (default: .venv/bin/python)
#   PEER_WORKERS=N    pytest-xdist workers per run (default 2)
#   extra pytest arguments can be given after the interpreter: scripts/peer-suite.sh PY -x ...
#
# Steps: reads the openai version installed for PYTHON, downloads that version's source
# distribution once into .cache/peer/openai-X/ and unpacks its tests/ and pyproject.toml (the
# SDK's pytest settings), installs what the tests need into PYTHON's environment, runs the
# offline subset with -p no:cacheprovider -n 2 (plugins from tests/peer/: openai_latency_peer_select
# in both runs, openai_latency_peer_plugin in the instrumented one), then compares the outcomes
# per test id from the two JUnit XML files.
#
# Exit status is non-zero when a test passes plain but not instrumented, when either run executed
# no test or the two runs ran different tests, when pytest itself broke (exit >= 2), or when the
# instrumented run exported no operation span.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${1:-.venv/bin/python}
(($#)) && shift
EXTRA=("$@")
WORKERS=${PEER_WORKERS:-2}
[[ $PY == */* ]] && PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")
command -v "$PY" >/dev/null || { echo "peer-suite: no interpreter $PY" >&2; exit 2; }

VERSION=$("$PY" -c 'import importlib.metadata as m; print(m.version("openai"))') || {
    echo "peer-suite: openai is not installed for $PY" >&2
    exit 2
}
CACHE=$ROOT/.cache/peer/openai-$VERSION
SRC=$CACHE/src
OUT=$CACHE/runs
start=$SECONDS

# --- the SDK's tests, from its source distribution ---------------------------------------------
if [[ ! -f $SRC/.complete ]]; then
    rm -rf "$SRC"
    mkdir -p "$CACHE/sdist" "$SRC"
    if ! compgen -G "$CACHE/sdist/openai-*.tar.gz" >/dev/null; then
        echo "== downloading the openai $VERSION source distribution"
        download=("$PY" -m pip download --quiet --disable-pip-version-check --no-binary :all: --no-deps
            -d "$CACHE/sdist" "openai==$VERSION")
        # pip builds the sdist's metadata: with the interpreter's own hatchling when it has one
        # (seconds), else in an isolated build environment (can take minutes on a busy machine).
        "${download[@]}" --no-build-isolation 2>/dev/null || "${download[@]}"
    fi
    "$PY" - "$CACHE/sdist" "$SRC" <<'PYEOF'
import sys
import tarfile
from pathlib import Path

sdist = sorted(Path(sys.argv[1]).glob("openai-*.tar.gz"))[0]
with tarfile.open(sdist) as archive:
    members = []
    for member in archive.getmembers():
        rest = member.name.partition("/")[2]
        if rest == "pyproject.toml" or rest.startswith("tests/"):
            member.name = rest
            members.append(member)
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    archive.extractall(sys.argv[2], members=members, **safe)
PYEOF
    touch "$SRC/.complete"
fi

# --- the offline subset ------------------------------------------------------------------------
SUBSET=()
for path in tests/test_client.py tests/test_streaming.py tests/test_response.py \
    tests/test_legacy_response.py tests/lib/chat tests/lib/responses; do
    if [[ -e $SRC/$path ]]; then
        SUBSET+=("$path")
    else
        echo "peer-suite: openai $VERSION has no $path" >&2
    fi
done
((${#SUBSET[@]})) || { echo "peer-suite: none of the subset exists in openai $VERSION" >&2; exit 2; }

# --- what the tests need -----------------------------------------------------------------------
# Always: the runner and its plugins, the SDK test suite's own helpers, the OTel SDK for our plugin.
NEEDS=(pytest pytest-asyncio pytest-xdist inline-snapshot rich 'websockets<16' opentelemetry-sdk)
# Test-only packages that some openai releases import (1.x/2.x mock with the respx package; 3.x
# vendors a fork in tests/respx2), as module=distribution: installed only when the subset or the
# helper modules it imports (conftest.py, utils.py, ...) name them in Python code. Installing respx
# next to openai 3 would also bring legacy httpx, which changes the SDK's retryable exceptions.
mapfile -t CODE < <(cd "$SRC" && {
    find "${SUBSET[@]}" -name '*.py'
    find tests -name '*.py' ! -name 'test_*.py'
} | sort -u)
for pair in respx=respx dirty_equals=dirty-equals time_machine=time-machine nest_asyncio=nest_asyncio \
    trio=trio; do
    module=${pair%%=*}
    if (cd "$SRC" && grep -qsE "^\s*(import|from) $module\b" "${CODE[@]}"); then
        NEEDS+=("${pair#*=}")
    fi
done
echo "== installing test needs into $("$PY" -c 'import sys; print(sys.prefix)'): ${NEEDS[*]}"
"$PY" -m pip install --quiet --disable-pip-version-check "${NEEDS[@]}"
if ! "$PY" -c 'import openai_latency' 2>/dev/null; then
    "$PY" -m pip install --quiet --disable-pip-version-check -e "$ROOT"
fi
WHERE=$("$PY" -c 'import os, openai_latency; print(os.path.dirname(openai_latency.__file__))')
[[ $WHERE == "$ROOT/src/openai_latency" ]] || echo "peer-suite: warning: openai_latency is imported from $WHERE" >&2

rm -rf "$OUT"
mkdir -p "$OUT"
export PYTHONPATH=$ROOT/tests/peer${PYTHONPATH:+:$PYTHONPATH}
PYTEST=("$PY" -m pytest -p no:cacheprovider -n "$WORKERS" -p openai_latency_peer_select -k "not aiohttp")

PLUGIN=(-p openai_latency_peer_plugin)
RERUNS=${PEER_RERUNS:-3}

run() {  # run MODE [pytest args...] -- TESTS...: one pass; sets RC_<MODE> (dashes become _)
    local mode=$1 t0=$SECONDS rc=0 args=()
    shift
    while [[ $1 != -- ]]; do args+=("$1"); shift; done
    shift
    (cd "$SRC" && "${PYTEST[@]}" "${args[@]}" --junitxml="$OUT/$mode.xml" "$@") >"$OUT/$mode.log" 2>&1 || rc=$?
    printf -v "RC_${mode//-/_}" %d "$rc"
    echo "== $mode: pytest exit $rc after $((SECONDS - t0)) s: $(tail -n 1 "$OUT/$mode.log")"
}

echo "== openai $VERSION, $(cd "$SRC" && "$PY" -c 'import sys; print(sys.version.split()[0])'), $WORKERS workers"
run plain -- "${SUBSET[@]}" "${EXTRA[@]}"
OPENAI_LATENCY_PEER_REPORT=$OUT/plugin.json run instrumented "${PLUGIN[@]}" -- "${SUBSET[@]}" "${EXTRA[@]}"
sed -n '/openai-latency peer plugin/,/^=/p' "$OUT/instrumented.log" | sed '$d'

# --- comparison --------------------------------------------------------------------------------
# Tests that passed plain but not instrumented are rerun alone, RERUNS times in each mode, one at
# a time: the SDK has timing-sensitive tests (4 s socket timeouts) that fail on a loaded machine
# whether instrumented or not. Only a failure that the reruns reproduce fails the peer suite.
COMPARE=("$PY" "$ROOT/tests/peer/peer_compare.py")
"${COMPARE[@]}" candidates "$OUT" "$SRC"
mapfile -t REGRESSED <"$OUT/regressed.txt"
if ((${#REGRESSED[@]})) && ((RERUNS > 0)); then
    echo "== rerunning ${#REGRESSED[@]} tests that passed plain but not instrumented, $RERUNS times each way"
    PYTEST+=(-n 0)
    for ((i = 1; i <= RERUNS; i++)); do
        run "rerun-plain-$i" -- "${REGRESSED[@]}"
        run "rerun-instrumented-$i" "${PLUGIN[@]}" -- "${REGRESSED[@]}"
    done
fi
status=0
"${COMPARE[@]}" verdict "$OUT" "$SRC" "$VERSION" "$RC_plain" "$RC_instrumented" || status=$?
echo "== wall time $((SECONDS - start)) s (logs and JUnit XML in ${OUT#"$ROOT"/})"
exit "$status"
