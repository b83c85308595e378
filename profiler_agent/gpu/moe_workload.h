// The device buffers of the MoE workload (moe_workload.cu) and its factory:
// every tensor of one MoE block's forward and backward on one rank, laid
// out through the workloads' DeviceArena (device_buffers.h), so
// WorkloadBytes can count them without a GPU.
#ifndef VTRAIN_PROFILER_AGENT_GPU_MOE_WORKLOAD_H_
#define VTRAIN_PROFILER_AGENT_GPU_MOE_WORKLOAD_H_

#include <cstdint>
#include <memory>
#include <string>

#include "profiler_agent/gpu/gemm.h"
#include "profiler_agent/gpu/workloads.h"

namespace vtrain::gpu::internal {

inline constexpr int kMoeWorkspaces = 4;  // one cuBLASLt workspace per expert stream

// n tokens of width h, E experts of FFN width f, top-k, L local experts:
// the n*k token copies sit expert by expert (moe_kernels.cuh).
template <class T>
struct MoeBuffers {
  T *x, *gamma, *ln_out, *w_router, *logits;
  float *rstd, *probs, *topk_w;
  int* topk_id;
  T *copies, *w1, *fc1, *act, *w2, *fc2, *moe_out, *out;
  // Backward.
  T *d_out, *d_fc2, *d_act, *dw2, *d_fc1, *d_copies, *dw1, *d_ln, *d_logits, *d_ln_router;
  T *dw_router, *dx_ln, *d_x;
  float *d_topk_w, *d_gamma;
  // The small kernels' input and output (kSmallKernel): n x experts x 2
  // floats, room for the largest (n x experts x 6 bytes, read and written).
  float* small_scratch;
  void* workspace[kMoeWorkspaces];

  template <class Arena>
  void Layout(int64_t n, int64_t h, int64_t f, int64_t experts, int64_t k, int64_t local,
              Arena* a) {
    const int64_t copies_n = n * k;
    a->Take(&x, "moe_x", {n, h});
    a->Take(&gamma, "moe_gamma", {h});
    a->Take(&ln_out, "moe_ln_out", {n, h});
    a->Take(&rstd, "moe_rstd", {n});
    a->Take(&w_router, "moe_w_router", {experts, h});
    a->Take(&logits, "moe_logits", {n, experts});
    a->Take(&probs, "moe_probs", {n, experts});
    a->Take(&topk_w, "moe_topk_w", {n, k});
    a->Take(&topk_id, "moe_topk_id", {n, k});
    a->Take(&copies, "moe_copies", {copies_n, h});
    a->Take(&w1, "moe_w1", {local, 2 * f, h});
    a->Take(&fc1, "moe_fc1", {copies_n, 2 * f});
    a->Take(&act, "moe_act", {copies_n, f});
    a->Take(&w2, "moe_w2", {local, h, f});
    a->Take(&fc2, "moe_fc2", {copies_n, h});
    a->Take(&moe_out, "moe_out", {n, h});
    a->Take(&out, "moe_layer_out", {n, h});
    a->Take(&d_out, "moe_d_out", {n, h});
    a->Take(&d_fc2, "moe_d_fc2", {copies_n, h});
    a->Take(&d_topk_w, "moe_d_topk_w", {n, k});
    a->Take(&d_act, "moe_d_act", {copies_n, f});
    a->Take(&dw2, "moe_dw2", {local, h, f});
    a->Take(&d_fc1, "moe_d_fc1", {copies_n, 2 * f});
    a->Take(&d_copies, "moe_d_copies", {copies_n, h});
    a->Take(&dw1, "moe_dw1", {local, 2 * f, h});
    a->Take(&d_ln, "moe_d_ln", {n, h});
    a->Take(&d_logits, "moe_d_logits", {n, experts});
    a->Take(&d_ln_router, "moe_d_ln_router", {n, h});
    a->Take(&dw_router, "moe_dw_router", {experts, h});
    a->Take(&dx_ln, "moe_dx_ln", {n, h});
    a->Take(&d_gamma, "moe_d_gamma", {h});
    a->Take(&d_x, "moe_d_x", {n, h});
    a->Take(&small_scratch, "moe_small_scratch", {n, experts, 2});
    for (void*& ws : workspace) {
      unsigned char* p = nullptr;
      a->Take(&p, "cublaslt_workspace", {static_cast<int64_t>(kWorkspaceBytes)});
      ws = p;
    }
  }
};

// The MoE workload of a validated MoE shape (shape.experts > 0).
std::unique_ptr<LayerWorkload> MakeMoeWorkload(const LayerShape& shape, std::string* error);

}  // namespace vtrain::gpu::internal

#endif  // VTRAIN_PROFILER_AGENT_GPU_MOE_WORKLOAD_H_
