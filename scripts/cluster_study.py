#!/usr/bin/env python3
"""The scheduling study's matrix: vtrain's plans against data-parallel-only.

Runs `vtrainctl cluster-sim` on every trace cluster found, at several offered
loads, over 128-job windows (5 seeds) and 400-hour windows (3 seeds), and
prints one line per window and a summary: the mean over windows of the mean
change of the average JCT, the worst seed, how many windows have a seed
worse than +2%, and the mean deadline-satisfaction ratio. Extra arguments go
to every cluster-sim call (e.g. --nodes-per-leaf 2 --oversubscription 4).

Usage (from the repository root, after a build):
  scripts/cluster_study.py [--traces data/itp-job-traces]
                           [--loads 0.5,0.8,1] [--gpus 1024] [-- extra flags]
"""

import argparse
import glob
import os
import re
import subprocess
import sys

LINE = re.compile(r"elasticflow (\S+)% (\d+)\s+vtrain (\S+)% (\d+)")


def study(vtrainctl, trace, gpus, load, window, extra):
    cmd = [vtrainctl, "cluster-sim", "--trace", trace, "--gpus", str(gpus),
           "--target-load", str(load)] + window + extra
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: {out.stderr.strip()}")
    seeds = []
    for line in out.stdout.splitlines():
        m = LINE.search(line)
        if m:
            ef_dl, ef_jct, vt_dl, vt_jct = (float(g) for g in m.groups())
            seeds.append((ef_dl, ef_jct, vt_dl, vt_jct))
    return seeds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="data/itp-job-traces")
    parser.add_argument("--loads", default="0.5,0.8,1")
    parser.add_argument("--gpus", type=int, default=1024)
    parser.add_argument("--vtrainctl", default="build/client/vtrainctl")
    parser.add_argument("extra", nargs="*")
    args = parser.parse_args()
    traces = sorted(glob.glob(os.path.join(args.traces, "cluster*.csv")))
    if not traces:
        sys.exit(f"no cluster*.csv under {args.traces}; pass --traces DIR")
    windows = [["--jobs", "128", "--seeds", "1-5"], ["--hours", "400", "--seeds", "1-3"]]
    means, worsts, ratios = [], [], []
    for trace in traces:
        for load in args.loads.split(","):
            for window in windows:
                seeds = study(args.vtrainctl, trace, args.gpus, load, window, args.extra)
                changes = [v / e - 1 for (_, e, _, v) in seeds if e > 0]
                if not changes:
                    continue
                ratio = [(vd + 0.01) / (ed + 0.01) for (ed, _, vd, _) in seeds]
                means.append(sum(changes) / len(changes))
                worsts.append(max(changes))
                ratios.extend(ratio)
                print(f"{os.path.basename(trace):14s} load {load:4s} {window[0]} {window[1]:4s}: "
                      f"average JCT {100 * means[-1]:+.1f}% mean, {100 * worsts[-1]:+.1f}% worst; "
                      f"deadlines {sum(ratio) / len(ratio):.3f}x", flush=True)
    if not means:
        sys.exit("no study produced figures")
    print(f"\n{len(means)} windows: average JCT {100 * sum(means) / len(means):+.2f}% mean of "
          f"means, worst seed {100 * max(worsts):+.1f}%, windows with a seed worse than +2%: "
          f"{sum(w > 0.02 for w in worsts)}; deadline ratio {sum(ratios) / len(ratios):.4f}x mean")


if __name__ == "__main__":
    main()
