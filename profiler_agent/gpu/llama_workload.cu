// The operator workload of one Llama-style decoder layer on one
// tensor-parallel rank (Megatron-Core with Transformer Engine, as
// core/profile/llama_kernels.cc models it): each operator runs the steps of
// its plan (llama_plan.h) one by one, so the kernels it launches are core's
// kernel list in core's order; the loss and the optimizer step are GPT's
// (tail_operators.cuh). Linear layers are cuBLASLt GEMMs, in fp8 with
// Transformer Engine's cast-transposes and delayed scaling when the shape
// says so; everything else is our own kernels (llama_kernels.cuh,
// fp8_kernels.cuh). The attention kernels are ours, not FlashAttention's:
// see llama_kernels.cuh for what that means for the measurement.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "profiler_agent/gpu/cuda_util.h"
#include "profiler_agent/gpu/device_buffers.h"
#include "profiler_agent/gpu/fp8_kernels.cuh"
#include "profiler_agent/gpu/gemm.h"
#include "profiler_agent/gpu/init_kernels.cuh"
#include "profiler_agent/gpu/kernel_common.cuh"
#include "profiler_agent/gpu/layer_kernels.cuh"
#include "profiler_agent/gpu/llama_buffers.h"
#include "profiler_agent/gpu/llama_gemm_specs.h"
#include "profiler_agent/gpu/llama_kernels.cuh"
#include "profiler_agent/gpu/llama_plan.h"
#include "profiler_agent/gpu/operator_names.h"
#include "profiler_agent/gpu/tail_operators.cuh"
#include "profiler_agent/gpu/vocab_kernels.cuh"
#include "profiler_agent/gpu/workloads.h"

namespace vtrain::gpu {
namespace internal {
namespace {

constexpr float kRmsNormEps = 1e-5f;      // Llama's norm_eps
constexpr float kRotaryBase = 500000.0f;  // Llama 3's rope_theta (Llama 2: 10000)
// Blocks of the RMSNorm backward (each sums its rows' gamma gradient once).
constexpr int64_t kRmsNormBwdChunks = 256;

using E4m3 = __nv_fp8_e4m3;
using E5m2 = __nv_fp8_e5m2;

template <class T>
class LlamaWorkload final : public LayerWorkload {
 public:
  static std::unique_ptr<LayerWorkload> Make(const LayerShape& shape, std::string* error) {
    std::unique_ptr<LlamaWorkload> w(new LlamaWorkload(shape));
    const std::string e = w->Init();
    if (!e.empty()) {
      *error = e;
      return nullptr;
    }
    return w;
  }

  ~LlamaWorkload() override {
    if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
    if (lt_ != nullptr) (void)cublasLtDestroy(lt_);
    arena_.Release();
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }

  std::vector<std::string> Operators() const override {
    std::vector<std::string> ops;
    for (const char* op : kOperatorsInStepOrder) {
      if (x_.adam > 0 || std::string(op) != "optimizer_step") ops.push_back(op);
    }
    return ops;
  }

  std::string Run(const std::string& op) override {
    if (op == "loss_fwd") return LossFwdKernels(stream_, x_, buf_);
    if (op == "loss_bwd") return LossBwdKernels(stream_, x_, buf_);
    if (op == "optimizer_step") {
      if (x_.adam <= 0) return "optimizer_step needs adam_params > 0 in the shape";
      return OptimizerStepKernels(stream_, x_.adam, buf_, ++adam_step_);
    }
    auto it = plans_.find(op);
    if (it == plans_.end()) {
      std::string known;
      for (const std::string& name : Operators()) known += (known.empty() ? "" : ", ") + name;
      return "unknown operator '" + op + "'; expected one of: " + known;
    }
    for (const Step& step : it->second) VTRAIN_GPU_RETURN_IF_ERROR(RunStep(step));
    return std::string();
  }

  std::string Synchronize() override {
    return CheckCuda("cudaStreamSynchronize", cudaStreamSynchronize(stream_));
  }

