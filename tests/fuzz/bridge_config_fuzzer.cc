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
  vtrain::v1::PredictRequest request = job->request;
  for (const auto& m : job->missing) {
    if (m.flag == "vocab") request.mutable_model()->set_vocab_size(32000);
    if (m.flag == "seq-len") request.mutable_model()->set_seq_len(1024);
    if (m.flag == "global-batch") request.mutable_plan()->set_global_batch(64);
  }
  if (!request.cluster().has_num_gpus()) request.mutable_cluster()->set_num_gpus(8);
  vtrain::fuzz::ConvertAndPredict(request);
  return 0;
}
