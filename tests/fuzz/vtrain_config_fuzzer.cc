// Fuzzes vTrain's own job configuration files: config JSON -> request ->
// job and options -> a bounded prediction on the built-in profile set.
#include <cstddef>
#include <cstdint>
#include <string>

#include "proto/vtrain_config.h"
#include "tests/fuzz/fuzz_predict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<vtrain::v1::PredictRequest> request = vtrain::proto::RequestFromVtrainConfig(json);
  if (!request.ok()) return 0;
  vtrain::fuzz::ConvertAndPredict(*request);
  return 0;
}
