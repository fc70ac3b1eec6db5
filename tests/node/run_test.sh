#!/usr/bin/env bash
# CTest's entry to one node client test (tests/CMakeLists.txt): runs
# `node --test FILE` from tests/node. Without node the test fails saying
# how to install it, where CTest alone would only report a missing command;
# the test files themselves say the same when the npm packages are missing.
set -euo pipefail
if ! command -v node >/dev/null 2>&1; then
  echo "node is not installed: run scripts/setup_test_tools.sh to install node and the packages of tests/node" >&2
  exit 1
fi
cd "$(dirname "$0")"
exec node --test "$1"
