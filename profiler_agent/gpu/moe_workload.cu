// The operator workload of one MoE block on one rank (moe_fwd, moe_bwd) as
// Megatron-Core with Transformer Engine runs it and core models it
// (core/profile/moe_kernels.cc): each operator runs the steps of its plan
// (moe_plan.h), so the kernels it launches are core's list in core's order.
// The router and the experts' linear layers are cuBLASLt GEMMs; each
// projection runs one GEMM per local expert, round-robin over 4 streams
// that join the main stream before the next step, as Transformer Engine's
// GroupedLinear does (multi_stream_cublas_gemm, 4 compute streams).
// Everything else is our own kernels (moe_kernels.cuh, llama_kernels.cuh);
// routing is forced balanced (moe_kernels.cuh).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "profiler_agent/gpu/cuda_util.h"
#include "profiler_agent/gpu/device_buffers.h"
#include "profiler_agent/gpu/gemm.h"
#include "profiler_agent/gpu/init_kernels.cuh"
#include "profiler_agent/gpu/kernel_common.cuh"
#include "profiler_agent/gpu/layer_kernels.cuh"
#include "profiler_agent/gpu/llama_gemm_specs.h"
#include "profiler_agent/gpu/llama_kernels.cuh"
#include "profiler_agent/gpu/moe_kernels.cuh"
#include "profiler_agent/gpu/moe_plan.h"
#include "profiler_agent/gpu/moe_workload.h"
#include "profiler_agent/gpu/workloads.h"

namespace vtrain::gpu {
namespace internal {
namespace {

constexpr float kMoeRmsNormEps = 1e-6f;  // Qwen3's and DeepSeek-V3's rms_norm_eps
constexpr int kExpertStreams = 4;        // Transformer Engine's compute streams
constexpr int64_t kMoeRmsNormBwdChunks = 256;

template <class T>
class MoeWorkload final : public LayerWorkload {
 public:
  static std::unique_ptr<LayerWorkload> Make(const LayerShape& shape, std::string* error) {
    std::unique_ptr<MoeWorkload> w(new MoeWorkload(shape));
    const std::string e = w->Init();
    if (!e.empty()) {
      *error = e;
      return nullptr;
    }
    return w;
  }

  ~MoeWorkload() override {
    if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
    for (cudaStream_t s : expert_streams_) {
      if (s != nullptr) (void)cudaStreamSynchronize(s);
    }
    if (lt_ != nullptr) (void)cublasLtDestroy(lt_);
    arena_.Release();
    for (cudaEvent_t e : events_) {
      if (e != nullptr) (void)cudaEventDestroy(e);
    }
    for (cudaStream_t s : expert_streams_) {
      if (s != nullptr) (void)cudaStreamDestroy(s);
    }
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }

  std::vector<std::string> Operators() const override { return {"moe_fwd", "moe_bwd"}; }

  std::string Run(const std::string& op) override {
    const std::vector<MoeStep>& steps = op == "moe_fwd" ? fwd_ : op == "moe_bwd" ? bwd_ : none_;
    if (steps.empty()) return "unknown operator '" + op + "'; expected one of: moe_fwd, moe_bwd";
    for (size_t i = 0; i < steps.size(); ++i) {
      const MoeStep& s = steps[i];
      if (s.kind == MoeStepKind::kExpertGemm) {
        VTRAIN_GPU_RETURN_IF_ERROR(ExpertGemm(s));
        const bool last = i + 1 == steps.size() || steps[i + 1].kind != MoeStepKind::kExpertGemm ||
                          steps[i + 1].pass != s.pass || steps[i + 1].linear != s.linear;
        if (last) VTRAIN_GPU_RETURN_IF_ERROR(JoinExpertStreams());
        continue;
      }
      VTRAIN_GPU_RETURN_IF_ERROR(RunStep(s));
    }
    return std::string();
  }

  std::string Synchronize() override {
    return CheckCuda("cudaStreamSynchronize", cudaStreamSynchronize(stream_));
  }

 private:
  explicit MoeWorkload(const LayerShape& shape)
      : n_(shape.micro_batch * shape.seq),
        h_(shape.hidden),
        f_(shape.ffn > 0 ? shape.ffn : 4 * shape.hidden),
        experts_(shape.experts),
        k_(shape.moe_top_k),
        local_(shape.experts / shape.expert_parallel),
        per_(n_ * k_ / local_),
        arena_(true),
        fwd_(MoeOperatorSteps("moe_fwd", local_)),
        bwd_(MoeOperatorSteps("moe_bwd", local_)) {}

