#include "profiler_agent/gpu/nccl_sweep.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace vtrain::gpu {
namespace {

std::string CudaError(const char* call, cudaError_t e) {
  return std::string(call) + ": " + cudaGetErrorString(e);
}
std::string NcclError(const char* call, ncclResult_t r) {
  return std::string(call) + ": " + ncclGetErrorString(r);
}

#define VTRAIN_CUDA_OR_RETURN(call)                                 \
  do {                                                              \
    cudaError_t vtrain_e = (call);                                  \
    if (vtrain_e != cudaSuccess) return CudaError(#call, vtrain_e); \
  } while (0)
#define VTRAIN_NCCL_OR_RETURN(call)                                 \
  do {                                                              \
    ncclResult_t vtrain_r = (call);                                 \
    if (vtrain_r != ncclSuccess) return NcclError(#call, vtrain_r); \
  } while (0)

// Communicators, streams, buffers and events for `n` GPUs; freed on
// destruction whatever state setup reached.
class Group {
 public:
  std::string Init(int n, int64_t buffer_bytes) {
    n_ = n;
    comms_.assign(n, nullptr);
    streams_.assign(n, nullptr);
    send_.assign(n, nullptr);
    recv_.assign(n, nullptr);
    start_.assign(n, nullptr);
    stop_.assign(n, nullptr);
    std::vector<int> devs(n);
    for (int i = 0; i < n; ++i) devs[i] = i;
    for (int i = 0; i < n; ++i) {
      VTRAIN_CUDA_OR_RETURN(cudaSetDevice(i));
      VTRAIN_CUDA_OR_RETURN(cudaStreamCreateWithFlags(&streams_[i], cudaStreamNonBlocking));
      VTRAIN_CUDA_OR_RETURN(cudaMalloc(&send_[i], buffer_bytes));
      VTRAIN_CUDA_OR_RETURN(cudaMalloc(&recv_[i], buffer_bytes));
      // On our stream: the legacy default stream does not order with
      // non-blocking streams.
      VTRAIN_CUDA_OR_RETURN(cudaMemsetAsync(send_[i], 0, buffer_bytes, streams_[i]));
      VTRAIN_CUDA_OR_RETURN(cudaStreamSynchronize(streams_[i]));
      VTRAIN_CUDA_OR_RETURN(cudaEventCreate(&start_[i]));
      VTRAIN_CUDA_OR_RETURN(cudaEventCreate(&stop_[i]));
    }
    VTRAIN_NCCL_OR_RETURN(ncclCommInitAll(comms_.data(), n, devs.data()));
    return "";
  }
  ~Group() {
    for (int i = 0; i < n_; ++i) {
      cudaSetDevice(i);
      // A communicator that timed out may never finish: abort, not destroy.
      if (comms_[i]) aborted_ ? ncclCommAbort(comms_[i]) : ncclCommDestroy(comms_[i]);
      if (send_[i]) cudaFree(send_[i]);
      if (recv_[i]) cudaFree(recv_[i]);
      if (start_[i]) cudaEventDestroy(start_[i]);
      if (stop_[i]) cudaEventDestroy(stop_[i]);
      if (streams_[i]) cudaStreamDestroy(streams_[i]);
    }
  }

  // Enqueues one collective of `bytes` (nccl-tests' size) on every GPU.
  std::string Launch(const std::string& collective, int64_t bytes) {
    const size_t count = static_cast<size_t>(bytes / 4);  // floats, as nccl-tests
    VTRAIN_NCCL_OR_RETURN(ncclGroupStart());
    for (int i = 0; i < n_; ++i) {
      ncclResult_t r = ncclSuccess;
      if (collective == "all_reduce") {
        r = ncclAllReduce(send_[i], recv_[i], count, ncclFloat, ncclSum, comms_[i], streams_[i]);
      } else if (collective == "all_gather") {
        r = ncclAllGather(send_[i], recv_[i], count / n_, ncclFloat, comms_[i], streams_[i]);
      } else if (collective == "reduce_scatter") {
        r = ncclReduceScatter(send_[i], recv_[i], count / n_, ncclFloat, ncclSum, comms_[i],
                              streams_[i]);
      } else if (collective == "all_to_all") {
        // nccl-tests' alltoall_perf: `bytes` is a rank's send buffer, of
        // which count / n goes to every rank (itself included), as grouped
        // point-to-point calls.
        const size_t chunk = count / static_cast<size_t>(n_);
        float* send = static_cast<float*>(send_[i]);
        float* recv = static_cast<float*>(recv_[i]);
        for (int j = 0; j < n_ && r == ncclSuccess; ++j) {
          r = ncclSend(send + j * chunk, chunk, ncclFloat, j, comms_[i], streams_[i]);
          if (r == ncclSuccess) {
            r = ncclRecv(recv + j * chunk, chunk, ncclFloat, j, comms_[i], streams_[i]);
          }
        }
      } else {  // send_recv: a ring, each rank sends `bytes` to the next
        r = ncclSend(send_[i], count, ncclFloat, (i + 1) % n_, comms_[i], streams_[i]);
        if (r == ncclSuccess) {
          r = ncclRecv(recv_[i], count, ncclFloat, (i + n_ - 1) % n_, comms_[i], streams_[i]);
        }
      }
      if (r != ncclSuccess) {
        ncclGroupEnd();
        return NcclError(collective.c_str(), r);
      }
    }
    VTRAIN_NCCL_OR_RETURN(ncclGroupEnd());
    return "";
  }

  // Mean time of one collective over `iterations` back-to-back launches,
  // the slowest GPU's (ns).
  std::string Time(const std::string& collective, int64_t bytes, int warmup, int iterations,
                   double* ns) {
    for (int w = 0; w < warmup; ++w) {
      if (std::string e = Launch(collective, bytes); !e.empty()) return e;
    }
    for (int i = 0; i < n_; ++i) {
      VTRAIN_CUDA_OR_RETURN(cudaSetDevice(i));
      VTRAIN_CUDA_OR_RETURN(cudaEventRecord(start_[i], streams_[i]));
    }
    for (int it = 0; it < iterations; ++it) {
      if (std::string e = Launch(collective, bytes); !e.empty()) return e;
    }
    float worst_ms = 0;
    for (int i = 0; i < n_; ++i) {
      VTRAIN_CUDA_OR_RETURN(cudaSetDevice(i));
      VTRAIN_CUDA_OR_RETURN(cudaEventRecord(stop_[i], streams_[i]));
    }
    for (int i = 0; i < n_; ++i) {
      VTRAIN_CUDA_OR_RETURN(cudaSetDevice(i));
      if (std::string e = WaitFor(i); !e.empty()) return e;
      float ms = 0;
      VTRAIN_CUDA_OR_RETURN(cudaEventElapsedTime(&ms, start_[i], stop_[i]));
      worst_ms = std::max(worst_ms, ms);
    }
    *ns = static_cast<double>(worst_ms) * 1e6 / iterations;
    return "";
  }

  // Waits for GPU i's stop event, polling so that a collective that hangs
  // (a broken link, a peer that died) or fails asynchronously becomes an
  // error after kTimeout instead of blocking the agent forever.
  std::string WaitFor(int i) {
    constexpr auto kTimeout = std::chrono::seconds(120);
    const auto deadline = std::chrono::steady_clock::now() + kTimeout;
    for (;;) {
      const cudaError_t e = cudaEventQuery(stop_[i]);
      if (e == cudaSuccess) return "";
      if (e != cudaErrorNotReady) return CudaError("cudaEventQuery", e);
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comms_[i], &async) == ncclSuccess && async != ncclSuccess) {
        aborted_ = true;
        return NcclError("collective failed asynchronously", async);
      }
      if (std::chrono::steady_clock::now() > deadline) {
        aborted_ = true;
        return "collective did not finish within 120 s on GPU " + std::to_string(i);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  // Waits, with WaitFor's timeout, for everything queued on GPU i's stream.
  std::string WaitIdle(int i) {
    VTRAIN_CUDA_OR_RETURN(cudaEventRecord(stop_[i], streams_[i]));
    return WaitFor(i);
  }

  void* send(int i) { return send_[i]; }
  void* recv(int i) { return recv_[i]; }
  cudaStream_t stream(int i) { return streams_[i]; }

 private:
  int n_ = 0;
  bool aborted_ = false;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  std::vector<void*> send_, recv_;
  std::vector<cudaEvent_t> start_, stop_;
};

}  // namespace

std::string NcclVersion() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "";
  // NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z since 2.9 (nccl.h).
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

NcclSweepResult RunNcclSweep(const NcclSweepOptions& options, std::ostream& progress) {
  NcclSweepResult result;
  int visible = 0;
  if (cudaError_t e = cudaGetDeviceCount(&visible); e != cudaSuccess) {
    result.error = CudaError("cudaGetDeviceCount", e);
    return result;
  }
  const int max_gpus = options.max_gpus > 0 ? std::min(options.max_gpus, visible) : visible;
  if (max_gpus < options.min_gpus) {
    result.error = "the sweep needs at least " + std::to_string(options.min_gpus) +
                   " GPUs and this node has " + std::to_string(visible) +
                   " (use `nccl --check` for a single-GPU check)";
    return result;
  }
  for (int n = options.min_gpus; n <= max_gpus; ++n) {
    Group group;
    if (std::string e = group.Init(n, options.max_bytes); !e.empty()) {
      result.error = std::to_string(n) + " GPUs: " + e;
      return result;
    }
    for (const std::string& c : options.collectives) {
      CollectiveEntry curve;
      curve.scope = "intra_node";
      curve.collective = c;
      curve.ranks = n;
      for (int64_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= 2) {
        if (bytes / 4 < n) continue;  // fewer elements than ranks
        double ns = 0;
        if (std::string e = group.Time(c, bytes, options.warmup, options.iterations, &ns);
            !e.empty()) {
          result.error = c + " over " + std::to_string(n) + " GPUs at " + std::to_string(bytes) +
                         " bytes: " + e;
          return result;
        }
        curve.points.push_back({static_cast<double>(bytes), ns});
      }
      progress << c << " over " << n << " GPUs: " << curve.points.size() << " sizes, "
               << (curve.points.empty() ? 0 : curve.points.back().second / 1e3) << " us at "
               << options.max_bytes << " bytes\n";
      result.curves.push_back(std::move(curve));
    }
  }
  return result;
}

std::string NcclCheck(int gpus, double* latency_ns) {
  int visible = 0;
  VTRAIN_CUDA_OR_RETURN(cudaGetDeviceCount(&visible));
  if (gpus < 1 || gpus > visible) {
    return "asked for " + std::to_string(gpus) + " GPUs; " + std::to_string(visible) +
           " are visible";
  }
  constexpr int64_t kBytes = 64 << 20;
  constexpr size_t kCount = kBytes / 4;
  Group group;
  if (std::string e = group.Init(gpus, kBytes); !e.empty()) return e;
  // Rank r holds r + 1 everywhere; the sum over n ranks is n (n + 1) / 2.
  std::vector<float> host(kCount);
  for (int r = 0; r < gpus; ++r) {
    std::fill(host.begin(), host.end(), static_cast<float>(r + 1));
    VTRAIN_CUDA_OR_RETURN(cudaSetDevice(r));
    // A pageable copy may return before the data lands; wait on the stream
    // NCCL will use.
    VTRAIN_CUDA_OR_RETURN(cudaMemcpyAsync(group.send(r), host.data(), kBytes,
                                          cudaMemcpyHostToDevice, group.stream(r)));
    VTRAIN_CUDA_OR_RETURN(cudaStreamSynchronize(group.stream(r)));
  }
  if (std::string e = group.Launch("all_reduce", kBytes); !e.empty()) return e;
  const float expected = static_cast<float>(gpus) * (gpus + 1) / 2;
  for (int r = 0; r < gpus; ++r) {
    VTRAIN_CUDA_OR_RETURN(cudaSetDevice(r));
    if (std::string e = group.WaitIdle(r); !e.empty()) return e;
    VTRAIN_CUDA_OR_RETURN(cudaMemcpyAsync(host.data(), group.recv(r), kBytes,
                                          cudaMemcpyDeviceToHost, group.stream(r)));
    VTRAIN_CUDA_OR_RETURN(cudaStreamSynchronize(group.stream(r)));
    for (size_t i = 0; i < kCount; i += 4093) {
      if (host[i] != expected) {
        return "all_reduce gave " + std::to_string(host[i]) + " at element " + std::to_string(i) +
               " of rank " + std::to_string(r) + "; expected " + std::to_string(expected);
      }
    }
  }
  return group.Time("all_reduce", kBytes, 3, 10, latency_ns);
}

}  // namespace vtrain::gpu
