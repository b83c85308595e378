// Where the service layer finds the profile tables a request is answered
// with: a server's registry, or the built-in tables of each GPU (vtrainctl
// --local). Service functions (service/service.h) take a ProfileSource.
#ifndef VTRAIN_SERVICE_PROFILE_SOURCE_H_
#define VTRAIN_SERVICE_PROFILE_SOURCE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "core/profile/lookup.h"
#include "core/profile/profile.h"
#include "core/spec/gpu.h"

namespace vtrain::service {

// Implementations are thread-safe: calls may come from many threads at once.
class ProfileSource {
 public:
  virtual ~ProfileSource() = default;

  // The set named `profile_set_id`, or with an empty id the set requests for
  // `gpu` get by default. NOT_FOUND naming the id when there is none.
  virtual absl::StatusOr<std::shared_ptr<const ProfileSet>> TablesFor(
      const std::string& profile_set_id, const GpuSpec& gpu) const = 0;

  // The figures of the GPU named `name` (cluster.gpu): this build's datasheet
  // (GpuByName), or, on a server, the one a pushed profile set carries for a
  // GPU the build has none for. NOT_FOUND listing the known GPUs otherwise.
  virtual absl::StatusOr<GpuSpec> GpuFor(absl::string_view name) const { return GpuByName(name); }

  // A lookup memo (core/profile/lookup.h) shared by every call over `tables`,
  // or nullptr (each call resolves its own; the answer is the same).
  virtual std::shared_ptr<LookupMemo> MemoFor(
      const std::shared_ptr<const ProfileSet>& /*tables*/) const {
    return nullptr;
  }
};

// The built-in tables of a GPU (core/profile/default_profiles.h), named by
// their content hash as a server names the same set when it seeds it. Each
// GPU's set is made once and kept.
class BuiltinProfiles final : public ProfileSource {
 public:
  // NOT_FOUND for a non-empty id: only a server holds named sets.
  absl::StatusOr<std::shared_ptr<const ProfileSet>> TablesFor(const std::string& profile_set_id,
                                                              const GpuSpec& gpu) const override;

 private:
  mutable absl::Mutex mu_;
  // By the whole datasheet, not only the name: a job may describe a GPU of
  // its own under a known name. A handful of GPUs: a list is enough.
  mutable std::vector<std::pair<GpuSpec, std::shared_ptr<const ProfileSet>>> sets_
      ABSL_GUARDED_BY(mu_);
};

// The built-in profile set of `gpu`, its id set to its content hash.
ProfileSet BuiltinProfileSet(const GpuSpec& gpu);

}  // namespace vtrain::service

#endif  // VTRAIN_SERVICE_PROFILE_SOURCE_H_
