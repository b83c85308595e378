// Resolves operator and collective timings against a profile set, falling
// back from measured to interpolated to analytical, and records the fidelity
// of every lookup and every key that had no measurement.
#ifndef VTRAIN_CORE_PROFILE_LOOKUP_H_
#define VTRAIN_CORE_PROFILE_LOOKUP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/synchronization/mutex.h"
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

// A kernel sequence as a pass's host-dispatch replay sees it
// (core/graph/template_writer.h): with the host at H and the GPU free at G
// before the sequence, the host is at H + host_ns after it and the GPU at
// max(G + duration_ns, H + host_lead_ns), exactly (a max-plus product of
// the kernels' steps).
struct KernelChain {
  int64_t count = 0;
  int64_t host_ns = 0;       // sum of host times
  int64_t duration_ns = 0;   // sum of durations
  int64_t host_lead_ns = 0;  // max over j of host(0..j) + duration(j..n-1)
  int64_t plain_ns = 0;      // sum of durations and gaps
  bool host_known = true;    // every kernel has a host time
};
KernelChain ChainOf(const std::vector<KernelRecord>& kernels);

// An operator as a lookup resolved it.
struct ResolvedOperator {
  OperatorProfile profile;
  KernelChain chain;
  std::string key;  // the operator key's text, for the lookup records
};

// What a lookup resolves a collective to (memo key: everything it depends on).
struct CollectiveQuery {
  std::string gpu;
  Collective collective = Collective::kAllReduce;
  double bytes = 0;
  int64_t ranks = 1, ranks_per_node = 1;
  double nic_fraction = 1;
  CommUse use = CommUse::kOther;
  double spine_slowdown = 1;
  double intra_bytes_per_s = 0, inter_bytes_per_s = 0;
  friend bool operator==(const CollectiveQuery&, const CollectiveQuery&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const CollectiveQuery& q) {
    return H::combine(std::move(h), q.gpu, q.collective, q.bytes, q.ranks, q.ranks_per_node,
                      q.nic_fraction, q.use, q.spine_slowdown, q.intra_bytes_per_s,
                      q.inter_bytes_per_s);
  }
};
struct ResolvedCollective {
  int64_t latency_ns = 0;
  Fidelity fidelity = Fidelity::kAnalytical;
  bool missing = true;
  std::string key;  // for the lookup records
};

// Resolutions shared by every ProfileLookup made with it over one profile
// set: a server answering many predictions, or a search over thousands of
// plans, resolves each operator and collective once instead of once per
// prediction. Thread-safe. The set (and each GPU's spec, checked) must not
// change while the memo is used; a memo holds at most `max_entries`
// operators and as many collectives, then stops adding (lookups still
// resolve, per prediction).
class LookupMemo {
 public:
  static constexpr size_t kDefaultMaxEntries = 16384;
  explicit LookupMemo(const ProfileSet& set, size_t max_entries = kDefaultMaxEntries)
      : set_(set), max_entries_(max_entries) {}
  LookupMemo(const LookupMemo&) = delete;
  LookupMemo& operator=(const LookupMemo&) = delete;

  const ProfileSet& set() const { return set_; }
  size_t operators() const;

 private:
  friend class ProfileLookup;
  // nullptr when absent, or when `gpu` is not the spec the memo first saw
  // under its name (then the caller resolves on its own).
  const ResolvedOperator* FindOperator(const OperatorKey& key, const GpuSpec& gpu) const;
  // Stores `resolved` unless full or `gpu` disagrees; returns the stored
  // entry or nullptr.
  const ResolvedOperator* AddOperator(const OperatorKey& key, const GpuSpec& gpu,
                                      ResolvedOperator resolved);
  const ResolvedCollective* FindCollective(const CollectiveQuery& q) const;
  const ResolvedCollective* AddCollective(const CollectiveQuery& q, ResolvedCollective resolved);
  bool SameGpuLocked(const GpuSpec& gpu) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const ProfileSet& set_;
  const size_t max_entries_;
  mutable absl::Mutex mu_;
  // Node-based: lookups hold pointers to entries for the memo's lifetime.
  absl::node_hash_map<OperatorKey, ResolvedOperator> operators_ ABSL_GUARDED_BY(mu_);
  absl::node_hash_map<CollectiveQuery, ResolvedCollective> collectives_ ABSL_GUARDED_BY(mu_);
  std::vector<GpuSpec> gpus_ ABSL_GUARDED_BY(mu_);  // the spec seen for each GPU name
};

// Not thread-safe: one per prediction. Holds references to `set` and `gpu`
// (and `memo`), which must outlive it. A memo of another set is ignored.
class ProfileLookup {
 public:
  ProfileLookup(const ProfileSet& set, const GpuSpec& gpu, LinkBandwidths links,
                LookupMemo* memo = nullptr);

  // The kernels of `key` and their fidelity. Memoised; the reference stays
  // valid for the lifetime of this object.
  const OperatorProfile& Operator(const OperatorKey& key) { return Resolved(key).profile; }
  // The same, with the kernels' replay summary.
  const ResolvedOperator& Resolved(const OperatorKey& key);

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
  ResolvedCollective ResolveCollective(Collective collective, double bytes,
                                       const CommGroup& group) const;

  const ProfileSet& set_;
  const GpuSpec& gpu_;
  LinkBandwidths links_;
  LookupMemo* memo_;
  absl::flat_hash_map<OperatorKey, const ResolvedOperator*> operators_;
  // Resolved here when the memo is absent or full.
  absl::node_hash_map<OperatorKey, ResolvedOperator> owned_operators_;
  absl::flat_hash_map<CollectiveQuery, const ResolvedCollective*> collectives_;
  absl::node_hash_map<CollectiveQuery, ResolvedCollective> owned_collectives_;
  std::vector<LookupRecord> records_;
};

}  // namespace vtrain

#endif  // VTRAIN_CORE_PROFILE_LOOKUP_H_
