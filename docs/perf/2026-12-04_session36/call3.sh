#!/usr/bin/env bash
# Session 36 call 3 (at 0ed4a48): ncu report of one GDN one-token replay step without a fold at batch 64
# (the 9th replay launch: a 9-entry log), its per-SASS-line instruction counts and stall samples, and its
# stall reasons; and the standard step (gdn_step_warps_kernel) at batch 64 for comparison.
set -u
eval "$(bash scripts/gpu_check.sh libs)"; cd .gpu
export PATH=$PATH:/usr/local/cuda/bin
ncu --version | tail -1
t0=$(date +%s)
timeout 200 ncu --kernel-name regex:gdn_replay_kernel --launch-skip 8 --launch-count 1 --set full --import-source yes \
  -o $OUT/replay_ar64 ./replayssm_ssm_bench --profile gdn ar 64 > $OUT/ncu_log.txt 2>&1; tail -3 $OUT/ncu_log.txt
ncu -i $OUT/replay_ar64.ncu-rep --page source --csv --print-source sass > $OUT/replay_ar64_sass.csv 2> $OUT/src_err.txt || true
ncu -i $OUT/replay_ar64.ncu-rep --page source --csv --print-source cuda > $OUT/replay_ar64_cuda.csv 2>> $OUT/src_err.txt || true
head -c 600 $OUT/src_err.txt; wc -c $OUT/replay_ar64_sass.csv $OUT/replay_ar64_cuda.csv
ncu -i $OUT/replay_ar64.ncu-rep --page raw --csv > $OUT/replay_raw.csv 2>/dev/null
python3 - "$OUT/replay_raw.csv" <<'PY' > $OUT/replay_stalls.txt
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
h, u, v = rows[0], rows[1], rows[2]
for k, un, x in zip(h, u, v):
    if 'stalled' in k or 'inst_executed' in k or 'dram__bytes' in k or 'sm__cycles' in k or 'warps_active' in k:
        print(k, un, x)
PY
wc -l $OUT/replay_stalls.txt; grep -E "warp_latency_issue_stalled.*ratio" $OUT/replay_stalls.txt | sort -k3 -g -r | head -12
echo "=== replay t=$(( $(date +%s) - t0 )) s"
timeout 150 ncu --kernel-name regex:gdn_step_warps_kernel --launch-count 1 --set full \
  ./replayssm_ssm_bench --profile gdn ar 64 > $OUT/ncu_step_ar64.txt 2>&1; grep -E "Duration|DRAM Throughput|Executed Instructions  |Registers|Achieved Occ|Issue Slots" $OUT/ncu_step_ar64.txt
rm -f $OUT/replay_raw.csv
echo "=== done t=$(( $(date +%s) - t0 )) s"
