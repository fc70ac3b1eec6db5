#!/usr/bin/env bash
# Session 37 call 5: GDN AR at batch 1 in CUDA graphs. (1) the bench with PDL off and on (graphs,
# batches 1, 2, 4; 2 rounds): with PDL a launch's part before its wait overlaps the one before's part
# after it; without, they add. (2) ncu --set full of the standard step (launch 1 of `--profile gdn ar
# 1`) and of a replay step with 14 older log entries (launch 15), SASS with stall samples.
set -u
eval "$(bash scripts/gpu_check.sh libs)"; cd .gpu
export PATH=$PATH:/usr/local/cuda/bin
t0=$(date +%s)
for round in 1 2; do
  for pdl in 1 0; do
    echo "=== PDL=$pdl r$round"
    REPLAYSSM_PDL=$pdl timeout 60 ./replayssm_ssm_bench --only gdn --batches 1,2,4 --graph 1 2>&1 | grep -E '^gdn '
  done
done
echo "=== ncu (t=$(( $(date +%s) - t0 )) s)"
for l in 1 15; do
  timeout 150 ncu --kernel-name regex:gdn_step_warps_kernel --launch-skip $l --launch-count 1 --set full --import-source yes \
    -o $OUT/b1_l$l ./replayssm_ssm_bench --profile gdn ar 1 > $OUT/ncu_log_$l.txt 2>&1; tail -2 $OUT/ncu_log_$l.txt
  ncu -i $OUT/b1_l$l.ncu-rep --page details > $OUT/b1_l${l}_details.txt 2>&1
  grep -E "Function Name|gdn_step_warps|Duration|Elapsed Cycles|DRAM Throughput|Executed Instructions  |Registers Per|Achieved Occ|Issue Slots Busy|Theoretical Occ" $OUT/b1_l${l}_details.txt | head -14
  ncu -i $OUT/b1_l$l.ncu-rep --page source --csv --print-source sass > $OUT/b1_l${l}_sass.csv 2>/dev/null || true
  ncu -i $OUT/b1_l$l.ncu-rep --page raw --csv > $OUT/raw.csv 2>/dev/null
  python3 - "$OUT/raw.csv" <<'PY' > $OUT/b1_l${l}_stalls.txt
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
h, u, v = rows[0], rows[1], rows[2]
for k, un, x in zip(h, u, v):
    if 'stalled' in k or 'inst_executed' in k or 'dram__bytes' in k or 'cycles' in k or 'warps_active' in k or 'time' in k:
        print(k, un, x)
PY
  grep -E "warp_latency_issue_stalled.*ratio|gpu__time_duration.sum|sm__cycles_elapsed.max " $OUT/b1_l${l}_stalls.txt | sort -k3 -g -r | head -10
  rm -f $OUT/raw.csv $OUT/b1_l$l.ncu-rep
  xz -9 $OUT/b1_l${l}_sass.csv $OUT/b1_l${l}_details.txt
done
echo "=== done t=$(( $(date +%s) - t0 )) s"
