#!/usr/bin/env bash
# The Python client against a real vtrain-server on loopback: the example
# scheduler asks for throughput curves of two models under both policies and
# prints the table; a bad request comes back as the server's error; predict,
# search, curve, plan_model and profiles take and return dicts in JSON form
# (matching vtrainctl --json when vtrainctl is built next to the server), and
# an unknown key or enum name is refused before anything is sent.
# usage: python_client_test.sh VTRAIN_SERVER STUBS_DIR SOURCE_DIR
set -euo pipefail
server_bin=$1 stubs=$2 src=$3
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the source tree
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
"$server_bin" --listen 127.0.0.1:0 --db "$work/v.db" > "$work/out" 2> "$work/err" &
pid=$!
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/^vtrain-server listening on port \([0-9]*\)$/\1/p' "$work/out")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "the server did not start"; cat "$work/err"; exit 1; }

/usr/bin/python3 "$src/client/python/scheduler_example.py" --server "127.0.0.1:$port" \
  --stubs "$stubs" --gpu-counts 8,16,32 > "$work/table"
cat "$work/table"
grep -q '^model .*data-parallel it/s.*best it/s' "$work/table"
[ "$(grep -c '^gpt3-1.3b ' "$work/table")" -eq 3 ]
[ "$(grep -c '^gpt3-6.7b ' "$work/table")" -eq 3 ]
# Every count of gpt3-1.3b has a plan under both policies: no zero column.
if grep '^gpt3-1.3b ' "$work/table" | awk '{ if ($3 <= 0 || $4 <= 0) bad = 1 } END { exit !bad }'; then
  echo "a gpt3-1.3b count has no plan"; exit 1
fi

# The library raises the server's error, naming the field.
PYTHONPATH="$stubs:$src/client/python" /usr/bin/python3 - "$port" <<'PY'
import sys
from vtrain_client import VtrainClient, VtrainError
client = VtrainClient(f"127.0.0.1:{sys.argv[1]}")
try:
    client.throughput_curves([{"preset": "gpt5", "global_batch": 8}], gpu_counts=[8])
except VtrainError as e:
    assert e.code.name == "INVALID_ARGUMENT", e
    assert "jobs[0].model.preset" in str(e), e
    print("bad request refused:", e)
else:
    sys.exit("a bad request was answered")
PY

# The dict API: each call on small inputs, timed.
vtrainctl="$(dirname "$server_bin")/../client/vtrainctl"
[ -x "$vtrainctl" ] || vtrainctl=""
PYTHONPATH="$stubs:$src/client/python" /usr/bin/python3 - "$port" "$vtrainctl" "$work" "$src" <<'PY'
import json
import os
import subprocess
import sys
import time

import grpc
from vtrain_client import VtrainClient, VtrainError

port, vtrainctl, work, src = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
client = VtrainClient(f"127.0.0.1:{port}", timeout_s=30)


def timed(what, call, *args, **kwargs):
    start = time.monotonic()
    result = call(*args, **kwargs)
    took = time.monotonic() - start
    print(f"{what}: {took:.2f} s")
    assert took < 10, f"{what} took {took:.1f} s"
    return result


def job(**plan):
    return {"model": {"preset": "gpt3-1.3b"},
            "cluster": {"gpu": "h100-sxm5-80gb", "num_gpus": 8},
            "plan": dict({"global_batch": 64}, **plan)}


# predict: a small job answers; the plan, in either spelling, and the dtype count.
base = timed("predict", client.predict, job())
assert base["iteration_time_ms"] > 0, base
assert isinstance(base["iteration_time_ns"], int), base  # numbers, as vtrainctl prints them
# The job as simulated, defaults filled in: t = 1, and the tuned settings (bf16),
# named with where they come from.
assert base["plan"]["tensor_parallel"] == 1 and base["plan"]["dtype"] == "DTYPE_BF16", base["plan"]
assert base["settings"]["name"] == "tuned" and base["settings"]["source"], base["settings"]
paper = client.predict(dict(job(), plan={"global_batch": 64, "settings": "SETTINGS_PAPER"}))
assert paper["plan"]["dtype"] == "DTYPE_FP16", paper["plan"]
assert paper["plan"]["recompute"] == "RECOMPUTE_FULL", paper["plan"]
t1 = client.predict(job(tensor_parallel=1))
t2 = client.predict(job(tensor_parallel=2))
assert t2["plan"]["tensor_parallel"] == 2, t2["plan"]
assert t1["iteration_time_ms"] != t2["iteration_time_ms"], (t1, t2)
camel = client.predict({"model": {"preset": "gpt3-1.3b"},
                        "cluster": {"gpu": "h100-sxm5-80gb", "numGpus": 8},
                        "plan": {"globalBatch": 64, "tensorParallel": 2}})
