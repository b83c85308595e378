// Kernel lists shared by the analytical generator's architectures: linear
// layers in 16 bits or in fp8 as Transformer Engine runs them, and the
// Llama-style layer (RMSNorm, rotary, grouped-query FlashAttention, SwiGLU).
#ifndef VTRAIN_CORE_PROFILE_LLAMA_KERNELS_H_
#define VTRAIN_CORE_PROFILE_LLAMA_KERNELS_H_

#include <vector>

#include "core/profile/analytical_params.h"
#include "core/profile/kernel_model.h"
#include "core/profile/profile.h"
#include "core/spec/gpu.h"

namespace vtrain::internal {

// FlashAttention's share of the tensor-core peak. FlashAttention-3 (Shah et
// al. 2024, §4.1) reaches 600-740 TFLOP/s forward in bf16 at head dimension
// 128 on H100 (61-75% of the dense peak) and its backward 1.5-1.75x
// FlashAttention-2's, about 450-550 TFLOP/s; FlashAttention-2 (Dao 2023, §4.1)
// reaches 50-73% of the A100 peak forward and less backward. We take the low
// ends, as cuDNN's fused attention (Transformer Engine's default) lands
// there at training shapes. Not calibrated: no measured attention kernels.
inline constexpr double kFlashForwardEfficiency = 0.60;
inline constexpr double kFlashBackwardEfficiency = 0.45;

// The dtype of everything but fp8 linear layers: fp8 training runs attention,
// norms and element-wise kernels in bf16.
inline DType ComputeDType(DType dtype) { return dtype == DType::kFp8 ? DType::kBf16 : dtype; }

// Forward of a linear layer y[tokens, n] = x[tokens, k] W[k, n]: one GEMM in
// 16 bits; with `fp8`, Transformer Engine's cast-transpose of the input to
// fp8 (the transpose kept for the weight gradient) before an fp8 GEMM.
void LinearForward(KernelSequence& seq, bool fp8, const char* gemm, double tokens, double n,
                   double k);
// Its backward: the data-gradient GEMM dx[tokens, k] = dy[tokens, n] W^T and
// the weight-gradient GEMM dW[n, k] = dy^T x; with `fp8`, the output
// gradient's cast-transpose to fp8 (E5M2) first and both GEMMs in fp8.
void LinearBackward(KernelSequence& seq, bool fp8, const char* dgrad, const char* wgrad,
                    double tokens, double n, double k);
// With `fp8`, the delayed-scaling update of one module's amax history and
// scales (one small kernel per module and pass); nothing otherwise.
void Fp8ScaleUpdate(KernelSequence& seq, bool fp8);

// The kernels of a Llama-architecture operator (key.arch == kLlama; every
// operator but the loss and the optimizer step, which are shared with GPT).
std::vector<KernelRecord> GenerateLlamaKernels(const GpuSpec& gpu, const OperatorKey& key,
                                               const AnalyticalParams& params);

// FLOPs of causal FlashAttention for one micro-batch on one GPU: forward
// 2 s^2 d per local head (QK^T and PV, 4 s^2 d, halved by the causal mask:
// masked blocks are skipped); backward 5 s^2 d (recomputed QK^T, dV, dP, dQ,
// dK). Attention is head-parallel, so the FLOPs split over t.
double FlashAttentionForwardFlops(const OperatorKey& key);
double FlashAttentionBackwardFlops(const OperatorKey& key);

}  // namespace vtrain::internal

#endif  // VTRAIN_CORE_PROFILE_LLAMA_KERNELS_H_
