#!/usr/bin/env bash
# Session 37 call 8 (fce6dd6): (1) fc5a5de's SSM bench against fce6dd6's over the same library (a log
# per rotation of slots; as many standard launches a timed run as replay launches), batches 1–8 and
# 64, 2 rounds; (2) the GDN fold-rows instance with Tile::load_whole (1b47369's guard, "foldwhole")
# against without (fce6dd6), batch 64–512 with the staggered cycle, 2 rounds; (3) the kernels part of
# the check at fce6dd6, sent back as one archive.
set -u
eval "$(bash scripts/gpu_check.sh libs)"
cd .gpu; for b in fc5a5de foldwhole; do xz -d -k bench_$b.xz && chmod +x bench_$b; done; cp replayssm_ssm_bench bench_fce6dd6; cd ..
t0=$(date +%s)
for round in 1 2; do
  for b in fc5a5de fce6dd6; do
    for fam in mamba2 gdn; do
      echo "=== $b $fam r$round (t=$(( $(date +%s) - t0 )) s)"
      timeout 90 .gpu/bench_$b --only $fam --batches 1,2,3,4,8,64 2>&1 | grep -E '^(gdn|mamba2) '
    done
  done
done
for round in 1 2; do
  for b in foldwhole fce6dd6; do
    echo "=== $b gdn r$round (t=$(( $(date +%s) - t0 )) s)"
    timeout 90 .gpu/bench_$b --only gdn --batches 64,256,512 2>&1 | grep -E '^gdn |staggered'
  done
done
echo "=== kernels (t=$(( $(date +%s) - t0 )) s)"
o=/tmp/s37_k8
bash scripts/gpu_check.sh run $o kernels > $o.log 2>&1; echo "rc=$?"; grep -A40 "== summary" $o.log | head -40
cp $o.log $o/run.log; tar -cJf $OUT/kernels_run_fce6dd6.tar.xz -C $o .
echo "=== done t=$(( $(date +%s) - t0 )) s"
