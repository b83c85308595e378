#!/usr/bin/env bash
# vtrainctl curve --format elasticflow writes files ElasticFlow loads: read
# them the way its loader does (scheduler/profiles.py in pkusys/ElasticFlow:
# the model is the file's name, csv.DictReader on ',', the column
# global_batch_size keys each row, the other columns are GPU counts as
# strings, each cell goes through float()), and check the numbers against
# vtrainctl's own curve. Also --format matrix-json parses as JSON with the
# same numbers.
# usage: elasticflow_loader_test.sh VTRAINCTL
set -euo pipefail
vtrainctl=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$vtrainctl" curve --model gpt3-13b --gpu-counts 1,8,16,32 --global-batches 256,512 \
  --format elasticflow --output-dir "$work" > "$work/out"
grep -q "wrote $work/gpt3-13b.csv" "$work/out"
"$vtrainctl" curve --model gpt3-13b --gpu-counts 8,16 --global-batch 512 --csv > "$work/rows.csv"
"$vtrainctl" curve --model gpt3-13b --gpu-counts 8,16 --global-batches 512 \
  --gpu-types a100-sxm4-80gb,h100-sxm5-80gb --format matrix-json > "$work/matrix.json"
/usr/bin/env python3 - "$work" <<'PY'
import csv, json, math, os, sys
work = sys.argv[1]
# ElasticFlow's loader, as its parse_throughput_file reads a .csv.
THROUGHPUTS = {}
path = os.path.join(work, "gpt3-13b.csv")
model_name = path[:-4].split("/")[-1]
THROUGHPUTS[model_name] = {}
with open(path) as fd:
    reader = csv.DictReader(fd, delimiter=",")
    assert reader.fieldnames == ["global_batch_size", "1", "8", "16", "32"], reader.fieldnames
    for row in reader:
        gbs = row["global_batch_size"]
        del row["global_batch_size"]
        THROUGHPUTS[model_name][gbs] = row
t = THROUGHPUTS["gpt3-13b"]
assert sorted(t) == ["256", "512"], sorted(t)
# As its scheduler uses them: float(THROUGHPUTS[model][batch][str(gpus)]).
assert math.isnan(float(t["512"]["1"])), t["512"]["1"]  # 13B does not fit one GPU
for batch in ("256", "512"):
    for gpus in ("8", "16", "32"):
        assert float(t[batch][gpus]) > 0, (batch, gpus, t[batch][gpus])
# The numbers are vtrainctl's own curve's.
with open(os.path.join(work, "rows.csv")) as fd:
    rows = list(csv.DictReader(fd))
for r in rows:
    # --csv prints 6 decimals
    assert abs(float(t["512"][r["gpus"]]) - float(r["iterations_per_s"])) <= 1e-6, (r, t["512"])
with open(os.path.join(work, "matrix.json")) as fd:
    m = json.load(fd)
assert m["jobs"] == ["gpt3-13b@512"], m["jobs"]
assert m["gpu_types"] == ["a100-sxm4-80gb", "h100-sxm5-80gb"], m["gpu_types"]
a100 = m["throughput"]["gpt3-13b@512"]["a100-sxm4-80gb"]
h100 = m["throughput"]["gpt3-13b@512"]["h100-sxm5-80gb"]
assert abs(a100["8"] - float(t["512"]["8"])) <= 1e-9 * a100["8"]
assert h100["8"] > a100["8"], (h100, a100)
print("elasticflow loader: ok", {k: t["512"][k] for k in ("1", "8")})
PY
