#!/usr/bin/env bash
# Builds (once) llama.cpp's own HTTP server, `llama-server`, for `make realserver-test`.
#
# Source: the sdist of llama-cpp-python on PyPI at a pinned version, which vendors the llama.cpp
# tree (vendor/llama.cpp, tools/server included). Fetched with pip (`pip download --no-binary`),
# never committed. Built with cmake, CPU only, no native tuning (the binary does not depend on the
# build machine's exact CPU), no libcurl (no model download), target `llama-server` only.
#
# The binary goes to a cache outside the checkout:
#   ${OPENAI_LATENCY_REALSERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/openai-latency/realserver}/
#     llama-server-<llama-cpp-python version>-<hash>/llama-server
# where <hash> covers the cmake flags: a binary that exists for that version and flags is reused.
# Measured on 2 cores: about 8 minutes cold (nice'd, -j2), well under a second when cached.
#
# Usage: scripts/build-llama-server.sh              build if missing (progress on stderr), then
#                                                   print LLAMA_SERVER_BIN=... on stdout
#        scripts/build-llama-server.sh --print-env  only print that line; fail if not built yet
set -euo pipefail

VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
CACHE="${OPENAI_LATENCY_REALSERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/openai-latency/realserver}"
JOBS="${LLAMA_SERVER_BUILD_JOBS:-2}"
PYTHON="${PYTHON:-python3}"
CMAKE_FLAGS=(
  -DCMAKE_BUILD_TYPE=Release
  -DGGML_NATIVE=OFF
  -DLLAMA_CURL=OFF
  -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_EXAMPLES=OFF
  -DLLAMA_BUILD_SERVER=ON
  -DBUILD_SHARED_LIBS=OFF
)
PRINT_ONLY=0
case "${1:-}" in
  --print-env) PRINT_ONLY=1 ;;
  "") ;;
  *) echo "usage: $0 [--print-env]" >&2; exit 2 ;;
esac

log() { echo "build-llama-server: $*" >&2; }

HASH="$(printf '%s\n' "${CMAKE_FLAGS[@]}" | sha256sum | cut -c1-10)"
OUT="$CACHE/llama-server-$VERSION-$HASH"
BIN="$OUT/llama-server"

if [ -x "$BIN" ]; then
  log "llama-server (llama-cpp-python $VERSION): cached ($BIN)"
  echo "LLAMA_SERVER_BIN=$BIN"
  exit 0
fi
if [ "$PRINT_ONLY" = 1 ]; then
  log "llama-server is not built yet; run scripts/build-llama-server.sh"
  exit 1
fi
for tool in cmake c++; do
  command -v "$tool" >/dev/null 2>&1 || { log "$tool is missing (apt-get install cmake g++)"; exit 2; }
done

mkdir -p "$CACHE"
WORK="$(mktemp -d "$CACHE/build.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
start=$(date +%s)
log "fetching the llama-cpp-python $VERSION sdist from PyPI ..."
"$PYTHON" -m pip download --quiet --disable-pip-version-check --no-binary :all: --no-deps \
  --dest "$WORK" "llama-cpp-python==$VERSION"
tar -xzf "$WORK"/llama_cpp_python-"$VERSION".tar.gz -C "$WORK"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
[ -f "$SRC/tools/server/CMakeLists.txt" ] || { log "no tools/server in $SRC"; exit 1; }

GENERATOR=()
command -v ninja >/dev/null 2>&1 && GENERATOR=(-G Ninja)
log "configuring (${CMAKE_FLAGS[*]}) ..."
nice -n 10 cmake -S "$SRC" -B "$WORK/build" "${GENERATOR[@]}" "${CMAKE_FLAGS[@]}" >"$WORK/configure.log" 2>&1 \
  || { tail -40 "$WORK/configure.log" >&2; exit 1; }
log "building llama-server with -j$JOBS (cold build: about 8 minutes on 2 cores) ..."
nice -n 10 cmake --build "$WORK/build" --target llama-server -j "$JOBS" >"$WORK/build.log" 2>&1 \
  || { tail -40 "$WORK/build.log" >&2; exit 1; }

mkdir -p "$OUT"
cp "$WORK/build/bin/llama-server" "$BIN.tmp"
mv "$BIN.tmp" "$BIN"
log "llama-server: built in $(($(date +%s) - start)) s ($BIN)"
# Older builds (another version or flags) are not used any more.
for old in "$CACHE/llama-server-"*; do
  [ "$old" = "$OUT" ] || rm -rf "$old"
done
echo "LLAMA_SERVER_BIN=$BIN"
