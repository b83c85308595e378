#include "server/profile_store.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "google/protobuf/util/time_util.h"

namespace vtrain::server {
namespace {

// A prepared statement, finalised on scope exit.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return stmt_; }
  void Bind(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  void BindBlob(int i, const std::string& s) {
    sqlite3_bind_blob(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  void Bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  int Step() { return sqlite3_step(stmt_); }
  std::string Text(int col) {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p == nullptr ? std::string() : std::string(p, sqlite3_column_bytes(stmt_, col));
  }
  std::string Blob(int col) {
    const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, col));
    return p == nullptr ? std::string() : std::string(p, sqlite3_column_bytes(stmt_, col));
  }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_ERROR;
};

// SQLite's integrity check: nullopt when the file is sound, else what it
// found (or why it could not check). Open refuses such a file; --check-db
// reports it.
std::optional<std::string> IntegrityProblem(sqlite3* db) {
  Statement check(db, "PRAGMA integrity_check");
  if (!check.ok()) return std::string(sqlite3_errmsg(db));
  if (check.Step() != SQLITE_ROW) return std::string("no answer");
  const std::string answer = check.Text(0);
  if (answer != "ok") return answer;
  return std::nullopt;
}

// Why a database whose schema is newer than this server's cannot be served.
std::string NewerSchema(int64_t version, int64_t supported) {
  return absl::StrCat("schema version ", version, " is newer than this vtrain-server's (",
                      supported, "); upgrade vtrain-server");
}

}  // namespace

absl::StatusOr<std::unique_ptr<ProfileStore>> ProfileStore::Open(const std::string& path,
                                                                 Durability durability) {
  // Say what is wrong with a file the server cannot write, rather than let
  // SQLite's first failed write read like corruption.
  if (access(path.c_str(), F_OK) == 0 && access(path.c_str(), R_OK | W_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "database '", path, "' is not writable by this process (", std::strerror(errno),
        "); give vtrain-server read and write access to it (the file is not damaged)"));
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  if (access(dir.empty() ? "." : dir.c_str(), W_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the directory of database '", path, "' is not writable by this process (",
                     std::strerror(errno), "); SQLite keeps its write-ahead log beside the file"));
  }
  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open database '", path, "': ", msg, "; check --db and its directory"));
  }
  sqlite3_busy_timeout(db, 5000);
  std::unique_ptr<ProfileStore> store(new ProfileStore(db, path));
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    store->device_ = static_cast<uint64_t>(st.st_dev);
    store->inode_ = static_cast<uint64_t>(st.st_ino);
  }
  absl::MutexLock lock(&store->mu_);
  // A corrupt file is refused, never recreated: the operator decides.
  if (std::optional<std::string> problem = IntegrityProblem(db)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "database '", path, "' failed the integrity check (", *problem,
        "); restore it from a backup or move it away — vtrain-server never recreates it"));
  }
  if (absl::Status s = store->Exec("PRAGMA journal_mode=WAL"); !s.ok()) return s;
  if (absl::Status s =
          store->Exec(durability == Durability::kPowerLoss ? "PRAGMA synchronous=FULL"
                                                           : "PRAGMA synchronous=NORMAL");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = store->Migrate(); !s.ok()) return s;
  return store;
}

absl::StatusOr<ProfileStore::Check> ProfileStore::CheckDatabase(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("database '", path, "' does not exist"));
  }
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    const std::string msg = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::FailedPreconditionError(absl::StrCat("cannot open database '", path, "': ", msg));
  }
  // close_v2: the connection goes once the statements still open are finalized.
  auto done = [db](absl::StatusOr<Check> result) {
    sqlite3_close_v2(db);
    return result;
  };
  auto damaged = [&](absl::string_view what, absl::string_view detail) {
    return absl::FailedPreconditionError(
        absl::StrCat("database '", path, "' ", what, " (", detail, ")"));
  };
  Check check;
  if (std::optional<std::string> problem = IntegrityProblem(db)) {
    return done(damaged("failed the integrity check", *problem));
  }
  {
    Statement q(db, "SELECT MAX(version) FROM schema_version");
    if (!q.ok() || q.Step() != SQLITE_ROW) {
      return done(damaged("is not a vtrain database: no schema_version table", sqlite3_errmsg(db)));
    }
    check.schema_version = q.Int(0);
  }
  if (check.schema_version > kSchemaVersion) {
    return done(absl::FailedPreconditionError(absl::StrCat(
        "database '", path, "': ", NewerSchema(check.schema_version, kSchemaVersion))));
  }
  Statement q(db, "SELECT gpu, COUNT(*) FROM profile_sets GROUP BY gpu ORDER BY gpu");
  if (!q.ok()) return done(damaged("has no profile_sets table", sqlite3_errmsg(db)));
  while (q.Step() == SQLITE_ROW) {
    check.sets_by_gpu.emplace_back(q.Text(0), q.Int(1));
    check.profile_sets += q.Int(1);
  }
  return done(check);
}

ProfileStore::~ProfileStore() {
  absl::MutexLock lock(&mu_);
  sqlite3_close(db_);
}

