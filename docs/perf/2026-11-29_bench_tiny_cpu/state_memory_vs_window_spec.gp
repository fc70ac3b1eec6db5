# spec: peak SSM state (checkpoints + logs + snapshots) vs window W — run `gnuplot state_memory_vs_window_spec.gp` in this directory
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size 1200,720 noenhanced font ",10"
} else {
  set terminal png size 1200,720 noenhanced
}
set output "state_memory_vs_window_spec.png"
set title "spec: peak SSM state (checkpoints + logs + snapshots) vs window W"
set xlabel "window W (tokens per flush)"
set ylabel "peak state MiB"
set key outside right top
set grid
set logscale x 2
plot "state_memory_vs_window_spec.dat" index 0 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay T=4 acc=0.9 batch=1", \
     "state_memory_vs_window_spec.dat" index 1 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay T=4 acc=0.9 batch=8", \
     "state_memory_vs_window_spec.dat" index 2 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay T=4 acc=0.7 batch=1", \
     "state_memory_vs_window_spec.dat" index 3 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay T=4 acc=0.7 batch=8", \
     "state_memory_vs_window_spec.dat" index 4 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay T=4 acc=0.5 batch=1", \
     "state_memory_vs_window_spec.dat" index 5 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay T=4 acc=0.5 batch=8", \
     "state_memory_vs_window_spec.dat" index 6 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot T=4 acc=0.9 batch=1", \
     "state_memory_vs_window_spec.dat" index 7 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot T=4 acc=0.9 batch=8", \
     "state_memory_vs_window_spec.dat" index 8 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot T=4 acc=0.7 batch=1", \
     "state_memory_vs_window_spec.dat" index 9 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot T=4 acc=0.7 batch=8", \
     "state_memory_vs_window_spec.dat" index 10 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot T=4 acc=0.5 batch=1", \
     "state_memory_vs_window_spec.dat" index 11 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot T=4 acc=0.5 batch=8", \
     "state_memory_vs_window_spec.dat" index 12 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "recompute T=4 acc=0.9 batch=1", \
     "state_memory_vs_window_spec.dat" index 13 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "recompute T=4 acc=0.9 batch=8", \
     "state_memory_vs_window_spec.dat" index 14 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "recompute T=4 acc=0.7 batch=1", \
     "state_memory_vs_window_spec.dat" index 15 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "recompute T=4 acc=0.7 batch=8", \
     "state_memory_vs_window_spec.dat" index 16 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "recompute T=4 acc=0.5 batch=1", \
     "state_memory_vs_window_spec.dat" index 17 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "recompute T=4 acc=0.5 batch=8"
