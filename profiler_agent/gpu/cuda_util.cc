#include "profiler_agent/gpu/cuda_util.h"

#include <string>

namespace vtrain::gpu::internal {

std::string CudaError(const std::string& what, cudaError_t e) {
  return what + ": " + cudaGetErrorString(e);
}

std::string CublasError(const std::string& what, cublasStatus_t s) {
  return what + ": " + cublasLtGetStatusName(s) + " (" + cublasLtGetStatusString(s) + ")";
}

std::string CheckCuda(const std::string& what, cudaError_t e) {
  return e == cudaSuccess ? std::string() : CudaError(what, e);
}

std::string CheckCublas(const std::string& what, cublasStatus_t s) {
  return s == CUBLAS_STATUS_SUCCESS ? std::string() : CublasError(what, s);
}

std::string OpenStreamAndLt(cudaStream_t* stream, cublasLtHandle_t* lt) {
  int devices = 0;
  VTRAIN_GPU_RETURN_IF_ERROR(CheckCuda("cudaGetDeviceCount", cudaGetDeviceCount(&devices)));
  if (devices == 0) return "cudaGetDeviceCount: no CUDA device";
  VTRAIN_GPU_RETURN_IF_ERROR(CheckCuda("cudaStreamCreateWithFlags",
                                       cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking)));
  return CheckCublas("cublasLtCreate", cublasLtCreate(lt));
}

}  // namespace vtrain::gpu::internal
