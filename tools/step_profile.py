#!/usr/bin/env python3
"""Where one decode step's time goes, from an Nsight Compute CSV.

ncu times each kernel alone (no overlap with its neighbours, no launch
gaps), so the sum here is what the step's kernels cost in isolation; the
difference to the measured step time is launch gaps, ramp-up and tails.

Capture (on the device, eager launches so every kernel is its own launch):
  ncu --clock-control none --cache-control none \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
      --csv --page raw --print-units base --log-file ncu.csv \
      replayssm_e2e_bench --batch 1 --prompt 8 --new 3 --runs 1 --no-graphs
Then: python3 tools/step_profile.py ncu.csv

A step is the kernels after one argmax up to and including the next; steps
with a prefill kernel in them are prompt chunks and are skipped. The last
decode step of each SSM layout found (standard: mamba2_step / gdn_step;
replay: *_replay) is printed, kernels grouped by name.
"""
import csv
import sys
from collections import OrderedDict


def rows(path):
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu's own log lines are not CSV
    out = []
    for r in csv.DictReader(lines):
        if not r.get("ID", "").isdigit():
            continue  # the units row
        out.append(r)
    return out


def short(name):
    for anon in ("<unnamed>::", "(anonymous namespace)::"):
        name = name.replace(anon, "")
    name = name.removeprefix("void ").split("(")[0].split("<")[0]
    return name.split("::")[-1]


def num(v):
    return float(v.replace(",", ""))  # ncu groups thousands


def steps(rs):
    cur = []
    for r in rs:
        cur.append(r)
        if short(r["Kernel Name"]).startswith("argmax"):
            yield cur
            cur = []


def report(step, title):
    groups = OrderedDict()
    total_us = total_b = 0.0
    for r in step:
        us = num(r["gpu__time_duration.sum"]) / 1e3  # ns
        b = num(r["dram__bytes_read.sum"]) + num(r["dram__bytes_write.sum"])
        g = groups.setdefault(short(r["Kernel Name"]), [0, 0.0, 0.0])
        g[0] += 1
        g[1] += us
        g[2] += b
        total_us += us
        total_b += b
    print(f"{title}: {len(step)} kernels, {total_us / 1e3:.3f} ms summed, {total_b / 1e9:.2f} GB from DRAM")
    print(f"  {'kernel':34s} {'n':>4s} {'µs':>9s} {'µs each':>8s} {'GB':>7s} {'GB/s':>7s}")
    for name, (n, us, b) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        print(f"  {name:34s} {n:4d} {us:9.1f} {us / n:8.2f} {b / 1e9:7.3f} {b / us / 1e3:7.0f}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: step_profile.py NCU_CSV")
    found = OrderedDict()
    for s in steps(rows(sys.argv[1])):
        names = [short(r["Kernel Name"]) for r in s]
        if any("prefill" in n for n in names):
            continue
        if any("replay" in n for n in names):
            found["replay"] = s
        elif any(n in ("mamba2_step_kernel", "gdn_step_kernel", "gdn_step_sliced_kernel") for n in names):
            found["standard"] = s
    if not found:
        sys.exit("no decode step found (was the capture eager, with --new ≥ 2?)")
    for title, s in found.items():
        report(s, "last decode step, " + title)


if __name__ == "__main__":
    main()
