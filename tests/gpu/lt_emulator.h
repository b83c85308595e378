// A host emulation of the workloads' cuBLASLt calls, shared by the GEMM
// layout tests: direct references of what a linear layer's GEMMs mean
// (Y = X W^T, dgrad, wgrad) over fp16 host buffers, cuBLASLt's column-major
// strided-batch semantics applied to a GemmSpec's ToColumnMajor call, and
// the comparison of the two. Outputs are keyed by address, so a GEMM that
// writes the wrong elements fails as surely as one that computes wrong values.
#ifndef VTRAIN_TESTS_GPU_LT_EMULATOR_H_
#define VTRAIN_TESTS_GPU_LT_EMULATOR_H_

#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <vector>

#include "profiler_agent/gpu/gemm.h"

namespace g = vtrain::gpu::internal;
using H = __half;

// Host buffers for a workload's Layout (calloc'd, never freed: a test).
struct HostArena {
  std::vector<void*> ptrs;
  template <class P>
  void Take(P** ptr, const char*, std::initializer_list<int64_t> dims) {
    size_t n = 1;
    for (auto d : dims) n *= d;
    *ptr = static_cast<P*>(calloc(n, sizeof(P)));
    ptrs.push_back(*ptr);
  }
};

inline float F(const H& x) { return __half2float(x); }

using Expect = std::map<const H*, float>;

// out[t][o] = sum_i in[t][i] * W[o][i]  (+bias)
inline void Linear(Expect& e, const H* in, const H* w, const H* bias, H* out, int64_t rows,
                   int64_t in_f, int64_t out_f) {
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t o = 0; o < out_f; ++o) {
      float acc = bias ? F(bias[o]) : 0;
      for (int64_t i = 0; i < in_f; ++i) acc += F(in[t * in_f + i]) * F(w[o * in_f + i]);
      e[&out[t * out_f + o]] = acc;
    }
}

// dX[t][i] = sum_o dY[t][o] W[o][i]
inline void Dgrad(Expect& e, const H* dy, const H* w, H* dx, int64_t rows, int64_t in_f,
                  int64_t out_f) {
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t i = 0; i < in_f; ++i) {
      float acc = 0;
      for (int64_t o = 0; o < out_f; ++o) acc += F(dy[t * out_f + o]) * F(w[o * in_f + i]);
      e[&dx[t * in_f + i]] = acc;
    }
}

// dW[o][i] = sum_t dY[t][o] X[t][i]
inline void Wgrad(Expect& e, const H* dy, const H* xin, H* dw, int64_t rows, int64_t in_f,
                  int64_t out_f) {
  for (int64_t o = 0; o < out_f; ++o)
    for (int64_t i = 0; i < in_f; ++i) {
      float acc = 0;
      for (int64_t t = 0; t < rows; ++t) acc += F(dy[t * out_f + o]) * F(xin[t * in_f + i]);
      e[&dw[o * in_f + i]] = acc;
    }
}

// The inner dimension of cuBLASLt's op(A).
inline int64_t InnerDim(const g::LtCall& c) { return c.a.op == CUBLAS_OP_N ? c.a.cols : c.a.rows; }

// Whether the column-major call's operand shapes agree and no leading
// dimension is smaller than its matrix.
inline bool LtShapesAgree(const g::LtCall& c) {
  const int64_t m_cu = c.d.rows, n_cu = c.d.cols;
  const int64_t k_cu = InnerDim(c);
  const int64_t k_b = c.b.op == CUBLAS_OP_N ? c.b.rows : c.b.cols;
  const int64_t m_a = c.a.op == CUBLAS_OP_N ? c.a.rows : c.a.cols;
  const int64_t n_b = c.b.op == CUBLAS_OP_N ? c.b.cols : c.b.rows;
  return k_cu == k_b && m_a == m_cu && n_b == n_cu && c.a.ld >= c.a.rows && c.b.ld >= c.b.rows &&
         c.d.ld >= c.d.rows;
}

// Emulates cuBLASLt on host memory: column-major
// D[m_cu, n_cu] = alpha op(A) op(B) (+ bias[row]) per batch, into `got`
// (nothing is written); false if two outputs overlap.
inline bool EmulateLt(const g::GemmSpec& sp, const g::LtCall& c, Expect* got) {
  const int64_t m_cu = c.d.rows, n_cu = c.d.cols, k_cu = InnerDim(c);
  const H* A = static_cast<const H*>(c.a.ptr);
  const H* Bm = static_cast<const H*>(c.b.ptr);
  const H* D = static_cast<const H*>(c.d.ptr);
  bool ok = true;
  for (int64_t z = 0; z < sp.batch; ++z)
    for (int64_t i = 0; i < m_cu; ++i)
      for (int64_t j = 0; j < n_cu; ++j) {
        float acc = 0;
        for (int64_t l = 0; l < k_cu; ++l) {
          const H ea = c.a.op == CUBLAS_OP_N ? A[z * c.a.stride + i + l * c.a.ld]
                                             : A[z * c.a.stride + l + i * c.a.ld];
          const H eb = c.b.op == CUBLAS_OP_N ? Bm[z * c.b.stride + l + j * c.b.ld]
                                             : Bm[z * c.b.stride + j + l * c.b.ld];
          acc += F(ea) * F(eb);
        }
        acc *= sp.alpha;
        if (sp.bias) acc += F(static_cast<const H*>(sp.bias)[i]);
        const H* addr = &D[z * c.d.stride + i + j * c.d.ld];
        if (got->count(addr)) ok = false;  // overlapping outputs
        (*got)[addr] = acc;
      }
  return ok;
}

