#!/usr/bin/env bash
# Checks the container and deployment files (CI runs it before the tests):
#   1. yamllint (.yamllint) on every YAML file,
#   2. shellcheck on every shell script (scripts/*.sh, .ci/run, any other *.sh; not
#      data/ and the fuzz corpus, whose launch scripts are inputs written as users write
#      them),
#   3. docker-compose -f docker-compose.yml config -q,
#   4. kubectl kustomize deploy/base and deploy/overlays/example,
#   5. schema and reference validation of every rendered object (deploy/validate,
#      npm kubernetes-models).
# yamllint, shellcheck and docker-compose are installed from apt when missing; steps
# 4 and 5 run only where kubectl / node and npm exist and say "skipped" otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

# --- apt-installable tools, only those missing ---
scripts/install-deps.sh yamllint shellcheck docker-compose

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
results=()
step() { printf '\n== %s\n' "$*"; }
ok() {
  echo "ok: $*"
  results+=("ok       $*")
}
skipped() {
  echo "skipped: $*"
  results+=("skipped  $*")
}

step "yamllint"
yamllint --version
mapfile -t yaml_files < <(yamllint -c .yamllint --list-files . | sort)
yamllint -c .yamllint --strict "${yaml_files[@]}"
ok "yamllint: ${#yaml_files[@]} files"

step "shellcheck"
shellcheck --version | sed -n 2p
mapfile -t shell_files < <(
  {
    find . \( -path './build*' -o -path ./.git -o -path ./data -o -path ./tests/fuzz/corpus -o -name node_modules \) -prune -o \
      -type f -name '*.sh' -print
    # Extension-less scripts (.ci/run, ...) by their shebang.
    find .ci scripts -maxdepth 1 -type f ! -name '*.*' -print 2>/dev/null |
      while read -r f; do head -n1 "$f" | grep -Eq '^#!.*\b(ba|da)?sh\b' && echo "$f"; done
  } | sed 's|^\./||' | sort -u
)
shellcheck "${shell_files[@]}"
ok "shellcheck: ${shell_files[*]}"

step "docker-compose config"
docker-compose --version
docker-compose -f docker-compose.yml config -q
ok "docker-compose -f docker-compose.yml config -q"

step "kubectl kustomize"
rendered=()
if command -v kubectl >/dev/null 2>&1; then
  kubectl version --client 2>/dev/null | head -2
  for dir in deploy/base deploy/overlays/example; do
    out="$work/$(basename "$dir").yaml"
    kubectl kustomize "$dir" >"$out"
    rendered+=("$out")
    ok "kubectl kustomize $dir: $(grep -c '^kind:' "$out") objects"
  done
else
  skipped "kubectl not installed (kubectl kustomize deploy/...)"
fi

step "schema validation (kubernetes-models)"
if [ ${#rendered[@]} -eq 0 ]; then
  skipped "kubectl not installed (nothing rendered to validate)"
elif ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  skipped "node/npm not installed (deploy/validate)"
else
  echo "node $(node --version), npm $(npm --version)"
  # Reuse node_modules when it matches package-lock.json; otherwise install it exactly.
  if ! (cd deploy/validate && npm ls --silent >/dev/null 2>&1); then
    (cd deploy/validate && npm ci --no-audit --no-fund --loglevel=error)
  fi
  for f in "${rendered[@]}"; do
    printf '%s: ' "$(basename "$f" .yaml)"
    node deploy/validate/validate.js "$f"
  done
  ok "kubernetes-models validation of ${#rendered[@]} renders"
fi

step "summary"
printf '%s\n' "${results[@]}"
