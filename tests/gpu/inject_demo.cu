// A stand-in for a framework process, for tests/gpu/run.sh: launches
// kernels inside NVTX ranges named after operators (and one framework range
// the injection library must ignore), so that libvtrain_inject.so loaded
// through CUDA_INJECTION64_PATH has something to record. Exits 1 without a
// GPU.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>

namespace {

__global__ void demo_scale_kernel(float* x, int n, float a) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    x[i] = x[i] * a + 1.0f;
  }
}

__global__ void demo_square_kernel(float* x, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    x[i] = x[i] * x[i] * 1e-3f;
  }
}

}  // namespace

int main() {
  constexpr int kN = 1 << 22;
  float* x = nullptr;
  if (cudaError_t e = cudaMalloc(&x, kN * sizeof(float)); e != cudaSuccess) {
    std::fprintf(stderr, "inject_demo: cudaMalloc: %s\n", cudaGetErrorString(e));
    return 1;
  }
  cudaMemset(x, 0, kN * sizeof(float));
  for (int rep = 0; rep < 6; ++rep) {
    nvtxRangePushA("vtrain:attention_fwd");
    demo_scale_kernel<<<256, 256>>>(x, kN, 0.5f);
    demo_square_kernel<<<256, 256>>>(x, kN);
    nvtxRangePop();
    nvtxRangePushA("mlp_fwd");
    nvtxRangePushA("aten::addmm");  // nested framework range: ignored, its kernel is mlp_fwd's
    demo_scale_kernel<<<512, 256>>>(x, kN, 0.25f);
    nvtxRangePop();
    nvtxRangePop();
    nvtxRangePushA("dataloader");  // not an operator: its kernel is not attributed
    demo_square_kernel<<<64, 256>>>(x, kN);
    nvtxRangePop();
    cudaDeviceSynchronize();
  }
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    std::fprintf(stderr, "inject_demo: %s\n", cudaGetErrorString(e));
    return 1;
  }
  cudaFree(x);
  std::printf("inject_demo: ran 6 repetitions of attention_fwd and mlp_fwd\n");
  return 0;
}
