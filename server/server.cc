#include "server/server.h"

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "prometheus/exposer.h"
#include "core/plan/search.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "proto/convert.h"
#include "server/metrics.h"
#include "server/profile_catalog.h"
#include "server/profile_store.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::server {
namespace {

using google::protobuf::util::TimeUtil;

// Errors change domain once, here (absl codes equal gRPC codes).
grpc::Status ToGrpcStatus(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

void Log(const std::string& line) {
  std::fprintf(stderr, "%s vtrain-server: %s\n",
               absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()).c_str(),
               line.c_str());
}

// Constant-time comparison, so a wrong token's length of common prefix is
// not observable through timing.
bool TokenEquals(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::string& longer = a.size() >= b.size() ? a : b;
  for (size_t i = 0; i < longer.size(); ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

const char* CodeName(grpc::StatusCode code) {
  static const char* kNames[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT",
                                 "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                                 "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
                                 "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
                                 "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  const int c = static_cast<int>(code);
  return c >= 0 && c <= 16 ? kNames[c] : "UNKNOWN";
}

}  // namespace

absl::StatusOr<Role> ParseRole(const std::string& name) {
  if (name == "all") return Role::kAll;
  if (name == "registry") return Role::kRegistry;
  if (name == "predictor") return Role::kPredictor;
  return absl::InvalidArgumentError(
      absl::StrCat("--role='", name, "' is unknown; use all, registry or predictor"));
}

class Server::Impl final : public v1::Simulator::Service, public v1::ProfileRegistry::Service {
 public:
  explicit Impl(const ServerOptions& options) : options_(options) {}

  absl::Status Init();
  absl::Status Listen();
  void StartSync();
  void Shutdown(absl::Duration grace);
  void Wait() { server_->Wait(); }
  int port() const { return port_; }

  // Simulator
  grpc::Status Predict(grpc::ServerContext* ctx, const v1::PredictRequest* req,
                       v1::PredictResponse* resp) override;
  grpc::Status Search(grpc::ServerContext* ctx, const v1::SearchRequest* req,
                      grpc::ServerWriter<v1::SearchResponse>* writer) override;
  // ProfileRegistry
  grpc::Status PushProfileSet(grpc::ServerContext* ctx, const v1::PushProfileSetRequest* req,
                              v1::PushProfileSetResponse* resp) override;
  grpc::Status ListProfileSets(grpc::ServerContext* ctx, const v1::ListProfileSetsRequest* req,
                               v1::ListProfileSetsResponse* resp) override;
  grpc::Status GetProfileSet(grpc::ServerContext* ctx, const v1::GetProfileSetRequest* req,
                             v1::ProfileSet* resp) override;
  grpc::Status DeleteProfileSet(grpc::ServerContext* ctx, const v1::DeleteProfileSetRequest* req,
                                v1::DeleteProfileSetResponse* resp) override;
  grpc::Status WatchProfileSets(grpc::ServerContext* ctx, const v1::WatchProfileSetsRequest* req,
                                grpc::ServerWriter<v1::ProfileSet>* writer) override;
  grpc::Status NextProfilingWork(grpc::ServerContext* ctx, const v1::NextProfilingWorkRequest* req,
                                 v1::NextProfilingWorkResponse* resp) override;

 private:
  // Records the RPC's outcome in the metrics.
  grpc::Status Done(const char* method, absl::Time start, grpc::Status status) {
    metrics_.Request(method, CodeName(status.error_code()), absl::ToDoubleSeconds(absl::Now() - start));
    return status;
  }
  grpc::Status CheckToken(grpc::ServerContext* ctx) const;
  grpc::Status CheckRead(grpc::ServerContext* ctx) const {
    return options_.require_auth_for_reads ? CheckToken(ctx) : grpc::Status::OK;
  }
  // Validates, names, stores and publishes a set; shared by pushes, seeding
  // and registry sync.
  absl::StatusOr<v1::PushProfileSetResponse> Accept(v1::ProfileSet set, bool builtin,
                                                    bool keep_timestamp);
  absl::Status Seed();
  void SyncLoop();
  absl::Status SyncOnce(v1::ProfileRegistry::Stub& stub);
  void FlushWork();

  const ServerOptions options_;
  Metrics metrics_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::unique_ptr<ProfileStore> store_;
  ProfileCatalog catalog_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread sync_thread_;

  absl::Mutex slots_mu_;
  int busy_slots_ ABSL_GUARDED_BY(slots_mu_) = 0;
  int max_slots_ = 1;

  absl::Mutex work_mu_;
  // Missing keys not yet written to the store, counted: bounded by the number
  // of distinct keys, however many predictions arrive.
  absl::flat_hash_map<std::pair<std::string, std::string>, int64_t> pending_work_
      ABSL_GUARDED_BY(work_mu_);
};

absl::Status Server::Impl::Init() {
  max_slots_ = options_.max_concurrent_simulations > 0
                   ? options_.max_concurrent_simulations
                   : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  absl::StatusOr<std::unique_ptr<ProfileStore>> store = ProfileStore::Open(options_.db_path);
  if (!store.ok()) return store.status();
  store_ = *std::move(store);
  absl::StatusOr<std::vector<v1::ProfileSet>> sets = store_->LoadAll();
  if (!sets.ok()) return sets.status();
  for (v1::ProfileSet& set : *sets) {
    absl::StatusOr<ProfileSet> tables = convert::ProfileSetFromProto(set);
    if (!tables.ok()) {
      return absl::DataLossError(absl::StrCat("stored profile set ", set.id(),
                                              " is invalid: ", tables.status().message()));
    }
    CatalogEntry e;
    e.tables = std::make_shared<const ProfileSet>(*std::move(tables));
    e.builtin = set.name().rfind("builtin-", 0) == 0 && set.operators_size() == 0;
    e.proto = std::move(set);
    catalog_.Add(std::move(e));
  }
  if (catalog_.size() == 0 && options_.role != Role::kPredictor) {
    if (absl::Status s = Seed(); !s.ok()) return s;
  }
  metrics_.ProfileSetsLoaded(static_cast<double>(catalog_.size()));
  if (!options_.metrics_listen.empty()) {
    try {
      exposer_ = std::make_unique<prometheus::Exposer>(options_.metrics_listen);
    } catch (const std::exception& e) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot serve metrics on --metrics-listen=", options_.metrics_listen, ": ", e.what()));
    }
    exposer_->RegisterCollectable(metrics_.registry());
  }
  return absl::OkStatus();
}

absl::Status Server::Impl::Seed() {
  for (const std::string& name : GpuNames()) {
    const ProfileSet set = DefaultProfileSet(*GpuByName(name));
    absl::StatusOr<v1::PushProfileSetResponse> r =
        Accept(convert::ProfileSetToProto(set), /*builtin=*/true, /*keep_timestamp=*/false);
    if (!r.ok()) return r.status();
  }
  Log(absl::StrCat("seeded an empty database with ", GpuNames().size(), " built-in profile sets"));
  return absl::OkStatus();
}

absl::StatusOr<v1::PushProfileSetResponse> Server::Impl::Accept(v1::ProfileSet set, bool builtin,
                                                                bool keep_timestamp) {
  absl::StatusOr<ProfileSet> tables = convert::ProfileSetFromProto(set);
  if (!tables.ok()) {
    return absl::InvalidArgumentError(tables.status().message());
  }
  const std::string id = convert::ContentId(set);
  if (!set.id().empty() && set.id() != id) {
    return absl::InvalidArgumentError(absl::StrCat(
        "profile_set.id='", set.id(), "' is not the content hash ", id,
        "; leave it empty and the server names the set"));
  }
  set.set_id(id);
  convert::Canonicalize(&set);
  if (!keep_timestamp || !set.has_created_at()) {
    *set.mutable_created_at() = TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(absl::Now()));
  }
  absl::StatusOr<ProfileStore::PutResult> put = store_->Put(set, builtin);
  if (!put.ok()) {
    metrics_.DatabaseError();
    return put.status();
  }
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
    if (!store_->ResolveWork(done).ok()) metrics_.DatabaseError();
  }
  if (!put->already_present) {
    CatalogEntry e;
    tables->id = id;
    e.tables = std::make_shared<const ProfileSet>(*std::move(tables));
    e.builtin = builtin;
    e.proto = std::move(set);
    catalog_.Add(std::move(e));
    metrics_.ProfileSetsLoaded(static_cast<double>(catalog_.size()));
  }
  return resp;
}

