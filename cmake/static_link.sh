#!/usr/bin/env bash
# Linker launcher for vtrainctl (client/CMakeLists.txt, CXX_LINKER_LAUNCHER):
# runs the link command CMake wrote with each system shared library
# (/usr/lib/<triplet>/libX.so[.N]) replaced by its static archive when Debian
# ships one (libgrpc++.a, libprotobuf.a, libabsl_*.a, ...). A vtrainctl run is
# one short process: linked statically it skips the dynamic loader's ~15 ms
# of relocations over ~55 libraries (docs/speed.md). Libraries without an
# archive stay shared.
set -euo pipefail
args=()
for a in "$@"; do
  if [[ $a =~ ^(/usr/lib/[a-z0-9_-]+/lib[A-Za-z0-9_+.-]+)\.so(\.[0-9.]+)?$ ]] &&
    [ -f "${BASH_REMATCH[1]}.a" ]; then
    args+=("${BASH_REMATCH[1]}.a")
  else
    args+=("$a")
  fi
done
exec "${args[@]}"
