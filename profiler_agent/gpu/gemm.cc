#include "profiler_agent/gpu/gemm.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "profiler_agent/gpu/cuda_util.h"

namespace vtrain::gpu::internal {
namespace {

// The largest power of two (up to 256) that the pointer and every batch's
// offset from it are multiples of: cuBLASLt's heuristic assumes 256-byte
// aligned operands unless told otherwise, and the attention GEMMs address
// Q, K and V at head-dim offsets inside the QKV output.
uint32_t Alignment(const LtOperand& x, int64_t batch, size_t element_bytes) {
  uint64_t bits = reinterpret_cast<uintptr_t>(x.ptr) | 256u;
  if (batch > 1) bits |= static_cast<uint64_t>(x.stride) * element_bytes;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

}  // namespace

LtCall ToColumnMajor(const GemmSpec& g) {
  LtCall call;
  // Our B, stored [k, n] (or [n, k] when trans_b) row-major.
  call.a.ptr = g.b;
  call.a.op = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  call.a.rows = g.trans_b ? g.k : g.n;
  call.a.cols = g.trans_b ? g.n : g.k;
  call.a.ld = g.ldb;
  call.a.stride = g.stride_b;
  // Our A, stored [m, k] (or [k, m] when trans_a) row-major.
  call.b.ptr = g.a;
  call.b.op = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  call.b.rows = g.trans_a ? g.m : g.k;
  call.b.cols = g.trans_a ? g.k : g.m;
  call.b.ld = g.lda;
  call.b.stride = g.stride_a;
  // C = D, [m, n] row-major; the bias epilogue runs along its column-major
  // rows, i.e. our output features.
  call.d.ptr = g.c;
  call.d.rows = g.n;
  call.d.cols = g.m;
  call.d.ld = g.ldc;
  call.d.stride = g.stride_c;
  return call;
}

Gemm::~Gemm() {
  // Host-side descriptors; nothing useful to do with a failure here.
  if (desc_ != nullptr) (void)cublasLtMatmulDescDestroy(desc_);
  if (layout_a_ != nullptr) (void)cublasLtMatrixLayoutDestroy(layout_a_);
  if (layout_b_ != nullptr) (void)cublasLtMatrixLayoutDestroy(layout_b_);
  if (layout_d_ != nullptr) (void)cublasLtMatrixLayoutDestroy(layout_d_);
}

template <class V>
std::string Gemm::SetDesc(cublasLtMatmulDescAttributes_t attr, const V& value,
                          const std::string& tag) {
  return CheckCublas("cublasLtMatmulDescSetAttribute" + tag,
                     cublasLtMatmulDescSetAttribute(desc_, attr, &value, sizeof(value)));
}

std::string Gemm::Plan(cublasLtHandle_t lt, const GemmSpec& spec, cudaDataType_t type,
                       size_t element_bytes) {
  GemmTypes types;
  types.a = types.b = types.d = type;
  types.a_bytes = types.b_bytes = types.d_bytes = element_bytes;
  return Plan(lt, spec, types);
}

std::string Gemm::Plan(cublasLtHandle_t lt, const GemmSpec& spec, const GemmTypes& types) {
  spec_ = spec;
  call_ = ToColumnMajor(spec);
  const std::string tag = std::string("(") + spec.name + ")";
  VTRAIN_GPU_RETURN_IF_ERROR(
      CheckCublas("cublasLtMatmulDescCreate" + tag,
                  cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F)));
  VTRAIN_GPU_RETURN_IF_ERROR(SetDesc(CUBLASLT_MATMUL_DESC_TRANSA, call_.a.op, tag));
  VTRAIN_GPU_RETURN_IF_ERROR(SetDesc(CUBLASLT_MATMUL_DESC_TRANSB, call_.b.op, tag));
  // cuBLASLt's A is our B and its B our A (ToColumnMajor).
  VTRAIN_GPU_RETURN_IF_ERROR(MakeLayout(&layout_a_, types.b, call_.a, "A" + tag));
  VTRAIN_GPU_RETURN_IF_ERROR(MakeLayout(&layout_b_, types.a, call_.b, "B" + tag));
  VTRAIN_GPU_RETURN_IF_ERROR(MakeLayout(&layout_d_, types.d, call_.d, "D" + tag));
  if (types.b_scale != nullptr) {
    VTRAIN_GPU_RETURN_IF_ERROR(SetDesc(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, types.b_scale, tag));
  }
  if (types.a_scale != nullptr) {
    VTRAIN_GPU_RETURN_IF_ERROR(SetDesc(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, types.a_scale, tag));
  }
  if (spec.bias != nullptr) {
    VTRAIN_GPU_RETURN_IF_ERROR(SetDesc(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS, tag));
    VTRAIN_GPU_RETURN_IF_ERROR(SetDesc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, spec.bias, tag));
    bias_fused_ = true;
  }

