# ar: peak SSM state (checkpoints + logs + snapshots) vs window W — run `gnuplot state_memory_vs_window_ar.gp` in this directory
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size 1200,720 noenhanced font ",10"
} else {
  set terminal png size 1200,720 noenhanced
}
set output "state_memory_vs_window_ar.png"
set title "ar: peak SSM state (checkpoints + logs + snapshots) vs window W"
set xlabel "window W (tokens per flush)"
set ylabel "peak state MiB"
set key outside right top
set grid
set logscale x 2
plot "state_memory_vs_window_ar.dat" index 0 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay batch=1", \
     "state_memory_vs_window_ar.dat" index 1 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay batch=64", \
     "state_memory_vs_window_ar.dat" index 2 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay batch=256", \
     "state_memory_vs_window_ar.dat" index 3 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot batch=1", \
     "state_memory_vs_window_ar.dat" index 4 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot batch=64", \
     "state_memory_vs_window_ar.dat" index 5 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot batch=256"
