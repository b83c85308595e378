// Lookup memos (core/profile/lookup.h) for the profile sets this server
// predicts with: each operator and collective of a set is resolved once and
// then shared by every Predict and Search call that uses the set, instead of
// being generated again for each call. Bounded; thread-safe.
#ifndef VTRAIN_SERVER_MEMO_CACHE_H_
#define VTRAIN_SERVER_MEMO_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "core/profile/lookup.h"
#include "core/profile/profile.h"

namespace vtrain::server {

class MemoCache {
 public:
  // Sets with a memo at once (the least recently used one is dropped past
  // it) and operators per memo: at a few kB per operator, tens of MB at most.
  static constexpr size_t kMaxSets = 4;
  static constexpr size_t kMaxOperatorsPerSet = 4096;

  // The memo of `set`, made on first use; it keeps `set` alive for as long
  // as the caller holds it.
  std::shared_ptr<LookupMemo> For(const std::shared_ptr<const ProfileSet>& set);
  size_t size() const;

 private:
  struct Entry {
    std::shared_ptr<LookupMemo> memo;  // aliases a holder that owns the set
    uint64_t used = 0;
  };
  mutable absl::Mutex mu_;
  absl::flat_hash_map<const ProfileSet*, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_MEMO_CACHE_H_