  static constexpr cudaDataType_t kDataType = std::is_same_v<T, __half> ? CUDA_R_16F : CUDA_R_16BF;

  std::string Init() {
    VTRAIN_GPU_RETURN_IF_ERROR(OpenStreamAndLt(&stream_, &lt_));
    for (cudaStream_t& s : expert_streams_) {
      VTRAIN_GPU_RETURN_IF_ERROR(CheckCuda("cudaStreamCreateWithFlags",
                                           cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)));
    }
    for (cudaEvent_t& e : events_) {
      VTRAIN_GPU_RETURN_IF_ERROR(CheckCuda("cudaEventCreateWithFlags",
                                           cudaEventCreateWithFlags(&e, cudaEventDisableTiming)));
    }
    const size_t norm = static_cast<size_t>(h_) * sizeof(float);
    VTRAIN_GPU_RETURN_IF_ERROR(
        CheckCuda("cudaFuncSetAttribute(max dynamic shared memory)",
                  cudaFuncSetAttribute(rmsnorm_bwd_kernel<T>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, (int)norm)));
    buf_.Layout(n_, h_, f_, experts_, k_, local_, &arena_);
    if (!arena_.error().empty()) return arena_.error();
    VTRAIN_GPU_RETURN_IF_ERROR(InitBuffers());
    VTRAIN_GPU_RETURN_IF_ERROR(PlanGemms());
    for (const std::string& op : Operators()) VTRAIN_GPU_RETURN_IF_ERROR(Run(op));
    return Synchronize();
  }

  template <class P>
  std::string Fill(P* p, int64_t n, float offset, float scale) {
    return Launch("init_uniform_kernel", init_uniform_kernel<P>, GridFor(n), kThreads, stream_, p,
                  n, ++seed_ * 0x6C8E9CF5u, offset, scale);
  }

