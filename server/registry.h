// The profile sets a vtrain-server holds, whatever its role: the durable
// SQLite store, the in-memory catalog predictions read, and the queue of
// profiling work. No gRPC here; the services translate to and from it.
#ifndef VTRAIN_SERVER_REGISTRY_H_
#define VTRAIN_SERVER_REGISTRY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/profile/profile.h"
#include "core/spec/gpu.h"
#include "server/metrics.h"
#include "server/profile_catalog.h"
#include "server/profile_store.h"
#include "server/view_key.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::server {

// Where an accepted set came from: built-in sets are seeded from the
// analytical model and answer no profiling work.
enum class SetOrigin { kMeasured, kBuiltin };
// A pushed set is stamped now; a set synced from a registry keeps the
// registry's created_at (stamped now only when it has none).
enum class CreatedAt { kStampNow, kKeepGiven };

struct AcceptOptions {
  SetOrigin origin = SetOrigin::kMeasured;
  CreatedAt created_at = CreatedAt::kStampNow;
};

// Where a WatchProfileSets stream stands.
struct WatchCursor {
  int64_t seen_sequence = 0;             // catalog changes already considered
  int64_t created_after_ns = INT64_MIN;  // only sets created after this
};

// Thread-safe, except Close.
class Registry {
 public:
  // Opens (creating if absent) the store at `db_path` and loads every set
  // into memory. DATA_LOSS names a stored set that no longer decodes; the
  // store's errors pass through. `metrics` must outlive the registry.
  static absl::StatusOr<std::unique_ptr<Registry>> Open(const std::string& db_path,
                                                        Metrics& metrics);

  // When the store holds no set, accepts the built-in set of every known GPU.
  absl::Status SeedBuiltinsIfEmpty();

  // Validates `set`, names it by its content hash, stores it, adds it to the
  // catalog (waking watchers) and, for a measured set, takes the keys it
  // answers off the profiling-work queue. INVALID_ARGUMENT for a set that
  // does not decode or whose id is not its content hash; store errors pass
  // through. Re-accepting a stored set reports already_present.
  absl::StatusOr<v1::PushProfileSetResponse> Accept(v1::ProfileSet set,
                                                    const AcceptOptions& options);

  // Summaries, oldest first, filtered by the request's gpu and created_after.
  v1::ListProfileSetsResponse List(const v1::ListProfileSetsRequest& request) const;
  // NOT_FOUND when absent.
  absl::StatusOr<v1::ProfileSet> Get(const std::string& id) const;
  // Removes a set from the store and the catalog; NOT_FOUND when absent.
  absl::Status Delete(const std::string& id);
  bool Contains(const std::string& id) const { return catalog_.Contains(id); }
  // The ids of every set held.
  std::vector<std::string> Ids() const;
  int64_t size() const { return catalog_.size(); }

  // The decoded tables a prediction uses: the set `profile_set_id` names
  // (NOT_FOUND when not loaded) or, when it is empty, the GPU's default: the
  // newest complete set for `gpu` (else the built-in tables of `gpu`) with
  // the tables of the partial sets pushed after it laid over it. Such a
  // merged set's id is "BASE+PARTIAL+..." (the ids of its parts).
  absl::StatusOr<std::shared_ptr<const ProfileSet>> TablesFor(const std::string& profile_set_id,
                                                              const GpuSpec& gpu) const;
  // The figures of the GPU named `name`: this build's datasheet, else the one
  // carried by the sets requests naming no set get for that GPU (the newest
  // set's). NOT_FOUND naming the known GPUs when neither has it.
  absl::StatusOr<GpuSpec> GpuFor(absl::string_view name) const;
  // The loaded set TablesFor would pick for a GPU named `gpu`, or nullptr
  // (not loaded: TablesFor would refuse or fall back to built-in tables).
  std::shared_ptr<const ProfileSet> LoadedTablesFor(const std::string& profile_set_id,
                                                    const std::string& gpu) const;
  // The id of what requests naming no set get for `gpu` ("" when only this
  // build's built-in tables would answer).
  std::string DefaultIdFor(const std::string& gpu) const;

