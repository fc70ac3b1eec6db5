#!/usr/bin/env bash
# The libFuzzer targets (fuzz/; docs/testing.md, "Fuzzing"), built with
# clang-16 in a build directory of their own (build-fuzz/, or $FUZZ_BUILD).
#
#   fuzz.sh build              configure (once) and build every target
#   fuzz.sh smoke NAME [SECS]  replay NAME's corpus, then fuzz for SECS (10) s:
#                              what CTest runs (fuzz_NAME); new inputs go to a
#                              scratch directory, the committed corpus is kept
#   fuzz.sh run NAME SECS      fuzz NAME for SECS s, adding what it finds to
#                              fuzz/corpus/NAME (then minimise: merge NAME)
#   fuzz.sh merge NAME         minimise fuzz/corpus/NAME in place: the fewest
#                              inputs that keep every edge it covers
#
# A finding stops the run: libFuzzer writes crash-*/leak-*/timeout-* (in
# the current directory) and exits non-zero; replay one with
# `build-fuzz/NAME_fuzz FILE`.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${FUZZ_BUILD:-$root/build-fuzz}

# Stack traces with function names and lines: clang-16's symbolizer, or
# the one on the PATH.
for s in llvm-symbolizer-16 llvm-symbolizer; do
  if command -v "$s" >/dev/null; then
    export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$(command -v "$s")}
    export UBSAN_SYMBOLIZER_PATH=${UBSAN_SYMBOLIZER_PATH:-$ASAN_SYMBOLIZER_PATH}
    break
  fi
done

usage() { sed -n '2,16p' "$0" >&2; exit 2; }

binary() {
  local bin="$build/${1}_fuzz"
  [ -f "fuzz/${1}_fuzz.cpp" ] || { echo "fuzz.sh: no fuzz target '$1' (fuzz/${1}_fuzz.cpp)" >&2; exit 2; }
  [ -x "$bin" ] || { echo "fuzz.sh: $bin is not built (bash scripts/fuzz.sh build)" >&2; exit 1; }
  echo "$bin"
}

# Flags every run shares: ten seconds on one input is a hang; the
# dictionary where the target has one.
flags() {
  local f=(-timeout=10 -rss_limit_mb=2048 -max_len=16384 -print_final_stats=1)
  [ -f "fuzz/$1.dict" ] && f+=("-dict=fuzz/$1.dict")
  echo "${f[@]}"
}

case "${1:-}" in
  build)
    command -v clang++-16 >/dev/null || { echo "fuzz.sh: clang++-16 not found (bash scripts/setup.sh installs it)" >&2; exit 1; }
    if [ ! -f "$build/CMakeCache.txt" ]; then
      CC=clang-16 CXX=clang++-16 cmake -S . -B "$build" -DREPLAYSSM_FUZZ=ON >/dev/null
    fi
    cmake --build "$build" -j "$(nproc)"
    ;;
  smoke)
    [ $# -ge 2 ] || usage
    bin=$(binary "$2")
    secs=${3:-10}
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    # shellcheck disable=SC2046
    "$bin" $(flags "$2") -max_total_time="$secs" -artifact_prefix="$scratch/" "$scratch" "fuzz/corpus/$2" || {
      rc=$?
      for f in "$scratch"/crash-* "$scratch"/leak-* "$scratch"/timeout-* "$scratch"/oom-*; do
        [ -f "$f" ] && { echo "fuzz.sh: finding $(basename "$f") (base64):"; base64 -w0 "$f"; echo; }
      done
      exit $rc
    }
    ;;
  run)
    [ $# -ge 3 ] || usage
    bin=$(binary "$2")
    mkdir -p "fuzz/corpus/$2"
    # shellcheck disable=SC2046
    "$bin" $(flags "$2") -max_total_time="$3" "fuzz/corpus/$2"
    ;;
  merge)
    [ $# -ge 2 ] || usage
    bin=$(binary "$2")
    merged=$(mktemp -d)
    trap 'rm -rf "$merged"' EXIT
    # shellcheck disable=SC2046
    # Edges only (no hit counts): the committed corpus stays a few hundred
    # kilobytes and loses no edge (docs/testing.md, "Fuzzing").
    "$bin" $(flags "$2") -set_cover_merge=1 -use_counters=0 "$merged" "fuzz/corpus/$2"
    rm -f "fuzz/corpus/$2"/*
    cp "$merged"/* "fuzz/corpus/$2"/
    ;;
  *) usage ;;
esac
