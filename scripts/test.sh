#!/usr/bin/env bash
# The whole test suite on a fresh machine: install dependencies (and the npm
# test tools: scripts/setup_test_tools.sh), build, run
# every test through CTest. Fails if any test fails or if none ran.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup_test_tools.sh
bash scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)" 2>&1 | tee ctest.log
grep -qE "^100% tests passed, 0 tests failed out of [1-9]" ctest.log
