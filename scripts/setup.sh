#!/usr/bin/env bash
# Installs the Debian packages replayssm builds against. Idempotent: packages
# already present are skipped, so CI and repeat runs pay nothing.
set -euo pipefail

pkgs=(
  build-essential cmake pkg-config
  nlohmann-json3-dev   # config.json / safetensors headers
  libcli11-dev         # command line
  libcpp-httplib-dev   # replayssm serve
  libpcre2-dev         # tokenizer.json pre-tokenizer regexes
  libutf8proc-dev      # tokenizer.json NFC normalization
  libgtest-dev         # tests
  libbenchmark-dev     # bench/
  gnuplot-nox          # replayssm bench: PNG plots
  # fuzz/ (scripts/fuzz.sh): libFuzzer targets under ASan and UBSan, built
  # with clang-16; its sanitizer runtimes and libFuzzer come separately.
  clang-16
  libclang-rt-16-dev
  libfuzzer-16-dev
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
