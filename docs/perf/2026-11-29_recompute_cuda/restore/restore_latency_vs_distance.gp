# restore(p) + one step vs distance from the path's start checkpoint (solid: log replay, dashed: re-prefill, dotted: checkpoint) — run `gnuplot restore_latency_vs_distance.gp` in this directory
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size 1200,720 noenhanced font ",10"
} else {
  set terminal png size 1200,720 noenhanced
}
set output "restore_latency_vs_distance.png"
set title "restore(p) + one step vs distance from the path's start checkpoint (solid: log replay, dashed: re-prefill, dotted: checkpoint)"
set xlabel "distance (tokens)"
set ylabel "ms"
set key outside right top
set grid
set logscale x 2
set logscale y
plot "restore_latency_vs_distance.dat" index 0 using 1:2:3:4 with yerrorlines lw 1.5 dt 2 title "recompute W=16 batch=1 reprefill", \
     "restore_latency_vs_distance.dat" index 1 using 1:2:3:4 with yerrorlines lw 1.5 dt 3 title "recompute W=16 batch=1 checkpoint", \
     "restore_latency_vs_distance.dat" index 2 using 1:2:3:4 with yerrorlines lw 1.5 dt 2 title "snapshot W=16 batch=1 reprefill", \
     "restore_latency_vs_distance.dat" index 3 using 1:2:3:4 with yerrorlines lw 1.5 dt 2 title "replay log=0 W=16 batch=1 reprefill", \
     "restore_latency_vs_distance.dat" index 4 using 1:2:3:4 with yerrorlines lw 1.5 dt 3 title "replay log=0 W=16 batch=1 checkpoint", \
     "restore_latency_vs_distance.dat" index 5 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay log=0 W=16 batch=1 log_replay"
