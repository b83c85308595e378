// GPU models with their datasheet figures, the inputs of the analytical model.
#ifndef VTRAIN_CORE_SPEC_GPU_H_
#define VTRAIN_CORE_SPEC_GPU_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vtrain {

enum class DType { kFp16, kBf16 };

// "fp16" / "bf16".
absl::string_view DTypeName(DType dtype);
absl::StatusOr<DType> ParseDType(absl::string_view name);

// Datasheet figures of one GPU model (dense, no sparsity).
struct GpuSpec {
  std::string name;                  // e.g. "a100-sxm4-80gb"
  double peak_fp16_flops_per_s = 0;  // dense tensor-core FP16
  double peak_bf16_flops_per_s = 0;  // 0 when the GPU has no BF16 tensor cores
  double hbm_bandwidth_bytes_per_s = 0;
  int64_t memory_bytes = 0;
  int num_sms = 0;
  // Defaults for a cluster of this GPU when the user gives none.
  double default_intra_node_bandwidth_bytes_per_s = 0;  // per GPU, one direction
  double default_inter_node_bandwidth_bytes_per_s = 0;  // per node, all NICs

  // Peak tensor throughput for `dtype`; 0 when unsupported.
  double PeakFlops(DType dtype) const {
    return dtype == DType::kFp16 ? peak_fp16_flops_per_s : peak_bf16_flops_per_s;
  }
};

// Returns the GPU model with this name, or NOT_FOUND listing the known names.
absl::StatusOr<GpuSpec> GpuByName(absl::string_view name);
std::vector<std::string> GpuNames();

}  // namespace vtrain

#endif  // VTRAIN_CORE_SPEC_GPU_H_
