// Operator workloads of one Megatron-LM GPT decoder layer on one
// tensor-parallel rank, for the agent's CUPTI profiler: each operator
// (embedding, attention and MLP blocks, logit, loss, Adam) enqueues the
// kernel sequence Megatron-LM launches for it, so that measured profile
// tables line up with the analytical generator (core/profile/analytical.cc)
// nearly kernel for kernel: layer-norm backward is two kernels here (input
// grad, then gamma/beta grad, as apex does) and cuBLASLt may add split-K
// reduction kernels; lookups compare whole operators, not kernels.
//
// GEMMs go through cuBLASLt; everything else is a small kernel of our own.
// Under fp8 (bf16 elsewhere) QKV, projection, FC1 and FC2 run as
// Transformer Engine runs them: the input's (the output gradient's)
// cast-transpose before the GEMMs, fp8 GEMMs on the copies
// (gemm_specs.h's UseFp8Operands), a scale update after each block and pass.
// The kernels are deliberately simple (one block per row for row
// reductions, grid-stride loops for element-wise work): they stand in for
// Megatron's fused kernels (fused layer-norm, scaled-upper-triangular-
// masked softmax, bias-GeLU, bias-dropout-add, vocabulary-parallel cross
// entropy, multi-tensor Adam) with about the same memory traffic and the
// same launch structure, not the same speed.
//
// This file holds the workload itself (one per element type) and the
// order of each operator's kernels and GEMMs; the kernels are in
// *_kernels.cuh, the buffers in device_buffers.h, the GEMMs in gemm.h and
// gemm_specs.h (with the row-major/column-major conventions).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "profiler_agent/gpu/adam_kernels.cuh"
#include "profiler_agent/gpu/cuda_util.h"
#include "profiler_agent/gpu/device_buffers.h"
#include "profiler_agent/gpu/fp8_kernels.cuh"
#include "profiler_agent/gpu/gemm.h"
#include "profiler_agent/gpu/gemm_specs.h"
#include "profiler_agent/gpu/init_kernels.cuh"
#include "profiler_agent/gpu/kernel_common.cuh"
#include "profiler_agent/gpu/layer_kernels.cuh"
#include "profiler_agent/gpu/llama_buffers.h"
#include "profiler_agent/gpu/moe_workload.h"
#include "profiler_agent/gpu/operator_names.h"
#include "profiler_agent/gpu/tail_operators.cuh"
#include "profiler_agent/gpu/vocab_kernels.cuh"
#include "profiler_agent/gpu/workloads.h"

namespace vtrain::gpu {
namespace internal {
namespace {

constexpr float kDropout = 0.1f;  // Megatron's default hidden and attention dropout
constexpr float kLayerNormEps = 1e-5f;
// ---------------------------------------------------------------------------
// The workload
// ---------------------------------------------------------------------------

template <class T>
class Workload final : public LayerWorkload {
 public:
  static std::unique_ptr<LayerWorkload> Make(const LayerShape& shape, std::string* error) {
    std::unique_ptr<Workload> w(new Workload(shape));
    const std::string e = w->Init();
    if (!e.empty()) {
      *error = e;
      return nullptr;  // the destructor frees whatever Init got
    }
    return w;
  }

  ~Workload() override {
    // Teardown cannot report; wait for in-flight kernels before freeing
    // what they use.
    if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
    if (lt_ != nullptr) (void)cublasLtDestroy(lt_);
    arena_.Release();
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }

  std::vector<std::string> Operators() const override {
    std::vector<std::string> ops;
    for (const char* op : kOperatorsInStepOrder) {
      if (dims_.adam > 0 || std::string(op) != "optimizer_step") ops.push_back(op);
    }
    return ops;
  }

