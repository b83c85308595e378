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
  return std::string();
}

}  // namespace vtrain::gpu
