#include "server/registry.h"

#include <algorithm>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/predict/sanity.h"
#include "core/profile/default_profiles.h"
#include "core/util/status_macros.h"
#include "google/protobuf/util/time_util.h"
#include "proto/convert.h"
#include "server/log.h"

namespace vtrain::server {

using google::protobuf::util::TimeUtil;

absl::StatusOr<std::unique_ptr<Registry>> Registry::Open(const std::string& db_path,
                                                         Metrics& metrics) {
  VTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ProfileStore> store, ProfileStore::Open(db_path));
  std::unique_ptr<Registry> registry(new Registry(std::move(store), metrics));
  VTRAIN_RETURN_IF_ERROR(registry->Load());
  return registry;
}

absl::Status Registry::Load() {
  VTRAIN_ASSIGN_OR_RETURN(std::vector<ProfileStore::StoredSet> stored, store_->LoadAll());
  for (auto& [set, builtin] : stored) {
    absl::StatusOr<ProfileSet> tables = proto::ProfileSetFromProto(set);
    if (!tables.ok()) {
      return absl::DataLossError(absl::StrCat("stored profile set ", set.id(),
                                              " is invalid: ", tables.status().message()));
    }
    CatalogEntry e;
    e.tables = std::make_shared<const ProfileSet>(*std::move(tables));
    e.builtin = builtin;  // as stored, never guessed from the name
    e.proto = std::move(set);
    catalog_.Add(std::move(e));
  }
  PublishSize();
  return absl::OkStatus();
}

absl::Status Registry::DatabaseError(absl::Status status) {
  metrics_.DatabaseError();
  Log(absl::StrCat("database error: ", status.message()));
  return status;
}

absl::Status Registry::SeedBuiltinsIfEmpty() {
  if (catalog_.size() > 0) return absl::OkStatus();
  for (const std::string& name : GpuNames()) {
    const ProfileSet set = DefaultProfileSet(*GpuByName(name));
    absl::StatusOr<v1::PushProfileSetResponse> r =
        Accept(proto::ProfileSetToProto(set), {.origin = SetOrigin::kBuiltin});
    if (!r.ok()) return r.status();
  }
  Log(absl::StrCat("seeded an empty database with ", GpuNames().size(), " built-in profile sets"));
  return absl::OkStatus();
}