  std::string Run(const std::string& op) override {
    if (op == "embedding_fwd") return EmbeddingFwd();
    if (op == "attention_fwd") return AttentionFwd();
    if (op == "mlp_fwd") return MlpFwd();
    if (op == "logit_fwd") return LogitFwd();
    if (op == "loss_fwd") return LossFwd();
    if (op == "loss_bwd") return LossBwd();
    if (op == "logit_bwd") return LogitBwd();
    if (op == "mlp_bwd") return MlpBwd();
    if (op == "attention_bwd") return AttentionBwd();
    if (op == "embedding_bwd") return EmbeddingBwd();
    if (op == "optimizer_step") {
      if (dims_.adam <= 0) return "optimizer_step needs adam_params > 0 in the shape";
      return OptimizerStep();
    }
    std::string known;
    for (const std::string& name : Operators()) known += (known.empty() ? "" : ", ") + name;
    return "unknown operator '" + op + "'; expected one of: " + known;
  }

  std::string Synchronize() override {
    return CheckCuda("cudaStreamSynchronize", cudaStreamSynchronize(stream_));
  }

 private:
  explicit Workload(const LayerShape& shape) : dims_(MakeDims(shape)), arena_(true) {}

  static constexpr cudaDataType_t kDataType = std::is_same_v<T, __half> ? CUDA_R_16F : CUDA_R_16BF;

  std::string Init() {
    VTRAIN_GPU_RETURN_IF_ERROR(OpenStreamAndLt(&stream_, &lt_));
    if (dims_.fp8) VTRAIN_GPU_RETURN_IF_ERROR(CheckFp8Device());
    buf_.Layout(dims_, &arena_);
    if (!arena_.error().empty()) return arena_.error();
    VTRAIN_GPU_RETURN_IF_ERROR(InitBuffers());
    VTRAIN_GPU_RETURN_IF_ERROR(InitFp8());
    VTRAIN_GPU_RETURN_IF_ERROR(PlanGemms());
    // One pass over every operator so that saved statistics, masks and
    // probabilities are the ones the forward produces, and every backward
    // finds consistent inputs however the profiler orders its runs.
    for (const std::string& op : Operators()) VTRAIN_GPU_RETURN_IF_ERROR(Run(op));
    return Synchronize();
  }

  template <class P>
  std::string Fill(P* p, int64_t n, float offset, float scale) {
    return Launch("init_uniform_kernel", init_uniform_kernel<P>, GridFor(n), kThreads, stream_, p,
                  n, NextSeed(), offset, scale);
  }

