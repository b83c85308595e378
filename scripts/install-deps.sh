#!/usr/bin/env bash
# Installs the Debian 12 packages vtrain builds with (and openssl, which the
# TLS test uses to make its certificates, and the Python gRPC packages the
# Python client's test uses), if any are missing.
# With arguments, installs those packages instead (the deploy checks and the
# container smoke test use it for their tools).
set -euo pipefail

packages=(cmake g++ make ninja-build pkg-config libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libsqlite3-dev
  prometheus-cpp-dev openssl python3-grpcio python3-protobuf)
if [ $# -gt 0 ]; then packages=("$@"); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing: ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
"${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"
