#!/usr/bin/env bash
# Installs what tests/cli/render/test_html.py needs (idempotent; `make test` runs it before pytest):
#   - chromium (Debian package): the headless browser that loads the --html pages, checks that every
#     chart drew its data without a script error, and takes a screenshot.
# Usage: scripts/install-browser.sh            (as root, or with sudo available)
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if ! command -v chromium >/dev/null 2>&1; then
  echo "install-browser: apt-get install chromium"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium
fi
# the Debian launcher script prints a harmless shell warning on some hosts: keep only the version line
chromium --version 2>/dev/null | sed -n 1p
