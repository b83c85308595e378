#include "core/spec/gpu.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace vtrain {
namespace {

constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;
constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiga64 = 1'000'000'000;

// Datasheet figures (dense tensor throughput, no sparsity):
//  V100 SXM2: NVIDIA V100 datasheet (2020): 125 TFLOPS tensor, 900 GB/s HBM2,
//    no BF16 or FP8; NVLink 2 300 GB/s aggregate.
//  A100 SXM4: NVIDIA A100 datasheet (2021): 312 TFLOPS FP16/BF16, no FP8;
//    HBM2 1,555 GB/s (40GB) and HBM2e 2,039 GB/s (80GB); NVLink 3 600 GB/s
//    aggregate.
//  H100 SXM5: NVIDIA H100 Tensor Core GPU datasheet (2023,
//    https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet):
//    989.4 TFLOPS FP16/BF16 and 1,978.9 TFLOPS FP8 dense (the datasheet's
//    1,979 and 3,958 are with sparsity); HBM3 80 GB at 3.35 TB/s; 132 SMs;
//    NVLink 4 900 GB/s per GPU, both directions together (450 GB/s each way).
//  H200 SXM: NVIDIA H200 Tensor Core GPU datasheet (2024,
//    https://www.nvidia.com/en-us/data-center/h200/): the H100's compute
//    (989 TFLOPS BF16 and 1,979 TFLOPS FP8 dense) with 141 GB of HBM3e
//    (nvidia-smi: 143,771 MiB) at 4.8 TB/s; NVLink 4 900 GB/s.
//  B200 (HGX/DGX B200): DGX B200 datasheet (2024,
//    https://resources.nvidia.com/en-us-dgx-systems/dgx-b200-datasheet): 8
//    GPUs with 72 PFLOPS FP8 training and 1,440 GB HBM3e at 64 TB/s, NVLink 5
//    1.8 TB/s per GPU; per GPU, dense: 4.5 PFLOPS FP8 (9 with sparsity),
//    2.25 PFLOPS FP16/BF16, 180 GB at 8 TB/s; 148 SMs.
// Default intra-node bandwidth is the achievable per-GPU one-direction rate the
// vTrain paper assumes for A100 (150 GB/s, a quarter of aggregate NVLink, half
// of one direction), with the same ratio for the other generations (225 GB/s
// for NVLink 4's 900, 450 GB/s for NVLink 5's 1,800), so that the intra-node
// efficiency calibrated on A100 nccl-tests carries over. Default inter-node
// bandwidth per node: 800 Gb/s for A100 (the measured cluster,
// docs/architecture.md#measured-a100-runs), 8x400 Gb/s NDR ConnectX-7 for
// H100/H200/B200 (DGX H100/H200/B200), 100 Gb/s for V100 (EFA on p3dn).
GpuSpec Gpu(const char* name, double fp16, double bf16, double fp8, double hbm, int64_t memory,
            int sms, double intra, double inter) {
  GpuSpec g;
  g.name = name;
  g.peak_fp16_flops_per_s = fp16;
  g.peak_bf16_flops_per_s = bf16;
  g.peak_fp8_flops_per_s = fp8;
  g.hbm_bandwidth_bytes_per_s = hbm;
  g.memory_bytes = memory;
  g.num_sms = sms;
  g.default_intra_node_bandwidth_bytes_per_s = intra;
  g.default_inter_node_bandwidth_bytes_per_s = inter;
  return g;
}

const GpuSpec kGpus[] = {
    Gpu("v100-sxm2-32gb", 125 * kTera, 0, 0, 900 * kGiga, 32 * kGiB, 80, 75 * kGiga,
        100 * kGiga / 8),
    Gpu("a100-sxm4-40gb", 312 * kTera, 312 * kTera, 0, 1555 * kGiga, 40 * kGiB, 108, 150 * kGiga,
        800 * kGiga / 8),
    Gpu("a100-sxm4-80gb", 312 * kTera, 312 * kTera, 0, 2039 * kGiga, 80 * kGiB, 108, 150 * kGiga,
        800 * kGiga / 8),
    Gpu("h100-sxm5-80gb", 989.4 * kTera, 989.4 * kTera, 1978.9 * kTera, 3350 * kGiga, 80 * kGiB,
        132, 225 * kGiga, 3200 * kGiga / 8),
    Gpu("h200-sxm-141gb", 989.4 * kTera, 989.4 * kTera, 1978.9 * kTera, 4800 * kGiga, 143771 * kMiB,
        132, 225 * kGiga, 3200 * kGiga / 8),
    Gpu("b200-sxm-180gb", 2250 * kTera, 2250 * kTera, 4500 * kTera, 8000 * kGiga, 180 * kGiga64,
        148, 450 * kGiga, 3200 * kGiga / 8),
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

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFp16:
      return "fp16";
    case DType::kBf16:
      return "bf16";
    case DType::kFp8:
      return "fp8";
  }
  return "unknown";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  if (name == "fp16") return DType::kFp16;
  if (name == "bf16") return DType::kBf16;
  if (name == "fp8") return DType::kFp8;
  return absl::InvalidArgumentError(
      absl::StrCat("plan.dtype='", name, "' is unknown; use fp16, bf16 or fp8"));
}

absl::string_view Fp8RecipeName(Fp8Recipe recipe) {
  switch (recipe) {
    case Fp8Recipe::kCurrent:
      return "current";
    case Fp8Recipe::kBlockwise:
      return "blockwise";
    case Fp8Recipe::kMxfp8:
      return "mxfp8";
    case Fp8Recipe::kDelayed:
      break;
  }
  return "delayed";
}

absl::StatusOr<Fp8Recipe> ParseFp8Recipe(absl::string_view name) {
  for (Fp8Recipe r :
       {Fp8Recipe::kDelayed, Fp8Recipe::kCurrent, Fp8Recipe::kBlockwise, Fp8Recipe::kMxfp8}) {
    if (name == Fp8RecipeName(r)) return r;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "plan.fp8_recipe='", name, "' is unknown; use delayed, current, blockwise or mxfp8"));
}

// Blackwell's 5th-generation tensor cores scale MX blocks in hardware
// (NVIDIA Blackwell architecture technical brief); Hopper's do not.
bool SupportsMxfp8(const GpuSpec& gpu) { return absl::StartsWith(gpu.name, "b200"); }

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

}  // namespace vtrain
