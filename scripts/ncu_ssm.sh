#!/usr/bin/env bash
# Nsight Compute on the SSM decode kernels, on the device machine after
# `gpu_check.sh stage` here (carry .gpu):
#   bash scripts/ncu_ssm.sh OUT "mamba2 verify 256 [VARIANT]" "gdn ar 64" …
# One report per workload under OUT (ncu_<family>_<work>_<batch>[_<variant>].txt):
# per kernel, averaged over its launches (the standard step, the replay
# cycle's kernels): time, DRAM and L2 traffic, instructions, occupancy and
# where warps stall. Clocks are left as they are (--clock-control none).
# NCU_KERNEL (a regex, default "mamba2|gdn"), NCU_EXTRA (more ncu options,
# e.g. "--launch-skip 15 --launch-count 1": the AR cycle's fold step) and
# NCU_SUMMARY (per-kernel, or none: each launch) narrow it.
set -uo pipefail
cd "$(dirname "$0")/.."
out="$1"; shift
eval "$(bash scripts/gpu_check.sh libs)"
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
stalls=""
for s in long_scoreboard short_scoreboard barrier lg_throttle mio_throttle wait math_pipe_throttle not_selected \
         selected drain membar no_instruction dispatch_stall branch_resolving tex_throttle imc_miss sleeping; do
  stalls="$stalls,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio"
done
metrics="gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,\
lts__t_requests_srcunit_tex_op_read.sum,smsp__inst_executed.sum,sm__warps_active.avg.per_cycle_active,\
launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,\
smsp__issue_active.avg.pct_of_peak_sustained_active$stalls"
for w in "$@"; do
  set -- $w
  f="$out/ncu_$1_$2_$3${4:+_$4}.txt"
  "$ncu" --clock-control none -k regex:"${NCU_KERNEL:-mamba2|gdn}" ${NCU_EXTRA:-} --metrics "$metrics" \
    --print-summary "${NCU_SUMMARY:-per-kernel}" \
    .gpu/replayssm_ssm_bench --profile "$@" >"$f" 2>&1
  echo "== $w"
  grep -vE "^==PROF==|fill_uniform" "$f" | grep -E "mamba2|gdn|Invocations|duration|dram__bytes|inst_executed|warps_active|registers|issue_active|stalled_(long|short|barrier|lg|mio|wait|math|not_sel)" \
    | grep -v "fill" | awk '{ if (NF >= 5 && $0 !~ /Invocations/) print $1, $(NF); else print }' | head -80
done
