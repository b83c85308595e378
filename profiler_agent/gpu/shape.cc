// ValidateShape (declared in workloads.h) lives apart from the CUDA
// workloads so the plain C++ parts and their tests can use it.
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "profiler_agent/gpu/workloads.h"

namespace vtrain::gpu {
namespace {

// Kernel grids and cuBLASLt dimensions are 32-bit.
constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();

std::string Positive(const char* field, int64_t value) {
  if (value <= 0) return std::string(field) + "=" + std::to_string(value) + " must be positive";
  if (value > kMaxDim) {
    return std::string(field) + "=" + std::to_string(value) + " exceeds " + std::to_string(kMaxDim);
  }
  return std::string();
}

std::string Str(int64_t v) { return std::to_string(v); }

// Llama's grouped-query heads and the flash kernels' head-dim bound.
std::string ValidateLlama(const LayerShape& shape) {
  const int64_t t = shape.tensor_parallel;
  const int64_t kv = shape.kv_heads > 0 ? shape.kv_heads : shape.heads;
  if (shape.kv_heads < 0 || shape.kv_heads > kMaxDim) {
    return "kv_heads=" + Str(shape.kv_heads) + " must be >= 0 (0 means heads)";
  }
  if (shape.heads % kv != 0) {
    return "kv_heads=" + Str(kv) + " does not divide heads=" + Str(shape.heads) +
           "; choose kv_heads dividing heads";
  }
  if (kv % t != 0) {
    return "kv_heads=" + Str(kv) + " is not divisible by tensor_parallel=" + Str(t) +
           "; choose t dividing kv_heads";
  }
  const int64_t d = shape.hidden / shape.heads;
  if (d > 256 || d % 2 != 0) {
    return "hidden/heads=" + Str(d) +
           " is not an even head dim of at most 256 (the flash-style attention kernels' bound); "
           "choose more heads";
  }
  return std::string();
}

// cuBLASLt's fp8 GEMMs need dimensions and leading dimensions that are
// multiples of 16: every linear layer's input and output features and the
// token count.
std::string ValidateFp8(const LayerShape& shape) {
  const int64_t t = shape.tensor_parallel;
  const int64_t d = shape.hidden / shape.heads;
  const int64_t kv = shape.llama && shape.kv_heads > 0 ? shape.kv_heads : shape.heads;
  const int64_t ffn = shape.ffn > 0 ? shape.ffn : 4 * shape.hidden;
  const std::pair<const char*, int64_t> dims[] = {
      {"hidden", shape.hidden},
      {"seq*micro_batch", shape.seq * shape.micro_batch},
      {"ffn/tensor_parallel", ffn / t},
      {"heads/tensor_parallel*head_dim", shape.heads / t * d},
      {"kv_heads/tensor_parallel*head_dim", kv / t * d}};
  for (const auto& [field, value] : dims) {
    if (value % 16 != 0) {
      return std::string(field) + "=" + Str(value) +
             " is not a multiple of 16, which cuBLASLt's fp8 GEMMs need; adjust the shape";
    }
  }
  return std::string();
}

// The MoE block (experts > 0): what the workload covers (moe_plan.h) and a
// balanced split of the token copies over the local experts.
std::string ValidateMoe(const LayerShape& shape) {
  if (shape.experts < 0 || shape.experts > kMaxMoeExperts) {
    return "experts=" + Str(shape.experts) + " must be in [0, " + Str(kMaxMoeExperts) +
           "] (0: a dense layer)";
  }
  if (shape.experts == 0) {
    if (shape.moe_top_k != 0 || shape.expert_parallel != 1) {
      return "moe_top_k and expert_parallel need experts > 0 (--experts)";
    }
    return std::string();
  }
  if (!shape.llama) return "experts needs a Llama-style layer (--arch llama)";
  if (shape.fp8) return "the MoE workload runs in 16 bits; profile it with --dtype bf16";
  if (shape.tensor_parallel != 1) {
    return "tensor_parallel=" + Str(shape.tensor_parallel) +
           " with experts: the MoE workload covers t = 1 (expert tensor parallel 1); use --tp 1";
  }
  if (shape.moe_top_k < 1 || shape.moe_top_k > kMaxMoeTopK || shape.moe_top_k > shape.experts) {
    return "moe_top_k=" + Str(shape.moe_top_k) + " must be in [1, min(experts, " +
           Str(kMaxMoeTopK) + ")] (--moe-top-k)";
  }
  if (shape.expert_parallel < 1 || shape.experts % shape.expert_parallel != 0) {
    return "expert_parallel=" + Str(shape.expert_parallel) +
           " must divide experts=" + Str(shape.experts) + " (--ep)";
  }
  const int64_t local = shape.experts / shape.expert_parallel;
  const int64_t copies = shape.micro_batch * shape.seq * shape.moe_top_k;
  if (copies % local != 0) {
    return "micro_batch*seq*moe_top_k=" + Str(copies) + " token copies do not split evenly over " +
           Str(local) + " local experts (experts/expert_parallel); adjust seq or --ep";
  }
  return std::string();
}

}  // namespace

std::string ValidateShape(const LayerShape& shape) {
  const std::pair<const char*, int64_t> positive[] = {{"hidden", shape.hidden},
                                                      {"heads", shape.heads},
                                                      {"seq", shape.seq},
                                                      {"micro_batch", shape.micro_batch},
                                                      {"tensor_parallel", shape.tensor_parallel},
                                                      {"vocab", shape.vocab}};
  for (const auto& [field, value] : positive) {
    if (std::string e = Positive(field, value); !e.empty()) return e;
  }
  if (shape.ffn < 0 || shape.ffn > kMaxDim) {
    return "ffn=" + std::to_string(shape.ffn) + " must be in [0, " + std::to_string(kMaxDim) +
           "] (0 means 4 x hidden)";
  }
  if (shape.adam_params < 0) {
    return "adam_params=" + std::to_string(shape.adam_params) + " must be >= 0 (0 skips it)";
  }
  const int64_t t = shape.tensor_parallel;
  if (shape.hidden % shape.heads != 0) {
    return "hidden=" + std::to_string(shape.hidden) +
           " is not divisible by heads=" + std::to_string(shape.heads) +
           "; choose heads dividing hidden";
  }
  if (shape.heads % t != 0) {
    return "heads=" + std::to_string(shape.heads) +
           " is not divisible by tensor_parallel=" + std::to_string(t) +
           "; choose t dividing heads";
  }
  const int64_t ffn = shape.ffn > 0 ? shape.ffn : 4 * shape.hidden;
  if (ffn % t != 0) {
    return (shape.ffn > 0 ? "ffn=" : "ffn=4*hidden=") + std::to_string(ffn) +
           " is not divisible by tensor_parallel=" + std::to_string(t) + "; choose t dividing ffn";
  }
  // One thread block per softmax row: the grid's x dimension caps the rows.
  const double rows = static_cast<double>(shape.micro_batch) *
                      static_cast<double>(shape.heads / t) * static_cast<double>(shape.seq);
  if (rows > static_cast<double>(kMaxDim)) {
    char count[32];
    std::snprintf(count, sizeof(count), "%.0f", rows);
    return std::string("micro_batch*heads/tensor_parallel*seq=") + count +
           " attention rows exceed " + std::to_string(kMaxDim) + "; lower micro_batch or seq";
  }
  if (shape.fp8 && !shape.bf16) {
    return "fp8 runs everything but its GEMMs in bf16: set bf16 with fp8";
  }
  if (shape.llama) {
    if (std::string e = ValidateLlama(shape); !e.empty()) return e;
  }
  if (std::string e = ValidateMoe(shape); !e.empty()) return e;
  if (shape.fp8) return ValidateFp8(shape);
  return std::string();
}

}  // namespace vtrain::gpu
