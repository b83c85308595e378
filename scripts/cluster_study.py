#!/usr/bin/env python3
"""The scheduling study's matrix: vtrain's plans against data-parallel-only.

A thin client: one `vtrainctl cluster-sim --json` request per trace cluster
(the service picks the windows, turns the jobs into LLM jobs, reshapes the
loads and runs both policies), then the matrix summarised: per job mix, the
mean over windows of the change of the average JCT, the worst window, how
many windows are worse than +2%, the mean deadline ratio, and the same
where data-parallel meets fewer than 95% of the deadlines. Extra arguments
go to every request (e.g. --server HOST:PORT, --nodes-per-leaf 2).

Usage (from the repository root, after a build):
  scripts/cluster_study.py [--traces data/itp-job-traces] [--gpus 128,256,1024]
                           [--loads 0.8,1] [--windows 128@1-5,400h@1-3]
                           [--job-mix itp,paper,2026] [-- extra flags]
"""

import argparse
import glob
import json
import os
import subprocess
import sys


def study(args, trace):
    cmd = [args.vtrainctl, "cluster-sim", "--trace", trace, "--gpus", args.gpus,
           "--target-load", args.loads, "--windows", args.windows,
           "--job-mix", args.job_mix, "--json"] + args.extra
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def window_name(w):
    return f"{w['hours']:g}h" if w.get("hours") else f"{w['jobs']} jobs"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="data/itp-job-traces")
    parser.add_argument("--gpus", default="128,256,1024")
    parser.add_argument("--loads", default="0.8,1")
    parser.add_argument("--windows", default="128@1-5,400h@1-3")
    parser.add_argument("--job-mix", default="itp,paper,2026")
    parser.add_argument("--vtrainctl", default="build/client/vtrainctl")
    parser.add_argument("extra", nargs="*")
    args = parser.parse_args()
    traces = sorted(glob.glob(os.path.join(args.traces, "cluster*.csv")))
    if not traces:
        sys.exit(f"no cluster*.csv under {args.traces}; pass --traces DIR")
    per_mix = {}
    for trace in traces:
        name = os.path.basename(trace)
        result = study(args, trace)
        for s in result.get("summaries", []):
            print(f"{name:14s} {s['job_mix'][8:].lower():5s} {s['gpus']:5d} GPUs load "
                  f"{s.get('target_load', 'traced')!s:4s} {window_name(s['window']):9s}: average JCT "
                  f"{100 * s['mean_avg_jct_change']:+6.1f}% mean, {100 * s['worst_avg_jct_change']:+6.1f}% "
                  f"worst; deadlines {s['mean_deadline_ratio']:.3f}x; data-parallel meets "
                  f"{100 * s['mean_data_parallel_deadline_satisfaction']:.1f}%", flush=True)
        for w in result.get("windows", []):
            per_mix.setdefault(w["job_mix"], []).append(w)
    print()
    for mix, windows in per_mix.items():
        changes = [w.get("avg_jct_change", 0) for w in windows]
        ratios = [w.get("deadline_ratio", 0) for w in windows]
        binding = [w for w in windows
                   if next(o for o in w["outcomes"] if o["policy"] == "elasticflow")
                   .get("deadline_satisfaction", 0) < 0.95]
        line = (f"{mix[8:].lower():5s} {len(windows)} windows: average JCT "
                f"{100 * sum(changes) / len(changes):+.2f}% mean, worst {100 * max(changes):+.1f}%, "
                f"{sum(c > 0.02 for c in changes)} worse than +2%; deadline ratio "
                f"{sum(ratios) / len(ratios):.3f}x")
        if binding:
            line += (f"; where data-parallel meets < 95% ({len(binding)} windows): "
                     f"{sum(w.get('deadline_ratio', 0) for w in binding) / len(binding):.3f}x")
        print(line)


if __name__ == "__main__":
    main()
