// One GEMM of the workloads through cuBLASLt: the GEMM in row-major terms
// (GemmSpec), its column-major cuBLASLt call (ToColumnMajor), and a planned
// Gemm that enqueues it on a stream.
//
// Layout conventions (Megatron's): activations are row-major [s*b, width]
// with the token row index s_i*b + b_i; weights are row-major
// [out_features, in_features] like torch.nn.Linear, so Y = X W^T.
// cuBLASLt is column-major; a row-major [r, c] matrix is handed to it as a
// column-major [c, r] one with the same leading dimension, and
// C = A B (row-major) is computed as C^T = B^T A^T (column-major), i.e. with
// the operands swapped. ToColumnMajor is the only place that does this.
#ifndef VTRAIN_PROFILER_AGENT_GPU_GEMM_H_
#define VTRAIN_PROFILER_AGENT_GPU_GEMM_H_

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace vtrain::gpu::internal {

// The cuBLASLt workspace of a workload, shared by its GEMMs.
constexpr uint64_t kWorkspaceBytes = 32ULL << 20;

// One GEMM in row-major terms: C[m, n] = alpha * op(A) op(B) (+ bias[n]),
// op(A) [m, k] (A stored [k, m] when trans_a), op(B) [k, n] (B stored
// [n, k] when trans_b); ld* are the stored row lengths; batches are
// stride_* elements apart.
struct GemmSpec {
  const char* name = "";
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  bool trans_a = false;
  bool trans_b = false;
  const void* a = nullptr;
  int64_t lda = 0;
  int64_t stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  int64_t stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 0;
  int64_t stride_c = 0;
  int64_t batch = 1;
  float alpha = 1.0f;
  const void* bias = nullptr;  // length n, fused as the bias epilogue when possible
};

// One cuBLASLt (column-major) operand: the matrix as stored, and whether
// the product uses its transpose.
struct LtOperand {
  const void* ptr = nullptr;
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;
  int64_t stride = 0;
};

// The column-major call computing a row-major GemmSpec:
// D = alpha * op(a) op(b) (+ bias along D's rows).
struct LtCall {
  LtOperand a;
  LtOperand b;
  LtOperand d;
};

// A row-major [r, c] matrix with row length ld is a column-major [c, r]
// matrix with leading dimension ld, so row-major C = op(A) op(B) is
// column-major C^T = op(B)^T op(A)^T: cuBLASLt's A is our B and its B our A,
// each transposed exactly when ours is.
LtCall ToColumnMajor(const GemmSpec& g);

// The element types of one GEMM's operands, and for fp8 the device
// pointers of A's and B's dequantisation scales (scale_inv; null: 1).
// cuBLASLt's fp8 GEMMs need compute capability 8.9 or newer, both operands
// stored with k contiguous (row-major A [m, k] and B stored [n, k], i.e.
// trans_a false and trans_b true), dimensions and leading dimensions
// multiples of 16, and not both operands E5M2.
struct GemmTypes {
  cudaDataType_t a = CUDA_R_16F;
  cudaDataType_t b = CUDA_R_16F;
  cudaDataType_t d = CUDA_R_16F;
  size_t a_bytes = 2;
  size_t b_bytes = 2;
  size_t d_bytes = 2;
  const float* a_scale = nullptr;
  const float* b_scale = nullptr;
};

// One GEMM planned for cuBLASLt: descriptors, layouts and algorithm are
// chosen once by Plan; Run enqueues it. Not thread-safe.
class Gemm {
 public:
  Gemm() = default;
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;
  ~Gemm();

  // Builds the descriptors and picks the algorithm once, so Run only
  // enqueues. Without an algorithm for the bias epilogue it plans a plain
  // GEMM and bias_fused() is false: the caller then adds the bias. Returns ""
  // or the failing cuBLASLt call.
  std::string Plan(cublasLtHandle_t lt, const GemmSpec& spec, cudaDataType_t type,
                   size_t element_bytes);
  // The same with operands of different types (fp8 inputs, 16-bit output).
  std::string Plan(cublasLtHandle_t lt, const GemmSpec& spec, const GemmTypes& types);

  // Enqueues the GEMM on `stream` with `workspace` (kWorkspaceBytes);
  // returns "" or the cuBLASLt error.
  std::string Run(cublasLtHandle_t lt, cudaStream_t stream, void* workspace) const;

  bool bias_fused() const { return bias_fused_; }

 private:
  template <class V>
  std::string SetDesc(cublasLtMatmulDescAttributes_t attr, const V& value, const std::string& tag);
  std::string MakeLayout(cublasLtMatrixLayout_t* layout, cudaDataType_t type, const LtOperand& x,
                         const std::string& tag);
  std::string Choose(cublasLtHandle_t lt, cublasLtMatmulPreference_t pref, const GemmTypes& types,
                     const std::string& tag);

  GemmSpec spec_;
  LtCall call_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t layout_a_ = nullptr;
  cublasLtMatrixLayout_t layout_b_ = nullptr;
  cublasLtMatrixLayout_t layout_d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  bool bias_fused_ = false;
};

}  // namespace vtrain::gpu::internal

#endif  // VTRAIN_PROFILER_AGENT_GPU_GEMM_H_