assert camel["iteration_time_ms"] == t2["iteration_time_ms"], (camel, t2)
fp8 = client.predict(job(dtype="DTYPE_FP8"))
assert fp8["plan"]["dtype"] == "DTYPE_FP8", fp8["plan"]
assert fp8["iteration_time_ms"] != base["iteration_time_ms"], (fp8, base)
# A Megatron-LM launch script carried as text: the job it describes, with
# the request's own fields (the GPU, the vocabulary) laid over it; the
# same prediction as the job written out.
with open(os.path.join(src, "data/megatron-launches/llama3_70b.sh")) as f:
    launch = client.predict({"megatron_args": f.read(),
                             "cluster": {"gpu": "h100-sxm5-80gb"}})
written = client.predict({
    "model": {"arch": "ARCHITECTURE_LLAMA", "num_layers": 80, "hidden_size": 8192,
              "num_heads": 64, "num_kv_heads": 8, "ffn_hidden_size": 28672, "seq_len": 8192,
              "vocab_size": 128256, "attention_impl": "ATTENTION_IMPL_FLASH"},
    "cluster": {"gpu": "h100-sxm5-80gb", "num_gpus": 64, "gpus_per_node": 8},
    "plan": {"settings": "SETTINGS_MEGATRON_DEFAULTS", "tensor_parallel": 4,
             "pipeline_parallel": 4, "context_parallel": 2, "virtual_stages": 5,
             "sequence_parallel": True, "tp_comm_overlap": True,
             "data_parallel_sharding": "DATA_PARALLEL_SHARDING_OPTIMIZER",
             "gradient_bucketing": True, "param_gather_overlap": True, "dtype": "DTYPE_FP8",
             "micro_batch": 1, "global_batch": 128, "recompute": "RECOMPUTE_NONE"}})
assert launch["iteration_time_ns"] == written["iteration_time_ns"], (launch, written)
# explain: the same job with one setting changed as the "measurement" names it.
changed = dict(written, plan=dict(written["plan"], tp_comm_overlap=False))
slower = client.predict({k: changed[k] for k in ("model", "cluster", "plan")})
why = client.explain({k: written[k] for k in ("model", "cluster", "plan")},
                     slower["iteration_time_ms"])["explanation"]
assert why["toward"][0]["change"] == "--tp-comm-overlap off", why
try:
    client.predict({"megatron_args": "--num-layers 2 --frobnicate 3", "cluster": {}})
except VtrainError as e:
    assert e.code == grpc.StatusCode.INVALID_ARGUMENT and "--frobnicate" in str(e), e
else:
    sys.exit("an unknown Megatron argument was accepted")
print(f"predict: t=1 {t1['iteration_time_ms']:.2f} ms, t=2 {t2['iteration_time_ms']:.2f} ms, "
      f"fp8 {fp8['iteration_time_ms']:.2f} ms")

# A MoE job: the expert layout and routing pass through as plan fields, and
# the answer carries the active parameters and the busiest rank's load.
def moe(**plan):
    return {"model": {"preset": "qwen3-30b-a3b"},
            "cluster": {"gpu": "h100-sxm5-80gb", "num_gpus": 16},
            "plan": dict({"global_batch": 64, "dtype": "DTYPE_BF16",
                          "recompute": "RECOMPUTE_NONE"}, **plan)}


ep8 = client.predict(moe(expert_parallel=8))
assert ep8["plan"]["expert_parallel"] == 8, ep8["plan"]
assert 3.0e9 < ep8["active_parameters"] < 3.7e9, ep8["active_parameters"]
skewed = client.predict(moe(expert_parallel=8, routing_sigma=1.0))
assert skewed["expert_load_max_over_mean"] > 1.1, skewed["expert_load_max_over_mean"]
assert skewed["iteration_time_ms"] > ep8["iteration_time_ms"], (skewed, ep8)
try:
    client.predict(moe(expert_parallel=3))
except VtrainError as e:
    assert e.code == grpc.StatusCode.INVALID_ARGUMENT and "plan.expert_parallel=3" in str(e), e
