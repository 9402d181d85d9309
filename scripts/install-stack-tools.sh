#!/usr/bin/env bash
# Installs what tests/stack needs (idempotent; CI runs it before pytest):
#   - docker-compose (Debian package, Compose 1.29): `docker-compose config` validates
#     docker-compose.yml and deploy/compose.scale-out.yml without a Docker engine;
#   - prometheus (Debian package): brings promtool for `promtool check config` / `check rules`;
#   - Python packages of the example backend + PyYAML, into the project's venv (or $PYTHON).
# Usage: scripts/install-stack-tools.sh            (as root, or with sudo available)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON="$(command -v python3)"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-stack-tools: apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  # --no-install-recommends: promtool is all we need from prometheus; the service is not started
  # (no init system in CI containers; on a full host, `systemctl disable --now prometheus` if unwanted).
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

echo "install-stack-tools: pip install (example backend, PyYAML) with $PYTHON"
"$PYTHON" -m pip install -q pyyaml -r "$ROOT/examples/requirements.txt"

docker-compose version | sed -n 1p  # sed reads all: no SIGPIPE under pipefail
promtool --version 2>&1 | sed -n 1p