absl::StatusOr<v1::PushProfileSetResponse> Registry::Accept(v1::ProfileSet set,
                                                            const AcceptOptions& options) {
  const bool builtin = options.origin == SetOrigin::kBuiltin;
  absl::StatusOr<ProfileSet> tables = proto::ProfileSetFromProto(set);
  if (!tables.ok()) {
    return absl::InvalidArgumentError(tables.status().message());
  }
  // Parameters left out took their defaults: store them written out, so the
  // stored set says what every prediction with it uses.
  proto::ParamsToProto(tables->params, set.mutable_params());
  // A set for a GPU this build has no datasheet for carries the GPU's figures
  // (ProfileSetFromProto refuses it otherwise): requests naming the GPU use them.
  // Built-in sets are this build's own; every other set must predict sanely.
  if (!builtin) {
    if (absl::Status sane = CheckPredictionsArePhysical(*tables); !sane.ok()) return sane;
  }
  const bool complete = IsComplete(*tables);
  if (!complete && tables->operators.empty() && tables->collectives.empty()) {
    return absl::InvalidArgumentError(
        "profile_set holds no operators, no collectives and no error_bands: nothing a "
        "prediction could use; add tables, or error bands with the parameters to make a "
        "complete set");
  }
  const std::string resp_gpu = set.gpu();
  const std::string id = proto::ContentId(set);
  if (!set.id().empty() && set.id() != id) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile_set.id='", set.id(), "' is not the content hash ", id,
                     "; leave it empty and the server names the set"));
  }
  set.set_id(id);
  proto::Canonicalize(&set);
  // From the creation stamp to the catalog, one set at a time: creation order
  // is then arrival order, so a follower that lists a set has also listed
  // every set stamped before it (and watches from there without a gap).
  absl::MutexLock arrival(&arrival_mu_);
  if (options.created_at == CreatedAt::kStampNow || !set.has_created_at()) {
    *set.mutable_created_at() = TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(absl::Now()));
  }
  const std::string default_before = DefaultIdFor(set.gpu());
  absl::StatusOr<ProfileStore::PutResult> put = store_->Put(set, builtin);
  if (!put.ok()) return DatabaseError(put.status());
  v1::PushProfileSetResponse resp;
  resp.set_id(id);
  resp.set_already_present(put->already_present);
  if (!builtin) {
    // The set answers the profiling work for its keys: take it off the queue
    // (pending counts are written first so none comes back after).
    std::vector<std::pair<std::string, std::string>> done;
    for (const auto& [key, profile] : tables->operators) done.emplace_back(key.gpu, key.ToString());
    for (const auto& [key, curve] : tables->collectives) done.emplace_back(key.gpu, key.ToString());
    FlushWork();
    if (absl::StatusOr<int64_t> n = store_->ResolveWork(done); !n.ok())
      DatabaseError(n.status()).IgnoreError();
  }
  if (!put->already_present) {
    CatalogEntry e;
    tables->id = id;
    e.tables = std::make_shared<const ProfileSet>(*std::move(tables));
    e.builtin = builtin;
    e.proto = std::move(set);
    catalog_.Add(std::move(e));
    PublishSize();
  }
  // Say what requests that name no set get now, and whether that changed.
  const std::string gpu = resp_gpu;
  resp.set_complete(complete);
  resp.set_default_profile_set_id(DefaultIdFor(gpu));
  if (resp.default_profile_set_id() != default_before) {
    resp.set_note(absl::StrCat(
        complete ? "a complete set: it is now the default for "
                 : "a partial set (no error bands, so no interval of its own): its tables are "
                   "laid over the newest complete set as the default for ",
        gpu, " (", resp.default_profile_set_id(), ", was ",
        !default_before.empty() ? default_before
        : GpuByName(gpu).ok()   ? std::string("the built-in tables")
                                : std::string("none: a GPU this build has no figures for"),
        ")"));
  } else if (!complete && !put->already_present) {
    resp.set_note(absl::StrCat("a partial set, older than the newest complete set for ", gpu,
                               ": stored, used only when named by id"));
  }
  return resp;
}

v1::ListProfileSetsResponse Registry::List(const v1::ListProfileSetsRequest& request) const {
  const int64_t after = request.has_created_after()
                            ? TimeUtil::TimestampToNanoseconds(request.created_after())
                            : INT64_MIN;
  std::vector<CatalogEntry> entries = catalog_.List();
  std::sort(entries.begin(), entries.end(), [](const CatalogEntry& a, const CatalogEntry& b) {
    return TimeUtil::TimestampToNanoseconds(a.proto.created_at()) <
           TimeUtil::TimestampToNanoseconds(b.proto.created_at());
  });
  v1::ListProfileSetsResponse response;
  for (const CatalogEntry& e : entries) {
    if (!request.gpu().empty() && e.proto.gpu() != request.gpu()) continue;
    if (TimeUtil::TimestampToNanoseconds(e.proto.created_at()) <= after) continue;
    v1::ProfileSetSummary* s = response.add_profile_sets();
    s->set_id(e.proto.id());
    s->set_name(e.proto.name());
    s->set_gpu(e.proto.gpu());
    *s->mutable_created_at() = e.proto.created_at();
    s->set_num_operators(e.proto.operators_size());
    s->set_num_collectives(e.proto.collectives_size());
    s->set_builtin(e.builtin);
    s->set_complete(IsComplete(*e.tables));
  }
  return response;
}

absl::StatusOr<v1::ProfileSet> Registry::Get(const std::string& id) const {
  std::optional<CatalogEntry> e = catalog_.Get(id);
  if (!e) return absl::NotFoundError(absl::StrCat("profile set '", id, "' not found"));
  return std::move(e->proto);
}

std::vector<std::string> Registry::Ids() const { return catalog_.Ids(); }

