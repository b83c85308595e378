#!/usr/bin/env bash
# The Python client against a real vtrain-server on loopback: the example
# scheduler asks for throughput curves of two models under both policies and
# prints the table; a bad request comes back as the server's error.
# usage: python_client_test.sh VTRAIN_SERVER STUBS_DIR SOURCE_DIR
set -euo pipefail
server_bin=$1 stubs=$2 src=$3
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
echo "python client: ok"