// Compares the emulated outputs with the reference: false if they cover
// different elements or one is off by more than 1e-3; *max_err is the
// largest difference seen.
inline bool MatchesReference(const Expect& got, const Expect& expect, double* max_err) {
  bool ok = got.size() == expect.size();
  *max_err = 0;
  for (auto& [addr, val] : expect) {
    auto it = got.find(addr);
    if (it == got.end()) {
      ok = false;
      break;
    }
    *max_err = std::max(*max_err, (double)std::fabs(it->second - val));
  }
  return ok && *max_err <= 1e-3;
}

// Checks one GEMM spec's column-major mapping against its direct reference
// and prints its line; writes its outputs, which later GEMMs read.
inline bool CheckGemm(const g::GemmSpec& sp, const Expect& expect) {
  const g::LtCall c = g::ToColumnMajor(sp);
  bool ok = LtShapesAgree(c);
  Expect got;
  if (!EmulateLt(sp, c, &got)) ok = false;
  // Write after computing (the real GEMM's outputs never alias its inputs here).
  for (auto& [addr, val] : got) *const_cast<H*>(addr) = __float2half(val);
  double max_err = 0;
  if (!MatchesReference(got, expect, &max_err)) ok = false;
  printf("%-28s m=%ld n=%ld k=%ld batch=%ld opA=%c opB=%c  elements=%zu max_err=%.2e %s\n", sp.name,
         sp.m, sp.n, sp.k, sp.batch, c.a.op == CUBLAS_OP_N ? 'N' : 'T',
         c.b.op == CUBLAS_OP_N ? 'N' : 'T', expect.size(), max_err, ok ? "OK" : "FAIL");
  return ok;
}

// --- fp8 ---------------------------------------------------------------------

inline float Fp8Value(uint8_t v, bool e5m2) {
  if (e5m2) {
    __nv_fp8_e5m2 x;
    x.__x = v;
    return static_cast<float>(x);
  }
  __nv_fp8_e4m3 x;
  x.__x = v;
  return static_cast<float>(x);
}

inline uint8_t ToFp8(float f, bool e5m2) {
  return e5m2 ? __nv_fp8_e5m2(f).__x : __nv_fp8_e4m3(f).__x;
}

// The fp8 copy of a [rows, cols] tensor and its transpose, as
// fp8_cast_transpose_kernel writes them (scale 1), and its dequantised
// values in fp16 (exact: every E4M3 and E5M2 value is an fp16 value).
inline std::vector<H> CastTranspose(const H* src, int64_t rows, int64_t cols, bool e5m2,
                                    uint8_t* out, uint8_t* out_t) {
  std::vector<H> dequantised(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t q = ToFp8(F(src[r * cols + c]), e5m2);
      out[r * cols + c] = q;
      out_t[c * rows + r] = q;
      dequantised[r * cols + c] = __float2half(Fp8Value(q, e5m2));
    }
  }
  return dequantised;
}

// EmulateLt for fp8 operands (no batches): cuBLASLt's A is our B (E4M3),
// its B our A; false unless in the TN form fp8 GEMMs need.
inline bool EmulateFp8(const g::GemmSpec& sp, const g::LtCall& c, bool a_e5m2, Expect* got) {
  const int64_t m_cu = c.d.rows, n_cu = c.d.cols, k_cu = InnerDim(c);
  const uint8_t* A = static_cast<const uint8_t*>(c.a.ptr);
  const uint8_t* B = static_cast<const uint8_t*>(c.b.ptr);
  const H* D = static_cast<const H*>(c.d.ptr);
  bool ok = c.a.op == CUBLAS_OP_T && c.b.op == CUBLAS_OP_N;  // the TN form
  for (int64_t i = 0; i < m_cu; ++i) {
    for (int64_t j = 0; j < n_cu; ++j) {
      float acc = 0;
      for (int64_t l = 0; l < k_cu; ++l) {
        acc += Fp8Value(A[l + i * c.a.ld], false) * Fp8Value(B[l + j * c.b.ld], a_e5m2);
      }
      if (sp.bias) acc += F(static_cast<const H*>(sp.bias)[i]);
      const H* addr = &D[i + j * c.d.ld];
      if (got->count(addr)) ok = false;
      (*got)[addr] = acc;
    }
  }
  return ok;
}

// Checks one fp8 GEMM spec: the TN form with k-contiguous operands and
// leading dimensions multiples of 16, and the emulated result against the
// reference over dequantised values. Prints its line.
inline bool CheckFp8Gemm(const g::GemmSpec& sp, bool a_e5m2, const Expect& expect) {
  const g::LtCall c = g::ToColumnMajor(sp);
  Expect got;
  bool ok = LtShapesAgree(c) && EmulateFp8(sp, c, a_e5m2, &got);
  ok = ok && c.a.ld % 16 == 0 && c.b.ld % 16 == 0 && c.a.ld == sp.k && c.b.ld == sp.k;
  double max_err = 0;
  ok = MatchesReference(got, expect, &max_err) && ok;
  printf("%-28s fp8 m=%ld n=%ld k=%ld  elements=%zu max_err=%.2e %s\n", sp.name, sp.m, sp.n, sp.k,
         got.size(), max_err, ok ? "OK" : "FAIL");
  return ok;
}

#endif  // VTRAIN_TESTS_GPU_LT_EMULATOR_H_