absl::Status ProfileStore::CheckFileIsOurs() const {
  struct stat st;
  if (stat(path_.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "database '", path_, "' was deleted while vtrain-server ran (", std::strerror(errno),
        "); nothing more is written to it — restore the file from a backup and restart the "
        "server"));
  }
  if (static_cast<uint64_t>(st.st_dev) != device_ || static_cast<uint64_t>(st.st_ino) != inode_) {
    return absl::FailedPreconditionError(
        absl::StrCat("database '", path_,
                     "' was replaced by another file while vtrain-server ran; nothing "
                     "more is written — restart the server to open the new file"));
  }
  return absl::OkStatus();
}

absl::Status ProfileStore::Error(const char* what) {
  return absl::InternalError(
      absl::StrCat("database error while ", what, ": ", sqlite3_errmsg(db_)));
}

absl::Status ProfileStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    absl::Status s =
        absl::InternalError(absl::StrCat("database error: ", err ? err : "", " in ", sql));
    sqlite3_free(err);
    return s;
  }
  return absl::OkStatus();
}

absl::Status ProfileStore::Migrate() {
  if (absl::Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  auto fail = [&](absl::Status s) {
    Exec("ROLLBACK").IgnoreError();
    return s;
  };
  if (absl::Status s = Exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
      !s.ok()) {
    return fail(s);
  }
  int64_t version = 0;
  {
    Statement q(db_, "SELECT MAX(version) FROM schema_version");
    if (!q.ok() || q.Step() != SQLITE_ROW) return fail(Error("reading the schema version"));
    version = q.Int(0);
  }
  if (version > kSchemaVersion) {
    return fail(absl::FailedPreconditionError(
        absl::StrCat("database ", NewerSchema(version, kSchemaVersion))));
  }
  // Migrations, one per version step.
  if (version < 1) {
    const char* v1 =
        "CREATE TABLE profile_sets ("
        "  id TEXT PRIMARY KEY, name TEXT NOT NULL, gpu TEXT NOT NULL,"
        "  created_at_ns INTEGER NOT NULL, builtin INTEGER NOT NULL, body BLOB NOT NULL);"
        "CREATE INDEX profile_sets_gpu ON profile_sets (gpu, created_at_ns);"
        "CREATE TABLE profiling_work ("
        "  gpu TEXT NOT NULL, key TEXT NOT NULL, requests INTEGER NOT NULL,"
        "  PRIMARY KEY (gpu, key));"
        "INSERT INTO schema_version VALUES (1);";
    if (absl::Status s = Exec(v1); !s.ok()) return fail(s);
  }
  return Exec("COMMIT");
}

absl::StatusOr<ProfileStore::PutResult> ProfileStore::Put(const v1::ProfileSet& set, bool builtin) {
  VTRAIN_RETURN_IF_ERROR(CheckFileIsOurs());
  absl::MutexLock lock(&mu_);
  PutResult result{set.id(), false};
  std::string body;
  if (!set.SerializeToString(&body)) return absl::InternalError("cannot serialize the profile set");
  if (absl::Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  Statement insert(
      db_,
      "INSERT OR IGNORE INTO profile_sets (id, name, gpu, created_at_ns, builtin, body) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  if (!insert.ok()) {
    Exec("ROLLBACK").IgnoreError();
    return Error("preparing the insert");
  }
  insert.Bind(1, set.id());
  insert.Bind(2, set.name());
  insert.Bind(3, set.gpu());
  insert.Bind(4, static_cast<int64_t>(
                     google::protobuf::util::TimeUtil::TimestampToNanoseconds(set.created_at())));
  insert.Bind(5, int64_t{builtin ? 1 : 0});
  insert.BindBlob(6, body);
  if (insert.Step() != SQLITE_DONE) {
    absl::Status s = Error("inserting a profile set");
    Exec("ROLLBACK").IgnoreError();
    return s;
  }
  result.already_present = sqlite3_changes(db_) == 0;
  if (absl::Status s = Exec("COMMIT"); !s.ok()) {
    Exec("ROLLBACK").IgnoreError();
    return s;
  }
  return result;
}

absl::StatusOr<std::vector<ProfileStore::StoredSet>> ProfileStore::LoadAll() {
  absl::MutexLock lock(&mu_);
  Statement q(db_, "SELECT id, body, builtin FROM profile_sets ORDER BY created_at_ns, id");
  if (!q.ok()) return Error("listing profile sets");
  std::vector<StoredSet> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    StoredSet stored;
    if (!stored.set.ParseFromString(q.Blob(1))) {
      return absl::DataLossError(absl::StrCat("profile set ", q.Text(0), " does not parse"));
    }
    stored.builtin = q.Int(2) != 0;
    out.push_back(std::move(stored));
  }
  if (rc != SQLITE_DONE) return Error("listing profile sets");
  return out;
}

absl::StatusOr<v1::ProfileSet> ProfileStore::Get(const std::string& id) {
  absl::MutexLock lock(&mu_);
  Statement q(db_, "SELECT body FROM profile_sets WHERE id = ?1");
  if (!q.ok()) return Error("reading a profile set");
  q.Bind(1, id);
  const int rc = q.Step();
  if (rc == SQLITE_DONE)
    return absl::NotFoundError(absl::StrCat("profile set '", id, "' not found"));
  if (rc != SQLITE_ROW) return Error("reading a profile set");
  v1::ProfileSet set;
  if (!set.ParseFromString(q.Blob(0))) {
    return absl::DataLossError(absl::StrCat("profile set ", id, " does not parse"));
  }
  return set;
}

absl::StatusOr<bool> ProfileStore::Delete(const std::string& id) {
  VTRAIN_RETURN_IF_ERROR(CheckFileIsOurs());
  absl::MutexLock lock(&mu_);
  Statement d(db_, "DELETE FROM profile_sets WHERE id = ?1");
  if (!d.ok()) return Error("deleting a profile set");
  d.Bind(1, id);
  if (d.Step() != SQLITE_DONE) return Error("deleting a profile set");
  return sqlite3_changes(db_) > 0;
}

absl::StatusOr<int64_t> ProfileStore::Count() {
  absl::MutexLock lock(&mu_);
  Statement q(db_, "SELECT COUNT(*) FROM profile_sets");
  if (!q.ok() || q.Step() != SQLITE_ROW) return Error("counting profile sets");
  return q.Int(0);
}

absl::StatusOr<int64_t> ProfileStore::SynchronousForTest() {
  absl::MutexLock lock(&mu_);
  Statement q(db_, "PRAGMA synchronous");
  if (!q.ok() || q.Step() != SQLITE_ROW) return Error("reading PRAGMA synchronous");
  return q.Int(0);
}

absl::Status ProfileStore::RecordMissing(const std::vector<WorkCount>& counts) {
  if (counts.empty()) return absl::OkStatus();
  VTRAIN_RETURN_IF_ERROR(CheckFileIsOurs());
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  auto fail = [&](const char* what) {
    absl::Status s = Error(what);
    Exec("ROLLBACK").IgnoreError();
    return s;
  };
  int64_t rows = 0;
  {
    Statement count(db_, "SELECT COUNT(*) FROM profiling_work");
    if (!count.ok() || count.Step() != SQLITE_ROW) return fail("counting profiling work");
    rows = count.Int(0);
  }
  Statement update(
      db_, "UPDATE profiling_work SET requests = requests + ?3 WHERE gpu = ?1 AND key = ?2");
  Statement insert(db_, "INSERT INTO profiling_work (gpu, key, requests) VALUES (?1, ?2, ?3)");
  if (!update.ok() || !insert.ok()) return fail("preparing the work update");
  for (const WorkCount& c : counts) {
    sqlite3_reset(update.get());
    update.Bind(1, c.gpu);
    update.Bind(2, c.key);
    update.Bind(3, c.requests);
    if (update.Step() != SQLITE_DONE) return fail("recording profiling work");
    // A new key only while the table has room: the queue stays bounded
    // whatever predictions ask for.
    if (sqlite3_changes(db_) > 0 || rows >= kMaxWorkRows) continue;
    sqlite3_reset(insert.get());
    insert.Bind(1, c.gpu);
    insert.Bind(2, c.key);
    insert.Bind(3, c.requests);
    if (insert.Step() != SQLITE_DONE) return fail("recording profiling work");
    ++rows;
  }
  return Exec("COMMIT");
}

absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> ProfileStore::NextWork(
    const std::string& gpu, int limit) {
  absl::MutexLock lock(&mu_);
  Statement q(db_,
              "SELECT key, requests FROM profiling_work WHERE (?1 = '' OR gpu = ?1) "
              "ORDER BY requests DESC, key LIMIT ?2");
  if (!q.ok()) return Error("reading profiling work");
  q.Bind(1, gpu);
  q.Bind(2, int64_t{limit});
  std::vector<std::pair<std::string, int64_t>> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) out.emplace_back(q.Text(0), q.Int(1));
  if (rc != SQLITE_DONE) return Error("reading profiling work");
  return out;
}

absl::StatusOr<int64_t> ProfileStore::ResolveWork(
    const std::vector<std::pair<std::string, std::string>>& done) {
  if (done.empty()) return 0;
  VTRAIN_RETURN_IF_ERROR(CheckFileIsOurs());
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  Statement d(db_,
              "DELETE FROM profiling_work WHERE gpu = ?1 AND (key = ?2 OR "
              "substr(key, 1, length(?2) + 7) = ?2 || ' bytes=')");
  if (!d.ok()) {
    Exec("ROLLBACK").IgnoreError();
    return Error("preparing the work removal");
  }
  int64_t removed = 0;
  for (const auto& [gpu, key] : done) {
    sqlite3_reset(d.get());
    d.Bind(1, gpu);
    d.Bind(2, key);
    if (d.Step() != SQLITE_DONE) {
      absl::Status s = Error("removing answered profiling work");
      Exec("ROLLBACK").IgnoreError();
      return s;
    }
    removed += sqlite3_changes(db_);
  }
  if (absl::Status s = Exec("COMMIT"); !s.ok()) return s;
  return removed;
}

}  // namespace vtrain::server
