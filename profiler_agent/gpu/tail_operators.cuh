// The loss and optimizer-step operators, shared by the GPT and Llama
// workloads (their kernels do not depend on the architecture, and core keys
// them without one): vocabulary-parallel cross entropy forward and backward
// over fp32 logits, and Megatron's multi-tensor mixed-precision Adam. B is a
// workload's buffer struct (the members used here by name), D its
// dimensions (n tokens, v vocabulary shard).
#ifndef VTRAIN_PROFILER_AGENT_GPU_TAIL_OPERATORS_CUH_
#define VTRAIN_PROFILER_AGENT_GPU_TAIL_OPERATORS_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "profiler_agent/gpu/adam_kernels.cuh"
#include "profiler_agent/gpu/kernel_common.cuh"
#include "profiler_agent/gpu/vocab_kernels.cuh"

namespace vtrain::gpu {
namespace {

// The gradient of the loss with respect to each token's loss, loss scale
// included. Chosen so that the softmax-minus-one-hot gradients of a 50k-256k
// vocabulary stay normal fp16 numbers (~kLossGradScale / vocab) and the
// weight gradients summed over thousands of tokens stay far below the fp16
// maximum.
constexpr float kLossGradScale = 32.0f;
// apex's multi_tensor_apply launches at most 320 chunks of 65536 elements
// per kernel; the optimizer step launches one kernel per such slice, like
// Megatron's fused Adam.
constexpr int64_t kAdamElementsPerLaunch = 65536LL * 320;

template <class D, class B>
std::string LossFwdKernels(cudaStream_t stream, const D& x, B& b) {
  using T = std::remove_pointer_t<decltype(b.logits)>;
  const int64_t nv = x.n * x.v;
  const unsigned rows = static_cast<unsigned>(x.n);
  VTRAIN_GPU_RETURN_IF_ERROR(Launch("logits_to_fp32_kernel", logits_to_fp32_kernel<T>, GridFor(nv),
                                    kThreads, stream, b.logits, b.logits32, nv));
  VTRAIN_GPU_RETURN_IF_ERROR(Launch("cross_entropy_max_kernel", cross_entropy_max_kernel, rows,
                                    kThreads, stream, b.logits32, b.row_max, x.v));
  VTRAIN_GPU_RETURN_IF_ERROR(Launch("cross_entropy_sub_exp_kernel", cross_entropy_sub_exp_kernel,
                                    GridFor(nv), kThreads, stream, b.logits32, b.row_max, nv, x.v));
  VTRAIN_GPU_RETURN_IF_ERROR(Launch("cross_entropy_sum_kernel", cross_entropy_sum_kernel, rows,
                                    kThreads, stream, b.logits32, b.sum_exp, x.v));
  VTRAIN_GPU_RETURN_IF_ERROR(Launch(
      "cross_entropy_target_gather_kernel", cross_entropy_target_gather_kernel<T>, GridFor(x.n),
      kThreads, stream, b.labels, b.logits, b.row_max, b.predicted, x.n, x.v, int64_t{0}));
  return Launch("cross_entropy_log_kernel", cross_entropy_log_kernel, GridFor(x.n), kThreads,
                stream, b.sum_exp, b.predicted, b.loss, x.n);
}

template <class D, class B>
std::string LossBwdKernels(cudaStream_t stream, const D& x, B& b) {
  using T = std::remove_pointer_t<decltype(b.d_logits)>;
  const int64_t nv = x.n * x.v;
  VTRAIN_GPU_RETURN_IF_ERROR(Launch("cross_entropy_softmax_grad_kernel",
                                    cross_entropy_softmax_grad_kernel, GridFor(nv), kThreads,
                                    stream, b.logits32, b.sum_exp, b.grad32, nv, x.v));
  VTRAIN_GPU_RETURN_IF_ERROR(Launch("cross_entropy_target_sub_kernel",
                                    cross_entropy_target_sub_kernel, GridFor(x.n), kThreads, stream,
                                    b.labels, b.grad32, x.n, x.v, int64_t{0}));
  return Launch("logit_grad_to_half_kernel", logit_grad_to_half_kernel<T>, GridFor(nv), kThreads,
                stream, b.grad32, b.d_logits, nv, kLossGradScale);
}

// Per kernel kind, one launch per apex-sized slice of the flat buffer,
// kinds in Megatron's order: overflow check, gradient norm, Adam, copy of
// the master weights into the fp16/bf16 parameters; then the fp32 main
// grads are reset (core/profile/analytical.cc has the same sequence and
// traffic: 18 bytes of state per parameter, Korthikanti et al. 2022).
template <class B>
std::string OptimizerStepKernels(cudaStream_t stream, int64_t adam, B& b, double adam_step) {
  using T = std::remove_pointer_t<decltype(b.adam_param)>;
  constexpr float kInvLossScale = 1.0f;  // gradients are stored unscaled
  VTRAIN_GPU_RETURN_IF_ERROR(Launch("optimizer_state_reset_kernel", optimizer_state_reset_kernel, 1,
                                    32, stream, b.adam_scalars));
  const int64_t slices = CeilDiv(adam, kAdamElementsPerLaunch);
  auto slice_len = [&](int64_t i) {
    return std::min(kAdamElementsPerLaunch, adam - i * kAdamElementsPerLaunch);
  };
  for (int64_t i = 0; i < slices; ++i) {
    const int64_t off = i * kAdamElementsPerLaunch;
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("grad_unscale_inf_check_kernel",
                                      grad_unscale_inf_check_kernel<float>, GridFor(slice_len(i)),
                                      kThreads, stream, b.adam_grad + off, slice_len(i),
                                      kInvLossScale, b.adam_scalars + 1));
  }
  for (int64_t i = 0; i < slices; ++i) {
    const int64_t off = i * kAdamElementsPerLaunch;
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("grad_norm_kernel", grad_norm_kernel<float>,
                                      GridFor(slice_len(i)), kThreads, stream, b.adam_grad + off,
                                      slice_len(i), kInvLossScale, b.adam_scalars));
  }
  AdamHyper hp;
  hp.lr = 1e-4f;
  hp.beta1 = 0.9f;
  hp.beta2 = 0.95f;
  hp.eps = 1e-8f;
  hp.weight_decay = 0.1f;
  hp.max_grad_norm = 1.0f;
  hp.inv_loss_scale = kInvLossScale;
  hp.bias_correction1 =
      static_cast<float>(1.0 - std::pow(static_cast<double>(hp.beta1), adam_step));
  hp.bias_correction2 =
      static_cast<float>(1.0 - std::pow(static_cast<double>(hp.beta2), adam_step));
  for (int64_t i = 0; i < slices; ++i) {
    const int64_t off = i * kAdamElementsPerLaunch;
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("adam_step_kernel", adam_step_kernel<float>,
                                      GridFor(slice_len(i)), kThreads, stream, b.adam_grad + off,
                                      b.master + off, b.exp_avg + off, b.exp_avg_sq + off,
                                      slice_len(i), b.adam_scalars, hp));
  }
  for (int64_t i = 0; i < slices; ++i) {
    const int64_t off = i * kAdamElementsPerLaunch;
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("master_to_half_copy_kernel", master_to_half_copy_kernel<T>,
                                      GridFor(slice_len(i)), kThreads, stream, b.master + off,
                                      b.adam_param + off, slice_len(i)));
  }
  return Launch("zero_main_grad_kernel", zero_main_grad_kernel, GridFor(adam), kThreads, stream,
                b.adam_grad, adam);
}

}  // namespace
}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_TAIL_OPERATORS_CUH_
