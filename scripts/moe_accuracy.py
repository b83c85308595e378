#!/usr/bin/env python3
"""Per-source, per-model error of the MoE measurement files (docs/moe.md).

Runs `vtrainctl validate --csv` on each file and groups the rows by the
file's `model` column: MAPE and mean signed error (bias). Nothing here is
fitted; the files are not kept-aside sources.

  python3 scripts/moe_accuracy.py [build/client/vtrainctl] [--rows]

--rows also prints each row's measured time and error. Where a file measured the
peak memory (peak_alloc_gib), a line under the model gives its error too.
"""
import csv
import io
import os
import subprocess
import sys

FILES = ["data/published/modelzoo-h100-moe.csv", "data/published/simumax-b200-moe-bf16.csv"]


def rows_of(path):
    with open(path) as f:
        lines = [l for l in f if not l.startswith("#")]
    return list(csv.DictReader(lines))


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    args = [a for a in sys.argv[1:] if a != "--rows"]
    per_row = "--rows" in sys.argv[1:]
    vtrainctl = args[0] if args else os.path.join(root, "build/client/vtrainctl")
    every = []
    print(f"{'source':34s} {'model':18s} {'rows':>4s} {'MAPE':>7s} {'bias':>7s} {'range':>17s}")
    for name in FILES:
        path = os.path.join(root, name)
        out = subprocess.run([vtrainctl, "validate", "--measurements", path, "--csv"],
                             check=True, capture_output=True, text=True).stdout
        predicted = list(csv.DictReader(io.StringIO(out)))
        rows = rows_of(path)
        models = [r["model"] for r in rows]
        if len(models) != len(predicted):
            sys.exit(f"{name}: {len(models)} rows, {len(predicted)} predictions")
        groups, memory = {}, {}
        for row, p in zip(rows, predicted):
            groups.setdefault(row["model"], []).append(float(p["error"]))
            if p.get("memory_error"):
                memory.setdefault(row["model"], []).append(float(p["memory_error"]))
            every.append(float(p["error"]))
            if per_row:
                print(f"  {row['case']:44s} {float(row['step_time_s']):8.3f} s "
                      f"{100 * float(p['error']):+6.1f}%")
        for model, errs in groups.items() :
            mape = sum(abs(e) for e in errs) / len(errs)
            bias = sum(errs) / len(errs)
            print(f"{os.path.basename(name):34s} {model:18s} {len(errs):4d} {100 * mape:6.2f}% "
                  f"{100 * bias:+6.2f}% {100 * min(errs):+6.1f}..{100 * max(errs):+5.1f}%")
            if model in memory:
                m = memory[model]
                print(f"{'  peak memory vs measured':34s} {'':18s} {len(m):4d} "
                      f"{100 * sum(abs(e) for e in m) / len(m):6.2f}% "
                      f"{100 * sum(m) / len(m):+6.2f}% {100 * min(m):+6.1f}..{100 * max(m):+5.1f}%")
    print(f"{'all':34s} {'':18s} {len(every):4d} "
          f"{100 * sum(abs(e) for e in every) / len(every):6.2f}% "
          f"{100 * sum(every) / len(every):+6.2f}%")


if __name__ == "__main__":
    main()
