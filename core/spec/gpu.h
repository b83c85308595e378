// GPU models with their datasheet figures, the inputs of the analytical model.
#ifndef VTRAIN_CORE_SPEC_GPU_H_
#define VTRAIN_CORE_SPEC_GPU_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vtrain {

// kFp8: Transformer Engine's fp8 training: the linear layers' GEMMs in fp8
// (E4M3 forward, E5M2 gradients) at the fp8 tensor peak, with casts and
// amax/scale kernels around them; attention, norms and everything else in bf16.
enum class DType { kFp16, kBf16, kFp8 };

// "fp16" / "bf16" / "fp8".
absl::string_view DTypeName(DType dtype);
absl::StatusOr<DType> ParseDType(absl::string_view name);

// How Transformer Engine scales fp8 tensors (plan.fp8_recipe; fp8 only).
// kDelayed: per-tensor scales from an amax history (TE's DelayedScaling, a
// scale-update kernel per module). kCurrent: per-tensor scales from each
// tensor's own amax, one more pass over it before the cast
// (Float8CurrentScaling). kBlockwise: DeepSeek-V3's 1x128 activation and
// 128x128 weight blocks with fp32 scales (DeepSeek-V3 report §3.3;
// Float8BlockScaling). kMxfp8: OCP MX, 1x32 blocks with E8M0 scales applied
// by the tensor cores (Blackwell only; MXFP8BlockScaling).
enum class Fp8Recipe { kDelayed, kCurrent, kBlockwise, kMxfp8 };
absl::string_view Fp8RecipeName(Fp8Recipe recipe);  // "delayed", "current", ...
absl::StatusOr<Fp8Recipe> ParseFp8Recipe(absl::string_view name);

// Datasheet figures of one GPU model (dense, no sparsity). The built-in models
// are the files data/gpus/*.json (docs/extending.md#a-new-gpu); a profile set
// may carry the figures of another (profile_set.datasheet).
struct GpuSpec {
  std::string name;                  // e.g. "a100-sxm4-80gb"
  double peak_fp16_flops_per_s = 0;  // dense tensor-core FP16
  double peak_bf16_flops_per_s = 0;  // 0 when the GPU has no BF16 tensor cores
  double peak_fp8_flops_per_s = 0;   // dense tensor-core FP8; 0 when the GPU has none
  double hbm_bandwidth_bytes_per_s = 0;
  int64_t memory_bytes = 0;
  int num_sms = 0;
  // Defaults for a cluster of this GPU when the user gives none.
  double default_intra_node_bandwidth_bytes_per_s = 0;  // per GPU, one direction
  double default_inter_node_bandwidth_bytes_per_s = 0;  // per node, all NICs
  // Whether the tensor cores apply OCP MX block scales (Blackwell), which
  // plan.fp8_recipe=mxfp8 needs.
  bool mx_block_scaling = false;
  // The built-in calibration the GPU's default profile set uses, by name
  // (core/profile/default_profiles.h, BuiltinCalibrations); empty: none of its
  // own, the A100 fit carried over with widened bands. A pushed datasheet has
  // none.
  std::string calibration;

  // Peak tensor throughput for `dtype`; 0 when unsupported. For kFp8 the fp8
  // peak, which only fp8 training's linear-layer GEMMs reach.
  double PeakFlops(DType dtype) const {
    switch (dtype) {
      case DType::kFp16:
        return peak_fp16_flops_per_s;
      case DType::kBf16:
        return peak_bf16_flops_per_s;
      case DType::kFp8:
        return peak_fp8_flops_per_s;
    }
    return 0;
  }
  friend bool operator==(const GpuSpec&, const GpuSpec&) = default;
};

// Checks the figures of a GPU this build has no datasheet for, as a profile set
// carries them (profile_set.datasheet): a name, a dense fp16 or bf16 peak, HBM
// bandwidth, memory, SMs and both default bandwidths given, every figure finite
// and inside a physical range (a peak up to 1e17 FLOP/s, memory up to 64 TiB).
// INVALID_ARGUMENT listing every missing or out-of-range figure, each named
// "<where>.<field>".
absl::Status CheckGpuDatasheet(const GpuSpec& gpu, absl::string_view where);

// Whether the GPU's tensor cores apply MX block scales (its mx_block_scaling).
inline bool SupportsMxfp8(const GpuSpec& gpu) { return gpu.mx_block_scaling; }

// Returns the GPU model with this name, or NOT_FOUND listing the known names.
absl::StatusOr<GpuSpec> GpuByName(absl::string_view name);
// The built-in GPU models' names, in their data files' "order".
std::vector<std::string> GpuNames();
// The built-in GPU models whose tensor cores apply MX block scales.
std::vector<std::string> MxBlockScalingGpuNames();

}  // namespace vtrain

#endif  // VTRAIN_CORE_SPEC_GPU_H_
