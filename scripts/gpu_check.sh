#!/usr/bin/env bash
# The GPU check: CUDA parity tests and benchmarks on the device machine (H100 or H200).
#
# The device machine has the CUDA toolkit but not this project's Debian
# dependencies, so binaries are built here and carried there:
#   bash scripts/gpu_check.sh stage                # here: build, pack binaries + shared libs into .gpu/
#   bash scripts/gpu_check.sh run [OUT [PARTS]]    # there (device tool, carry .gpu): tests, bench, table
#   bash scripts/gpu_check.sh summary DIR          # anywhere: the table from a run's outputs
# PARTS is a comma list of tests, backend, kernels, model, serve, moe, prefix
# (default: the first four; backend: the conformance suite on the CUDA
# backend and tools/serve_check.py; serve: bench-serve at Nemotron-H-8B
# shapes through the server and in process, snapshot against replay; moe:
# the MoE tests and the two MoE presets end to end, with n-gram
# speculation; prefix: the prefix-cache workload at 8B and 27B shapes). The
# whole run takes longer than one device call may (10 minutes), so it can be
# sent as two calls, e.g. `run $OUT tests,kernels` and `run $OUT model`; put
# both calls' files in one folder and `summary` prints the table from it.
set -euo pipefail
caller_dir=$PWD  # OUT and DIR are the caller's paths
cd "$(dirname "$0")/.."
in_caller() { case "$1" in /*) echo "$1" ;; *) echo "$caller_dir/$1" ;; esac; }

# The short table `run` ends with: the issue's figures, from its outputs.
summary() {
  local o="$1"
  # Parts sent in separate calls may be missing: each block reads only files that exist.
  have() { [ -f "$o/$1" ]; }
  echo
  echo "== summary ($(date -u +%F), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)) =="
  if have cuda_tests.log; then
    grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$o/cuda_tests.log" | tail -1 | sed 's/^/CUDA tests: /' ||
      echo "CUDA tests: no result line (the run was cut short or crashed)"
  fi
  if have backend_tests.log; then
    grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$o/backend_tests.log" | tail -1 | sed 's/^/conformance on cuda: /' ||
      echo "conformance on cuda: no result line"
  fi
  have serve_check.log && grep -E '^serve_check: ' "$o/serve_check.log" | tail -1
  if have ssm_decode_bench.txt; then
    echo "kernels (replay / standard, same run, and the bytes' ratio; standard % of copy bandwidth):"
    # The verify rows' standard path reads a state and writes four: beside
    # its share of copy, its share of the probe of that mix (header line).
    awk '/one read \+ [0-9]+ writes/ { for (i = 1; i < NF; ++i) if ($i == "writes") { fan = $(i + 1); nw = $(i - 1) } }
         $1 ~ /^(mamba2|gdn)$/ && $2 ~ /^(ar|verify)$/ && $3 ~ /^(1|64|256|512)$/ {
           printf "  %-7s %-7s batch %4s  %6s (bytes %s)  standard at %s of copy", $1, $2, $3, $(NF-1), $NF, $7
           if ($2 == "verify" && fan > 0) printf ", %.0f%% of one read + %s writes", 100 * $6 / fan, nw
           printf "\n" }' \
      "$o/ssm_decode_bench.txt"
  fi
  have ssm_small_batches.txt && awk '$1 ~ /^(mamba2|gdn)$/ && $2 ~ /^(ar|verify)$/ { n++; r = $(NF-1); sub(/x$/, "", r); if (r + 0 < 1.0) slow = slow " " $1 "/" $2 "/" $3 " " $(NF-1) }
       END { if (n == 0) print "  batch 2-7: no rows"
             else printf "  batch 2-7 (%d rows): %s\n", n, slow == "" ? "replay >= standard in every row" : "replay slower at" slow }' \
    "$o/ssm_small_batches.txt"
  have ssm_decode_bench.txt && awk '$1 ~ /^(mamba2|gdn)$/ && $2 ~ /^beam8(-alone)?$/ && $3 ~ /^(64|256)$/ {
         printf "  %-7s %-12s batch %4s  %6s\n", $1, $2, $3, $(NF-1) }' "$o/ssm_decode_bench.txt"
  have attn_decode_bench.txt && echo "attention decode, 4,096-row contexts (the tensor-core kernel):" && awk '$1 ~ /^(nemotron|qwen)/ && $5 ~ /^(64|256)$/ && $6 == 4096 {
         printf "  %-14s batch %4s  %8s us  %6s GB/s  %s of read bandwidth\n", $1, $5, $10, $11, $12 }' \
    "$o/attn_decode_bench.txt"
  have backend_bench.txt && echo "end to end on the CUDA backend at 8B shapes (decode tok/s, snapshot -> replay):" &&
    awk '$2 == "snapshot" { s[$1] = $3 } $2 == "replay" && ($1 in s) { printf "  batch %4s  %9s -> %9s  %s\n", $1, s[$1], $3, $NF }' \
      "$o/backend_bench.txt"
  have beam/table.txt && awk '$1 == "beam" { printf "  beam width %3s %-8s %s tok/s\n", $3, $2, $9 }' "$o/beam/table.txt"
  have beam_gdn/table.txt && echo "beams at Qwen3.5-27B shapes (GDN):" && awk '$1 == "beam" { printf "  beam width %3s %-8s %s tok/s\n", $3, $2, $9 }' "$o/beam_gdn/table.txt"
  return 0
}
case "${1:-}" in
  stage)
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build build -j "$(nproc)" --target replayssm_cuda_tests replayssm_ssm_bench replayssm_gemv_bench replayssm_attn_bench \
      replayssm_backend_bench replayssm_moe_bench replayssm_cli replayssm_tests
    rm -rf .gpu && mkdir -p .gpu
    # The CUDA runtime is linked statically and cuBLAS comes from the device's
    # own CUDA 13; the Debian libraries the model loader and the CPU
    # reference and the server need (utf8proc, PCRE2, cpp-httplib and what
    # it links) travel compressed.
    cp build/tests/replayssm_cuda_tests build/tests/replayssm_tests build/replayssm_ssm_bench build/replayssm_gemv_bench \
      build/replayssm_attn_bench build/replayssm_backend_bench build/replayssm_moe_bench build/replayssm .gpu/
    libs=$(ldd .gpu/replayssm_cuda_tests .gpu/replayssm .gpu/replayssm_tests | awk '/=> \//{print $3}' | sort -u |
           grep -E 'pcre2|utf8proc|httplib|brotli|libz\.|libssl|libcrypto|gtest' || true)
    tar -cJhf .gpu/libs.tar.xz --transform 's,.*/,,' $libs
    # The binaries travel compressed too (the device tool carries 64 MiB
    # with the working tree); `run` and `libs` unpack them in place. They
    # share most of their bytes (every one links the same kernels), so one
    # stream with a dictionary wider than a binary stores those once:
    # 7.8 MB where 4 MiB blocks took 29.5.
    bins="replayssm_cuda_tests replayssm_tests replayssm_ssm_bench replayssm_gemv_bench replayssm_attn_bench replayssm_backend_bench replayssm_moe_bench replayssm"
    (cd .gpu && XZ_OPT='-T1 --lzma2=preset=3,dict=128MiB' tar -cJf bin.tar.xz $bins && rm $bins)
    exclude=$(git rev-parse --git-path info/exclude) && mkdir -p "$(dirname "$exclude")" && touch "$exclude"
    grep -qxF '/.gpu/' "$exclude" || echo '/.gpu/' >> "$exclude"
    du -sh .gpu
    ;;
  run)
    out=$(in_caller "${2:-${OUT:-/tmp/gpu_check}}")
    parts="${3:-tests,backend,kernels,model}"
    if ! [[ "$parts" =~ ^(tests|backend|kernels|model|serve|moe|prefix)(,(tests|backend|kernels|model|serve|moe|prefix))*$ ]]; then
      echo "gpu_check.sh run: PARTS '$parts' is not a comma list of tests, backend, kernels, model, serve, moe, prefix" >&2
      exit 2
    fi
    part() { [[ ",$parts," == *",$1,"* ]]; }
    mkdir -p "$out"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
    mkdir -p /tmp/replayssm_libs && tar -xJf .gpu/libs.tar.xz -C /tmp/replayssm_libs
    tar -xJf .gpu/bin.tar.xz -C .gpu
    export LD_LIBRARY_PATH=/tmp/replayssm_libs:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    if part tests; then
      .gpu/replayssm_cuda_tests 2>&1 | tee "$out/cuda_tests.log" | grep -E '^\[ *(OK|FAILED|PASSED|SKIPPED) ' || true
      # A crash leaves no PASSED line; a skip or failure names itself.
      if grep -q 'SKIPPED\|FAILED' "$out/cuda_tests.log" || ! grep -q '^\[  PASSED  \]' "$out/cuda_tests.log"; then
        echo "CUDA tests did not all pass"
        exit 1
      fi
    fi
    if part backend; then
      # The workloads on the CUDA backend against the CPU reference, and the
      # server on it through a Python client (the device has no node).
      export REPLAYSSM_CLI=$PWD/.gpu/replayssm REPLAYSSM_TEST_DATA=$PWD/tests/data
      .gpu/replayssm_tests --gtest_filter='*Conformance*:*PrefixCache*' 2>&1 | tee "$out/backend_tests.log" |
        grep -E '^\[ *(OK|FAILED|PASSED|SKIPPED) ' || true
      python3 tools/serve_check.py --cli .gpu/replayssm --device cuda 2>&1 | tee "$out/serve_check.log"
      if grep -q 'FAILED' "$out/backend_tests.log" || ! grep -q '^\[  PASSED  \]' "$out/backend_tests.log" ||
         ! grep -q '^serve_check: passed' "$out/serve_check.log"; then
        echo "backend checks did not all pass"
        exit 1
      fi
    fi
    if part kernels; then
      .gpu/replayssm_ssm_bench "$out/ssm_decode_bench.json" | tee "$out/ssm_decode_bench.txt"
      # The batches between 1 and 8, where the launchers switch kernels.
      for fam in mamba2 gdn; do .gpu/replayssm_ssm_bench --only $fam --batches 2,3,4,5,6,7; done |
        grep -E '^(mamba2|gdn) ' | tee "$out/ssm_small_batches.txt"
      .gpu/replayssm_gemv_bench | tee "$out/gemv_bench.txt"
      .gpu/replayssm_attn_bench --json "$out/attn_decode_bench.json" | tee "$out/attn_decode_bench.txt"
      .gpu/replayssm_moe_bench | tee "$out/moe_bench.txt"
    fi
    if part model; then
      # Decode and prefill through the workloads on the CUDA backend.
      .gpu/replayssm_backend_bench --json "$out/backend_bench.json" | tee "$out/backend_bench.txt"
      .gpu/replayssm_backend_bench --preset qwen3.5-27b --batch 1,64 --new 64 | tee "$out/backend_bench_gdn.txt"
      # Beam search: replay against snapshot (forks share pages and
      # checkpoints; snapshot copies a state per child).
      .gpu/replayssm bench --device cuda --preset nemotron-h-8b --workload beam --strategy replay,snapshot \
        --batch 8,32,64 --prompt-tokens 128 --new-tokens 128 --no-concurrency --out "$out/beam" >/dev/null
      .gpu/replayssm bench --device cuda --preset qwen3.5-27b --workload beam --strategy replay,snapshot \
        --batch 32,64 --prompt-tokens 128 --new-tokens 128 --no-concurrency --runs 2 --out "$out/beam_gdn" >/dev/null
      cat "$out/beam/table.txt" "$out/beam_gdn/table.txt"
    fi
    if part serve; then
      # The serving benchmark (input 1,024, output 256): each concurrency c
      # with 2c requests (c = 1: 4), through the HTTP server and through the
      # same engine in process, per strategy; no prefix cache (random
      # prompts share nothing).
      for strat in snapshot replay; do
        port=$((18000 + RANDOM % 1000))
        .gpu/replayssm serve --preset nemotron-h-8b --device cuda --strategy $strat --port $port \
          --no-prefix-cache --no-request-log --max-prompt-tokens 2048 2>"$out/serve_$strat.err" &
        pid=$!
        for _ in $(seq 600); do
          python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1])" \
            "http://127.0.0.1:$port/health" 2>/dev/null && break
          sleep 0.5
        done
        for c in 1 16 64 256; do
          n=$((c == 1 ? 4 : 2 * c))
          .gpu/replayssm bench-serve --url "http://127.0.0.1:$port" --input-len 1024 --output-len 256 \
            --num-prompts $n --concurrency $c --vocab-size 131072 --out "$out/serve_${strat}_c$c.json" |
            sed "s/^/http $strat: /" | tee -a "$out/serve_bench.txt"
          .gpu/replayssm bench-serve --in-process --preset nemotron-h-8b --device cuda --strategy $strat \
            --no-prefix-cache --input-len 1024 --output-len 256 --num-prompts $n --concurrency $c \
            --out "$out/inproc_${strat}_c$c.json" | sed "s/^/in-process $strat: /" | tee -a "$out/serve_bench.txt"
        done
        kill -TERM $pid; wait $pid || true
      done
    fi
    if part moe; then
      # Mixtures of experts: the kernels' and the backend's tests, then each
      # preset end to end (prompt 1,024, 128 new tokens; the batches that
      # fit), and Nemotron 3 Nano with n-gram drafts of 4.
      .gpu/replayssm_cuda_tests --gtest_filter='*MoeCuda*:*CudaMoe*' 2>&1 | tee "$out/moe_tests.log" |
        grep -E '^\[ *(OK|FAILED|PASSED|SKIPPED) |compared' || true
      for preset in nemotron-3-nano-30b-a3b qwen3.5-35b-a3b; do
        .gpu/replayssm_backend_bench --preset $preset --batch 1,8,64,256 --prompt 1024 --new 128 --runs 2 \
          --strategy snapshot,replay --json "$out/$preset.json" | tee "$out/$preset.txt"
      done
      .gpu/replayssm bench --device cuda --preset nemotron-3-nano-30b-a3b --workload spec --draft ngram --spec-t 4 \
        --strategy snapshot,replay --batch 1,8 --prompt-tokens 1024 --new-tokens 128 --runs 2 --no-concurrency \
        --out "$out/nano_spec" >/dev/null
      cat "$out/nano_spec/table.txt"
    fi
    if part prefix; then
      # The prefix cache's workload (docs/bench.md) at 8B shapes and, at a
      # quarter of the requests, 27B shapes; 20 GB of cache.
      .gpu/replayssm bench --workload prefix --device cuda --preset nemotron-h-8b --prefix-cache-bytes 20000000000 \
        --out "$out/prefix_8b" >/dev/null
      .gpu/replayssm bench --workload prefix --device cuda --preset qwen3.5-27b --prefix-scale 0.25 \
        --prefix-cache-bytes 20000000000 --out "$out/prefix_27b" >/dev/null
      cat "$out/prefix_8b/table.txt" "$out/prefix_27b/table.txt"
    fi
    summary "$out" | tee "$out/summary.txt"
    ;;
  summary)
    dir=$(in_caller "${2:-}")
    [ -n "${2:-}" ] && [ -d "$dir" ] || { echo "usage: $0 summary DIR (a run's output folder; '${2:-}' is not one)" >&2; exit 2; }
    summary "$dir"
    ;;
  libs)  # there: the binaries unpacked and the environment, for a single command (device tool)
    mkdir -p /tmp/replayssm_libs && tar -xJf .gpu/libs.tar.xz -C /tmp/replayssm_libs
    tar -xJf .gpu/bin.tar.xz -C .gpu
    echo "export LD_LIBRARY_PATH=/tmp/replayssm_libs:/usr/local/cuda/lib64"
    ;;
  *)
    echo "usage: $0 stage | run [OUT_DIR [tests,backend,kernels,model,serve,moe,prefix]] | summary DIR | libs" >&2
    exit 2
    ;;
esac