  cublasLtMatmulPreference_t pref = nullptr;
  VTRAIN_GPU_RETURN_IF_ERROR(
      CheckCublas("cublasLtMatmulPreferenceCreate" + tag, cublasLtMatmulPreferenceCreate(&pref)));
  std::string error = Choose(lt, pref, types, tag);
  if (!error.empty() && bias_fused_) {
    // No algorithm with the epilogue for this shape: plain GEMM, and the
    // caller adds the bias with bias_add_kernel.
    bias_fused_ = false;
    error = SetDesc(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_DEFAULT, tag);
    if (error.empty()) error = Choose(lt, pref, types, tag);
  }
  const cublasStatus_t destroyed = cublasLtMatmulPreferenceDestroy(pref);
  if (!error.empty()) return error;
  return CheckCublas("cublasLtMatmulPreferenceDestroy" + tag, destroyed);
}

std::string Gemm::Run(cublasLtHandle_t lt, cudaStream_t stream, void* workspace) const {
  const float beta = 0.0f;
  // C = D: beta is 0, so C is never read.
  const cublasStatus_t s =
      cublasLtMatmul(lt, desc_, &spec_.alpha, call_.a.ptr, layout_a_, call_.b.ptr, layout_b_, &beta,
                     call_.d.ptr, layout_d_, const_cast<void*>(call_.d.ptr), layout_d_, &algo_,
                     workspace, kWorkspaceBytes, stream);
  return CheckCublas(std::string("cublasLtMatmul(") + spec_.name + ")", s);
}

std::string Gemm::MakeLayout(cublasLtMatrixLayout_t* layout, cudaDataType_t type,
                             const LtOperand& x, const std::string& tag) {
  VTRAIN_GPU_RETURN_IF_ERROR(
      CheckCublas("cublasLtMatrixLayoutCreate" + tag,
                  cublasLtMatrixLayoutCreate(layout, type, static_cast<uint64_t>(x.rows),
                                             static_cast<uint64_t>(x.cols), x.ld)));
  if (spec_.batch <= 1) return std::string();
  const int32_t count = static_cast<int32_t>(spec_.batch);
  const int64_t stride = x.stride;
  VTRAIN_GPU_RETURN_IF_ERROR(
      CheckCublas("cublasLtMatrixLayoutSetAttribute(batch count)" + tag,
                  cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                   &count, sizeof(count))));
  return CheckCublas(
      "cublasLtMatrixLayoutSetAttribute(batch stride)" + tag,
      cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                       &stride, sizeof(stride)));
}

std::string Gemm::Choose(cublasLtHandle_t lt, cublasLtMatmulPreference_t pref,
                         const GemmTypes& types, const std::string& tag) {
  const uint64_t workspace = kWorkspaceBytes;
  const uint32_t align_a = Alignment(call_.a, spec_.batch, types.b_bytes);
  const uint32_t align_b = Alignment(call_.b, spec_.batch, types.a_bytes);
  const uint32_t align_d = Alignment(call_.d, spec_.batch, types.d_bytes);
  const std::string set = "cublasLtMatmulPreferenceSetAttribute" + tag;
  VTRAIN_GPU_RETURN_IF_ERROR(CheckCublas(
      set, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &workspace, sizeof(workspace))));
  VTRAIN_GPU_RETURN_IF_ERROR(CheckCublas(
      set, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                &align_a, sizeof(align_a))));
  VTRAIN_GPU_RETURN_IF_ERROR(CheckCublas(
      set, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                &align_b, sizeof(align_b))));
  VTRAIN_GPU_RETURN_IF_ERROR(CheckCublas(
      set, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                &align_d, sizeof(align_d))));
  VTRAIN_GPU_RETURN_IF_ERROR(CheckCublas(
      set, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                &align_d, sizeof(align_d))));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  VTRAIN_GPU_RETURN_IF_ERROR(
      CheckCublas("cublasLtMatmulAlgoGetHeuristic" + tag,
                  cublasLtMatmulAlgoGetHeuristic(lt, desc_, layout_a_, layout_b_, layout_d_,
                                                 layout_d_, pref, 1, &result, &found)));
  if (found < 1) {
    return "cublasLtMatmulAlgoGetHeuristic" + tag +
           ": no algorithm for m=" + std::to_string(spec_.m) + " n=" + std::to_string(spec_.n) +
           " k=" + std::to_string(spec_.k) + " batch=" + std::to_string(spec_.batch);
  }
  VTRAIN_GPU_RETURN_IF_ERROR(
      CheckCublas("cublasLtMatmulAlgoGetHeuristic result" + tag, result.state));
  algo_ = result.algo;
  return std::string();
}

}  // namespace vtrain::gpu::internal
