#include "core/spec/gpu.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace vtrain {
namespace {

constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;
constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kMiB = int64_t{1} << 20;

// Datasheet figures (dense tensor throughput, no sparsity):
//  V100 SXM2: NVIDIA V100 datasheet (2020): 125 TFLOPS tensor, 900 GB/s HBM2,
//    no BF16; NVLink 2 300 GB/s aggregate.
//  A100 SXM4: NVIDIA A100 datasheet (2021): 312 TFLOPS FP16/BF16; HBM2 1,555 GB/s
//    (40GB) and HBM2e 2,039 GB/s (80GB); NVLink 3 600 GB/s aggregate.
//  H100 SXM5: NVIDIA H100 datasheet (2023): 989 TFLOPS FP16/BF16 dense
//    (1,979 with sparsity); HBM3 3.35 TB/s; NVLink 4 900 GB/s aggregate.
//  H200 SXM: NVIDIA H200 datasheet (2024): 989 TFLOPS dense; HBM3e 4.8 TB/s,
//    141 GB (nvidia-smi: 143,771 MiB).
// Default intra-node bandwidth is the achievable per-GPU one-direction rate the
// vTrain paper assumes for A100 (150 GB/s, a quarter of aggregate NVLink), with
// the same ratio for the other generations. Default inter-node bandwidth per
// node: 800 Gb/s for A100 (the measured cluster, DESIGN.md §4), 8x400 Gb/s NDR
// for H100/H200 (DGX H100), 100 Gb/s for V100 (EFA on p3dn).
const GpuSpec kGpus[] = {
    {"v100-sxm2-32gb", 125 * kTera, 0, 900 * kGiga, 32 * kGiB, 80, 75 * kGiga, 100 * kGiga / 8},
    {"a100-sxm4-40gb", 312 * kTera, 312 * kTera, 1555 * kGiga, 40 * kGiB, 108, 150 * kGiga,
     800 * kGiga / 8},
    {"a100-sxm4-80gb", 312 * kTera, 312 * kTera, 2039 * kGiga, 80 * kGiB, 108, 150 * kGiga,
     800 * kGiga / 8},
    {"h100-sxm5-80gb", 989.4 * kTera, 989.4 * kTera, 3350 * kGiga, 80 * kGiB, 132, 225 * kGiga,
     3200 * kGiga / 8},
    {"h200-sxm-141gb", 989.4 * kTera, 989.4 * kTera, 4800 * kGiga, 143771 * kMiB, 132, 225 * kGiga,
     3200 * kGiga / 8},
};

}  // namespace

absl::string_view DTypeName(DType dtype) { return dtype == DType::kFp16 ? "fp16" : "bf16"; }

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  if (name == "fp16") return DType::kFp16;
  if (name == "bf16") return DType::kBf16;
  return absl::InvalidArgumentError(
      absl::StrCat("plan.dtype='", name, "' is unknown; use fp16 or bf16"));
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

}  // namespace vtrain