  // Inputs, weights (std 0.02), gains near 1, the output gradient, zeroed
  // fp32 gamma gradient. Every other buffer is written before it is read.
  std::string InitBuffers() {
    MoeBuffers<T>& b = buf_;
    const float w = 0.02f;
    VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.x, n_ * h_, 0, 1));
    VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.gamma, h_, 1, w));
    VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.w_router, experts_ * h_, 0, w));
    VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.w1, local_ * 2 * f_ * h_, 0, w));
    VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.w2, local_ * h_ * f_, 0, w));
    VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.d_out, n_ * h_, 0, w));
    return Fill(b.d_gamma, h_, 0, 0);
  }

  // The router's GEMMs and each local expert's three GEMMs per projection
  // (forward, data gradient, weight gradient), in Megatron's conventions
  // (llama_gemm_specs.h): Y = X W^T, dX = dY W, dW = dY^T X.
  std::string PlanGemms() {
    MoeBuffers<T>& b = buf_;
    const GemmSpec router[3] = {
        DenseGemm("gemm_router_fwd", n_, experts_, h_, false, true, b.ln_out, b.w_router, b.logits),
        DenseGemm("gemm_router_dgrad", n_, h_, experts_, false, false, b.d_logits, b.w_router,
                  b.d_ln_router),
        DenseGemm("gemm_router_wgrad", experts_, h_, n_, true, false, b.d_logits, b.ln_out,
                  b.dw_router)};
    for (int pass = 0; pass < 3; ++pass) {
      VTRAIN_GPU_RETURN_IF_ERROR(router_[pass].Plan(lt_, router[pass], kDataType, sizeof(T)));
    }
    experts_gemms_ = std::make_unique<ExpertGemms[]>(static_cast<size_t>(local_));
    for (int64_t e = 0; e < local_; ++e) {
      for (int linear = 0; linear < 2; ++linear) {
        for (int pass = 0; pass < 3; ++pass) {
          const GemmSpec spec = ExpertSpec(e, linear, pass);
          VTRAIN_GPU_RETURN_IF_ERROR(experts_gemms_[static_cast<size_t>(e)].g[linear][pass].Plan(
              lt_, spec, kDataType, sizeof(T)));
        }
      }
    }
    return std::string();
  }

  // Local expert e's block of the copies: rows [e*per, (e+1)*per).
  GemmSpec ExpertSpec(int64_t e, int linear, int pass) const {
    const MoeBuffers<T>& b = buf_;
    const int64_t row = e * per_;
    const int64_t in = linear == 0 ? h_ : f_;
    const int64_t out = linear == 0 ? 2 * f_ : h_;
    const T* xs[] = {b.copies + row * h_, b.act + row * f_};
    T* ys[] = {b.fc1 + row * 2 * f_, b.fc2 + row * h_};
    const T* dys[] = {b.d_fc1 + row * 2 * f_, b.d_fc2 + row * h_};
    T* dxs[] = {b.d_copies + row * h_, b.d_act + row * f_};
    const T* ws[] = {b.w1 + e * 2 * f_ * h_, b.w2 + e * h_ * f_};
    T* dws[] = {b.dw1 + e * 2 * f_ * h_, b.dw2 + e * h_ * f_};
    const char* name = MoeExpertGemmName(linear, pass);
    if (pass == 0)
      return DenseGemm(name, per_, out, in, false, true, xs[linear], ws[linear], ys[linear]);
    if (pass == 1) {
      return DenseGemm(name, per_, in, out, false, false, dys[linear], ws[linear], dxs[linear]);
    }
    return DenseGemm(name, out, in, per_, true, false, dys[linear], xs[linear], dws[linear]);
  }

  // One expert's GEMM on its stream (expert e on stream e % 4), after the
  // main stream's work so far.
  std::string ExpertGemm(const MoeStep& s) {
    const int lane = s.expert % kExpertStreams;
    cudaStream_t stream = expert_streams_[lane];
    if (s.expert < kExpertStreams) {
      VTRAIN_GPU_RETURN_IF_ERROR(
          CheckCuda("cudaEventRecord", cudaEventRecord(events_[kExpertStreams], stream_)));
      VTRAIN_GPU_RETURN_IF_ERROR(CheckCuda(
          "cudaStreamWaitEvent", cudaStreamWaitEvent(stream, events_[kExpertStreams], 0)));
    }
    return experts_gemms_[static_cast<size_t>(s.expert)].g[s.linear][s.pass].Run(
        lt_, stream, buf_.workspace[lane]);
  }

  // The main stream waits for every expert stream.
  std::string JoinExpertStreams() {
    for (int lane = 0; lane < kExpertStreams; ++lane) {
      VTRAIN_GPU_RETURN_IF_ERROR(
          CheckCuda("cudaEventRecord", cudaEventRecord(events_[lane], expert_streams_[lane])));
      VTRAIN_GPU_RETURN_IF_ERROR(
          CheckCuda("cudaStreamWaitEvent", cudaStreamWaitEvent(stream_, events_[lane], 0)));
    }
    return std::string();
  }

  std::string RunStep(const MoeStep& s) {
    MoeBuffers<T>& b = buf_;
    const int64_t nh = n_ * h_;
    const int64_t copies = n_ * k_;
    const unsigned token_grid = GridFor(n_);
    switch (s.kind) {
      case MoeStepKind::kRmsNormFwd:
        return Launch("rmsnorm_fwd_kernel", rmsnorm_fwd_kernel<T>, static_cast<unsigned>(n_),
                      kThreads, stream_, b.x, b.gamma, b.ln_out, b.rstd, h_, kMoeRmsNormEps);
      case MoeStepKind::kRouterGemmFwd:
        return router_[0].Run(lt_, stream_, b.workspace[0]);
      case MoeStepKind::kRouterTopkFwd:
        return Launch("router_topk_fwd_kernel", router_topk_fwd_kernel<T>, token_grid, kThreads,
                      stream_, b.logits, b.probs, b.topk_w, b.topk_id, n_, experts_, k_);
      case MoeStepKind::kPermuteFwd:
        return Launch("moe_permute_fwd_kernel", moe_permute_fwd_kernel<T>, GridFor(copies * h_),
                      kThreads, stream_, b.ln_out, b.copies, n_, k_, h_);
      case MoeStepKind::kSwigluFwd:
        return Launch("swiglu_fwd_kernel", swiglu_fwd_kernel<T>, GridFor(copies * f_), kThreads,
                      stream_, b.fc1, b.act, copies, f_);
      case MoeStepKind::kUnpermuteFwd:
        return Launch("moe_unpermute_fwd_kernel", moe_unpermute_fwd_kernel<T>, GridFor(nh),
                      kThreads, stream_, b.fc2, b.topk_w, b.moe_out, n_, k_, h_);
      case MoeStepKind::kResidualAddFwd:
        return Launch("residual_add_fwd_kernel", residual_add_fwd_kernel<T>, GridFor(nh), kThreads,
                      stream_, b.x, b.moe_out, b.out, nh);
      case MoeStepKind::kUnpermuteBwd:
        return Launch("moe_unpermute_bwd_kernel", moe_unpermute_bwd_kernel<T>,
                      static_cast<unsigned>(std::min<int64_t>(copies, kMaxGridStrideBlocks)),
                      kThreads, stream_, b.d_out, b.fc2, b.topk_w, b.d_fc2, b.d_topk_w, n_, k_, h_);
      case MoeStepKind::kSwigluBwd:
        return Launch("swiglu_bwd_kernel", swiglu_bwd_kernel<T>, GridFor(copies * f_), kThreads,
                      stream_, b.d_act, b.fc1, b.d_fc1, copies, f_);
      case MoeStepKind::kPermuteBwd:
        return Launch("moe_permute_bwd_kernel", moe_permute_bwd_kernel<T>, GridFor(nh), kThreads,
                      stream_, b.d_copies, b.d_ln, n_, k_, h_);
      case MoeStepKind::kRouterTopkBwd:
        return Launch("router_topk_bwd_kernel", router_topk_bwd_kernel<T>, token_grid, kThreads,
                      stream_, b.probs, b.d_topk_w, b.topk_id, b.d_logits, n_, experts_, k_);
      case MoeStepKind::kRouterGemmDgrad:
        return router_[1].Run(lt_, stream_, b.workspace[0]);
      case MoeStepKind::kRouterGemmWgrad:
        return router_[2].Run(lt_, stream_, b.workspace[0]);
      case MoeStepKind::kRmsNormBwd: {
        const int64_t rows_per_chunk = CeilDiv(n_, kMoeRmsNormBwdChunks);
        return LaunchShared("rmsnorm_bwd_kernel", rmsnorm_bwd_kernel<T>,
                            static_cast<unsigned>(CeilDiv(n_, rows_per_chunk)), kThreads,
                            static_cast<size_t>(h_) * sizeof(float), stream_, b.d_ln, b.x, b.gamma,
                            b.rstd, b.dx_ln, b.d_gamma, n_, h_, rows_per_chunk);
      }
      case MoeStepKind::kResidualAddBwd:
        return Launch("residual_add_bwd_kernel", residual_add_bwd_kernel<T>, GridFor(nh), kThreads,
                      stream_, b.d_out, b.dx_ln, b.d_x, nh);
      case MoeStepKind::kSmallKernel: {
        // Half the bytes read, half written (moe_small_stream_kernel).
        const int64_t count = std::clamp<int64_t>(
            MoeSmallKernelBytes(s.small, n_, experts_, local_) / 8, 1, n_ * experts_);
        return Launch("moe_small_stream_kernel", moe_small_stream_kernel, GridFor(count), kThreads,
                      stream_, b.small_scratch, b.small_scratch + count, count);
      }
      case MoeStepKind::kExpertGemm:
        break;
    }
    return "unknown step " + s.name;
  }

  struct ExpertGemms {
    Gemm g[2][3];  // [fc1, fc2][forward, dgrad, wgrad]
  };

  const int64_t n_, h_, f_, experts_, k_, local_, per_;
  DeviceArena arena_;
  MoeBuffers<T> buf_{};
  const std::vector<MoeStep> fwd_, bwd_, none_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t expert_streams_[kExpertStreams] = {};
  cudaEvent_t events_[kExpertStreams + 1] = {};  // one per expert stream, one for the main
  cublasLtHandle_t lt_ = nullptr;
  uint32_t seed_ = 0;
  Gemm router_[3];
  std::unique_ptr<ExpertGemms[]> experts_gemms_;  // one per local expert
};

}  // namespace

std::unique_ptr<LayerWorkload> MakeMoeWorkload(const LayerShape& shape, std::string* error) {
  if (shape.bf16) return MoeWorkload<__nv_bfloat16>::Make(shape, error);
  return MoeWorkload<__half>::Make(shape, error);
}

}  // namespace internal
}  // namespace vtrain::gpu
