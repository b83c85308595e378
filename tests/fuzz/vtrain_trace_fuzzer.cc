// Fuzzes the importer of vTrain CUPTI kernel traces; what it imports must
// pass the validation a pushed set goes through.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "profiler_agent/importers.h"
#include "proto/profile_set_convert.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  vtrain::agent::TraceShape shape;
  shape.hidden = 1024;
  shape.heads = 16;
  shape.seq = 1024;
  shape.micro_batch = 1;
  shape.tensor_parallel = 1;
  absl::StatusOr<vtrain::ProfileSet> set =
      vtrain::agent::ImportVtrainTrace(text, "fuzz", "a100-sxm4-80gb", shape);
  if (!set.ok()) return 0;
  absl::StatusOr<vtrain::ProfileSet> valid =
      vtrain::proto::ProfileSetFromProto(vtrain::proto::ProfileSetToProto(*set));
  VTRAIN_FUZZ_CHECK(valid.ok(), valid.status().ToString());
  return 0;
}
