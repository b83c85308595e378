#!/usr/bin/env python3
"""Asks a running vtrain-server for throughput curves, as an elastic cluster
scheduler would, and prints iterations per second by GPU count for both
policies.

usage: scheduler_example.py --server 127.0.0.1:50051 [--stubs build/client/python/gen]
"""

import argparse
import os
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True, help="HOST:PORT of a vtrain-server")
    parser.add_argument("--stubs", default=os.path.join("build", "client", "python", "gen"),
                        help="where the generated vtrain/v1 stubs are")
    parser.add_argument("--gpu-counts", default="8,16,32,64")
    args = parser.parse_args()
    sys.path.insert(0, args.stubs)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from vtrain_client import VtrainClient, VtrainError  # noqa: E402 (needs the stubs path)

    jobs = [{"name": "gpt3-1.3b", "preset": "gpt3-1.3b", "global_batch": 128},
            {"name": "gpt3-6.7b", "preset": "gpt3-6.7b", "global_batch": 256}]
    counts = [int(c) for c in args.gpu_counts.split(",")]
    client = VtrainClient(args.server, client_name="scheduler-example")
    try:
        table = {}
        for policy in ("data-parallel", "best"):
            for curve in client.throughput_curves(jobs, gpu_counts=counts, policy=policy):
                for p in curve["points"]:
                    table[(curve["name"], p["gpus"], policy)] = (
                        p["iterations_per_s"] if p["fits"] else 0.0)
    except VtrainError as e:
        print(f"scheduler_example: {e}", file=sys.stderr)
        return 2 if e.code.name == "INVALID_ARGUMENT" else 1
    finally:
        client.close()
    print(f"{'model':<12} {'gpus':>5} {'data-parallel it/s':>19} {'best it/s':>10} {'gain':>6}")
    for job in jobs:
        for gpus in counts:
            dp = table[(job["name"], gpus, "data-parallel")]
            best = table[(job["name"], gpus, "best")]
            gain = f"{best / dp:.2f}x" if dp > 0 else "-"
            print(f"{job['name']:<12} {gpus:>5} {dp:>19.4f} {best:>10.4f} {gain:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
