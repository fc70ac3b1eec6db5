#!/usr/bin/env bash
# Session 37 call 1: the whole check at ffa8936 (the CUDA suite, the kernel, attention and end-to-end benches).
set -u
bash scripts/gpu_check.sh run "$OUT"