  // What changed after the cursor: sets that arrived (and were created after
  // its time) and deletions, in order, waiting up to `timeout` for a change;
  // advances the cursor.
  // ABORTED when the cursor fell so far behind that deletions were forgotten:
  // the watcher must resynchronise by listing.
  absl::StatusOr<std::vector<v1::ProfileSetEvent>> WaitForChanges(WatchCursor& cursor,
                                                                  absl::Duration timeout) const;

  // The profiling-work queue. RecordMissing counts keys a prediction on `gpu`
  // found no measurement for (in memory, bounded by the number of distinct
  // keys; written to the store by the next FlushWork). NextWork flushes and
  // answers the most requested open items; INVALID_ARGUMENT for max_items
  // outside [0, 10000] (0: 10).
  // `client` (the caller's peer address) may add at most kWorkKeysPerClient
  // new keys a minute, and at most kMaxPendingWork distinct keys wait in
  // memory; further keys are dropped (counted in
  // vtrain_profiling_work_dropped_total), existing ones still counted.
  void RecordMissing(const std::string& gpu, absl::Span<const std::string> keys,
                     const std::string& client = "");
  // The same, asking for the client's address only when a key is new.
  void RecordMissing(const std::string& gpu, absl::Span<const std::string> keys,
                     absl::FunctionRef<std::string()> client);
  static constexpr int64_t kMaxPendingWork = 10'000;
  static constexpr int64_t kWorkKeysPerClient = 1'000;
  absl::StatusOr<v1::NextProfilingWorkResponse> NextWork(
      const v1::NextProfilingWorkRequest& request);
  void FlushWork();

  // Flushes the work queue and closes the database. Call only when no other
  // call can arrive; nothing may be called after.
  void Close();

 private:
  Registry(std::unique_ptr<ProfileStore> store, Metrics& metrics)
      : metrics_(metrics), store_(std::move(store)) {}
  absl::Status Load();
  // The GPU's default from the catalog: the base alone, or the base with the
  // overlays' tables laid over it (made once per combination). nullptr when
  // the catalog has neither; `gpu` makes the built-in base when it has only
  // partial sets (and may be null: then nullptr).
  std::shared_ptr<const ProfileSet> DefaultTables(const std::string& gpu_name,
                                                  const GpuSpec* gpu) const;
  // Counts and logs a store error; returns it.
  absl::Status DatabaseError(absl::Status status);
  void PublishSize() { metrics_.ProfileSetsLoaded(static_cast<double>(catalog_.size())); }

  Metrics& metrics_;
  std::unique_ptr<ProfileStore> store_;  // internally synchronised
  ProfileCatalog catalog_;               // internally synchronised

  absl::Mutex arrival_mu_;  // serialises Accept from the creation stamp to the catalog
  // The merged default of each GPU, by GPU name, with the ids it was made of.
  mutable absl::Mutex merged_mu_;
  mutable absl::flat_hash_map<std::string, std::shared_ptr<const ProfileSet>> merged_
      ABSL_GUARDED_BY(merged_mu_);
  absl::Mutex work_mu_;
  // Missing keys not yet written to the store, counted: bounded by the number
  // of distinct keys, however many predictions arrive.
  // (gpu, key) pairs, found by string views: counting a known key copies
  // nothing.
  using WorkView = std::pair<absl::string_view, absl::string_view>;
  absl::flat_hash_map<std::pair<std::string, std::string>, int64_t, ViewHash<WorkView>,
                      ViewEq<WorkView>>
      pending_work_ ABSL_GUARDED_BY(work_mu_);
  // New keys each client added in the current minute (cleared each minute).
  absl::flat_hash_map<std::string, int64_t> keys_by_client_ ABSL_GUARDED_BY(work_mu_);
  absl::Time window_start_ ABSL_GUARDED_BY(work_mu_) = absl::InfinitePast();
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_REGISTRY_H_
