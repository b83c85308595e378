#include "core/graph/iteration.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/util/enum_names.h"

namespace vtrain {

namespace {
constexpr EnumName<Granularity> kGranularities[] = {{Granularity::kKernel, "kernel"},
                                                    {Granularity::kOperator, "operator"}};
}  // namespace

absl::string_view GranularityName(Granularity g) { return NameIn(kGranularities, g); }

absl::StatusOr<Granularity> ParseGranularity(absl::string_view name) {
  return ParseIn(kGranularities, name, "granularity");
}

}  // namespace vtrain
