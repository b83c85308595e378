#include "core/spec/gpu.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/util/enum_names.h"

namespace vtrain {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

constexpr EnumName<DType> kDTypes[] = {
    {DType::kFp16, "fp16"}, {DType::kBf16, "bf16"}, {DType::kFp8, "fp8"}};
constexpr EnumName<Fp8Recipe> kFp8Recipes[] = {{Fp8Recipe::kDelayed, "delayed"},
                                               {Fp8Recipe::kCurrent, "current"},
                                               {Fp8Recipe::kBlockwise, "blockwise"},
                                               {Fp8Recipe::kMxfp8, "mxfp8"}};

// The built-in GPU models: one data file each (data/gpus/NAME.json, with the
// datasheet each figure comes from in its "source"), made into designated
// initializers by cmake/gpu_table.cmake. Default intra-node bandwidth is the
// achievable per-GPU one-direction rate the vTrain paper assumes for A100 (150
// GB/s, a quarter of aggregate NVLink, half of one direction), with the same
// ratio for the other generations (225 GB/s for NVLink 4's 900, 450 GB/s for
// NVLink 5's 1,800), so that the intra-node efficiency calibrated on A100
// nccl-tests carries over.
const GpuSpec kGpus[] = {
#include "core/spec/gpu_table.inc"
};

// One figure of CheckGpuDatasheet: `value` in [lo, hi], or 0 where optional.
void CheckFigure(double value, double lo, double hi, bool optional, absl::string_view field,
                 std::vector<std::string>& problems) {
  if (optional && value == 0) return;
  if (std::isfinite(value) && value >= lo && value <= hi) return;
  problems.push_back(value == 0
                         ? absl::StrCat(field, " is missing")
                         : absl::StrCat(field, "=", value, " must be in [", lo, ", ", hi, "]"));
}

}  // namespace

absl::Status CheckGpuDatasheet(const GpuSpec& gpu, absl::string_view where) {
  std::vector<std::string> problems;
  if (gpu.name.empty()) problems.push_back(absl::StrCat(where, ".name is missing"));
  // Ranges: a V100's 125 TFLOPS is 1.25e14; 1e17 leaves three orders of
  // magnitude. 1 GB/s and 1 GiB are below any training GPU.
  constexpr double kMaxFlops = 1e17;
  constexpr double kMaxBytesPerS = 1e15;
  const std::string w(where);
  if (gpu.peak_fp16_flops_per_s == 0 && gpu.peak_bf16_flops_per_s == 0) {
    problems.push_back(
        absl::StrCat(w, ".peak_bf16_flops_per_s (or peak_fp16_flops_per_s) is missing"));
  }
  CheckFigure(gpu.peak_fp16_flops_per_s, 1e12, kMaxFlops, true, w + ".peak_fp16_flops_per_s",
              problems);
  CheckFigure(gpu.peak_bf16_flops_per_s, 1e12, kMaxFlops, true, w + ".peak_bf16_flops_per_s",
              problems);
  CheckFigure(gpu.peak_fp8_flops_per_s, 1e12, kMaxFlops, true, w + ".peak_fp8_flops_per_s",
              problems);
  CheckFigure(gpu.hbm_bandwidth_bytes_per_s, 1e9, kMaxBytesPerS, false,
              w + ".hbm_bandwidth_bytes_per_s", problems);
  CheckFigure(static_cast<double>(gpu.memory_bytes), static_cast<double>(kGiB),
              static_cast<double>(kGiB) * 65536, false, w + ".memory_bytes", problems);
  CheckFigure(gpu.num_sms, 1, 100000, false, w + ".num_sms", problems);
  CheckFigure(gpu.default_intra_node_bandwidth_bytes_per_s, 1e8, kMaxBytesPerS, false,
              w + ".default_intra_node_bandwidth_bytes_per_s", problems);
  CheckFigure(gpu.default_inter_node_bandwidth_bytes_per_s, 1e8, kMaxBytesPerS, false,
              w + ".default_inter_node_bandwidth_bytes_per_s", problems);
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(absl::StrJoin(problems, "; "),
                   "; give the GPU's dense datasheet figures (FLOP/s, bytes, bytes/s)"));
}

absl::string_view DTypeName(DType dtype) { return NameIn(kDTypes, dtype); }

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  return ParseIn(kDTypes, name, "plan.dtype");
}

absl::string_view Fp8RecipeName(Fp8Recipe recipe) { return NameIn(kFp8Recipes, recipe); }

absl::StatusOr<Fp8Recipe> ParseFp8Recipe(absl::string_view name) {
  return ParseIn(kFp8Recipes, name, "plan.fp8_recipe");
}

absl::StatusOr<GpuSpec> GpuByName(absl::string_view name) {
  for (const GpuSpec& g : kGpus) {
    if (name == g.name) return g;
  }
  return absl::NotFoundError(absl::StrCat(
      "GPU model '", name, "' is unknown; use one of: ", absl::StrJoin(GpuNames(), ", ")));
}

std::vector<std::string> GpuNames() {
  std::vector<std::string> names;
  for (const GpuSpec& g : kGpus) names.push_back(g.name);
  return names;
}

std::vector<std::string> MxBlockScalingGpuNames() {
  std::vector<std::string> names;
  for (const GpuSpec& g : kGpus) {
    if (g.mx_block_scaling) names.push_back(g.name);
  }
  return names;
}

}  // namespace vtrain