else:
    sys.exit("ep=3 for 128 experts was answered")
print(f"predict MoE: ep=8 {ep8['iteration_time_ms']:.2f} ms, log-normal 1.0 "
      f"{skewed['iteration_time_ms']:.2f} ms (busiest rank "
      f"{skewed['expert_load_max_over_mean']:.2f}x)")

# The same job through vtrainctl --json: the same keys and values (but the
# simulation's wall time and cache flag).
if vtrainctl:
    with open(f"{work}/job.json", "w") as f:
        json.dump(job(tensor_parallel=2), f)
    printed = json.loads(subprocess.run(
        [vtrainctl, "predict", "--server", f"127.0.0.1:{port}", "-f", f"{work}/job.json",
         "--json"], check=True, capture_output=True, text=True).stdout)
    for d in (printed, t2):
        d.pop("simulation", None)
    assert printed == t2, (printed, t2)
    print("predict: the same dict as vtrainctl predict --json")

# A server error: the server's code and message.
try:
    client.predict(job(dtype="DTYPE_FP8") | {"cluster": {"gpu": "a100-sxm4-80gb", "num_gpus": 8}})
except VtrainError as e:
    assert e.code == grpc.StatusCode.INVALID_ARGUMENT and "fp8" in str(e), e
    print("server error:", e)
else:
    sys.exit("fp8 on an A100 was answered")

# Refused before any call: nothing listens on port 1, so reaching the server
# would be UNAVAILABLE.
nowhere = VtrainClient("127.0.0.1:1", timeout_s=5)
try:
    nowhere.predict(job())
except VtrainError as e:
    assert e.code == grpc.StatusCode.UNAVAILABLE, e
else:
    sys.exit("127.0.0.1:1 answered")
for call, request, named in [
        (nowhere.predict, dict(job(), global_batchh=64), "global_batchh"),
        (nowhere.predict, job(dtype="DTYPE_FP9"), "DTYPE_FP9"),
        (nowhere.predict, job(dtype="fp8"), "'fp8'"),
        (nowhere.search, {"model": {"preset": "gpt3-1.3b"}, "gpus": 8, "global_batch": 64,
                          "objective": "OBJECTIVE_FASTEST"}, "OBJECTIVE_FASTEST"),
        (nowhere.curve, {"jobs": [{"model": {"presett": "gpt3-1.3b"}}]}, "presett"),
        (nowhere.plan_model, {"gpus": 8, "dayz": 1}, "dayz"),
        (nowhere.predict, [job()], "dict"),
        (nowhere.predict, '{"model": {"preset": "gpt3-1.3b"}}', "dict")]:
    try:
        call(request)
    except VtrainError as e:
        assert e.code == grpc.StatusCode.INVALID_ARGUMENT, e
        assert named in str(e), (named, e)
        print("refused:", e)
    else:
        sys.exit(f"{request!r} was not refused")
try:
    nowhere.throughput_curves([{"preset": "gpt3-1.3b", "global_batch": 64, "dtyp": "fp8"}])
except VtrainError as e:
    assert e.code == grpc.StatusCode.INVALID_ARGUMENT and "dtyp" in str(e), e
else:
    sys.exit("throughput_curves took an unknown key")
nowhere.close()

# search: streamed progress, then a result with plans.
seen = []
result = timed("search", client.search,
               {"model": {"preset": "gpt3-1.3b"}, "cluster": {"gpu": "a100-sxm4-80gb"},
                "gpus": 8, "global_batch": 64,
                "space": {"tensor_parallel": [1, 2], "max_micro_batch": 2},
                "objective": "OBJECTIVE_TIME"},
               progress=lambda done, total: seen.append((done, total)))
assert result["evaluated"] > 0 and result["fastest"], result
assert result["best"]["iteration_time_ms"] > 0 and result["best"]["plan"]["tensor_parallel"] in (1, 2)
print(f"search: {result['evaluated']} plans predicted, {len(result['fastest'])} fastest, "
      f"best {result['best']['iteration_time_ms']:.2f} ms, {len(seen)} progress messages")

# curve: one curve per job, a point per count.
response = timed("curve", client.curve,
                 {"jobs": [{"name": "small", "model": {"preset": "gpt3-1.3b"},
                            "global_batch": 64}],
                  "gpu_counts": [8, 16], "policy": "CURVE_POLICY_DATA_PARALLEL"})
