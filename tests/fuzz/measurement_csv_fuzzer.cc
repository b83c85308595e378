// Fuzzes the reader of measured iteration-time CSVs (vtrainctl validate and
// calibrate).
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "client/measurements.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<vtrain::Measurement>> rows =
      vtrain::client::ParseAnyMeasurementCsv(text, "fuzz", vtrain::client::MegatronA100Setup());
  if (!rows.ok()) return 0;
  for (const vtrain::Measurement& m : *rows) {
    VTRAIN_FUZZ_CHECK(std::isfinite(m.measured_ms) && m.measured_ms > 0, m.source);
    VTRAIN_FUZZ_CHECK(vtrain::ValidateJob(m.job).ok(), m.source);
  }
  return 0;
}