 private:
  explicit LlamaWorkload(const LayerShape& shape) : x_(MakeLlamaDims(shape)), arena_(true) {
    for (const char* op : kOperatorsInStepOrder) {
      std::vector<Step> steps = LlamaOperatorSteps(op, x_.fp8);
      if (!steps.empty()) plans_[op] = std::move(steps);
    }
  }

  static constexpr cudaDataType_t kDataType = std::is_same_v<T, __half> ? CUDA_R_16F : CUDA_R_16BF;

  std::string Init() {
    VTRAIN_GPU_RETURN_IF_ERROR(OpenStreamAndLt(&stream_, &lt_));
    VTRAIN_GPU_RETURN_IF_ERROR(CheckDevice());
    buf_.Layout(x_, &arena_);
    if (!arena_.error().empty()) return arena_.error();
    VTRAIN_GPU_RETURN_IF_ERROR(InitBuffers());
    VTRAIN_GPU_RETURN_IF_ERROR(PlanGemms());
    // One pass over every operator, so that every backward finds what its
    // forward saved.
    for (const std::string& op : Operators()) VTRAIN_GPU_RETURN_IF_ERROR(Run(op));
    return Synchronize();
  }

  // fp8 GEMMs need compute capability 8.9 (Ada) or newer; the attention and
  // RMSNorm kernels need their shared memory; grids have 16-bit y sizes.
  std::string CheckDevice() {
    int device = 0;
    int major = 0;
    int minor = 0;
    int optin = 0;
    VTRAIN_GPU_RETURN_IF_ERROR(CheckCuda("cudaGetDevice", cudaGetDevice(&device)));
    VTRAIN_GPU_RETURN_IF_ERROR(
        CheckCuda("cudaDeviceGetAttribute",
                  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device)));
    VTRAIN_GPU_RETURN_IF_ERROR(
        CheckCuda("cudaDeviceGetAttribute",
                  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device)));
    VTRAIN_GPU_RETURN_IF_ERROR(
        CheckCuda("cudaDeviceGetAttribute",
                  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device)));
    if (x_.fp8 && major * 10 + minor < 89) {
      return "fp8 GEMMs need a GPU of compute capability 8.9 or newer (Ada, Hopper, Blackwell); "
             "this one is sm_" +
             std::to_string(major) + std::to_string(minor) + "; profile with --dtype bf16";
    }
    const size_t fwd = FlashFwdSharedBytes(x_.d, sizeof(T));
    const size_t bwd = FlashBwdSharedBytes(x_.d, sizeof(T));
    const size_t norm = static_cast<size_t>(x_.h) * sizeof(float);
    const size_t needs[] = {fwd, bwd, norm};
    for (size_t bytes : needs) {
      if (bytes > static_cast<size_t>(optin)) {
        return "the shape needs " + std::to_string(bytes) +
               " bytes of shared memory per block and " + "this GPU allows " +
               std::to_string(optin) + "; use a smaller head dim or hidden";
      }
    }
    if (x_.b * x_.a > 65535 || CeilDiv(x_.n, kCastTile) > 65535) {
      return "micro_batch*heads/t=" + std::to_string(x_.b * x_.a) +
             " or tokens/32=" + std::to_string(CeilDiv(x_.n, kCastTile)) +
             " exceeds 65535 grid rows; lower the "
             "micro-batch or sequence";
    }
    const std::string what = "cudaFuncSetAttribute(max dynamic shared memory)";
    VTRAIN_GPU_RETURN_IF_ERROR(CheckCuda(
        what, cudaFuncSetAttribute(flash_attention_fwd_kernel<T>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fwd)));
    VTRAIN_GPU_RETURN_IF_ERROR(CheckCuda(
        what, cudaFuncSetAttribute(flash_attention_bwd_kernel<T>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bwd)));
    return CheckCuda(what,
                     cudaFuncSetAttribute(rmsnorm_bwd_kernel<T>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, (int)norm));
  }

  template <class P>
  std::string Fill(P* p, int64_t n, float offset, float scale) {
    return Launch("init_uniform_kernel", init_uniform_kernel<P>, GridFor(n), kThreads, stream_, p,
                  n, NextSeed(), offset, scale);
  }

