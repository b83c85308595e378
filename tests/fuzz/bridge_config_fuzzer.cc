// Fuzzes Megatron-Bridge ConfigContainer YAML dumps: text -> the bounded
// YAML reader -> field translation -> Megatron argument mapping -> request ->
// job -> a bounded prediction. Aliases are shared, never expanded, and a
// tag names no type, so no input constructs anything or grows without bound.
#include <cstddef>
#include <cstdint>
#include <string>

#include "proto/megatron_bridge.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_predict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<vtrain::proto::MegatronJob> job =
      vtrain::proto::RequestFromBridgeConfig(text, "fuzz.yaml");
  if (!job.ok()) {
    VTRAIN_FUZZ_CHECK(job.status().code() == absl::StatusCode::kInvalidArgument,
                      job.status().ToString());
    return 0;
  }
  vtrain::fuzz::PredictLaunch(*job);
  return 0;
}
