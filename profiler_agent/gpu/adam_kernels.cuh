// The optimizer step's kernels: mixed-precision AdamW with the loss scaler's
// overflow check and gradient clipping, as apex's multi-tensor kernels run it
// for Megatron-LM. Included by workloads.cu only (see kernel_common.cuh).
#ifndef VTRAIN_PROFILER_AGENT_GPU_ADAM_KERNELS_CUH_
#define VTRAIN_PROFILER_AGENT_GPU_ADAM_KERNELS_CUH_

#include <cstdint>

#include "profiler_agent/gpu/kernel_common.cuh"

namespace vtrain::gpu {
namespace {

// ---------------------------------------------------------------------------
// Mixed-precision Adam (Megatron's Float16OptimizerWithFloat16Params over
// apex multi-tensor kernels): fp16/bf16 gradients and parameters, fp32
// master weights and moments. Scalars: [0] squared gradient norm, [1]
// non-finite-gradient flag.
// ---------------------------------------------------------------------------

struct AdamHyper {
  float lr;
  float beta1;
  float beta2;
  float eps;
  float weight_decay;
  float max_grad_norm;
  float inv_loss_scale;
  float bias_correction1;  // 1 - beta1^step
  float bias_correction2;  // 1 - beta2^step
};

__global__ void optimizer_state_reset_kernel(float* scalars) {
  if (threadIdx.x < 2) scalars[threadIdx.x] = 0.0f;
}

// Read-only unless a gradient overflowed: the loss scaler's inf/NaN check.
template <class T>
__global__ void grad_unscale_inf_check_kernel(const T* grad, int64_t n, float inv_scale,
                                              float* found_inf) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    if (!isfinite(ToFloat(grad[i]) * inv_scale)) *found_inf = 1.0f;
  }
}

// Sum of squares for gradient clipping (multi_tensor_l2norm).
template <class T>
__global__ void grad_norm_kernel(const T* grad, int64_t n, float inv_scale, float* norm_sq) {
  float s = 0.0f;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const float g = ToFloat(grad[i]) * inv_scale;
    s += g * g;
  }
  s = BlockReduceSum(s);
  if (threadIdx.x == 0) atomicAdd(norm_sq, s);
}

// AdamW with clipping; skips the step when the check found an overflow, as
// the dynamic loss scaler does.
template <class T>
__global__ void adam_step_kernel(const T* grad, float* master, float* exp_avg, float* exp_avg_sq,
                                 int64_t n, const float* scalars, AdamHyper hp) {
  if (scalars[1] != 0.0f) return;
  const float norm = sqrtf(scalars[0]);
  const float clip = fminf(1.0f, hp.max_grad_norm / (norm + 1e-6f));
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const float g = ToFloat(grad[i]) * hp.inv_loss_scale * clip;
    const float m = hp.beta1 * exp_avg[i] + (1.0f - hp.beta1) * g;
    const float v = hp.beta2 * exp_avg_sq[i] + (1.0f - hp.beta2) * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    const float update = (m / hp.bias_correction1) / (sqrtf(v / hp.bias_correction2) + hp.eps);
    const float p = master[i];
    master[i] = p - hp.lr * (update + hp.weight_decay * p);
  }
}

template <class T>
__global__ void master_to_half_copy_kernel(const float* master, T* param, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) param[i] = FromFloat<T>(master[i]);
}

// Megatron zeroes the main-grad buffer after the step for the next
// iteration's accumulation. We write a small constant instead of 0: the same
// 4 bytes per parameter, and the next profiled step sees non-zero gradients.
__global__ void zero_main_grad_kernel(float* grad, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) grad[i] = 1e-3f;
}

}  // namespace
}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_ADAM_KERNELS_CUH_
