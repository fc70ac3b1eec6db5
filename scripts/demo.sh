#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build, and run the
# embedded default model (models/nemotron_h_small): its architecture, then a
# greedy continuation of a text prompt, streamed as it is generated.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
./build/replayssm info --model models/nemotron_h_small
echo
./build/replayssm generate --prompt "The Python standard library" --max-new-tokens 60