grpc::Status Server::Impl::CheckToken(grpc::ServerContext* ctx) const {
  if (options_.push_token.empty()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "this server has no push token; start it with --push-token-file");
  }
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "missing 'authorization: Bearer <token>' metadata; pass --token-file");
  }
  const std::string value(it->second.data(), it->second.size());
  const std::string prefix = "Bearer ";
  if (value.rfind(prefix, 0) != 0 || !TokenEquals(value.substr(prefix.size()), options_.push_token)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "the bearer token is wrong");
  }
  return grpc::Status::OK;
}

grpc::Status Server::Impl::Predict(grpc::ServerContext* ctx, const v1::PredictRequest* req,
                                   v1::PredictResponse* resp) {
  const absl::Time start = absl::Now();
  const char* kMethod = "Predict";
  if (options_.role == Role::kRegistry) {
    return Done(kMethod, start, grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                             "a registry does not predict; ask a predictor"));
  }
  if (grpc::Status s = CheckRead(ctx); !s.ok()) return Done(kMethod, start, s);
  absl::StatusOr<Job> job = convert::JobFromProto(*req);
  if (!job.ok()) return Done(kMethod, start, ToGrpcStatus(job.status()));
  std::shared_ptr<const ProfileSet> tables;
  if (!req->profile_set_id().empty()) {
    tables = catalog_.Tables(req->profile_set_id());
    if (tables == nullptr) {
      return Done(kMethod, start,
                  grpc::Status(grpc::StatusCode::NOT_FOUND,
                               absl::StrCat("profile_set_id '", req->profile_set_id(),
                                            "' is not loaded; list sets with ListProfileSets")));
    }
  } else if ((tables = catalog_.NewestTables(job->cluster.gpu.name)) == nullptr) {
    tables = std::make_shared<const ProfileSet>(DefaultProfileSet(job->cluster.gpu));
  }
  absl::StatusOr<PredictOptions> parsed_options = convert::OptionsFromProto(*req);
  if (!parsed_options.ok()) return Done(kMethod, start, ToGrpcStatus(parsed_options.status()));
  PredictOptions& options = *parsed_options;
  options.max_tasks = options_.max_tasks;
  options.cancelled = [ctx] { return ctx->IsCancelled(); };

  // A bounded number of simulations run at once; others wait for a slot
  // until their deadline or cancellation.
  {
    absl::MutexLock lock(&slots_mu_);
    auto free_slot = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(slots_mu_) { return busy_slots_ < max_slots_; };
    while (!free_slot()) {
      if (ctx->IsCancelled()) {
        return Done(kMethod, start, grpc::Status(grpc::StatusCode::CANCELLED, "cancelled while queued"));
      }
      slots_mu_.AwaitWithTimeout(absl::Condition(&free_slot), absl::Milliseconds(50));
    }
    ++busy_slots_;
  }
  absl::StatusOr<Prediction> p = vtrain::Predict(*job, *tables, options);
  {
    absl::MutexLock lock(&slots_mu_);
    --busy_slots_;
  }
  if (!p.ok()) {
    if (p.status().code() == absl::StatusCode::kCancelled &&
        ctx->deadline() < std::chrono::system_clock::now()) {
      return Done(kMethod, start, grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                               "the deadline passed during the simulation"));
    }
    return Done(kMethod, start, ToGrpcStatus(p.status()));
  }
  convert::PredictionToProto(*job, *p, resp);
  metrics_.SimulatedTasks(static_cast<double>(p->num_tasks));
  for (int f = 0; f < kNumFidelities; ++f) {
    if (p->fidelity.lookups[f] > 0) {
      metrics_.Lookups(std::string(FidelityName(static_cast<Fidelity>(f))),
                       static_cast<double>(p->fidelity.lookups[f]));
    }
  }
  if (!p->fidelity.missing_keys.empty()) {
    absl::MutexLock lock(&work_mu_);
    for (const std::string& key : p->fidelity.missing_keys) {
      ++pending_work_[{job->cluster.gpu.name, key}];
    }
  }
  return Done(kMethod, start, grpc::Status::OK);
}

