#!/usr/bin/env bash
# Builds (once) the real observability stack that `make stack-test` runs on loopback:
#   - the OpenTelemetry Collector distribution of stack/otelcol (the components of collector/*.yaml,
#     every module at the collector release in stack/otelcol/go.mod),
#   - Jaeger v2 (cmd/jaeger of the github.com/jaegertracing/jaeger module in stack/jaeger/go.mod),
#   - Prometheus and promtool from Debian's `prometheus` package (installed with apt-get if missing).
#
# Binaries go to a cache outside the checkout:
#   ${OPENAI_LATENCY_STACK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/openai-latency/stack}/<name>-<version>-<hash>/
# where <hash> covers the Go module's own files (go.mod, go.sum, *.go): a binary that exists for
# that version and source is reused, nothing is rebuilt.
#
# Usage: scripts/build-stack.sh              build what is missing (progress on stderr), then print
#                                            OTELCOL_BIN=..., JAEGER_BIN=..., PROMETHEUS_BIN=...,
#                                            PROMTOOL_BIN=... on stdout
#        scripts/build-stack.sh --print-env  only print those lines; fail if anything is missing
#        scripts/build-stack.sh --print-versions  print OTELCOL_VERSION=, JAEGER_MODULE_VERSION=,
#                                            JAEGER_VERSION= (the image tags derived from
#                                            stack/*/go.mod) and stop; needs neither Go nor a build
# Needs Go >= the `go` line of stack/*/go.mod (1.24.6) and the Go module proxy.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${OPENAI_LATENCY_STACK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/openai-latency/stack}"
PRINT_ONLY=0
PRINT_VERSIONS=0
case "${1:-}" in
  --print-env) PRINT_ONLY=1 ;;
  --print-versions) PRINT_VERSIONS=1 ;;
  "") ;;
  *) echo "usage: $0 [--print-env | --print-versions]" >&2; exit 2 ;;
esac

log() { echo "build-stack: $*" >&2; }

# The version of module $2 required by the go.mod in directory $1.
required_version() {
  awk -v mod="$2" '$1 == mod { print $2; exit } $2 == mod { print $3; exit }' "$1/go.mod"
}

# Short hash of a Go module directory's own sources: a change to them means a new binary.
source_hash() {
  (cd "$1" && cat go.mod go.sum ./*.go 2>/dev/null | sha256sum | cut -c1-10)
}

need_go() {
  if ! command -v go >/dev/null 2>&1; then
    log "Go is not installed; make stack-test needs Go >= 1.24.6 (https://go.dev/dl/)."
    exit 2
  fi
}

# go_build NAME VERSION MODULE_DIR PACKAGE [LDFLAGS]: prints the binary's path.
go_build() {
  local name="$1" version="$2" dir="$ROOT/$3" pkg="$4" ldflags="${5:-}"
  local out bin start
  out="$CACHE/$name-$version-$(source_hash "$dir")"
  bin="$out/$name"
  if [ -x "$bin" ]; then
    log "$name $version: cached ($bin)"
  elif [ "$PRINT_ONLY" = 1 ]; then
    log "$name $version is not built yet; run scripts/build-stack.sh"
    exit 1
  else
    need_go
    mkdir -p "$out"
    log "$name $version: building (cold build: several minutes on 2 cores) ..."
    start=$(date +%s)
    # -mod=readonly: go.mod/go.sum in the repo are the whole truth, nothing is resolved anew.
    (cd "$dir" && go build -mod=readonly -trimpath -ldflags "-s -w $ldflags" -o "$bin.tmp" "$pkg")
    mv "$bin.tmp" "$bin"
    log "$name $version: built in $(($(date +%s) - start)) s"
    # Older builds of this binary (another version or source) are not used any more.
    for old in "$CACHE/$name-"*; do
      [ "$old" = "$out" ] || rm -rf "$old"
    done
  fi
  echo "$bin"
}

ensure_prometheus() {
  if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
    return
  fi
  if [ "$PRINT_ONLY" = 1 ]; then
    log "prometheus/promtool not installed; run scripts/build-stack.sh"
    exit 1
  fi
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  log "apt-get install prometheus (Debian package: prometheus and promtool)"
  $sudo apt-get update -qq >&2
  # The service is not started by this (no init system in CI containers).
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >&2
}

otelcol_version="$(required_version "$ROOT/stack/otelcol" go.opentelemetry.io/collector/otelcol)"
jaeger_module_version="$(required_version "$ROOT/stack/jaeger" github.com/jaegertracing/jaeger)"
# Module v1.N.0 is Jaeger v2.(N-63).0: Jaeger releases both from one commit (tags v1.75.0 and
# v2.12.0 are the same commit; CHANGELOG.md: "v1.75.0 / v2.12.0 (2025-11-18)"); the v2 number is
# the image tag. tests/stack checks the result against the pairs of Jaeger's CHANGELOG.
jaeger_minor="${jaeger_module_version#v1.}"
jaeger_minor="${jaeger_minor%%.*}"
jaeger_version="2.$((jaeger_minor - 63)).0"

if [ "$PRINT_VERSIONS" = 1 ]; then
  echo "OTELCOL_VERSION=${otelcol_version#v}"
  echo "JAEGER_MODULE_VERSION=$jaeger_module_version"
  echo "JAEGER_VERSION=$jaeger_version"
  exit 0
fi

otelcol_bin="$(go_build otelcol "${otelcol_version#v}" stack/otelcol . \
  "-X main.version=${otelcol_version#v}")"
jaeger_bin="$(go_build jaeger "$jaeger_version" stack/jaeger github.com/jaegertracing/jaeger/cmd/jaeger \
  "-X github.com/jaegertracing/jaeger/internal/version.latestVersion=v$jaeger_version")"
ensure_prometheus
[ "$PRINT_ONLY" = 1 ] || log "all binaries ready after $SECONDS s"

echo "OTELCOL_BIN=$otelcol_bin"
echo "JAEGER_BIN=$jaeger_bin"
echo "PROMETHEUS_BIN=$(command -v prometheus)"
echo "PROMTOOL_BIN=$(command -v promtool)"