assert response["policy"] == "CURVE_POLICY_DATA_PARALLEL", response
[curve] = response["curves"]
assert curve["name"] == "small" and [p["gpus"] for p in curve["points"]] == [8, 16], curve
assert all(p["fits"] and p["iterations_per_s"] > 0 for p in curve["points"]), curve
print("curve:", [(p["gpus"], round(p["iterations_per_s"], 3)) for p in curve["points"]])

# cluster_sim: one outcome per policy, the jobs in the request's order.
sim = timed("cluster_sim", client.cluster_sim,
            {"gpus": 16, "jobs": [{"id": "a", "submit_s": 0, "deadline_s": 7200,
                                   "duration_s": 1800, "num_gpus": 8},
                                  {"id": "b", "submit_s": 60, "deadline_s": 3600,
                                   "duration_s": 600, "num_gpus": 2}]})
assert [o["policy"] for o in sim["outcomes"]] == ["elasticflow", "vtrain"], sim["outcomes"]
assert [j["id"] for j in sim["outcomes"][1]["jobs"]] == ["a", "b"], sim
print(f"cluster_sim: vtrain avg JCT {sim['outcomes'][1]['avg_jct_s']:.0f} s")

# cluster_sim of a whole study: a synthetic trace, two seeds, the paper mix;
# one window per seed and one summary over them.
trace = [{"id": f"t{i}", "submit_s": 3600 * i, "deadline_s": 3600 * i + 14400,
          "duration_s": 7200, "num_gpus": 1} for i in range(30)]
study = timed("cluster_sim study", client.cluster_sim,
              {"gpus": 64, "study": {"trace": trace, "windows": [{"jobs": 8}],
                                     "seeds": [1, 2], "job_mixes": ["JOB_MIX_PAPER"]}})
assert [w["seed"] for w in study["windows"]] == [1, 2], study["windows"]
assert all(w["job_mix"] == "JOB_MIX_PAPER" and len(w["outcomes"]) == 2
           for w in study["windows"]), study["windows"]
[summary] = study["summaries"]
assert summary["windows"] == 2, summary
print(f"cluster_sim study: average JCT {100 * summary['mean_avg_jct_change']:+.1f}% over 2 seeds")

# presets: the server's models and GPUs, the same as vtrainctl prints.
presets = timed("presets", client.presets)
names = [g["name"] for g in presets["gpus"]]
assert "a100-sxm4-80gb" in names and "b200-sxm-180gb" in names, names
b200 = next(g for g in presets["gpus"] if g["name"] == "b200-sxm-180gb")
assert b200["mx_block_scaling"] and b200["datasheet"]["num_sms"] == 148, b200
assert any(m["name"] == "deepseek-v3" and m["active_parameters"] < m["parameters"]
           for m in presets["models"]), presets["models"][:3]
if vtrainctl:
    printed = json.loads(subprocess.run(
        [vtrainctl, "presets", "--server", f"127.0.0.1:{port}", "--json"],
        check=True, capture_output=True, text=True).stdout)
    assert printed == presets, "vtrainctl presets --json differs from the Python client"
print(f"presets: {len(presets['models'])} models, {len(names)} GPUs")

# plan_model: a result.
planned = timed("plan_model", client.plan_model,
                {"cluster": {"gpu": "a100-sxm4-80gb"}, "gpus": 8, "days": 1,
                 "global_batch": 64, "min_parameters": 1e8, "max_parameters": 2e9,
                 "space": {"tensor_parallel": [1]}})
assert planned["candidates"] and planned["naive_estimate_parameters"] > 0, planned
assert planned["optimal"]["fits"], planned
print(f"plan_model: {len(planned['candidates'])} candidates, optimal "
      f"{planned['optimal']['parameters']:.3g} parameters")

# profiles: the server's sets.
sets = timed("profiles", client.profiles)
assert sets and all(s["id"] and s["gpu"] for s in sets), sets
assert all(s["gpu"] == "a100-sxm4-80gb" for s in client.profiles(gpu="a100-sxm4-80gb"))
print(f"profiles: {len(sets)} sets, e.g. {sets[0]['id']}")
if vtrainctl:
    printed = json.loads(subprocess.run(
        [vtrainctl, "profiles", "ls", "--server", f"127.0.0.1:{port}", "--json"],
        check=True, capture_output=True, text=True).stdout)
    assert printed == {"profile_sets": sets}, (printed, sets)
    print("profiles: the same list as vtrainctl profiles ls --json")
client.close()
PY
echo "python client: ok"
