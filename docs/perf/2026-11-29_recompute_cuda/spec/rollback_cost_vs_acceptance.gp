# spec: rollback cost (truncate + re-prefill) per rejected verify step vs acceptance rate — run `gnuplot rollback_cost_vs_acceptance.gp` in this directory
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size 1200,720 noenhanced font ",10"
} else {
  set terminal png size 1200,720 noenhanced
}
set output "rollback_cost_vs_acceptance.png"
set title "spec: rollback cost (truncate + re-prefill) per rejected verify step vs acceptance rate"
set xlabel "acceptance rate"
set ylabel "ms per rejection"
set key outside right top
set grid
set logscale y
plot "rollback_cost_vs_acceptance.dat" index 0 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "recompute W=16 T=4 batch=1", \
     "rollback_cost_vs_acceptance.dat" index 1 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "recompute W=16 T=4 batch=64", \
     "rollback_cost_vs_acceptance.dat" index 2 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot W=16 T=4 batch=1", \
     "rollback_cost_vs_acceptance.dat" index 3 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot W=16 T=4 batch=64", \
     "rollback_cost_vs_acceptance.dat" index 4 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay W=16 T=4 batch=1", \
     "rollback_cost_vs_acceptance.dat" index 5 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay W=16 T=4 batch=64"
