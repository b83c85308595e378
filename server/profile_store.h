// The durable profile store of vtrain-server: one SQLite file (WAL mode,
// versioned schema, one transaction per write, prepared statements only),
// holding profile sets as serialized vtrain.v1.ProfileSet rows and the
// profiling-work queue.
#ifndef VTRAIN_SERVER_PROFILE_STORE_H_
#define VTRAIN_SERVER_PROFILE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "vtrain/v1/vtrain.pb.h"

struct sqlite3;
struct sqlite3_stmt;

namespace vtrain::server {

class ProfileStore {
 public:
  // What an acknowledged write survives (docs/deployment.md#durability).
  // kPowerLoss: SQLite's synchronous=FULL in WAL mode, the write-ahead log
  // synced to disk before each commit returns, so a push the server
  // acknowledged survives a process crash, a kernel crash and a power cut.
  // kProcessCrash: synchronous=NORMAL, synced only at checkpoints: it survives
  // a process crash, but a power cut may lose the last commits.
  enum class Durability { kPowerLoss, kProcessCrash };

  // What CheckDatabase found in a database file.
  struct Check {
    int64_t schema_version = 0;
    int64_t profile_sets = 0;
    std::vector<std::pair<std::string, int64_t>> sets_by_gpu;  // GPU, sets; by GPU name
  };
  // Checks the database at `path` without changing it (opened read-only, no
  // migration): SQLite's integrity check, the schema version this server
  // reads, the profile sets. NOT_FOUND when there is no such file;
  // FAILED_PRECONDITION naming the file when it is damaged, not a vtrain
  // database, or written by a newer server.
  static absl::StatusOr<Check> CheckDatabase(const std::string& path);

  // Opens (creating if absent) the database at `path`, runs the integrity
  // check and the schema migrations. A corrupt or foreign file is refused
  // with FAILED_PRECONDITION naming it; it is never recreated.
  static absl::StatusOr<std::unique_ptr<ProfileStore>> Open(
      const std::string& path, Durability durability = Durability::kPowerLoss);
  ~ProfileStore();

  struct PutResult {
    std::string id;
    bool already_present = false;
  };
  // Stores `set` (whose id and created_at must be set) atomically; a set with
  // the same id is left as it is.
  absl::StatusOr<PutResult> Put(const v1::ProfileSet& set, bool builtin);
  // A stored set and whether it was stored as a built-in (the flag Put got).
  struct StoredSet {
    v1::ProfileSet set;
    bool builtin = false;
  };
  absl::StatusOr<std::vector<StoredSet>> LoadAll();
  // NOT_FOUND when absent.
  absl::StatusOr<v1::ProfileSet> Get(const std::string& id);
  // Whether a set was deleted.
  absl::StatusOr<bool> Delete(const std::string& id);
  absl::StatusOr<int64_t> Count();
  // SQLite's synchronous setting on this connection (1 NORMAL, 2 FULL).
  absl::StatusOr<int64_t> SynchronousForTest();

  // The profiling-work queue: keys predictions needed but found no
  // measurement for, counted. Adds `requests` to each key's count.
  struct WorkCount {
    std::string gpu;
    std::string key;
    int64_t requests = 1;
  };
  // New keys are added while the queue holds fewer than kMaxWorkRows; past
  // that only existing keys are counted.
  absl::Status RecordMissing(const std::vector<WorkCount>& counts);
  static constexpr int64_t kMaxWorkRows = 100'000;
  absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> NextWork(const std::string& gpu,
                                                                        int limit);
  // Removes work a pushed set answers: for each (gpu, key text), the item
  // with that key and, for collective keys, every "<key> bytes=..." item
  // (a curve now exists; sizes it does not cover come back with the next
  // prediction that needs them). Returns how many items were open.
  absl::StatusOr<int64_t> ResolveWork(const std::vector<std::pair<std::string, std::string>>& done);

  static constexpr int kSchemaVersion = 1;

 private:
  ProfileStore(sqlite3* db, std::string path) : path_(std::move(path)), db_(db) {}
  // FAILED_PRECONDITION when the file at path_ is no longer the one opened
  // (deleted or replaced while the server ran): writes would go to an
  // unlinked file and be lost, so every write checks first.
  absl::Status CheckFileIsOurs() const;
  absl::Status Exec(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Migrate() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Error(const char* what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  uint64_t device_ = 0, inode_ = 0;  // of the file opened
  absl::Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_PROFILE_STORE_H_
