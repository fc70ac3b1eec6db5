#!/usr/bin/env bash
# Session 38 call 7: what the SSM decode kernels cost inside the decode step at batch 1–2: the
# end-to-end rows with and without them (a trial build, skip_ssm_kernels_trial.diff:
# REPLAYSSM_TRIAL_SKIP=1 leaves out the Mamba2/GDN step and replay kernels; the logits are then
# meaningless, the timing is what is wanted). 8B at batch 1, 2; Qwen3.5-27B at batch 1.
set -u
eval "$(bash scripts/gpu_check.sh libs)"
for skip in 0 1; do
  for p in nemotron-h-8b:1,2 qwen3.5-27b:1; do
    echo "=== ${p%%:*} skip=$skip"
    if [ $skip = 1 ]; then export REPLAYSSM_TRIAL_SKIP=1; else unset REPLAYSSM_TRIAL_SKIP; fi
    timeout 120 .gpu/replayssm_e2e_bench --preset ${p%%:*} --batch ${p##*:} --runs 3 --prefill 0 --replay-step 0,1 2>&1 | sed -n 4,12p
  done
done