grpc::Status Server::Impl::Search(grpc::ServerContext* ctx, const v1::SearchRequest* req,
                                  grpc::ServerWriter<v1::SearchResponse>* writer) {
  const absl::Time start = absl::Now();
  const char* kMethod = "Search";
  if (options_.role == Role::kRegistry) {
    return Done(kMethod, start, grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                             "a registry does not search; ask a predictor"));
  }
  if (grpc::Status s = CheckRead(ctx); !s.ok()) return Done(kMethod, start, s);
  absl::StatusOr<convert::SearchCall> call = convert::SearchFromProto(*req);
  if (!call.ok()) return Done(kMethod, start, ToGrpcStatus(call.status()));
  const SearchSpace* space = &call->space;
  SearchOptions* options = &call->options;
  std::shared_ptr<const ProfileSet> tables = catalog_.NewestTables(space->cluster.gpu.name);
  if (tables == nullptr) {
    tables = std::make_shared<const ProfileSet>(DefaultProfileSet(space->cluster.gpu));
  }
  options->threads = max_slots_;
  options->cancelled = [ctx] { return ctx->IsCancelled(); };
  // Progress as results finish, at most every 2% (writes are serialised).
  absl::Mutex write_mu;
  int64_t last_reported = 0;
  options->progress = [&](int64_t done, int64_t total) {
    absl::MutexLock lock(&write_mu);
    if (done != total && (done - last_reported) * 50 < total) return;
    last_reported = done;
    v1::SearchResponse msg;
    msg.mutable_progress()->set_evaluated(done);
    msg.mutable_progress()->set_total(total);
    writer->Write(msg);
  };
  absl::StatusOr<SearchResult> result = vtrain::Search(*space, *tables, *options);
  if (!result.ok()) {
    if (result.status().code() == absl::StatusCode::kCancelled &&
        ctx->deadline() < std::chrono::system_clock::now()) {
      return Done(kMethod, start, grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                               "the deadline passed during the search"));
    }
    return Done(kMethod, start, ToGrpcStatus(result.status()));
  }
  v1::SearchResponse msg;
  convert::SearchResultToProto(*result, *call, msg.mutable_result());
  {
    absl::MutexLock lock(&write_mu);
    writer->Write(msg);
  }
  return Done(kMethod, start, grpc::Status::OK);
}

