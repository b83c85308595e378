// Fuzzes bandwidth text ("150GB/s", "800Gb/s"): accepted values are positive
// and finite.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "core/spec/job.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<double> bytes_per_s = vtrain::ParseBandwidth(text, "fuzz");
  if (!bytes_per_s.ok()) return 0;
  VTRAIN_FUZZ_CHECK(std::isfinite(*bytes_per_s) && *bytes_per_s > 0, std::to_string(*bytes_per_s));
  return 0;
}
