#!/usr/bin/env bash
# Container smoke test (not part of CI; needs podman and about 10 minutes the first time).
#
# Builds the Debian 12 base image with mmdebstrap if it is missing (no registry can be
# pulled from here), builds the vtrain image from the top-level Dockerfile with podman,
# runs a registry and a predictor container on the host network and talks to them with
# the host's build/client/vtrainctl:
#   - profiles ls against the registry, predict --server against the predictor (and the
#     same iteration time as predict --local),
#   - a push to the registry with the token (stored), one without it (refused), and the
#     pushed set reaching the predictor (profiles ls, predict --profile-set),
#   - both /metrics endpoints, a graceful stop (exit code 0) and the registry's database
#     surviving a restart on its named volume,
# then removes the containers and the volume.
#
# Environment: IMAGE (default localhost/vtrain:smoke), BASE_IMAGE (default
# localhost/debian:bookworm), REBUILD=0 to reuse an existing IMAGE instead of rebuilding.
# Ports (host network): gRPC 51051/51052, metrics 19091/19092.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export CONTAINERS_CONF="$root/deploy/podman/containers.conf"

image=${IMAGE:-localhost/vtrain:smoke}
base=${BASE_IMAGE:-localhost/debian:bookworm}
registry_port=51051
predictor_port=51052
registry_metrics=19091
predictor_metrics=19092
prefix=vtrain-smoke
ctl=build/client/vtrainctl
registry=127.0.0.1:$registry_port
predictor=127.0.0.1:$predictor_port

step() { printf '\n== %s  [%s]\n' "$*" "$(date -u +%H:%M:%S)"; }
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# --- tools: install what is missing ---
scripts/install-deps.sh podman runc mmdebstrap curl
podman --version

# --- the host's client ---
if [ ! -x "$ctl" ]; then
  step "building the host's vtrainctl"
  scripts/install-deps.sh
  scripts/build.sh
fi

# --- images ---
if ! podman image exists "$base"; then
  step "building $base with mmdebstrap (about 3 minutes)"
  mmdebstrap --variant=minbase bookworm - \
    "deb http://deb.debian.org/debian bookworm main" \
    "deb http://deb.debian.org/debian bookworm-updates main" \
    "deb http://deb.debian.org/debian-security bookworm-security main" |
    podman import --change 'CMD ["/bin/bash"]' - "$base"
fi
if [ "${REBUILD:-1}" != 0 ] || ! podman image exists "$image"; then
  step "building $image from Dockerfile (compiles vtrain: 5-8 minutes on 2 cores)"
  start=$(date +%s)
  podman build --network host --build-arg BASE="$base" -t "$image" -f Dockerfile .
  echo "image built in $(($(date +%s) - start)) s"
fi
size=$(podman image inspect --format '{{.Size}}' "$image")
echo "image $image: $size bytes ($(numfmt --to=iec-i --suffix=B "$size"))"

