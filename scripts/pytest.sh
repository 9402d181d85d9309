#!/usr/bin/env bash
# Runs the test suite with the given interpreter; pytest's exit code 5 (no tests collected) fails.
set -uo pipefail
python=${1:-.venv/bin/python}
shift || true
"$python" -m pytest -p no:cacheprovider "$@"
status=$?
if [[ $status -eq 5 ]]; then
    echo "pytest collected no tests: failing on purpose" >&2
    exit 1
fi
exit $status
