#include "service/profile_source.h"

#include "absl/strings/str_cat.h"
#include "core/profile/default_profiles.h"
#include "proto/profile_set_convert.h"

namespace vtrain::service {

ProfileSet BuiltinProfileSet(const GpuSpec& gpu) {
  ProfileSet set = DefaultProfileSet(gpu);
  // Named by content, as a server names the same set when it seeds it.
  set.id = proto::ContentId(proto::ProfileSetToProto(set));
  return set;
}

absl::StatusOr<std::shared_ptr<const ProfileSet>> BuiltinProfiles::TablesFor(
    const std::string& profile_set_id, const GpuSpec& gpu) const {
  if (!profile_set_id.empty()) {
    return absl::NotFoundError(absl::StrCat("profile_set_id='", profile_set_id,
                                            "': only a server holds named profile sets; "
                                            "ask one with --server, or leave the id out"));
  }
  auto find = [&]() -> std::shared_ptr<const ProfileSet> {
    for (const auto& [spec, set] : sets_) {
      if (spec == gpu) return set;
    }
    return nullptr;
  };
  {
    absl::MutexLock lock(&mu_);
    if (auto set = find()) return set;
  }
  auto set = std::make_shared<const ProfileSet>(BuiltinProfileSet(gpu));
  absl::MutexLock lock(&mu_);
  if (auto made = find()) return made;  // another thread made it meanwhile
  sets_.emplace_back(gpu, set);
  return set;
}

}  // namespace vtrain::service
