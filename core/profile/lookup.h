// Resolves operator and collective timings against a profile set, falling
// back from measured to interpolated to analytical, and records the fidelity
// of every lookup and every key that had no measurement.
#ifndef VTRAIN_CORE_PROFILE_LOOKUP_H_
#define VTRAIN_CORE_PROFILE_LOOKUP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "core/profile/analytical.h"
#include "core/profile/profile.h"
#include "core/spec/gpu.h"

namespace vtrain {

struct LookupRecord {
  std::string key;
  Fidelity fidelity = Fidelity::kAnalytical;
  // No measurement covers it: profiling this key would raise the fidelity.
  bool missing = true;
};

// Not thread-safe: one per prediction. Holds references to `set` and `gpu`,
// which must outlive it.
class ProfileLookup {
 public:
  ProfileLookup(const ProfileSet& set, const GpuSpec& gpu, LinkBandwidths links);

  // The kernels of `key` and their fidelity. Memoised; the reference stays
  // valid for the lifetime of this object.
  const OperatorProfile& Operator(const OperatorKey& key);

  struct CollectiveTime {
    int64_t latency_ns = 0;
    Fidelity fidelity = Fidelity::kAnalytical;
  };
  // Latency of `collective` over `bytes` in `group`.
  CollectiveTime CollectiveNs(Collective collective, double bytes, const CommGroup& group);

  const AnalyticalParams& params() const { return set_.params; }
  // Every distinct lookup, in first-use order.
  const std::vector<LookupRecord>& records() const { return records_; }
  // Keys no measurement covers (see LookupRecord::missing).
  std::vector<std::string> MissingKeys() const;

 private:
  OperatorProfile Resolve(const OperatorKey& key) const;

  const ProfileSet& set_;
  const GpuSpec& gpu_;
  LinkBandwidths links_;
  // Node-based: Operator() hands out references that must survive rehashing.
  absl::node_hash_map<OperatorKey, OperatorProfile> operators_;
  absl::flat_hash_map<std::string, CollectiveTime> collectives_;
  std::vector<LookupRecord> records_;
};

}  // namespace vtrain

#endif  // VTRAIN_CORE_PROFILE_LOOKUP_H_
