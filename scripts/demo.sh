#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build, and run the
# default model (the tiny NemotronH fixture until an embedded trained model
# ships): its architecture, then a greedy continuation with timing stats.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
model=tests/data/nemotron_h_tiny
./build/replayssm info --model "$model"
echo
echo "generate --prompt-ids 3,17,5,42,8 --max-new-tokens 24:"
./build/replayssm generate --model "$model" --prompt-ids 3,17,5,42,8 --max-new-tokens 24 --ignore-eos --json