void Server::Impl::FlushWork() {
  absl::flat_hash_map<std::pair<std::string, std::string>, int64_t> work;
  {
    absl::MutexLock lock(&work_mu_);
    work.swap(pending_work_);
  }
  if (work.empty()) return;
  std::vector<ProfileStore::WorkCount> counts;
  for (const auto& [gpu_key, n] : work) counts.push_back({gpu_key.first, gpu_key.second, n});
  if (!store_->RecordMissing(counts).ok()) metrics_.DatabaseError();
}

grpc::Status Server::Impl::PushProfileSet(grpc::ServerContext* ctx,
                                          const v1::PushProfileSetRequest* req,
                                          v1::PushProfileSetResponse* resp) {
  const absl::Time start = absl::Now();
  const char* kMethod = "PushProfileSet";
  if (grpc::Status s = CheckToken(ctx); !s.ok()) return Done(kMethod, start, s);
  if (options_.role == Role::kPredictor) {
    return Done(kMethod, start,
                grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                             absl::StrCat("this is a predictor; push to the registry at ",
                                          options_.registry)));
  }
  if (!req->has_profile_set()) {
    return Done(kMethod, start,
                grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "profile_set is required"));
  }
  absl::StatusOr<v1::PushProfileSetResponse> r = Accept(req->profile_set(), false, false);
  if (!r.ok()) return Done(kMethod, start, ToGrpcStatus(r.status()));
  *resp = *r;
  Log(absl::StrCat(r->already_present() ? "re-push of " : "accepted ", r->id()));
  return Done(kMethod, start, grpc::Status::OK);
}

