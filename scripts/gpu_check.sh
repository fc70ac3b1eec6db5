#!/usr/bin/env bash
# The GPU check: CUDA parity tests and kernel benchmarks on the H200.
#
# The device machine has the CUDA toolkit but not this project's Debian
# dependencies, so binaries are built here and carried there:
#   bash scripts/gpu_check.sh stage        # here: build, copy binaries + shared libs to .gpu/
#   bash scripts/gpu_check.sh run [OUT]    # there (device tool, carry .gpu): tests, bench, table
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  stage)
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build build -j "$(nproc)" --target replayssm_cuda_tests replayssm_ssm_bench
    rm -rf .gpu && mkdir -p .gpu
    # Both need only libc and libstdc++: the CUDA runtime is linked statically.
    cp build/tests/replayssm_cuda_tests build/replayssm_ssm_bench .gpu/
    grep -qxF '/.gpu/' .git/info/exclude || echo '/.gpu/' >> .git/info/exclude
    du -sh .gpu
    ;;
  run)
    out="${2:-${OUT:-/tmp/gpu_check}}"
    mkdir -p "$out"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
    .gpu/replayssm_cuda_tests 2>&1 | tee "$out/cuda_tests.log" | grep -E '^\[ *(OK|FAILED|PASSED|SKIPPED) ' || true
    if grep -q 'SKIPPED\|FAILED' "$out/cuda_tests.log"; then echo "CUDA tests did not all pass"; exit 1; fi
    .gpu/replayssm_ssm_bench "$out/ssm_decode_bench.json" | tee "$out/ssm_decode_bench.txt"
    ;;
  *)
    echo "usage: $0 stage | run [OUT_DIR]" >&2
    exit 2
    ;;
esac