  // Token ids and dropout masks, then every fp16/bf16 and fp32 buffer
  // (device_buffers.h has their values) and the Adam state; each launch
  // takes the next seed.
  std::string InitBuffers() {
    const Dims& x = dims_;
    Buffers<T>& b = buf_;
    const int64_t n = x.n;
    const int64_t h = x.h;
    const int64_t sc = x.bh() * x.s * x.s;
    const float w = 0.02f;
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("init_token_ids_kernel", init_token_ids_kernel, GridFor(n),
                                      kThreads, stream_, b.tokens, n, x.vocab, NextSeed()));
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("init_token_ids_kernel", init_token_ids_kernel, GridFor(n),
                                      kThreads, stream_, b.labels, n, x.vocab, NextSeed()));
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("init_token_ids_kernel", init_token_ids_kernel, GridFor(n),
                                      kThreads, stream_, b.local_ids, n, x.v, NextSeed()));
    uint8_t* const residual_masks[] = {b.emb_mask, b.attn_resid_mask, b.mlp_mask};
    for (uint8_t* mask : residual_masks) {
      VTRAIN_GPU_RETURN_IF_ERROR(Launch("init_dropout_mask_kernel", init_dropout_mask_kernel,
                                        GridFor(n * h), kThreads, stream_, mask, n * h, NextSeed(),
                                        kDropout));
    }
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("init_dropout_mask_kernel", init_dropout_mask_kernel,
                                      GridFor(sc), kThreads, stream_, b.attn_mask, sc, NextSeed(),
                                      kDropout));
    for (const BufferInit<T>& init : HalfBufferInits(x, b)) {
      VTRAIN_GPU_RETURN_IF_ERROR(Fill(init.p, init.n, init.offset, init.scale));
    }
    for (const BufferInit<float>& init : FloatBufferInits(x, b)) {
      VTRAIN_GPU_RETURN_IF_ERROR(Fill(init.p, init.n, init.offset, init.scale));
    }
    if (x.adam > 0) {
      VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.master, x.adam, 0, w));
      VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.exp_avg, x.adam, 0, 0));
      VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.exp_avg_sq, x.adam, 0, 0));
      VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.adam_grad, x.adam, 0, 1e-3f));
      VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.adam_param, x.adam, 0, w));
      VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.adam_scalars, 2, 0, 0));
    }
    return std::string();
  }

  // Under fp8: scales 1, an empty amax history, and the weights' fp8
  // copies (cast once, as Transformer Engine caches them).
  std::string InitFp8() {
    if (!dims_.fp8) return std::string();
    Buffers<T>& b = buf_;
    VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.amax_history, kAmaxHistory * kFp8Tensors, 0, 0));
    VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.scale, kFp8Tensors, 1, 0));
    VTRAIN_GPU_RETURN_IF_ERROR(Fill(b.scale_inv, kFp8Tensors, 1, 0));
    for (int l = 0; l < kNumFp8Linears; ++l) {
      const int tensor = 3 * l + 1;
      VTRAIN_GPU_RETURN_IF_ERROR(LaunchCastTranspose<__nv_fp8_e4m3>(
          stream_, b.weight(l), dims_.out(l), dims_.in(l), b.scale + tensor,
          b.amax_history + tensor, b.fp8[l].w, b.fp8[l].w_t));
    }
    return std::string();
  }

  std::string PlanGemms() {
    const std::array<GemmSpec, kGemmCount> specs = MakeGemmSpecs(dims_, buf_);
    for (int i = 0; i < kGemmCount; ++i) {
      int linear = 0;
      int pass = 0;
      if (dims_.fp8 && Fp8LinearOf(i, &linear, &pass)) {
        const Fp8Operands o = Fp8OperandsOf(dims_, linear, pass);
        VTRAIN_GPU_RETURN_IF_ERROR(
            gemms_[i].Plan(lt_, specs[i], Fp8GemmTypes(o, buf_.scale_inv, kDataType, sizeof(T))));
        continue;
      }
      VTRAIN_GPU_RETURN_IF_ERROR(gemms_[i].Plan(lt_, specs[i], kDataType, sizeof(T)));
    }
    return std::string();
  }

  // fp8 only (nothing otherwise): linear layer l's input, or its output
  // gradient, cast to fp8 with its transpose before its GEMMs (core's
  // fp8_cast_transpose and fp8_cast_transpose_grad), and one block's scale
  // update after a pass (fp8_amax_scale_update).
  std::string CastInput(int l, const T* src) {
    if (!dims_.fp8) return std::string();
    Buffers<T>& b = buf_;
    return LaunchCastTranspose<__nv_fp8_e4m3>(stream_, src, dims_.n, dims_.in(l), b.scale + 3 * l,
                                              b.amax_history + 3 * l, b.fp8[l].x, b.fp8[l].x_t);
  }
  std::string CastGrad(int l, const T* src) {
    if (!dims_.fp8) return std::string();
    Buffers<T>& b = buf_;
    const int tensor = 3 * l + 2;
    return LaunchCastTranspose<__nv_fp8_e5m2>(stream_, src, dims_.n, dims_.out(l), b.scale + tensor,
                                              b.amax_history + tensor, b.fp8[l].dy, b.fp8[l].dy_t);
  }
  std::string ScaleUpdate(Module m) {
    if (!dims_.fp8) return std::string();
    const int64_t per_module = 2 * kFp8TensorsPerLinear;
    return LaunchAmaxScaleUpdate(stream_, buf_.amax_history, buf_.scale, buf_.scale_inv,
                                 per_module * m, per_module, kFp8Tensors, kAmaxHistory);
  }

  std::string RunGemm(GemmId id) { return gemms_[id].Run(lt_, stream_, buf_.workspace); }

  uint32_t NextSeed() { return ++seed_ * 0x6C8E9CF5u; }

  std::string LayerNormFwd(const T* x, const T* gamma, const T* beta, T* y, float* mean,
                           float* rstd) {
    return Launch("layer_norm_fwd_kernel", layer_norm_fwd_kernel<T>, static_cast<unsigned>(dims_.n),
                  kThreads, stream_, x, gamma, beta, y, mean, rstd, dims_.h, kLayerNormEps);
  }

  // Input gradient, then the gamma/beta gradients.
  std::string LayerNormBwd(const T* dy, const T* x, const T* gamma, const float* mean,
                           const float* rstd, T* dx, float* dgamma, float* dbeta) {
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("layer_norm_bwd_kernel", layer_norm_bwd_kernel<T>,
                                      static_cast<unsigned>(dims_.n), kThreads, stream_, dy, x,
                                      gamma, mean, rstd, dx, dims_.h));
    int64_t rows_per_chunk = 0;
    const dim3 grid = ColumnReduceGrid(dims_.n, dims_.h, &rows_per_chunk);
    return Launch("layer_norm_gamma_beta_grad_kernel", layer_norm_gamma_beta_grad_kernel<T>, grid,
                  dim3(kColTile, kRowLanes), stream_, dy, x, mean, rstd, dims_.n, dims_.h,
                  rows_per_chunk, dgamma, dbeta);
  }

  std::string BiasGradReduce(const T* a, int64_t cols_a, float* grad_a, const T* bb, int64_t cols_b,
                             float* grad_b) {
    int64_t rows_per_chunk = 0;
    const dim3 grid = ColumnReduceGrid(dims_.n, cols_a + cols_b, &rows_per_chunk);
    return Launch("bias_grad_reduce_kernel", bias_grad_reduce_kernel<T>, grid,
                  dim3(kColTile, kRowLanes), stream_, a, cols_a, grad_a, bb, cols_b, grad_b,
                  dims_.n, rows_per_chunk);
  }

  // --- Operators (kernel order as in core/profile/analytical.cc) ---

  std::string EmbeddingFwd() {
    const Dims& x = dims_;
    Buffers<T>& b = buf_;
    const int64_t nh = x.n * x.h;
    // This workload is rank 0 of the tensor-parallel group.
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("vocab_range_mask_kernel", vocab_range_mask_kernel,
                                      GridFor(x.n), kThreads, stream_, b.tokens, b.local_ids, x.n,
                                      int64_t{0}, x.v));
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("word_embedding_gather_kernel",
                                      word_embedding_gather_kernel<T>, GridFor(nh), kThreads,
                                      stream_, b.local_ids, b.word_emb, b.word_rows, x.n, x.h));
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("position_embedding_gather_kernel",
                                      position_embedding_gather_kernel<T>, GridFor(nh), kThreads,
                                      stream_, b.pos_emb, b.pos_rows, x.n, x.b, x.h));
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("embedding_add_kernel", embedding_add_kernel<T>, GridFor(nh),
                                      kThreads, stream_, b.word_rows, b.pos_rows, b.word_rows, nh));
    return Launch("embedding_dropout_fwd_kernel", embedding_dropout_fwd_kernel<T>, GridFor(nh),
                  kThreads, stream_, b.word_rows, b.h0, b.emb_mask, nh, kDropout, NextSeed());
  }

  std::string AttentionFwd() {
    const Dims& x = dims_;
    Buffers<T>& b = buf_;
    const int64_t sc = x.bh() * x.s * x.s;
    VTRAIN_GPU_RETURN_IF_ERROR(
        LayerNormFwd(b.h0, b.ln1_gamma, b.ln1_beta, b.ln1_out, b.ln1_mean, b.ln1_rstd));
    VTRAIN_GPU_RETURN_IF_ERROR(CastInput(kLinearQkv, b.ln1_out));
    VTRAIN_GPU_RETURN_IF_ERROR(RunGemm(kGemmQkvFwd));
    if (!gemms_[kGemmQkvFwd].bias_fused()) {
      VTRAIN_GPU_RETURN_IF_ERROR(Launch("bias_add_kernel", bias_add_kernel<T>,
                                        GridFor(x.n * x.qkv()), kThreads, stream_, b.qkv, b.b_qkv,
                                        x.n, x.qkv()));
    }
    VTRAIN_GPU_RETURN_IF_ERROR(RunGemm(kGemmScoresFwd));
    VTRAIN_GPU_RETURN_IF_ERROR(Launch(
        "scaled_causal_softmax_fwd_kernel", scaled_causal_softmax_fwd_kernel<T>,
        static_cast<unsigned>(x.bh() * x.s), kThreads, stream_, b.scores, b.probs, x.s, 1.0f));
    VTRAIN_GPU_RETURN_IF_ERROR(
        Launch("attention_dropout_fwd_kernel", attention_dropout_fwd_kernel<T>, GridFor(sc),
               kThreads, stream_, b.probs, b.dropped, b.attn_mask, sc, kDropout, NextSeed()));
    VTRAIN_GPU_RETURN_IF_ERROR(RunGemm(kGemmContextFwd));
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("context_transpose_copy_kernel",
                                      context_transpose_copy_kernel<T>, GridFor(x.n * x.ad()),
                                      kThreads, stream_, b.ctx_bsd, b.ctx, x.s, x.b, x.a, x.d));
    VTRAIN_GPU_RETURN_IF_ERROR(CastInput(kLinearProjection, b.ctx));
    VTRAIN_GPU_RETURN_IF_ERROR(RunGemm(kGemmProjectionFwd));
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("bias_dropout_add_fwd_kernel", bias_dropout_add_fwd_kernel<T>,
                                      GridFor(x.n * x.h), kThreads, stream_, b.proj_out, b.b_proj,
                                      b.h0, b.h1, b.attn_resid_mask, x.n, x.h, kDropout,
                                      NextSeed()));
    return ScaleUpdate(kModuleAttention);
  }

  std::string MlpFwd() {
    const Dims& x = dims_;
    Buffers<T>& b = buf_;
    VTRAIN_GPU_RETURN_IF_ERROR(
        LayerNormFwd(b.h1, b.ln2_gamma, b.ln2_beta, b.ln2_out, b.ln2_mean, b.ln2_rstd));
    VTRAIN_GPU_RETURN_IF_ERROR(CastInput(kLinearFc1, b.ln2_out));
    VTRAIN_GPU_RETURN_IF_ERROR(RunGemm(kGemmFc1Fwd));
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("bias_gelu_fwd_kernel", bias_gelu_fwd_kernel<T>,
                                      GridFor(x.n * x.f), kThreads, stream_, b.fc1_out, b.b_fc1,
                                      b.gelu_out, x.n, x.f));
    VTRAIN_GPU_RETURN_IF_ERROR(CastInput(kLinearFc2, b.gelu_out));
    VTRAIN_GPU_RETURN_IF_ERROR(RunGemm(kGemmFc2Fwd));
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("bias_dropout_add_fwd_kernel", bias_dropout_add_fwd_kernel<T>,
                                      GridFor(x.n * x.h), kThreads, stream_, b.fc2_out, b.b_fc2,
                                      b.h1, b.h2, b.mlp_mask, x.n, x.h, kDropout, NextSeed()));
    return ScaleUpdate(kModuleMlp);
  }

  std::string LogitFwd() {
    Buffers<T>& b = buf_;
    VTRAIN_GPU_RETURN_IF_ERROR(
        LayerNormFwd(b.h2, b.lnf_gamma, b.lnf_beta, b.lnf_out, b.lnf_mean, b.lnf_rstd));
    return RunGemm(kGemmLogitFwd);
  }

  std::string LossFwd() { return LossFwdKernels(stream_, dims_, buf_); }
  std::string LossBwd() { return LossBwdKernels(stream_, dims_, buf_); }
  std::string OptimizerStep() {
    return OptimizerStepKernels(stream_, dims_.adam, buf_, ++adam_step_);
  }

  std::string LogitBwd() {
    Buffers<T>& b = buf_;
    VTRAIN_GPU_RETURN_IF_ERROR(RunGemm(kGemmLogitDgrad));
    VTRAIN_GPU_RETURN_IF_ERROR(RunGemm(kGemmLogitWgrad));
    // The final layer norm's input is the last layer's output; its gradient
    // is that layer's incoming gradient.
    return LayerNormBwd(b.d_lnf, b.h2, b.lnf_gamma, b.lnf_mean, b.lnf_rstd, b.d_h2, b.d_lnf_gamma,
                        b.d_lnf_beta);
  }

  std::string MlpBwd() {
    const Dims& x = dims_;
    Buffers<T>& b = buf_;
    const float keep_scale = 1.0f / (1.0f - kDropout);
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("bias_dropout_add_bwd_kernel", bias_dropout_add_bwd_kernel<T>,
                                      GridFor(x.n * x.h), kThreads, stream_, b.d_h2, b.mlp_mask,
                                      b.dy_fc2, x.n * x.h, keep_scale));
    VTRAIN_GPU_RETURN_IF_ERROR(CastGrad(kLinearFc2, b.dy_fc2));
    VTRAIN_GPU_RETURN_IF_ERROR(RunGemm(kGemmFc2Dgrad));
    VTRAIN_GPU_RETURN_IF_ERROR(RunGemm(kGemmFc2Wgrad));
    // The FC1 bias gradient needs bias_gelu_bwd's output, so the reduction
    // of both biases comes after it.
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("bias_gelu_bwd_kernel", bias_gelu_bwd_kernel<T>,
                                      GridFor(x.n * x.f), kThreads, stream_, b.d_gelu, b.fc1_out,
                                      b.b_fc1, b.d_fc1, x.n, x.f));
    VTRAIN_GPU_RETURN_IF_ERROR(BiasGradReduce(b.d_fc1, x.f, b.db_fc1, b.dy_fc2, x.h, b.db_fc2));
    VTRAIN_GPU_RETURN_IF_ERROR(CastGrad(kLinearFc1, b.d_fc1));
    VTRAIN_GPU_RETURN_IF_ERROR(RunGemm(kGemmFc1Dgrad));
    VTRAIN_GPU_RETURN_IF_ERROR(RunGemm(kGemmFc1Wgrad));
    VTRAIN_GPU_RETURN_IF_ERROR(LayerNormBwd(b.d_ln2, b.h1, b.ln2_gamma, b.ln2_mean, b.ln2_rstd,
                                            b.dx_ln2, b.d_ln2_gamma, b.d_ln2_beta));
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("residual_add_bwd_kernel", residual_add_bwd_kernel<T>,
                                      GridFor(x.n * x.h), kThreads, stream_, b.d_h2, b.dx_ln2,
                                      b.d_h1, x.n * x.h));
    return ScaleUpdate(kModuleMlp);
  }

  std::string AttentionBwd() {
    const Dims& x = dims_;
    Buffers<T>& b = buf_;
    const int64_t sc = x.bh() * x.s * x.s;
    const float keep_scale = 1.0f / (1.0f - kDropout);
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("bias_dropout_add_bwd_kernel", bias_dropout_add_bwd_kernel<T>,
                                      GridFor(x.n * x.h), kThreads, stream_, b.d_h1,
                                      b.attn_resid_mask, b.dy_proj, x.n * x.h, keep_scale));
    VTRAIN_GPU_RETURN_IF_ERROR(CastGrad(kLinearProjection, b.dy_proj));
    VTRAIN_GPU_RETURN_IF_ERROR(RunGemm(kGemmProjectionDgrad));
    VTRAIN_GPU_RETURN_IF_ERROR(RunGemm(kGemmProjectionWgrad));
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("context_transpose_copy_bwd_kernel",
                                      context_transpose_copy_bwd_kernel<T>, GridFor(x.n * x.ad()),
                                      kThreads, stream_, b.d_ctx, b.d_ctx_bsd, x.s, x.b, x.a, x.d));
    VTRAIN_GPU_RETURN_IF_ERROR(RunGemm(kGemmContextDgradProbs));   // dP into scores
    VTRAIN_GPU_RETURN_IF_ERROR(RunGemm(kGemmContextDgradValues));  // dV into d_qkv
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("attention_dropout_bwd_kernel",
                                      attention_dropout_bwd_kernel<T>, GridFor(sc), kThreads,
                                      stream_, b.scores, b.attn_mask, b.scores, sc, keep_scale));
    VTRAIN_GPU_RETURN_IF_ERROR(Launch(
        "scaled_causal_softmax_bwd_kernel", scaled_causal_softmax_bwd_kernel<T>,
        static_cast<unsigned>(x.bh() * x.s), kThreads, stream_, b.probs, b.scores, x.s, 1.0f));
    VTRAIN_GPU_RETURN_IF_ERROR(RunGemm(kGemmScoresDgradQuery));  // dQ into d_qkv
    VTRAIN_GPU_RETURN_IF_ERROR(RunGemm(kGemmScoresDgradKey));    // dK into d_qkv
    VTRAIN_GPU_RETURN_IF_ERROR(CastGrad(kLinearQkv, b.d_qkv));
    VTRAIN_GPU_RETURN_IF_ERROR(RunGemm(kGemmQkvDgrad));
    VTRAIN_GPU_RETURN_IF_ERROR(RunGemm(kGemmQkvWgrad));
    VTRAIN_GPU_RETURN_IF_ERROR(
        BiasGradReduce(b.d_qkv, x.qkv(), b.db_qkv, b.dy_proj, x.h, b.db_proj));
    VTRAIN_GPU_RETURN_IF_ERROR(LayerNormBwd(b.d_ln1, b.h0, b.ln1_gamma, b.ln1_mean, b.ln1_rstd,
                                            b.dx_ln1, b.d_ln1_gamma, b.d_ln1_beta));
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("residual_add_bwd_kernel", residual_add_bwd_kernel<T>,
                                      GridFor(x.n * x.h), kThreads, stream_, b.d_h1, b.dx_ln1,
                                      b.d_h0, x.n * x.h));
    return ScaleUpdate(kModuleAttention);
  }

  std::string EmbeddingBwd() {
    const Dims& x = dims_;
    Buffers<T>& b = buf_;
    const int64_t nh = x.n * x.h;
    VTRAIN_GPU_RETURN_IF_ERROR(
        Launch("embedding_dropout_bwd_kernel", embedding_dropout_bwd_kernel<T>, GridFor(nh),
               kThreads, stream_, b.d_h0, b.emb_mask, b.d_emb, nh, 1.0f / (1.0f - kDropout)));
    VTRAIN_GPU_RETURN_IF_ERROR(Launch("word_embedding_scatter_add_kernel",
                                      word_embedding_scatter_add_kernel<T>, GridFor(nh), kThreads,
                                      stream_, b.local_ids, b.d_emb, b.word_dense_grad, x.n, x.h));
    VTRAIN_GPU_RETURN_IF_ERROR(Launch(
        "word_embedding_grad_accumulate_kernel", word_embedding_grad_accumulate_kernel,
        GridFor(x.v * x.h), kThreads, stream_, b.word_dense_grad, b.word_main_grad, x.v * x.h));
    return Launch("position_embedding_bwd_kernel", position_embedding_bwd_kernel<T>,
                  GridFor(x.s * x.h), kThreads, stream_, b.d_emb, b.pos_grad, x.s, x.b, x.h);
  }

  Dims dims_;
  DeviceArena arena_;
  Buffers<T> buf_{};
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  uint32_t seed_ = 0;
  double adam_step_ = 0;
  std::array<Gemm, kGemmCount> gemms_;
};

}  // namespace
}  // namespace internal

std::unique_ptr<LayerWorkload> LayerWorkload::Create(const LayerShape& shape, std::string* error) {
  std::string ignored;
  if (error == nullptr) error = &ignored;
  error->clear();
  if (std::string e = ValidateShape(shape); !e.empty()) {
    *error = e;
    return nullptr;
  }
  const int64_t bytes = WorkloadBytes(shape);
  if (bytes == std::numeric_limits<int64_t>::max()) {
    *error = "shape needs more than 1 PiB of device memory";
    return nullptr;
  }
  if (shape.experts > 0) return internal::MakeMoeWorkload(shape, error);
  if (shape.llama) return internal::MakeLlamaWorkload(shape, error);
  if (shape.bf16) return internal::Workload<__nv_bfloat16>::Make(shape, error);
  return internal::Workload<__half>::Make(shape, error);
}

}  // namespace vtrain::gpu