grpc::Status Server::Impl::ListProfileSets(grpc::ServerContext* ctx,
                                           const v1::ListProfileSetsRequest* req,
                                           v1::ListProfileSetsResponse* resp) {
  const absl::Time start = absl::Now();
  if (grpc::Status s = CheckRead(ctx); !s.ok()) return Done("ListProfileSets", start, s);
  const int64_t after = req->has_created_after()
                            ? TimeUtil::TimestampToNanoseconds(req->created_after())
                            : INT64_MIN;
  std::vector<CatalogEntry> entries = catalog_.List();
  std::sort(entries.begin(), entries.end(), [](const CatalogEntry& a, const CatalogEntry& b) {
    return TimeUtil::TimestampToNanoseconds(a.proto.created_at()) <
           TimeUtil::TimestampToNanoseconds(b.proto.created_at());
  });
  for (const CatalogEntry& e : entries) {
    if (!req->gpu().empty() && e.proto.gpu() != req->gpu()) continue;
    if (TimeUtil::TimestampToNanoseconds(e.proto.created_at()) <= after) continue;
    v1::ProfileSetSummary* s = resp->add_profile_sets();
    s->set_id(e.proto.id());
    s->set_name(e.proto.name());
    s->set_gpu(e.proto.gpu());
    *s->mutable_created_at() = e.proto.created_at();
    s->set_num_operators(e.proto.operators_size());
    s->set_num_collectives(e.proto.collectives_size());
    s->set_builtin(e.builtin);
  }
  return Done("ListProfileSets", start, grpc::Status::OK);
}

grpc::Status Server::Impl::GetProfileSet(grpc::ServerContext* ctx,
                                         const v1::GetProfileSetRequest* req, v1::ProfileSet* resp) {
  const absl::Time start = absl::Now();
  if (grpc::Status s = CheckRead(ctx); !s.ok()) return Done("GetProfileSet", start, s);
  std::optional<CatalogEntry> e = catalog_.Get(req->id());
  if (!e) {
    return Done("GetProfileSet", start,
                grpc::Status(grpc::StatusCode::NOT_FOUND,
                             absl::StrCat("profile set '", req->id(), "' not found")));
  }
  *resp = e->proto;
  return Done("GetProfileSet", start, grpc::Status::OK);
}

grpc::Status Server::Impl::DeleteProfileSet(grpc::ServerContext* ctx,
                                            const v1::DeleteProfileSetRequest* req,
                                            v1::DeleteProfileSetResponse* resp) {
  const absl::Time start = absl::Now();
  const char* kMethod = "DeleteProfileSet";
  if (grpc::Status s = CheckToken(ctx); !s.ok()) return Done(kMethod, start, s);
  if (options_.role == Role::kPredictor) {
    return Done(kMethod, start, grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                             "this is a predictor; delete on the registry"));
  }
  absl::StatusOr<bool> deleted = store_->Delete(req->id());
  if (!deleted.ok()) {
    metrics_.DatabaseError();
    return Done(kMethod, start, ToGrpcStatus(deleted.status()));
  }
  catalog_.Remove(req->id());
  metrics_.ProfileSetsLoaded(static_cast<double>(catalog_.size()));
  resp->set_deleted(*deleted);
  if (!*deleted) {
    return Done(kMethod, start, grpc::Status(grpc::StatusCode::NOT_FOUND,
                                             absl::StrCat("profile set '", req->id(), "' not found")));
  }
  return Done(kMethod, start, grpc::Status::OK);
}

