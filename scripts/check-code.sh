#!/usr/bin/env bash
# Code and documentation checks (CI, after scripts/test.sh has built
# everything): clang-format, the 500-line file limit and the 100-line
# function limit outside the GPU code, README/docs links, every command
# README.md and docs/ show with the output they show (scripts/check_docs.py
# lists those that need a server or a GPU instead of running them), and the
# generated figures (scripts/figures.py --check).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh clang-format python3
mapfile -t sources < <(git ls-files '*.cc' '*.h' | grep -v '^profiler_agent/gpu/\|^tests/gpu/')
mapfile -t all < <(git ls-files '*.cc' '*.h' '*.proto' '*.py' '*.sh' |
  grep -v '^profiler_agent/gpu/\|^tests/gpu/')
echo "check-code: clang-format on ${#sources[@]} files"
clang-format --dry-run --Werror "${sources[@]}"
echo "check-code: file and function length"
python3 scripts/check_code.py "${all[@]}"
echo "check-code: README and docs"
python3 scripts/check_docs.py .
echo "check-code: the figures the pages quote (scripts/figures.py)"
python3 scripts/figures.py --check
echo "check-code: ok"
