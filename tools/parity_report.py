#!/usr/bin/env python3
"""Prints how closely replayssm's logits match transformers' on each fixture.

For every model under tests/data with an expected.json (see
make_fixtures.py), every prompt and both paths (prefill, decode), runs
`replayssm logits` and reports max |Δ| and max |Δ|/(1+|ref|) — the quantity
the parity tests bound by 1e-4. Plain Python; no numpy needed.

Usage: python3 tools/parity_report.py [path/to/replayssm] [tests/data]
"""
import json
import os
import subprocess
import sys


def main():
    exe = sys.argv[1] if len(sys.argv) > 1 else "build/replayssm"
    data = sys.argv[2] if len(sys.argv) > 2 else "tests/data"
    print(f"{'model':26s} {'path':8s} {'max|Δ|':>10s} {'max|Δ|/(1+|ref|)':>18s}")
    for name in sorted(os.listdir(data)):
        d = os.path.join(data, name)
        if not os.path.exists(os.path.join(d, "expected.json")) or not os.path.exists(os.path.join(d, "config.json")):
            continue
        exp = json.load(open(os.path.join(d, "expected.json")))
        for path in ("prefill", "decode"):
            worst_abs = worst_rel = 0.0
            for i, prompt in enumerate(exp["prompts"]):
                out = subprocess.run([exe, "logits", "--model", d, "--path", path, "--prompt-ids",
                                      ",".join(map(str, prompt))], capture_output=True, text=True)
                if out.returncode != 0:
                    sys.exit(out.stderr)
                got = json.loads(out.stdout)["logits"]
                for row_g, row_r in zip(got, exp[path + "_logits"][i]):
                    for g, r in zip(row_g, row_r):
                        worst_abs = max(worst_abs, abs(g - r))
                        worst_rel = max(worst_rel, abs(g - r) / (1 + abs(r)))
            print(f"{name:26s} {path:8s} {worst_abs:10.2e} {worst_rel:18.2e}")


if __name__ == "__main__":
    main()
