#!/usr/bin/env bash
# Session 38 call 6: the kernel bench with a read after every timed SSM launch (--between MB, as a
# decoder's next GEMV streams its weights): does what the standard step leaves behind (its state
# written, dirty in L2) cost the read after it, closing the gap between the kernels alone
# (replay 0.60x / 0.93x standard at batch 1) and end to end (1.01x / 1.02x)? Two rounds.
set -u
eval "$(bash scripts/gpu_check.sh libs)"
for round in 1 2; do
  for mb in 0 16 64; do
    for fam in mamba2 gdn; do
      echo "=== $fam --between $mb r$round"
      timeout 90 .gpu/replayssm_ssm_bench --only $fam --batches 1,2,4,8 --between $mb 2>&1 | grep -E '^(gdn|mamba2) +ar|after each'
    done
  done
done
