#!/usr/bin/env bash
# Installs what the tests need beyond the C++ build: node, and the npm
# packages pinned by tests/node/package-lock.json into tests/node/node_modules:
# @huggingface/jinja, the oracle of tests/jinja_oracle_test.cpp, and openai,
# the official SDK that tests/node/*.test.mjs drive `replayssm serve` with
# (CTest's node_openai_sdk and node_load).
# Idempotent: node comes from Debian's nodejs/npm only when missing, and
# `npm ci` runs only when node_modules does not match the lock file.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  pkgs=()
  command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
  command -v npm >/dev/null 2>&1 || pkgs+=(npm)
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
fi

# Every package the lock file names, installed at the locked version.
lock_satisfied() {
  (cd tests/node && node -e '
    const lock = require("./package-lock.json");
    for (const [path, info] of Object.entries(lock.packages)) {
      if (path === "") continue;
      let version;
      try { version = require("./" + path + "/package.json").version; } catch { process.exit(1); }
      if (version !== info.version) process.exit(1);
    }') >/dev/null 2>&1
}

if lock_satisfied; then
  echo "tests/node: packages up to date"
else
  npm ci --prefix tests/node --no-audit --no-fund --loglevel=error
  lock_satisfied || { echo "tests/node: npm ci did not install the locked packages" >&2; exit 1; }
fi
