# spec: decode tokens/s vs batch (median, min-max) — run `gnuplot tokens_per_s_vs_batch_spec.gp` in this directory
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size 1200,720 noenhanced font ",10"
} else {
  set terminal png size 1200,720 noenhanced
}
set output "tokens_per_s_vs_batch_spec.png"
set title "spec: decode tokens/s vs batch (median, min-max)"
set xlabel "batch (sequences)"
set ylabel "tokens/s"
set key outside right top
set grid
plot "tokens_per_s_vs_batch_spec.dat" index 0 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay W=4 T=4 acc=0.9", \
     "tokens_per_s_vs_batch_spec.dat" index 1 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay W=4 T=4 acc=0.7", \
     "tokens_per_s_vs_batch_spec.dat" index 2 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay W=4 T=4 acc=0.5", \
     "tokens_per_s_vs_batch_spec.dat" index 3 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay W=16 T=4 acc=0.9", \
     "tokens_per_s_vs_batch_spec.dat" index 4 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay W=16 T=4 acc=0.7", \
     "tokens_per_s_vs_batch_spec.dat" index 5 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay W=16 T=4 acc=0.5", \
     "tokens_per_s_vs_batch_spec.dat" index 6 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay W=64 T=4 acc=0.9", \
     "tokens_per_s_vs_batch_spec.dat" index 7 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay W=64 T=4 acc=0.7", \
     "tokens_per_s_vs_batch_spec.dat" index 8 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay W=64 T=4 acc=0.5", \
     "tokens_per_s_vs_batch_spec.dat" index 9 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot W=4 T=4 acc=0.9", \
     "tokens_per_s_vs_batch_spec.dat" index 10 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot W=4 T=4 acc=0.7", \
     "tokens_per_s_vs_batch_spec.dat" index 11 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot W=4 T=4 acc=0.5", \
     "tokens_per_s_vs_batch_spec.dat" index 12 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot W=16 T=4 acc=0.9", \
     "tokens_per_s_vs_batch_spec.dat" index 13 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot W=16 T=4 acc=0.7", \
     "tokens_per_s_vs_batch_spec.dat" index 14 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot W=16 T=4 acc=0.5", \
     "tokens_per_s_vs_batch_spec.dat" index 15 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot W=64 T=4 acc=0.9", \
     "tokens_per_s_vs_batch_spec.dat" index 16 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot W=64 T=4 acc=0.7", \
     "tokens_per_s_vs_batch_spec.dat" index 17 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot W=64 T=4 acc=0.5", \
     "tokens_per_s_vs_batch_spec.dat" index 18 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "recompute W=4 T=4 acc=0.9", \
     "tokens_per_s_vs_batch_spec.dat" index 19 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "recompute W=4 T=4 acc=0.7", \
     "tokens_per_s_vs_batch_spec.dat" index 20 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "recompute W=4 T=4 acc=0.5", \
     "tokens_per_s_vs_batch_spec.dat" index 21 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "recompute W=16 T=4 acc=0.9", \
     "tokens_per_s_vs_batch_spec.dat" index 22 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "recompute W=16 T=4 acc=0.7", \
     "tokens_per_s_vs_batch_spec.dat" index 23 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "recompute W=16 T=4 acc=0.5", \
     "tokens_per_s_vs_batch_spec.dat" index 24 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "recompute W=64 T=4 acc=0.9", \
     "tokens_per_s_vs_batch_spec.dat" index 25 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "recompute W=64 T=4 acc=0.7", \
     "tokens_per_s_vs_batch_spec.dat" index 26 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "recompute W=64 T=4 acc=0.5"
