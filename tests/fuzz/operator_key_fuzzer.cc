// Fuzzes the operator-key text form (profile tables, work queues): an
// accepted key prints to text that parses back to the same key.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "core/profile/profile.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<vtrain::OperatorKey> key = vtrain::ParseOperatorKey(text);
  if (!key.ok()) return 0;
  const std::string printed = key->ToString();
  absl::StatusOr<vtrain::OperatorKey> again = vtrain::ParseOperatorKey(printed);
  VTRAIN_FUZZ_CHECK(again.ok(), again.status().ToString());
  VTRAIN_FUZZ_CHECK(*again == *key, printed);
  return 0;
}
