# vtrain container image: vtrain-server and vtrainctl on Debian 12.
#
#   docker build -t vtrain .                        # real Docker / BuildKit
#   podman build --network host \
#     --build-arg BASE=localhost/debian:bookworm -t localhost/vtrain .   # see scripts/container-smoke.sh
#
# The entrypoint is vtrain-server with container defaults; arguments given to
# `docker run IMAGE ...` (compose `command:`, Kubernetes `args:`) are appended,
# and a repeated flag takes its last value, so `--listen=0.0.0.0:50052` overrides
# the default. Use `--entrypoint vtrainctl` (Kubernetes `command:`) for the client.
ARG BASE=debian:bookworm

# ---- build: the same CMake build as CI (scripts/build.sh), without tests ----
FROM ${BASE} AS build
ENV DEBIAN_FRONTEND=noninteractive
# The build dependencies come from scripts/install-deps.sh, the single list CI uses;
# copied alone first so this layer is cached across source changes.
COPY scripts/install-deps.sh /src/scripts/install-deps.sh
RUN /src/scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN scripts/build.sh -DVTRAIN_BUILD_TESTS=OFF -DVTRAIN_BUILD_BENCHMARKS=OFF \
      -DVTRAIN_BUILD_AGENT_GPU=OFF \
 && install -D -m 0755 build/server/vtrain-server /out/usr/local/bin/vtrain-server \
 && install -D -m 0755 build/client/vtrainctl /out/usr/local/bin/vtrainctl \
 && install -D -m 0755 build/profiler_agent/vtrain-agent /out/usr/local/bin/vtrain-agent \
 && strip /out/usr/local/bin/*
# vtrain-agent here has its importers, push and serve loop; vtrain-agent-gpu
# (CUPTI, cuBLASLt, NCCL) needs the CUDA Toolkit, which this Debian image does
# not have: build it on a CUDA base with `cmake -S profiler_agent/gpu` and
# install it beside vtrain-agent for the agent DaemonSet in deploy/.

# ---- runtime: the same base with only the shared libraries the binaries load ----
FROM ${BASE}
ENV DEBIAN_FRONTEND=noninteractive
# Found with `ldd build/server/vtrain-server build/client/vtrainctl` and `dpkg -S`:
# gRPC 1.51 (pulls libgrpc29, c-ares, re2, OpenSSL 3), protobuf 3.21, abseil,
# SQLite, prometheus-cpp (pulls civetweb). libstdc++, libc and zlib are in the base.
# apt's caches are removed explicitly (85 MB otherwise on bases without the apt-clean
# hook of Docker's debian images, such as one made with mmdebstrap).
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libabsl20220623 libsqlite3-0 \
      libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin \
 && groupadd --gid 10001 vtrain \
 && useradd --uid 10001 --gid vtrain --home-dir /var/lib/vtrain \
      --no-create-home --shell /usr/sbin/nologin vtrain \
 && install -d -o vtrain -g vtrain -m 0750 /var/lib/vtrain
COPY --from=build /out/ /
# Fails the build if a shared library is missing.
RUN ! ldd /usr/local/bin/vtrain-server /usr/local/bin/vtrainctl | grep 'not found' \
 && vtrainctl presets >/dev/null
# The database lives in /var/lib/vtrain: mount a volume there (compose: a named
# volume; Kubernetes: a PersistentVolumeClaim for the registry).
USER 10001:10001
WORKDIR /var/lib/vtrain
# 50051: gRPC (vtrain.v1, grpc.health.v1, reflection); 9090: Prometheus /metrics.
EXPOSE 50051 9090
ENTRYPOINT ["vtrain-server", "--listen=0.0.0.0:50051", "--metrics-listen=0.0.0.0:9090", \
            "--db=/var/lib/vtrain/vtrain.db"]