absl::Status Registry::Delete(const std::string& id) {
  absl::StatusOr<bool> deleted = store_->Delete(id);
  if (!deleted.ok()) return DatabaseError(deleted.status());
  catalog_.Remove(id);
  PublishSize();
  if (!*deleted) return absl::NotFoundError(absl::StrCat("profile set '", id, "' not found"));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const ProfileSet>> Registry::TablesFor(
    const std::string& profile_set_id, const GpuSpec& gpu) const {
  if (!profile_set_id.empty()) {
    std::shared_ptr<const ProfileSet> tables = catalog_.Tables(profile_set_id);
    if (tables == nullptr) {
      return absl::NotFoundError(absl::StrCat("profile_set_id '", profile_set_id,
                                              "' is not loaded; list sets with ListProfileSets"));
    }
    return tables;
  }
  if (std::shared_ptr<const ProfileSet> tables = DefaultTables(gpu.name, &gpu)) return tables;
  return std::make_shared<const ProfileSet>(DefaultProfileSet(gpu));
}

absl::StatusOr<GpuSpec> Registry::GpuFor(absl::string_view name) const {
  absl::StatusOr<GpuSpec> builtin = GpuByName(name);
  if (builtin.ok()) return builtin;
  ProfileCatalog::DefaultSets sets = catalog_.DefaultFor(std::string(name));
  // Every set for such a GPU carries the figures (ProfileSetFromProto); the
  // newest one's win.
  for (auto it = sets.overlays.rbegin(); it != sets.overlays.rend(); ++it) {
    if ((*it)->datasheet.has_value()) return *(*it)->datasheet;
  }
  if (sets.base != nullptr && sets.base->datasheet.has_value()) return *sets.base->datasheet;
  return absl::NotFoundError(absl::StrCat(builtin.status().message(),
                                          ", or push a profile set for it with its "
                                          "profile_set.datasheet"));
}

std::shared_ptr<const ProfileSet> Registry::LoadedTablesFor(const std::string& profile_set_id,
                                                            const std::string& gpu) const {
  return profile_set_id.empty() ? DefaultTables(gpu, nullptr) : catalog_.Tables(profile_set_id);
}

namespace {

// "+PARTIAL+PARTIAL...": what a merged default's id adds to its base's.
std::string OverlaySuffix(const ProfileCatalog::DefaultSets& sets) {
  std::string suffix;
  for (const auto& overlay : sets.overlays) absl::StrAppend(&suffix, "+", overlay->id);
  return suffix;
}

}  // namespace

std::string Registry::DefaultIdFor(const std::string& gpu) const {
  // Derived from the parts: a push asks for it twice, and need not merge.
  ProfileCatalog::DefaultSets sets = catalog_.DefaultFor(gpu);
  if (sets.base != nullptr) return absl::StrCat(sets.base->id, OverlaySuffix(sets));
  // Only partial sets (or none): their base is the built-in tables, whose id
  // is known once a prediction has merged them.
  std::shared_ptr<const ProfileSet> tables = DefaultTables(gpu, nullptr);
  return tables == nullptr ? "" : tables->id;
}

std::shared_ptr<const ProfileSet> Registry::DefaultTables(const std::string& gpu_name,
                                                          const GpuSpec* gpu) const {
  ProfileCatalog::DefaultSets sets = catalog_.DefaultFor(gpu_name);
  if (sets.overlays.empty()) return sets.base;
  const std::string suffix = OverlaySuffix(sets);
  if (sets.base == nullptr) {
    // Only partial sets for this GPU: over this build's built-in tables
    // (made once per combination, like any merge).
    {
      absl::MutexLock lock(&merged_mu_);
      auto it = merged_.find(gpu_name);
      if (it != merged_.end() && absl::EndsWith(it->second->id, suffix)) return it->second;
    }
    if (gpu == nullptr) return nullptr;
    ProfileSet builtin = DefaultProfileSet(*gpu);
    builtin.id = proto::ContentId(proto::ProfileSetToProto(builtin));
    sets.base = std::make_shared<const ProfileSet>(std::move(builtin));
  }
  const std::string id = absl::StrCat(sets.base->id, suffix);
  {
    absl::MutexLock lock(&merged_mu_);
    auto it = merged_.find(gpu_name);
    if (it != merged_.end() && it->second->id == id) return it->second;
  }
  // The base's parameters and error bands (so the interval stays), every
  // overlay's operators and collectives over its tables, newest last.
  auto merged = std::make_shared<ProfileSet>(*sets.base);
  merged->id = id;
  for (const auto& overlay : sets.overlays) {
    for (const auto& [key, profile] : overlay->operators) {
      merged->operators.insert_or_assign(key, profile);
    }
    for (const auto& [key, curve] : overlay->collectives) {
      merged->collectives.insert_or_assign(key, curve);
    }
    absl::StrAppend(&merged->name, " + ", overlay->name.empty() ? overlay->id : overlay->name);
    absl::StrAppend(&merged->provenance, "; tables of ", overlay->id, " laid over it");
  }
  absl::MutexLock lock(&merged_mu_);
  merged_[gpu_name] = merged;
  return merged;
}

absl::StatusOr<std::vector<v1::ProfileSetEvent>> Registry::WaitForChanges(
    WatchCursor& cursor, absl::Duration timeout) const {
  ProfileCatalog::Changes changes = catalog_.WaitForNewer(cursor.seen_sequence, timeout);
  if (changes.gap) {
    return absl::AbortedError(
        "this watch fell behind by more deletions than the registry remembers; list the sets "
        "again and watch anew");
  }
  cursor.seen_sequence = changes.sequence;
  std::vector<v1::ProfileSetEvent> events;
  for (CatalogEntry& e : changes.added) {
    if (TimeUtil::TimestampToNanoseconds(e.proto.created_at()) <= cursor.created_after_ns) continue;
    *events.emplace_back().mutable_added() = std::move(e.proto);
  }
  for (std::string& id : changes.removed) events.emplace_back().set_deleted_id(std::move(id));
  return events;
}

void Registry::RecordMissing(const std::string& gpu, absl::Span<const std::string> keys,
                             const std::string& client) {
  RecordMissing(gpu, keys, [&client] { return client; });
}

void Registry::RecordMissing(const std::string& gpu, absl::Span<const std::string> keys,
                             absl::FunctionRef<std::string()> client_of) {
  if (keys.empty()) return;
  std::optional<std::string> client;
  int64_t dropped = 0;
  {
    absl::MutexLock lock(&work_mu_);
    const absl::Time now = absl::Now();
    if (now - window_start_ > absl::Minutes(1)) {
      keys_by_client_.clear();
      window_start_ = now;
    }
    for (const std::string& key : keys) {
      auto it = pending_work_.find(WorkView(gpu, key));
      if (it != pending_work_.end()) {
        ++it->second;
        continue;
      }
      if (!client.has_value()) client = client_of();
      int64_t& added = keys_by_client_[*client];
      if (static_cast<int64_t>(pending_work_.size()) >= kMaxPendingWork ||
          added >= kWorkKeysPerClient) {
        ++dropped;
        continue;
      }
      ++added;
      pending_work_[{gpu, key}] = 1;
    }
  }
  if (dropped > 0) metrics_.WorkDropped(static_cast<double>(dropped));
}

void Registry::FlushWork() {
  decltype(pending_work_) work;
  {
    absl::MutexLock lock(&work_mu_);
    work.swap(pending_work_);
  }
  if (work.empty()) return;
  std::vector<ProfileStore::WorkCount> counts;
  for (const auto& [gpu_key, n] : work) counts.push_back({gpu_key.first, gpu_key.second, n});
  if (absl::Status s = store_->RecordMissing(counts); !s.ok()) DatabaseError(s).IgnoreError();
}

absl::StatusOr<v1::NextProfilingWorkResponse> Registry::NextWork(
    const v1::NextProfilingWorkRequest& request) {
  if (request.max_items() < 0 || request.max_items() > 10000) {
    return absl::InvalidArgumentError("max_items must be between 0 and 10000");
  }
  FlushWork();
  absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> work =
      store_->NextWork(request.gpu(), request.max_items() == 0 ? 10 : request.max_items());
  if (!work.ok()) return DatabaseError(work.status());
  v1::NextProfilingWorkResponse response;
  for (const auto& [key, n] : *work) {
    v1::ProfilingWork* w = response.add_work();
    w->set_key(key);
    w->set_requests(n);
  }
  return response;
}

void Registry::Close() {
  FlushWork();
  store_.reset();  // closes the database cleanly
}

}  // namespace vtrain::server