grpc::Status Server::Impl::WatchProfileSets(grpc::ServerContext* ctx,
                                            const v1::WatchProfileSetsRequest* req,
                                            grpc::ServerWriter<v1::ProfileSet>* writer) {
  const absl::Time start = absl::Now();
  if (grpc::Status s = CheckRead(ctx); !s.ok()) return Done("WatchProfileSets", start, s);
  const int64_t since =
      req->has_since() ? TimeUtil::TimestampToNanoseconds(req->since()) : INT64_MIN;
  int64_t seen = 0;
  while (!ctx->IsCancelled() && !stopping_) {
    for (const CatalogEntry& e : catalog_.WaitForNewer(seen, absl::Milliseconds(200))) {
      seen = std::max(seen, e.sequence);
      if (TimeUtil::TimestampToNanoseconds(e.proto.created_at()) <= since) continue;
      if (!writer->Write(e.proto)) return Done("WatchProfileSets", start, grpc::Status::CANCELLED);
    }
  }
  return Done("WatchProfileSets", start, grpc::Status::OK);
}

grpc::Status Server::Impl::NextProfilingWork(grpc::ServerContext* ctx,
                                             const v1::NextProfilingWorkRequest* req,
                                             v1::NextProfilingWorkResponse* resp) {
  const absl::Time start = absl::Now();
  if (grpc::Status s = CheckRead(ctx); !s.ok()) return Done("NextProfilingWork", start, s);
  if (req->max_items() < 0 || req->max_items() > 10000) {
    return Done("NextProfilingWork", start,
                grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                             "max_items must be between 0 and 10000"));
  }
  FlushWork();
  absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> work =
      store_->NextWork(req->gpu(), req->max_items() == 0 ? 10 : req->max_items());
  if (!work.ok()) {
    metrics_.DatabaseError();
    return Done("NextProfilingWork", start, ToGrpcStatus(work.status()));
  }
  for (const auto& [key, n] : *work) {
    v1::ProfilingWork* w = resp->add_work();
    w->set_key(key);
    w->set_requests(n);
  }
  return Done("NextProfilingWork", start, grpc::Status::OK);
}

absl::Status Server::Impl::Listen() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (!options_.tls_cert_file.empty() || !options_.tls_key_file.empty()) {
    auto read = [](const std::string& path, std::string* out) {
      std::ifstream in(path);
      if (!in) return false;
      std::stringstream s;
      s << in.rdbuf();
      *out = s.str();
      return true;
    };
    grpc::SslServerCredentialsOptions ssl;
    grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
    if (!read(options_.tls_cert_file, &pair.cert_chain) ||
        !read(options_.tls_key_file, &pair.private_key)) {
      return absl::InvalidArgumentError(
          "--tls-cert-file and --tls-key-file must both name readable PEM files");
    }
    ssl.pem_key_cert_pairs.push_back(pair);
    if (!options_.tls_client_ca_file.empty()) {
      if (!read(options_.tls_client_ca_file, &ssl.pem_root_certs)) {
        return absl::InvalidArgumentError("--tls-client-ca-file must name a readable PEM file");
      }
      ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    }
    creds = grpc::SslServerCredentials(ssl);
  }
  builder.AddListeningPort(options_.listen, creds, &port_);
  builder.SetMaxReceiveMessageSize(static_cast<int>(options_.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(options_.max_message_bytes));
  builder.RegisterService(static_cast<v1::Simulator::Service*>(this));
  builder.RegisterService(static_cast<v1::ProfileRegistry::Service*>(this));
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on --listen=", options_.listen, "; is the port in use?"));
  }
  // SERVING once profiles are loaded (they are, by now).
  server_->GetHealthCheckService()->SetServingStatus(true);
  Log(absl::StrCat("listening on port ", port_, " with ", catalog_.size(), " profile sets"));
  return absl::OkStatus();
}

