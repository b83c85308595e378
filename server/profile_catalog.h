// The decoded profile sets a server predicts from, kept in memory (the
// SQLite store is the durable copy), with a version counter that
// WatchProfileSets streams wait on. Thread-safe.
#ifndef VTRAIN_SERVER_PROFILE_CATALOG_H_
#define VTRAIN_SERVER_PROFILE_CATALOG_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/profile/profile.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::server {

struct CatalogEntry {
  v1::ProfileSet proto;                      // as stored and served
  std::shared_ptr<const ProfileSet> tables;  // decoded for lookups
  bool builtin = false;
  int64_t sequence = 0;  // order of arrival in this process
};

// Whether a set covers its GPU by itself: it carries the error bands of the
// 90% interval (and the analytical parameters beside them). A set without
// them (an nccl-tests import, a few profiled operators) is partial: it never
// becomes a GPU's default alone, its tables are laid over the newest
// complete set instead (ProfileCatalog::DefaultFor).
bool IsComplete(const ProfileSet& set);

class ProfileCatalog {
 public:
  // Adds or replaces a set; wakes watchers.
  void Add(CatalogEntry entry);
  bool Remove(const std::string& id);
  std::optional<CatalogEntry> Get(const std::string& id) const;
  bool Contains(const std::string& id) const;
  // Only the decoded tables (no copy of the stored message): what a
  // prediction needs. nullptr when absent. NewestTables: of the newest set
  // for `gpu`, measured sets before built-in ones.
  std::shared_ptr<const ProfileSet> Tables(const std::string& id) const;
  std::shared_ptr<const ProfileSet> NewestTables(const std::string& gpu) const;

  // What requests naming no set get for `gpu`: the newest complete set
  // (measured sets before built-in ones; null when the GPU has none) and the
  // partial sets for the GPU created after it, oldest first, whose tables
  // are laid over it (the newer wins a key both hold).
  struct DefaultSets {
    std::shared_ptr<const ProfileSet> base;
    std::vector<std::shared_ptr<const ProfileSet>> overlays;
  };
  DefaultSets DefaultFor(const std::string& gpu) const;
  std::vector<CatalogEntry> List() const;
  // The ids alone (no copy of the entries).
  std::vector<std::string> Ids() const;
  int64_t size() const;

  // What changed after sequence `after`: entries that arrived and ids that
  // were removed, in order; `sequence` is where the caller now stands.
  // Waits up to `timeout` for a change if there is none yet.
  struct Changes {
    std::vector<CatalogEntry> added;
    std::vector<std::string> removed;
    int64_t sequence = 0;
    // Removals after `after` were forgotten (the watcher fell more than
    // kRemembered removals behind): `removed` is incomplete and the caller
    // must resynchronise by listing.
    bool gap = false;
  };
  Changes WaitForNewer(int64_t after, absl::Duration timeout) const;

  // How many removals are remembered for watchers (older ones are dropped:
  // a watcher that far behind resynchronises by listing).
  static constexpr size_t kRemembered = 4096;

 private:
  const CatalogEntry* NewestLocked(const std::string& gpu) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, CatalogEntry> entries_ ABSL_GUARDED_BY(mu_);
  int64_t sequence_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<std::pair<int64_t, std::string>> removals_ ABSL_GUARDED_BY(mu_);  // (sequence, id)
  int64_t forgotten_through_ ABSL_GUARDED_BY(mu_) = 0;  // sequence of the last dropped removal
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_PROFILE_CATALOG_H_
