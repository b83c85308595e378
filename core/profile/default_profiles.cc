#include "core/profile/default_profiles.h"

#include "absl/strings/str_cat.h"

namespace vtrain {

AnalyticalParams DefaultAnalyticalParams() { return AnalyticalParams{}; }

ProfileSet DefaultProfileSet(const GpuSpec& gpu) {
  ProfileSet set;
  set.name = absl::StrCat("builtin-", gpu.name);
  set.gpu = gpu.name;
  set.provenance = absl::StrCat(
      "built-in analytical profile for ", gpu.name,
      ": roofline model on datasheet figures with default parameters; no measurements");
  set.params = DefaultAnalyticalParams();
  return set;
}

}  // namespace vtrain
