// Fuzzes a pushed profile set: JSON -> vtrain.v1.ProfileSet -> validation ->
// the probe predictions the registry runs on a valid set.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/predict/sanity.h"
#include "proto/json.h"
#include "proto/profile_set_convert.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  vtrain::v1::ProfileSet message;
  if (!vtrain::proto::FromJson(json, &message).ok()) return 0;
  vtrain::proto::ContentId(message);
  absl::StatusOr<vtrain::ProfileSet> set = vtrain::proto::ProfileSetFromProto(message);
  if (!set.ok()) return 0;
  // A valid set prints to a message that validates again.
  absl::StatusOr<vtrain::ProfileSet> again =
      vtrain::proto::ProfileSetFromProto(vtrain::proto::ProfileSetToProto(*set));
  VTRAIN_FUZZ_CHECK(again.ok(), again.status().ToString());
  vtrain::CheckPredictionsArePhysical(*set).IgnoreError();
  return 0;
}
