#!/usr/bin/env bash
# Runs the whole test suite once per supported OpenAI SDK generation, each in its own virtual
# environment under .venv-matrix/ (reused between runs; each run upgrades openai to the newest
# release of its line):
#
#   openai3         newest openai 3.x (httpx2/httpcore2); the primary leg: the whole suite
#   openai2         newest openai 2.x (httpx/httpcore)
#   openai1         newest openai 1.x, >= 1.76
#   openai3-httpx   newest openai 3.x with legacy httpx installed; every client the tests build
#                   gets a legacy httpx.Client/AsyncClient (pytest plugin tests.support.legacy_httpx_plugin)
#
# Usage: scripts/test-matrix.sh [leg ...] [-- extra pytest args]
#   PYTHON=python3.11 picks the interpreter for new environments (default: python3).
#   REPEAT=20 runs each leg's pytest 20 times in a row and prints, per test, how many runs it
#   passed (flake hunting: REPEAT=20 scripts/test-matrix.sh openai1 -- tests/core/test_x.py::test_y).
# Exits non-zero when any leg fails, including pytest exit 5 (no tests collected).
set -uo pipefail

cd "$(dirname "$0")/.."
ROOT=.venv-matrix
PYTHON=${PYTHON:-python3}

declare -A SPEC=(
    [openai3]='openai>=3,<4'
    [openai2]='openai>=2,<3'
    [openai1]='openai>=1.76,<2'
    [openai3-httpx]='openai>=3,<4 httpx'
)
# The primary leg (the newest openai) runs the whole suite; the others leave out the tests that
# do not depend on the SDK's generation (the CLI, the fake server, the stack's files: tests/conftest.py
# PRIMARY_ONLY) but for those marked every_sdk.
declare -A PYTEST_ARGS=(
    [openai3]='--durations=15'  # the primary leg is the 5-minute suite: its slowest tests in the log
    [openai2]='--sdk-leg=secondary'
    [openai1]='--sdk-leg=secondary'
    [openai3-httpx]='--sdk-leg=secondary -p tests.support.legacy_httpx_plugin'
)
ALL=(openai3 openai2 openai1 openai3-httpx)

legs=()
extra=()
while (($#)); do
    if [[ $1 == -- ]]; then
        shift
        extra=("$@")
        break
    fi
    [[ -n ${SPEC[$1]+x} ]] || { echo "unknown leg: $1 (known: ${ALL[*]})" >&2; exit 2; }
    legs+=("$1")
    shift
done
((${#legs[@]})) || legs=("${ALL[@]}")

mkdir -p "$ROOT"
start=$SECONDS

setup() {  # setup LEG: create or refresh the leg's environment; output goes to its log
    local leg=$1 venv=$ROOT/$1 want have=
    want="$(sha1sum pyproject.toml | cut -c1-40) ${SPEC[$leg]}"
    [[ -x $venv/bin/python ]] || "$PYTHON" -m venv "$venv" || return 1
    [[ -f $venv/.matrix-stamp ]] && have=$(<"$venv/.matrix-stamp")
    local pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check
        --upgrade --upgrade-strategy only-if-needed)
    # shellcheck disable=SC2086  # SPEC holds several requirement words
    if [[ $have == "$want" ]]; then
        "${pip[@]}" ${SPEC[$leg]}  # project already installed (editable): only move openai to its newest
    else
        "${pip[@]}" -e ".[test]" ${SPEC[$leg]} && echo "$want" >"$venv/.matrix-stamp"
    fi
}

repeat() {  # repeat LEG PY: REPEAT runs of the leg's pytest; per test "passed/runs"; non-zero if any failed
    local leg=$1 py=$2 log=$ROOT/$1.repeat.log rc=0 run
    : >"$log"
    for ((run = 1; run <= REPEAT; run++)); do
        # shellcheck disable=SC2086
        "$py" -m pytest -q -rA -p no:cacheprovider ${PYTEST_ARGS[$leg]-} "${extra[@]}" >>"$log" 2>&1 || rc=1
    done
    grep -E '^(PASSED|FAILED|ERROR) ' "$log" | awk -v runs="$REPEAT" '
        { test = $2; seen[test] = 1; if ($1 == "PASSED") passed[test]++ }
        END { for (test in seen) printf "   %d/%d  %s\n", passed[test], runs, test }' | sort -k2
    grep -E '^(FAILED|ERROR) ' "$log" | sort | uniq -c | sed 's/^/   failures: /'
    return $rc
}

# Environments are built in parallel (network/disk bound); tests run one leg at a time, since
# the timing tests compare against the fake server's clock and want the CPU.
declare -A PIDS
for leg in "${legs[@]}"; do
    setup "$leg" >"$ROOT/$leg.setup.log" 2>&1 &
    PIDS[$leg]=$!
done
failed=()
for leg in "${legs[@]}"; do
    if ! wait "${PIDS[$leg]}"; then
        echo "== $leg: environment setup failed (see $ROOT/$leg.setup.log)" >&2
        tail -n 20 "$ROOT/$leg.setup.log" >&2
        failed+=("$leg(setup)")
    fi
done
echo "== environments ready after $((SECONDS - start)) s"

for leg in "${legs[@]}"; do
    [[ " ${failed[*]-} " == *" $leg(setup) "* ]] && continue
    py=$ROOT/$leg/bin/python
    versions=$("$py" - <<'EOF'
import importlib.metadata as m
out = []
for name in ("openai", "httpx", "httpcore", "httpx2", "httpcore2"):
    try:
        out.append(f"{name} {m.version(name)}")
    except m.PackageNotFoundError:
        pass
print(", ".join(out))
EOF
)
    echo "== $leg: $versions"
    leg_start=$SECONDS
    if ((${REPEAT:-1} > 1)); then
        repeat "$leg" "$py"
        rc=$?
    else
        # shellcheck disable=SC2086
        "$py" -m pytest -q -p no:cacheprovider ${PYTEST_ARGS[$leg]-} "${extra[@]}"
        rc=$?
    fi
    echo "== $leg: pytest exit $rc after $((SECONDS - leg_start)) s"
    if [[ $leg == "${ALL[0]}" ]] && ((SECONDS - leg_start > 300)); then
        echo "== $leg: over the 5-minute budget of one run of the suite: see the slowest tests above" >&2
    fi
    ((rc == 0)) || failed+=("$leg(pytest exit $rc)")
done

echo "== matrix wall time $((SECONDS - start)) s"
if ((${#failed[@]})); then
    echo "== FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "== all legs passed: ${legs[*]}"
