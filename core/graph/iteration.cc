#include "core/graph/iteration.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace vtrain {

absl::string_view GranularityName(Granularity g) {
  return g == Granularity::kKernel ? "kernel" : "operator";
}

absl::StatusOr<Granularity> ParseGranularity(absl::string_view name) {
  if (name == "kernel") return Granularity::kKernel;
  if (name == "operator") return Granularity::kOperator;
  return absl::InvalidArgumentError(
      absl::StrCat("granularity='", name, "' is unknown; use kernel or operator"));
}

}  // namespace vtrain
