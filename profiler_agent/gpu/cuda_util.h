// Host-side helpers of the workloads' sources: CUDA and cuBLASLt results as
// error strings ("" for success) and an early return on them. The GPU half
// builds without abseil, so errors here are strings, not absl::Status.
#ifndef VTRAIN_PROFILER_AGENT_GPU_CUDA_UTIL_H_
#define VTRAIN_PROFILER_AGENT_GPU_CUDA_UTIL_H_

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

// Returns the error string of `expr` from the enclosing function when it is
// not empty (core's VTRAIN_RETURN_IF_ERROR, for strings).
#define VTRAIN_GPU_RETURN_IF_ERROR(expr)                \
  do {                                                  \
    std::string vtrain_status_ = (expr);                \
    if (!vtrain_status_.empty()) return vtrain_status_; \
  } while (false)

namespace vtrain::gpu::internal {

// "<what>: <CUDA error string>".
std::string CudaError(const std::string& what, cudaError_t e);

// "<what>: <status name> (<status string>)".
std::string CublasError(const std::string& what, cublasStatus_t s);

// "" for cudaSuccess, else CudaError(what, e).
std::string CheckCuda(const std::string& what, cudaError_t e);

// "" for CUBLAS_STATUS_SUCCESS, else CublasError(what, s).
std::string CheckCublas(const std::string& what, cublasStatus_t s);

// What every workload opens first: a CUDA device must exist, then a
// non-blocking stream and a cuBLASLt handle. "" or the failing call.
std::string OpenStreamAndLt(cudaStream_t* stream, cublasLtHandle_t* lt);

// a / b rounded up, for positive a and b.
inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace vtrain::gpu::internal

#endif  // VTRAIN_PROFILER_AGENT_GPU_CUDA_UTIL_H_