absl::Status Server::Impl::SyncOnce(v1::ProfileRegistry::Stub& stub) {
  // Fill the cache with every set the registry has that we lack.
  grpc::ClientContext list_ctx;
  list_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListProfileSetsResponse list;
  grpc::Status s = stub.ListProfileSets(&list_ctx, v1::ListProfileSetsRequest(), &list);
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  for (const v1::ProfileSetSummary& summary : list.profile_sets()) {
    if (catalog_.Contains(summary.id())) continue;
    grpc::ClientContext get_ctx;
    get_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::GetProfileSetRequest get;
    get.set_id(summary.id());
    v1::ProfileSet set;
    s = stub.GetProfileSet(&get_ctx, get, &set);
    if (!s.ok()) return absl::UnavailableError(s.error_message());
    absl::StatusOr<v1::PushProfileSetResponse> r = Accept(set, summary.builtin(), true);
    if (!r.ok()) Log(absl::StrCat("ignoring registry set ", summary.id(), ": ", r.status().message()));
  }
  metrics_.RegistryUp(true);
  metrics_.RegistrySyncLag(0);
  // Then follow new sets as they arrive.
  grpc::ClientContext watch_ctx;
  std::unique_ptr<grpc::ClientReader<v1::ProfileSet>> reader =
      stub.WatchProfileSets(&watch_ctx, v1::WatchProfileSetsRequest());
  v1::ProfileSet set;
  std::atomic<bool> done{false};
  // Shutdown must not wait for the registry's next message.
  std::thread canceller([&] {
    while (!stopping_ && !done) absl::SleepFor(absl::Milliseconds(50));
    if (stopping_) watch_ctx.TryCancel();
  });
  while (reader->Read(&set)) {
    if (!catalog_.Contains(set.id())) {
      absl::StatusOr<v1::PushProfileSetResponse> r = Accept(set, false, true);
      if (r.ok()) Log(absl::StrCat("synced ", set.id(), " from the registry"));
    }
    metrics_.RegistrySyncLag(0);
  }
  done = true;
  canceller.join();
  grpc::Status end = reader->Finish();
  return absl::UnavailableError(end.error_message());
}

void Server::Impl::SyncLoop() {
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!options_.registry_ca_file.empty()) {
    std::ifstream in(options_.registry_ca_file);
    std::stringstream s;
    s << in.rdbuf();
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = s.str();
    creds = grpc::SslCredentials(ssl);
  }
  auto channel = grpc::CreateChannel(options_.registry, creds);
  auto stub = v1::ProfileRegistry::NewStub(channel);
  absl::Duration backoff = absl::Milliseconds(200);
  absl::Time last_contact = absl::Now();
  while (!stopping_) {
    absl::Status s = SyncOnce(*stub);
    if (stopping_) break;
    metrics_.RegistryUp(false);
    metrics_.RegistrySyncLag(absl::ToDoubleSeconds(absl::Now() - last_contact));
    Log(absl::StrCat("registry ", options_.registry, " unreachable (", s.message(),
                     "); serving from the local cache of ", catalog_.size(), " sets"));
    for (absl::Time until = absl::Now() + backoff; absl::Now() < until && !stopping_;) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    backoff = std::min(backoff * 2, absl::Seconds(5));
    last_contact = s.ok() ? absl::Now() : last_contact;
  }
}

void Server::Impl::StartSync() {
  if (options_.role != Role::kPredictor) return;
  sync_thread_ = std::thread([this] { SyncLoop(); });
}

void Server::Impl::Shutdown(absl::Duration grace) {
  if (stopping_.exchange(true)) return;
  Log("shutting down");
  server_->GetHealthCheckService()->SetServingStatus(false);
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(absl::ToInt64Milliseconds(grace)));
  if (sync_thread_.joinable()) sync_thread_.join();
  FlushWork();
  store_.reset();  // closes the database cleanly
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  if (options.role == Role::kPredictor && options.registry.empty()) {
    return absl::InvalidArgumentError("--role=predictor needs --registry HOST:PORT");
  }
  auto impl = std::make_unique<Impl>(options);
  if (absl::Status s = impl->Init(); !s.ok()) return s;
  if (absl::Status s = impl->Listen(); !s.ok()) return s;
  impl->StartSync();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() { impl_->Shutdown(absl::Seconds(1)); }
int Server::port() const { return impl_->port(); }
void Server::Shutdown(absl::Duration grace) { impl_->Shutdown(grace); }
void Server::Wait() { impl_->Wait(); }

}  // namespace vtrain::server
