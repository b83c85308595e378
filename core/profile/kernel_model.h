// The kernel-time model of the analytical profile generator: how long one
// GEMM or memory-bound kernel takes on a GPU, and the gaps the host's kernel
// dispatch leaves between them. The kernel lists (analytical.cc) use it.
#ifndef VTRAIN_CORE_PROFILE_KERNEL_MODEL_H_
#define VTRAIN_CORE_PROFILE_KERNEL_MODEL_H_

#include <vector>

#include "core/profile/analytical_params.h"
#include "core/profile/profile.h"
#include "core/spec/gpu.h"

namespace vtrain {

// Accumulates kernels with their GPU time, then derives the gaps from the
// host-dispatch model.
class KernelSequence {
 public:
  KernelSequence(const GpuSpec& gpu, DType dtype, const AnalyticalParams& params)
      : gpu_(gpu), params_(params), peak_flops_(gpu.PeakFlops(dtype)) {}

  // C[m,n] = A[m,k] * B[k,n], `batch` times; 2-byte elements. Its time is
  // non-decreasing in every dimension (tests/kernel_model_test.cc).
  void Gemm(const char* name, double m, double n, double k, double batch = 1);

  // A memory-bound kernel moving `bytes` through HBM.
  void Memory(const char* name, double bytes);

  // Gemm with fp8 operands (Transformer Engine's fp8 linear layers): the same
  // tile-and-wave model at the GPU's peak_fp8_flops_per_s.
  // `rate`: the fraction of the fp8 peak the recipe leaves (blockwise < 1).
  void GemmFp8(const char* name, double m, double n, double k, double batch = 1, double rate = 1);

  // `count` GEMMs of m x n x k, each its own kernel, launched round-robin
  // over `streams` streams so that `streams` of them run at once (Transformer
  // Engine's grouped linear layers on their default cuBLAS path,
  // multi_stream_cublas_gemm). A round of them takes the time of one batched
  // GEMM of that many, shared evenly by its kernels; each kernel is
  // dispatched by the host. `fp8_rate` > 0: fp8 operands at that fraction of
  // the fp8 peak (as GemmFp8). Non-decreasing in every dimension and count.
  void GemmsOnStreams(const char* name, double m, double n, double k, double count, double streams,
                      double fp8_rate = 0);

  // A fused tensor-core kernel that keeps its intermediates on chip
  // (FlashAttention): `flops` at `efficiency` of the sequence's peak, plus
  // the GEMM overhead, or `bytes` of HBM traffic, whichever is slower.
  void FusedTensorCore(const char* name, double flops, double bytes, double efficiency);

  // Applies the host-dispatch recurrence: kernel i is enqueued i * dispatch
  // after the first, and starts when both enqueued and its predecessor is
  // done; the next operator's first kernel is enqueued n * dispatch +
  // operator overhead after this one's first.
  std::vector<KernelRecord> Finish() &&;

 private:
  static bool Aligned(double dim);
  // The compute-bound time of a GEMM: tile and wave quantisation over the SMs.
  double GemmComputeNs(double m, double n, double k, double batch) const;
  double MemoryNs(double bytes) const;
  void Add(const char* name, double gpu_ns);

  const GpuSpec& gpu_;
  const AnalyticalParams& params_;
  double peak_flops_;
  std::vector<KernelRecord> kernels_;
};

}  // namespace vtrain

#endif  // VTRAIN_CORE_PROFILE_KERNEL_MODEL_H_
