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

// FlashAttention's share of the tensor-core peak for one causal kernel whose
// queries each attend to `key_len` keys (s, or s / c per ring step under
// context parallelism) with query/key heads of `head_dim`. At s = 4096 and
// head dimension 128 it is 0.60 forward and 0.45 backward: FlashAttention-3
// (Shah et al. 2024, §4.1) reaches 61-75% of the H100 dense peak forward at
// head dimension 128 and its backward 1.5-1.75x FlashAttention-2's;
// FlashAttention-2 (Dao 2023, §4.1) 50-73% of the A100 peak forward and less
// backward; we take the low ends, as cuDNN's fused attention (Transformer
// Engine's default) lands there at training shapes. Around that point:
//  - length: a thread block of 128 queries loops over the key blocks (n =
//    key_len / 128), computing (n + 1) / 2 of them under the causal mask
//    (the diagonal block in full) for n / 2 useful ones, plus about 1.5
//    blocks' worth of loading Q and writing O: efficiency ∝ n / (n + 4).
//    FlashAttention-2's Fig. 4 (A100, fwd+bwd) rises from 54% (causal) and
//    68% (not) of its 16K speed at 512 to its plateau past 4K, as this does.
//  - head width: 1.25 d / (d + 32), 1 at 128, 0.83 at 64 (FlashAttention-2
//    at head dimension 64 runs about 0.8x its head-128 speed), at most 1.1.
// Not calibrated: no measured attention kernels.
double FlashAttentionEfficiency(double key_len, double head_dim, bool backward);
// The same for a key's attention core (head_dim: the query/key width).
double FlashAttentionEfficiency(const OperatorKey& key, double head_dim, bool backward);

// The dtype of everything but fp8 linear layers: fp8 training runs attention,
// norms and element-wise kernels in bf16.
inline DType ComputeDType(DType dtype) { return dtype == DType::kFp8 ? DType::kBf16 : dtype; }

// Whether an operator's linear layers run in fp8, and with which recipe.
// Tests as a bool (on), so the kernel lists read `if (fp8)`.
struct Fp8Linear {
  bool on = false;
  Fp8Recipe recipe = Fp8Recipe::kDelayed;
  explicit operator bool() const { return on; }
};
inline Fp8Linear Fp8Of(const OperatorKey& key) {
  return {key.dtype == DType::kFp8, key.fp8_recipe};
}

// Transformer Engine's cast of `elements` 16-bit values to fp8, rowwise and
// columnwise (the transpose kept for the other GEMM), with the recipe's
// scales: an fp32 per 128 (blockwise) or an E8M0 byte per 32 (mxfp8), and
// under current scaling a pass over the input for its amax first.
void Fp8Cast(KernelSequence& seq, Fp8Linear fp8, const char* name, double elements);
// An fp8 GEMM (batched `batch` times) at the recipe's rate: blockwise
// scaling runs at kBlockwiseGemmEfficiency of the per-tensor rate.
void Fp8Gemm(KernelSequence& seq, Fp8Linear fp8, const char* name, double m, double n, double k,
             double batch = 1);
// Bytes per element of bf16 / fp16 activations, shared by the Llama and MoE kernels.
inline constexpr double kElem = 2;
// DeepSeek-V3's blockwise fp8 GEMMs promote partial sums to fp32 on the CUDA
// cores every 128 elements of K (report §3.3.2), which costs tensor-core
// time: an assumption, not a calibration (no blockwise run is measured here).
inline constexpr double kBlockwiseGemmEfficiency = 0.9;

// Forward of a linear layer y[tokens, n] = x[tokens, k] W[k, n]: one GEMM in
// 16 bits; with `fp8`, Transformer Engine's cast of the input to fp8 (the
// transpose kept for the weight gradient) before an fp8 GEMM.
void LinearForward(KernelSequence& seq, Fp8Linear fp8, const char* gemm, double tokens, double n,
                   double k);
// Its backward: the data-gradient GEMM dx[tokens, k] = dy[tokens, n] W^T and
// the weight-gradient GEMM dW[n, k] = dy^T x; with `fp8`, the output
// gradient's cast to fp8 (E5M2) first and both GEMMs in fp8.
void LinearBackward(KernelSequence& seq, Fp8Linear fp8, const char* dgrad, const char* wgrad,
                    double tokens, double n, double k);
// With delayed-scaling fp8, the update of one module's amax history and
// scales (one small kernel per module and pass); nothing otherwise (the
// other recipes compute their scales in the cast).
void Fp8ScaleUpdate(KernelSequence& seq, Fp8Linear fp8);

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

// The attention core of multi-head or grouped-query attention (either
// architecture; key.attention_impl picks the kernels):
//  - flash: one fused kernel forward; backward FlashAttention-2's rowsum
//    preprocess, the main kernel (dQ accumulated in fp32) and dQ's
//    conversion;
//  - unfused (Megatron-LM's CoreAttention): the scores as a batched GEMM,
//    the scaled masked softmax and (`dropout`) the attention dropout on the
//    s x s scores, the weighted sum as a batched GEMM; grouped-query keys
//    and values are first repeated to every query head. Backward: the same
//    in reverse, two batched GEMMs per forward one.
void AttentionCoreForward(KernelSequence& seq, const OperatorKey& key, bool dropout);
void AttentionCoreBackward(KernelSequence& seq, const OperatorKey& key, bool dropout);

}  // namespace vtrain::internal

#endif  // VTRAIN_CORE_PROFILE_LLAMA_KERNELS_H_