  // Token ids, weights (Megatron's init_method_std 0.02), gains near 1,
  // zeroed fp32 accumulators, the loss gradient, the Adam state and the fp8
  // scaling state with the weights' fp8 copies. Every other buffer is
  // written by an operator before any operator reads it.
  std::string InitBuffers() {
    LlamaBuffers<T>& b = buf_;
    const int64_t h = x_.h;
    const float w = 0.02f;
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("init_token_ids_kernel", init_token_ids_kernel, GridFor(x_.n),
                                      kThreads, stream_, b.tokens, x_.n, x_.vocab, NextSeed()));
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("init_token_ids_kernel", init_token_ids_kernel, GridFor(x_.n),
                                      kThreads, stream_, b.labels, x_.n, x_.vocab, NextSeed()));
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("init_token_ids_kernel", init_token_ids_kernel, GridFor(x_.n),
                                      kThreads, stream_, b.local_ids, x_.n, x_.v, NextSeed()));
    VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.word_emb, x_.v * h, 0, w));
    for (int l = 0; l <= kLinearLogit; ++l) {
      VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.weight(l), x_.out(l) * x_.in(l), 0, w));
    }
    T* const gammas[] = {b.ln1_gamma, b.ln2_gamma, b.lnf_gamma};
    for (T* gamma : gammas) {
      VTRAIN_GPU_RETURN_IF_ERROR(Fill(gamma, h, 1, w));
    }
    VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.d_logits, x_.n * x_.v, 0, w));
    VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.word_dense_grad, x_.v * h, 0, 0));
    VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.word_main_grad, x_.v * h, 0, 0));
    float* const grads[] = {b.d_ln1_gamma, b.d_ln2_gamma, b.d_lnf_gamma};
    for (float* g : grads) {
      VTRAIN_GPU_RETURN_IF_ERROR(Fill(g, h, 0, 0));
    }
    if (x_.adam > 0) {
      VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.master, x_.adam, 0, w));
      VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.exp_avg, x_.adam, 0, 0));
      VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.exp_avg_sq, x_.adam, 0, 0));
      VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.adam_grad, x_.adam, 0, 1e-3f));
      VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.adam_param, x_.adam, 0, w));
      VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.adam_scalars, 2, 0, 0));
    }
    if (!x_.fp8) return std::string();
    VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.amax_history, kAmaxHistory * kFp8Tensors, 0, 0));
    VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.scale, kFp8Tensors, 1, 0));
    VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.scale_inv, kFp8Tensors, 1, 0));
    for (int l = 0; l < kNumFp8Linears; ++l) {
      VTRAIN_GPU_RETURN_IF_ERROR(CastTranspose<E4m3>(b.weight(l), x_.out(l), x_.in(l), 3 * l + 1,
                                                     b.fp8[l].w, b.fp8[l].w_t));
    }
    return std::string();
  }

  // Each linear layer's three GEMMs (llama_gemm_specs.h), fp8 ones with
  // their operands' formats and dequantisation scales.
  std::string PlanGemms() {
    for (int l = 0; l < kLlamaLinears; ++l) {
      for (int pass = 0; pass < kGemmPasses; ++pass) {
        const GemmSpec spec = LlamaGemmSpec(x_, buf_, l, pass);
        const Fp8Operands o = Fp8OperandsOf(x_, l, pass);
        if (!o.fp8) {
          VTRAIN_GPU_RETURN_IF_ERROR(gemms_[l][pass].Plan(lt_, spec, kDataType, sizeof(T)));
          continue;
        }
        VTRAIN_GPU_RETURN_IF_ERROR(
            gemms_[l][pass].Plan(lt_, spec, Fp8GemmTypes(o, buf_.scale_inv, kDataType, sizeof(T))));
      }
    }
    return std::string();
  }

  uint32_t NextSeed() { return ++seed_ * 0x6C8E9CF5u; }

  // src [rows, cols] to fp8 (F8) and its transpose with fp8 tensor `tensor`'s
  // scale, its amax into the history's newest row.
  template <class F8>
  std::string CastTranspose(const T* src, int64_t rows, int64_t cols, int tensor, uint8_t* out,
                            uint8_t* out_t) {
    return LaunchCastTranspose<F8>(stream_, src, rows, cols, buf_.scale + tensor,
                                   buf_.amax_history + tensor, out, out_t);
  }

  std::string RunStep(const Step& step) {
    switch (step.kind) {
      case StepKind::kVocabRangeMask:
      case StepKind::kWordEmbeddingGather:
      case StepKind::kWordEmbeddingDenseBwd:
      case StepKind::kWordEmbeddingGradAccumulate:
        return EmbeddingStep(step);
      case StepKind::kRmsNormFwd:
      case StepKind::kRmsNormBwd:
        return NormStep(step);
      case StepKind::kCastTranspose:
      case StepKind::kCastTransposeGrad:
      case StepKind::kGemmFwd:
      case StepKind::kGemmDgrad:
      case StepKind::kGemmWgrad:
      case StepKind::kFp8AmaxScaleUpdate:
        return LinearStep(step);
      case StepKind::kRotaryQFwd:
      case StepKind::kRotaryKFwd:
      case StepKind::kRotaryQBwd:
      case StepKind::kRotaryKBwd:
        return RotaryStep(step);
      case StepKind::kFlashAttentionFwd:
      case StepKind::kFlashAttentionBwdPreprocess:
      case StepKind::kFlashAttentionBwd:
      case StepKind::kFlashAttentionBwdDqConvert:
        return AttentionStep(step);
      case StepKind::kSwigluFwd:
      case StepKind::kSwigluBwd:
      case StepKind::kResidualAddFwd:
      case StepKind::kResidualAddBwd:
        return ElementwiseStep(step);
    }
    return "unknown step " + step.name;
  }

  std::string EmbeddingStep(const Step& step) {
    LlamaBuffers<T>& b = buf_;
    const int64_t nh = x_.n * x_.h;
    switch (step.kind) {
      case StepKind::kVocabRangeMask:  // this workload is rank 0 of the group
        return Launch("vocab_range_mask_kernel", vocab_range_mask_kernel, GridFor(x_.n), kThreads,
                      stream_, b.tokens, b.local_ids, x_.n, int64_t{0}, x_.v);
      case StepKind::kWordEmbeddingGather:
        return Launch("word_embedding_gather_kernel", word_embedding_gather_kernel<T>, GridFor(nh),
                      kThreads, stream_, b.local_ids, b.word_emb, b.h0, x_.n, x_.h);
      case StepKind::kWordEmbeddingDenseBwd:
        return Launch("word_embedding_scatter_add_kernel", word_embedding_scatter_add_kernel<T>,
                      GridFor(nh), kThreads, stream_, b.local_ids, b.d_h0, b.word_dense_grad, x_.n,
                      x_.h);
      default:
        return Launch("word_embedding_grad_accumulate_kernel",
                      word_embedding_grad_accumulate_kernel, GridFor(x_.v * x_.h), kThreads,
                      stream_, b.word_dense_grad, b.word_main_grad, x_.v * x_.h);
    }
  }

  std::string NormStep(const Step& step) {
    LlamaBuffers<T>& b = buf_;
    const int i = step.index;
    const T* xs[] = {b.h0, b.h1, b.h2};
    const T* gammas[] = {b.ln1_gamma, b.ln2_gamma, b.lnf_gamma};
    float* rstds[] = {b.ln1_rstd, b.ln2_rstd, b.lnf_rstd};
    if (step.kind == StepKind::kRmsNormFwd) {
      T* ys[] = {b.ln1_out, b.ln2_out, b.lnf_out};
      return Launch("rmsnorm_fwd_kernel", rmsnorm_fwd_kernel<T>, static_cast<unsigned>(x_.n),
                    kThreads, stream_, xs[i], gammas[i], ys[i], rstds[i], x_.h, kRmsNormEps);
    }
    const T* dys[] = {b.d_ln1, b.d_ln2, b.d_lnf};
    T* dxs[] = {b.dx_ln1, b.dx_ln2, b.d_h2};
    float* dgammas[] = {b.d_ln1_gamma, b.d_ln2_gamma, b.d_lnf_gamma};
    const int64_t rows_per_chunk = CeilDiv(x_.n, kRmsNormBwdChunks);
    return LaunchShared("rmsnorm_bwd_kernel", rmsnorm_bwd_kernel<T>,
                        static_cast<unsigned>(CeilDiv(x_.n, rows_per_chunk)), kThreads,
                        static_cast<size_t>(x_.h) * sizeof(float), stream_, dys[i], xs[i],
                        gammas[i], rstds[i], dxs[i], dgammas[i], x_.n, x_.h, rows_per_chunk);
  }

  std::string LinearStep(const Step& step) {
    LlamaBuffers<T>& b = buf_;
    const int l = step.index;
    switch (step.kind) {
      case StepKind::kCastTranspose: {
        const T* xs[] = {b.ln1_out, b.ctx, b.ln2_out, b.act};
        return CastTranspose<E4m3>(xs[l], x_.n, x_.in(l), 3 * l, b.fp8[l].x, b.fp8[l].x_t);
      }
      case StepKind::kCastTransposeGrad: {
        const T* dys[] = {b.d_qkv, b.d_h1, b.d_fc1, b.d_h2};
        return CastTranspose<E5m2>(dys[l], x_.n, x_.out(l), 3 * l + 2, b.fp8[l].dy, b.fp8[l].dy_t);
      }
      case StepKind::kGemmFwd:
        return gemms_[l][0].Run(lt_, stream_, b.workspace);
      case StepKind::kGemmDgrad:
        return gemms_[l][1].Run(lt_, stream_, b.workspace);
      case StepKind::kGemmWgrad:
        return gemms_[l][2].Run(lt_, stream_, b.workspace);
      default: {
        // One module's two linear layers: 6 tensors from 6 * module.
        const int64_t per_module = 2 * kFp8TensorsPerLinear;
        return LaunchAmaxScaleUpdate(stream_, b.amax_history, b.scale, b.scale_inv,
                                     per_module * step.index, per_module, kFp8Tensors,
                                     kAmaxHistory);
      }
    }
  }

  std::string RotaryStep(const Step& step) {
    LlamaBuffers<T>& b = buf_;
    const int64_t w = x_.qkv();
    switch (step.kind) {
      case StepKind::kRotaryQFwd:
        return Launch("rotary_fwd_kernel", rotary_fwd_kernel<T>, GridFor(x_.n * x_.ad() / 2),
                      kThreads, stream_, b.qkv, w, b.q_rot, x_.ad(), x_.n, x_.a, x_.d, x_.b,
                      kRotaryBase);
      case StepKind::kRotaryKFwd:
        return Launch("rotary_fwd_kernel", rotary_fwd_kernel<T>, GridFor(x_.n * x_.kd() / 2),
                      kThreads, stream_, b.qkv + x_.ad(), w, b.k_rot, x_.kd(), x_.n, x_.kv, x_.d,
                      x_.b, kRotaryBase);
      case StepKind::kRotaryQBwd:
        return Launch("rotary_bwd_kernel", rotary_bwd_kernel<T>, GridFor(x_.n * x_.ad() / 2),
                      kThreads, stream_, b.dq, x_.ad(), b.d_qkv, w, x_.n, x_.a, x_.d, x_.b,
                      kRotaryBase);
      default:
        return Launch("rotary_bwd_kernel", rotary_bwd_kernel<T>, GridFor(x_.n * x_.kd() / 2),
                      kThreads, stream_, b.dk, x_.kd(), b.d_qkv + x_.ad(), w, x_.n, x_.kv, x_.d,
                      x_.b, kRotaryBase);
    }
  }

  FlashArgs<T> Flash() const {
    const LlamaBuffers<T>& b = buf_;
    FlashArgs<T> p;
    p.q = b.q_rot;
    p.q_stride = x_.ad();
    p.k = b.k_rot;
    p.k_stride = x_.kd();
    p.v = b.qkv + x_.ad() + x_.kd();
    p.v_stride = x_.qkv();
    p.o = b.ctx;
    p.o_stride = x_.ad();
    p.lse = b.lse;
    p.d_o = b.d_ctx;
    p.delta = b.delta;
    p.dq_accum = b.dq_accum;
    p.dk = b.dk;
    p.dk_stride = x_.kd();
    p.dv = b.d_qkv + x_.ad() + x_.kd();
    p.dv_stride = x_.qkv();
    p.s = x_.s;
    p.b = x_.b;
    p.heads = x_.a;
    p.kv_heads = x_.kv;
    p.d = x_.d;
    p.scale = 1.0f / std::sqrt(static_cast<float>(x_.d));
    return p;
  }

  std::string AttentionStep(const Step& step) {
    const FlashArgs<T> p = Flash();
    const unsigned q_tiles = static_cast<unsigned>(CeilDiv(x_.s, kFlashTile));
    switch (step.kind) {
      case StepKind::kFlashAttentionFwd:
        return LaunchShared("flash_attention_fwd_kernel", flash_attention_fwd_kernel<T>,
                            dim3(q_tiles, static_cast<unsigned>(x_.b * x_.a)), kFlashThreads,
                            FlashFwdSharedBytes(x_.d, sizeof(T)), stream_, p);
      case StepKind::kFlashAttentionBwdPreprocess:
        return Launch("flash_attention_bwd_preprocess_kernel",
                      flash_attention_bwd_preprocess_kernel<T>, GridFor(x_.n * x_.a * 32), kThreads,
                      stream_, p, buf_.delta);
      case StepKind::kFlashAttentionBwd:
        return LaunchShared("flash_attention_bwd_kernel", flash_attention_bwd_kernel<T>,
                            dim3(q_tiles, static_cast<unsigned>(x_.b * x_.kv)), kFlashThreads,
                            FlashBwdSharedBytes(x_.d, sizeof(T)), stream_, p);
      default:
        return Launch("flash_attention_bwd_dq_convert_kernel",
                      flash_attention_bwd_dq_convert_kernel<T>, GridFor(x_.n * x_.ad()), kThreads,
                      stream_, buf_.dq_accum, buf_.dq, x_.n * x_.ad());
    }
  }

  std::string ElementwiseStep(const Step& step) {
    LlamaBuffers<T>& b = buf_;
    const int64_t nh = x_.n * x_.h;
    const int64_t nf = x_.n * x_.f;
    switch (step.kind) {
      case StepKind::kSwigluFwd:
        return Launch("swiglu_fwd_kernel", swiglu_fwd_kernel<T>, GridFor(nf), kThreads, stream_,
                      b.fc1_out, b.act, x_.n, x_.f);
      case StepKind::kSwigluBwd:
        return Launch("swiglu_bwd_kernel", swiglu_bwd_kernel<T>, GridFor(nf), kThreads, stream_,
                      b.d_act, b.fc1_out, b.d_fc1, x_.n, x_.f);
      case StepKind::kResidualAddFwd: {
        const bool attn = step.index == kModuleAttention;
        return Launch("residual_add_fwd_kernel", residual_add_fwd_kernel<T>, GridFor(nh), kThreads,
                      stream_, attn ? b.h0 : b.h1, attn ? b.proj_out : b.fc2_out,
                      attn ? b.h1 : b.h2, nh);
      }
      default: {
        const bool attn = step.index == kModuleAttention;
        return Launch("residual_add_bwd_kernel", residual_add_bwd_kernel<T>, GridFor(nh), kThreads,
                      stream_, attn ? b.d_h1 : b.d_h2, attn ? b.dx_ln1 : b.dx_ln2,
                      attn ? b.d_h0 : b.d_h1, nh);
      }
    }
  }

  LlamaDims x_;
  DeviceArena arena_;
  LlamaBuffers<T> buf_{};
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  uint32_t seed_ = 0;
  double adam_step_ = 0;
  std::map<std::string, std::vector<Step>> plans_;
  Gemm gemms_[kLlamaLinears][kGemmPasses];
};

}  // namespace

std::unique_ptr<LayerWorkload> MakeLlamaWorkload(const LayerShape& shape, std::string* error) {
  if (shape.bf16) return LlamaWorkload<__nv_bfloat16>::Make(shape, error);
  return LlamaWorkload<__half>::Make(shape, error);
}

}  // namespace internal
}  // namespace vtrain::gpu
