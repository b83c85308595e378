// Fuzzes a job file / Predict request: JSON -> vtrain.v1.PredictRequest ->
// job and options -> a bounded prediction on the built-in profile set.
#include <cstddef>
#include <cstdint>
#include <string>

#include "proto/json.h"
#include "tests/fuzz/fuzz_predict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  vtrain::v1::PredictRequest request;
  if (!vtrain::proto::FromJson(json, &request).ok()) return 0;
  vtrain::fuzz::ConvertAndPredict(request);
  return 0;
}