# --- containers ---
work=$(mktemp -d)
cleanup() {
  podman rm -f "$prefix-registry" "$prefix-predictor" >/dev/null 2>&1 || true
  podman volume rm -f "$prefix-registry-db" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
cleanup
mkdir -p "$work"

for port in $registry_port $predictor_port $registry_metrics $predictor_metrics; do
  if ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; then
    fail "port $port is in use on this machine; free it or edit the ports at the top of $0"
  fi
done

head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/push-token"
chmod 0644 "$work/push-token" # the container runs as uid 10001

running() { [ "$(podman inspect --format '{{.State.Running}}' "$1" 2>/dev/null)" = true ]; }
wait_serving() { # NAME ADDRESS: until profiles ls answers
  for _ in $(seq 1 120); do
    if "$ctl" profiles ls --server "$2" --timeout 2 >/dev/null 2>&1; then return 0; fi
    if ! running "$1"; then
      podman logs "$1" >&2 || true
      fail "container $1 exited"
    fi
    sleep 0.5
  done
  podman logs "$1" >&2 || true
  fail "$1 did not answer on $2 within 60 s"
}

step "starting the registry (gRPC $registry, metrics 127.0.0.1:$registry_metrics, volume $prefix-registry-db)"
podman volume create "$prefix-registry-db" >/dev/null
podman run -d --name "$prefix-registry" --network host \
  -v "$prefix-registry-db:/var/lib/vtrain" \
  -v "$work/push-token:/run/secrets/vtrain-push-token:ro" \
  "$image" --role=registry --listen="$registry" \
  --metrics-listen="127.0.0.1:$registry_metrics" \
  --push-token-file=/run/secrets/vtrain-push-token
wait_serving "$prefix-registry" "$registry"

step "starting a predictor (gRPC $predictor, metrics 127.0.0.1:$predictor_metrics, registry $registry)"
podman run -d --name "$prefix-predictor" --network host \
  "$image" --role=predictor --registry="$registry" --listen="$predictor" \
  --metrics-listen="127.0.0.1:$predictor_metrics"
wait_serving "$prefix-predictor" "$predictor"
podman ps --filter "name=$prefix" --format '{{.Names}}  {{.Image}}  {{.Status}}'

step "vtrainctl profiles ls --server $registry"
"$ctl" profiles ls --server "$registry"
builtin_sets=$("$ctl" profiles ls --server "$registry" --json | grep -c '"id"')

step "waiting for the predictor to sync the $builtin_sets built-in sets"
for _ in $(seq 1 60); do
  n=$("$ctl" profiles ls --server "$predictor" --json | grep -c '"id"' || true)
  [ "$n" -ge "$builtin_sets" ] && break
  sleep 0.5
done
"$ctl" profiles ls --server "$predictor"

job=(--model gpt3-175b --gpu a100-sxm4-80gb --gpus 512 --tp 8 --pp 16 --micro-batch 6
  --global-batch 1536 --tokens 300e9 --price-usd-per-gpu-hour 4.096)
step "vtrainctl predict --server $predictor ${job[*]}"
"$ctl" predict --server "$predictor" "${job[@]}"
iter_ms() { grep -o '"iteration_time_ms": *[0-9.e+-]*' | head -1 | sed 's/.*: *//'; }
remote_ms=$("$ctl" predict --server "$predictor" "${job[@]}" --json | iter_ms)
local_ms=$("$ctl" predict --local "${job[@]}" --json | iter_ms)
echo "iteration time: predictor container $remote_ms ms, host --local $local_ms ms"
# The same double, printed by different JSON writers: compare numerically.
if [ -z "$remote_ms" ] || ! awk -v a="$remote_ms" -v b="$local_ms" \
  'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-9 * (b < 0 ? -b : b)) }'; then
  fail "the predictor and --local disagree"
fi

step "a registry does not predict (expected to fail)"
if "$ctl" predict --server "$registry" "${job[@]}" 2>&1; then fail "the registry predicted"; fi

step "push a new profile set to the registry"
a100=$("$ctl" profiles ls --server "$registry" --gpu a100-sxm4-80gb --json |
  grep -o '"id": *"sha256:[0-9a-f]*"' | head -1 | grep -o 'sha256:[0-9a-f]*')
"$ctl" profiles pull "$a100" -o "$work/builtin.json" --server "$registry"
name="container-smoke-$(date -u +%Y%m%dT%H%M%SZ)"
sed -e '/"id":/d' -e '/"created_at":/d' \
  -e "s/\"name\": \"builtin-a100-sxm4-80gb\"/\"name\": \"$name\"/" \
  "$work/builtin.json" >"$work/new.json"
echo "\$ vtrainctl profiles push new.json --server $registry   # no token: must be refused"
if "$ctl" profiles push "$work/new.json" --server "$registry" 2>&1; then
  fail "a push without the token was accepted"
fi
echo "\$ vtrainctl profiles push new.json --server $registry --token-file push-token"
out=$("$ctl" profiles push "$work/new.json" --server "$registry" --token-file "$work/push-token")
echo "$out"
new_id=$(grep -o 'sha256:[0-9a-f]*' <<<"$out" | head -1)
[ -n "$new_id" ] || fail "no id in the push output"

step "the pushed set reaches the predictor"
found=0
for i in $(seq 1 60); do
  if "$ctl" profiles ls --server "$predictor" | grep -q "$new_id"; then
    found=1
    echo "seen on the predictor after $((i * 250)) ms or less"
    break
  fi
  sleep 0.25
done
[ "$found" = 1 ] || fail "$new_id did not reach the predictor within 15 s"
"$ctl" profiles ls --server "$predictor"
echo "\$ vtrainctl predict --server $predictor --profile-set $new_id ..."
out=$("$ctl" predict --server "$predictor" --profile-set "$new_id" "${job[@]}")
grep -E '^(iteration time|profiles|fidelity)' <<<"$out"
grep -q "^profiles $new_id" <<<"$out" || fail "the predictor did not use $new_id"

step "metrics"
echo "registry 127.0.0.1:$registry_metrics/metrics:"
curl -fsS "http://127.0.0.1:$registry_metrics/metrics" | grep -E '^vtrain_(profile_sets_loaded|requests_total)' | head -8
echo "predictor 127.0.0.1:$predictor_metrics/metrics:"
curl -fsS "http://127.0.0.1:$predictor_metrics/metrics" |
  grep -E '^vtrain_(profile_sets_loaded|registry_up|simulated_tasks_total)'

step "graceful stop (SIGTERM; exit code must be 0)"
podman stop -t 20 "$prefix-predictor" "$prefix-registry" >/dev/null
for c in "$prefix-predictor" "$prefix-registry"; do
  code=$(podman inspect --format '{{.State.ExitCode}}' "$c")
  echo "$c exited with $code"
  [ "$code" = 0 ] || fail "$c exited with $code"
done

step "the registry's database survives a restart on its volume"
podman start "$prefix-registry" >/dev/null
wait_serving "$prefix-registry" "$registry"
"$ctl" profiles ls --server "$registry" | grep "$new_id" || fail "$new_id lost after a restart"
podman stop -t 20 "$prefix-registry" >/dev/null

step "container logs"
for c in "$prefix-registry" "$prefix-predictor"; do
  echo "--- $c"
  podman logs "$c" 2>&1
done

step "container smoke: OK (image $image, $(numfmt --to=iec-i --suffix=B "$size"))"
