// Fuzzes Megatron-LM launch scripts and argument lists: text -> the static
// shell reader -> Megatron argument mapping -> request -> job -> a bounded
// prediction. Nothing is ever run: the reader has no way to.
#include <cstddef>
#include <cstdint>
#include <string>

#include "proto/megatron_args.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_predict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<vtrain::proto::MegatronJob> job =
      vtrain::proto::RequestFromMegatronArgs(text, "fuzz.sh");
  if (!job.ok()) {
    VTRAIN_FUZZ_CHECK(job.status().code() == absl::StatusCode::kInvalidArgument,
                      job.status().ToString());
    return 0;
  }
  vtrain::fuzz::PredictLaunch(*job);
  return 0;
}
