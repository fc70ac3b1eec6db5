# beam: decode tokens/s vs batch (median, min-max) — run `gnuplot tokens_per_s_vs_batch_beam.gp` in this directory
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size 1200,720 noenhanced font ",10"
} else {
  set terminal png size 1200,720 noenhanced
}
set output "tokens_per_s_vs_batch_beam.png"
set title "beam: decode tokens/s vs batch (median, min-max)"
set xlabel "beam width"
set ylabel "tokens/s"
set key outside right top
set grid
plot "tokens_per_s_vs_batch_beam.dat" index 0 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "replay W=16", \
     "tokens_per_s_vs_batch_beam.dat" index 1 using 1:2:3:4 with yerrorlines lw 1.5 dt 1 title "snapshot W=16"
