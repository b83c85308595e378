// A soak of a registry and two predictors in-process on loopback, with real
// SQLite files (issue 12): N clients mix predictions, searches, pushes and
// deletes for a while; it reports calls, failures and latency per kind and the
// process's resident memory over time, then checks that both predictors
// converged to exactly the sets the registry acknowledged. Exits 1 when a
// check fails or a call failed that should not have.
//
//   build/tests/soak_benchmark --clients 64 --seconds 600 [--json] 2>servers.log
//
// Not Google Benchmark: one long run, not repeated short ones.
#include <malloc.h>
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/flag_parser.h"
#include "core/profile/default_profiles.h"
#include "grpcpp/grpcpp.h"
#include "proto/profile_set_convert.h"
#include "server/server.h"
#include "tests/testing/profile_sets.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::server {
namespace {

namespace fs = std::filesystem;

constexpr char kToken[] = "soak-token";

struct SoakOptions {
  int clients = 64;
  int64_t seconds = 600;
  int64_t rss_interval_seconds = 5;
  int64_t converge_seconds = 30;
  // Growth of resident memory from the end of warm-up (a tenth of the run)
  // to the last sample that fails the run.
  int64_t max_rss_growth_mib = 64;
  uint64_t seed = 1;
  bool json = false;
};

// The kinds of call, with their share of the mix (percent).
enum Kind { kPredict, kPredictNamed, kSearch, kPush, kDelete, kNumKinds };
constexpr const char* kKindNames[kNumKinds] = {"predict", "predict_named", "search", "push",
                                               "delete"};
constexpr int kMixPercent[kNumKinds] = {85, 5, 2, 4, 4};
// The live pool of pushed sets stays under this (a push becomes a delete), so
// the registry's contents, and the process's memory, stay bounded.
constexpr size_t kMaxLiveSets = 256;

// Latencies in a fixed log histogram (buckets 5% wide from 1 us), so that
// recording never allocates and the soak's own memory stays flat.
class Histogram {
 public:
  void Add(absl::Duration d) {
    const double us = std::max(1.0, absl::ToDoubleMicroseconds(d));
    const int b = std::min<int>(kBuckets - 1, static_cast<int>(std::log(us) / std::log(kGrowth)));
    ++counts_[b];
  }
  void Merge(const Histogram& o) {
    for (int b = 0; b < kBuckets; ++b) counts_[b] += o.counts_[b];
  }
  // The upper edge of the bucket holding the q-quantile, in ms; 0 when empty.
  double QuantileMs(double q) const {
    int64_t total = 0;
    for (int64_t c : counts_) total += c;
    if (total == 0) return 0;
    const int64_t rank = static_cast<int64_t>(std::ceil(q * static_cast<double>(total)));
    int64_t seen = 0;
    for (int b = 0; b < kBuckets; ++b) {
      seen += counts_[b];
      if (seen >= std::max<int64_t>(rank, 1)) return std::pow(kGrowth, b + 1) / 1000.0;
    }
    return std::pow(kGrowth, kBuckets) / 1000.0;
  }

 private:
  static constexpr double kGrowth = 1.05;
  static constexpr int kBuckets = 512;  // 1.05^512 us: far past any deadline
  std::array<int64_t, kBuckets> counts_{};
};

// One client's (then the run's) figures for one kind of call.
struct KindStats {
  int64_t calls = 0;
  std::array<int64_t, 17> unexpected{};  // by grpc::StatusCode
  std::array<int64_t, 17> expected{};
  int64_t bad_responses = 0;  // OK, but the answer is malformed
  Histogram latency;
  void Merge(const KindStats& o) {
    calls += o.calls;
    for (int c = 0; c < 17; ++c) {
      unexpected[c] += o.unexpected[c];
      expected[c] += o.expected[c];
    }
    bad_responses += o.bad_responses;
    latency.Merge(o.latency);
  }
  int64_t Unexpected() const {
    int64_t n = bad_responses;
    for (int64_t c : unexpected) n += c;
    return n;
  }
  int64_t Expected() const {
    int64_t n = 0;
    for (int64_t c : expected) n += c;
    return n;
  }
};
using ClientStats = std::array<KindStats, kNumKinds>;

const char* CodeName(int code) {
  static constexpr const char* kNames[17] = {
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT", "DEADLINE",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "EXHAUSTED",        "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",         "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
  return code >= 0 && code < 17 ? kNames[code] : "?";
}

// The sets pushed during the run: acknowledged ones (live until deleted),
// those a client is deleting, and those whose fate a failed call left unknown
// (they are left out of the final check).
class SetBook {
 public:
  void Acknowledged(const std::string& id) {
    absl::MutexLock lock(&mu_);
    live_.push_back(id);
  }
  size_t live() const {
    absl::MutexLock lock(&mu_);
    return live_.size();
  }
  // Takes a random live set out of the pool for one client to delete.
  std::optional<std::string> TakeForDelete(std::mt19937_64& rng) {
    absl::MutexLock lock(&mu_);
    if (live_.empty()) return std::nullopt;
    const size_t i = rng() % live_.size();
    std::swap(live_[i], live_.back());
    std::string id = std::move(live_.back());
    live_.pop_back();
    return id;
  }
  void Deleted(const std::string& id) {
    absl::MutexLock lock(&mu_);
    recent_deleted_.push_back(id);
    if (recent_deleted_.size() > 16) recent_deleted_.pop_front();
    // "sha256:" and 64 hex digits packed into 32 bytes: the record of every
    // deletion grows by 32 bytes a delete, and is reported as such.
    const std::string bytes = id.rfind("sha256:", 0) == 0 && id.size() == 71
                                  ? absl::HexStringToBytes(id.substr(7))
                                  : std::string();
    if (!bytes.empty() && absl::StrCat("sha256:", absl::BytesToHexString(bytes)) == id) {
      deleted_packed_ += bytes;
    } else {
      deleted_other_.push_back(id);
    }
  }
  explicit SetBook(size_t expected_deletes) { deleted_packed_.reserve(expected_deletes * 32); }
  // The bytes the record of deletions takes (it grows with the run).
  int64_t DeletedRecordBytes() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int64_t>(deleted_packed_.size());
  }
  void Unknown() {
    absl::MutexLock lock(&mu_);
    ++unknown_;
  }
  // A live or recently deleted set, to name in a prediction.
  std::optional<std::string> AnyRecent(std::mt19937_64& rng) const {
    absl::MutexLock lock(&mu_);
    const size_t n = live_.size() + recent_deleted_.size();
    if (n == 0) return std::nullopt;
    const size_t i = rng() % n;
    return i < live_.size() ? live_[i] : recent_deleted_[i - live_.size()];
  }
  std::vector<std::string> Live() const {
    absl::MutexLock lock(&mu_);
    return live_;
  }
  std::vector<std::string> AllDeleted() const {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> ids = deleted_other_;
    for (size_t at = 0; at < deleted_packed_.size(); at += 32) {
      ids.push_back(
          absl::StrCat("sha256:", absl::BytesToHexString(deleted_packed_.substr(at, 32))));
    }
    return ids;
  }
  int64_t unknown() const {
    absl::MutexLock lock(&mu_);
    return unknown_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> live_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> recent_deleted_ ABSL_GUARDED_BY(mu_);  // the last 16
  std::string deleted_packed_ ABSL_GUARDED_BY(mu_);              // 32 bytes an id
  std::vector<std::string> deleted_other_ ABSL_GUARDED_BY(mu_);  // ids of another form
  int64_t unknown_ ABSL_GUARDED_BY(mu_) = 0;
};

// A small job at operator granularity: a GPT-3 up to 2.7B on 8 or 16 GPUs.
v1::PredictRequest SmallJob(std::mt19937_64& rng) {
  static constexpr const char* kModels[] = {"gpt3-125m", "gpt3-350m", "gpt3-1.3b", "gpt3-2.7b"};
  v1::PredictRequest r;
  r.mutable_model()->set_preset(kModels[rng() % 4]);
  const int64_t gpus = rng() % 2 == 0 ? 8 : 16;
  r.mutable_cluster()->set_num_gpus(gpus);
  // t in {1, 2, 4} divides every head count, p in {1, 2} every layer count.
  r.mutable_plan()->set_tensor_parallel(int64_t{1} << (rng() % 3));
  r.mutable_plan()->set_pipeline_parallel(int64_t{1} << (rng() % 2));
  r.mutable_plan()->set_micro_batch(1 + static_cast<int64_t>(rng() % 2));
  r.mutable_plan()->set_global_batch(128);
  r.set_granularity(v1::GRANULARITY_OPERATOR);
  return r;
}

std::unique_ptr<grpc::ClientContext> Context(absl::Duration deadline, bool with_token) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  if (with_token) ctx->AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
  return ctx;
}

struct Targets {
  std::unique_ptr<v1::ProfileRegistry::Stub> registry;
  std::vector<std::unique_ptr<v1::Simulator::Stub>> predictors;
};

// One client: calls until `stop`, one at a time, each with a deadline.
class Client {
 public:
  Client(const Targets& targets, SetBook& book, std::atomic<int64_t>& next_duration, uint64_t seed)
      : targets_(targets), book_(book), next_duration_(next_duration), rng_(seed) {}

  void Run(const std::atomic<bool>& stop) {
    while (!stop) {
      int roll = static_cast<int>(rng_() % 100);
      int kind = 0;
      while (roll >= kMixPercent[kind]) roll -= kMixPercent[kind++];
      if (kind == kPush && book_.live() >= kMaxLiveSets) kind = kDelete;
      if (kind == kDelete && !DeleteOne()) kind = kPush;  // nothing to delete yet
      switch (kind) {
        case kPredict:
          Predict();
          break;
        case kPredictNamed:
          PredictNamed();
          break;
        case kSearch:
          Search();
          break;
        case kPush:
          Push();
          break;
        default:
          break;  // deleted above
      }
    }
  }
  const ClientStats& stats() const { return stats_; }

 private:
  v1::Simulator::Stub& AnyPredictor() {
    return *targets_.predictors[rng_() % targets_.predictors.size()];
  }
  void Record(Kind kind, absl::Time start, const grpc::Status& s, bool expected_failure,
              bool bad_response) {
    KindStats& k = stats_[kind];
    ++k.calls;
    k.latency.Add(absl::Now() - start);
    const int code = std::clamp(static_cast<int>(s.error_code()), 0, 16);
    if (!s.ok()) {
      (expected_failure ? k.expected : k.unexpected)[code]++;
      if (!expected_failure && k.unexpected[code] <= 3) {  // the first few, for the diagnosis
        std::printf("unexpected %s failure: %s %s\n", kKindNames[kind], CodeName(code),
                    s.error_message().c_str());
      }
    } else if (bad_response) {
      ++k.bad_responses;
    }
  }

  void Predict() {
    const v1::PredictRequest req = SmallJob(rng_);
    v1::PredictResponse resp;
    const absl::Time start = absl::Now();
    grpc::Status s = AnyPredictor().Predict(Context(absl::Seconds(30), false).get(), req, &resp);
    Record(kPredict, start, s, false, resp.iteration_time_ns() <= 0);
  }

  // NOT_FOUND is expected here: the set may have been deleted a moment ago,
  // or not reached this predictor yet (predictors follow asynchronously).
  void PredictNamed() {
    std::optional<std::string> id = book_.AnyRecent(rng_);
    if (!id) return Predict();
    v1::PredictRequest req = SmallJob(rng_);
    req.set_profile_set_id(*id);
    v1::PredictResponse resp;
    const absl::Time start = absl::Now();
    grpc::Status s = AnyPredictor().Predict(Context(absl::Seconds(30), false).get(), req, &resp);
    Record(kPredictNamed, start, s, s.error_code() == grpc::StatusCode::NOT_FOUND,
           resp.iteration_time_ns() <= 0 || resp.profile_set_id() != *id);
  }

  void Search() {
    static constexpr const char* kModels[] = {"gpt3-125m", "gpt3-350m", "gpt3-1.3b"};
    v1::SearchRequest req;
    req.mutable_model()->set_preset(kModels[rng_() % 3]);
    req.set_global_batch(64);
    req.set_max_gpus(16);
    const absl::Time start = absl::Now();
    auto ctx = Context(absl::Seconds(60), false);
    std::unique_ptr<grpc::ClientReader<v1::SearchResponse>> reader =
        AnyPredictor().Search(ctx.get(), req);
    v1::SearchResponse msg;
    bool result = false;
    while (reader->Read(&msg)) result = result || msg.has_result();
    grpc::Status s = reader->Finish();
    Record(kSearch, start, s, false, !result);
  }

  void Push() {
    v1::PushProfileSetRequest req;
    *req.mutable_profile_set() = testing::MeasuredSet(next_duration_.fetch_add(1));
    v1::PushProfileSetResponse resp;
    const absl::Time start = absl::Now();
    grpc::Status s =
        targets_.registry->PushProfileSet(Context(absl::Seconds(30), true).get(), req, &resp);
    // Every push is new content: already_present means ids collided.
    Record(kPush, start, s, false, resp.id().empty() || resp.already_present());
    if (s.ok() && !resp.id().empty()) {
      book_.Acknowledged(resp.id());
    } else if (!s.ok()) {
      book_.Unknown();  // it may have landed
    }
  }

  // False when no set is live. NOT_FOUND is unexpected: only this client
  // deletes the set it took.
  bool DeleteOne() {
    std::optional<std::string> id = book_.TakeForDelete(rng_);
    if (!id) return false;
    v1::DeleteProfileSetRequest req;
    req.set_id(*id);
    v1::DeleteProfileSetResponse resp;
    const absl::Time start = absl::Now();
    grpc::Status s =
        targets_.registry->DeleteProfileSet(Context(absl::Seconds(30), true).get(), req, &resp);
    Record(kDelete, start, s, false, !resp.deleted());
    if (s.ok()) {
      book_.Deleted(*id);
    } else {
      book_.Unknown();
    }
    return true;
  }

  const Targets& targets_;
  SetBook& book_;
  std::atomic<int64_t>& next_duration_;
  std::mt19937_64 rng_;
  ClientStats stats_;
};

int64_t ResidentKib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoll(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

// What the allocator has handed out and not had back, over all arenas: unlike
// the resident size, fragmentation and cached free memory do not count.
int64_t HeapInUseKib() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<int64_t>((m.uordblks + m.hblkhd) / 1024);
}

struct MemorySample {
  double t_s;  // seconds into the run
  int64_t rss_kib, heap_kib;
};
MemorySample SampleMemory(absl::Time begin) {
  return {absl::ToDoubleSeconds(absl::Now() - begin), ResidentKib(), HeapInUseKib()};
}

// The ids a server lists; nullopt when the call fails.
std::optional<absl::flat_hash_set<std::string>> ListIds(const Server& server) {
  auto stub = v1::ProfileRegistry::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", server.port()), grpc::InsecureChannelCredentials()));
  v1::ListProfileSetsResponse list;
  if (!stub->ListProfileSets(Context(absl::Seconds(10), false).get(), {}, &list).ok()) {
    return std::nullopt;
  }
  absl::flat_hash_set<std::string> ids;
  for (const v1::ProfileSetSummary& s : list.profile_sets()) ids.insert(s.id());
  return ids;
}

// Where the predictors stand against the book and the registry.
struct Convergence {
  bool converged = false;
  double waited_s = 0;
  int64_t live = 0, deleted = 0, unknown = 0;
  std::vector<int64_t> live_missing, deleted_present, differs_from_registry;  // per predictor
  std::vector<std::string> examples;                                          // a few offending ids
};

Convergence CheckOnce(const Server& registry,
                      const std::vector<std::unique_ptr<Server>>& predictors, const SetBook& book) {
  Convergence c;
  const std::vector<std::string> live = book.Live();
  const std::vector<std::string> deleted = book.AllDeleted();
  c.live = static_cast<int64_t>(live.size());
  c.deleted = static_cast<int64_t>(deleted.size());
  c.unknown = book.unknown();
  const std::optional<absl::flat_hash_set<std::string>> reg = ListIds(registry);
  bool ok = reg.has_value();
  // The registry itself first: it acknowledged these.
  std::vector<const Server*> servers = {&registry};
  for (const auto& p : predictors) servers.push_back(p.get());
  for (size_t i = 0; i < servers.size(); ++i) {
    const std::optional<absl::flat_hash_set<std::string>> ids = ListIds(*servers[i]);
    int64_t missing = 0, present = 0, differs = 0;
    if (!ids) {
      ok = false;
      missing = present = differs = -1;
    } else {
      for (const std::string& id : live) {
        if (!ids->contains(id) && ++missing <= 3) c.examples.push_back("missing " + id);
      }
      for (const std::string& id : deleted) {
        if (ids->contains(id) && ++present <= 3) c.examples.push_back("undeleted " + id);
      }
      if (reg) {
        for (const std::string& id : *ids) differs += reg->contains(id) ? 0 : 1;
        for (const std::string& id : *reg) differs += ids->contains(id) ? 0 : 1;
      }
      ok = ok && missing == 0 && present == 0 && differs == 0;
    }
    c.live_missing.push_back(missing);
    c.deleted_present.push_back(present);
    c.differs_from_registry.push_back(differs);
  }
  c.converged = ok;
  return c;
}

int Run(const SoakOptions& o) {
  std::string tmpl = (fs::temp_directory_path() / "vtrain_soak_XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::printf("cannot make a temp dir under %s\n", fs::temp_directory_path().c_str());
    return 1;
  }
  const fs::path dir = tmpl;
  auto start_server = [&](const std::string& db, Role role,
                          const std::string& registry) -> std::unique_ptr<Server> {
    ServerOptions so;
    so.listen = "127.0.0.1:0";
    so.db_path = (dir / db).string();
    so.role = role;
    so.registry = registry;
    so.push_token = kToken;
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(so);
    if (!s.ok()) std::printf("cannot start %s: %s\n", db.c_str(), s.status().ToString().c_str());
    return s.ok() ? *std::move(s) : nullptr;
  };
  std::unique_ptr<Server> registry = start_server("registry.db", Role::kRegistry, "");
  if (registry == nullptr) return 1;
  const std::string registry_address = absl::StrCat("127.0.0.1:", registry->port());
  std::vector<std::unique_ptr<Server>> predictors;
  for (const char* db : {"predictor0.db", "predictor1.db"}) {
    predictors.push_back(start_server(db, Role::kPredictor, registry_address));
    if (predictors.back() == nullptr) return 1;
  }

  Targets targets;
  targets.registry = v1::ProfileRegistry::NewStub(
      grpc::CreateChannel(registry_address, grpc::InsecureChannelCredentials()));
  for (const auto& p : predictors) {
    targets.predictors.push_back(v1::Simulator::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", p->port()), grpc::InsecureChannelCredentials())));
  }

  SetBook book(static_cast<size_t>(o.seconds) * 256);
  std::atomic<int64_t> next_duration{50'000};
  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < o.clients; ++i) {
    clients.push_back(std::make_unique<Client>(targets, book, next_duration, o.seed * 1000 + i));
  }

  // Resident memory every few seconds (the main thread), while clients run.
  std::vector<MemorySample> mem;
  mem.reserve(static_cast<size_t>(o.seconds / o.rss_interval_seconds + 4));
  const absl::Time begin = absl::Now();
  mem.push_back(SampleMemory(begin));
  std::vector<std::thread> threads;
  for (auto& c : clients) threads.emplace_back([&c, &stop] { c->Run(stop); });
  const absl::Time end = begin + absl::Seconds(o.seconds);
  while (absl::Now() < end) {
    absl::SleepFor(std::min(absl::Seconds(o.rss_interval_seconds), end - absl::Now()));
    mem.push_back(SampleMemory(begin));
  }
  stop = true;
  for (std::thread& t : threads) t.join();
  const double elapsed_s = absl::ToDoubleSeconds(absl::Now() - begin);
  mem.push_back(SampleMemory(begin));

  ClientStats total;
  for (const auto& c : clients) {
    for (int k = 0; k < kNumKinds; ++k) total[k].Merge(c->stats()[k]);
  }

  // Convergence: bounded wait for the predictors to hold what the registry does.
  const absl::Time converge_start = absl::Now();
  Convergence conv;
  do {
    conv = CheckOnce(*registry, predictors, book);
    if (conv.converged) break;
    absl::SleepFor(absl::Milliseconds(250));
  } while (absl::Now() - converge_start < absl::Seconds(o.converge_seconds));
  conv.waited_s = absl::ToDoubleSeconds(absl::Now() - converge_start);

  // Memory: growth after warm-up (the first tenth of the run, at least 5 s).
  const double warm_s = std::max(5.0, static_cast<double>(o.seconds) / 10);
  MemorySample warm = mem.front(), peak = mem.front();
  for (const MemorySample& m : mem) {
    peak.rss_kib = std::max(peak.rss_kib, m.rss_kib);
    peak.heap_kib = std::max(peak.heap_kib, m.heap_kib);
    if (m.t_s <= warm_s) warm = m;
  }
  const MemorySample& first = mem.front();
  const MemorySample& last = mem.back();
  const int64_t growth_kib = last.rss_kib - warm.rss_kib;
  const bool memory_ok = growth_kib <= o.max_rss_growth_mib * 1024;
  // The series, at most ~20 points for the text.
  const size_t stride = std::max<size_t>(1, mem.size() / 20);
  std::vector<std::string> rss_series, heap_series, rss_text, heap_text;
  for (size_t i = 0; i < mem.size(); ++i) {
    rss_series.push_back(absl::StrCat(mem[i].rss_kib));
    heap_series.push_back(absl::StrCat(mem[i].heap_kib));
    if (i % stride == 0 || i + 1 == mem.size()) {
      rss_text.push_back(absl::StrFormat("%.0fs:%.1f", mem[i].t_s, mem[i].rss_kib / 1024.0));
      heap_text.push_back(absl::StrFormat("%.0fs:%.1f", mem[i].t_s, mem[i].heap_kib / 1024.0));
    }
  }

  int64_t unexpected = 0;
  for (const KindStats& k : total) unexpected += k.Unexpected();

  std::printf("\nsoak: %d clients, %.1f s, registry + 2 predictors on 127.0.0.1\n", o.clients,
              elapsed_s);
  std::printf("%-14s %9s %9s %9s %9s %10s %10s  %s\n", "kind", "calls", "calls/s", "expected",
              "failures", "p50_ms", "p99_ms", "failures by code");
  for (int k = 0; k < kNumKinds; ++k) {
    const KindStats& s = total[k];
    std::vector<std::string> codes;
    for (int c = 0; c < 17; ++c) {
      if (s.unexpected[c] > 0) codes.push_back(absl::StrCat(CodeName(c), "=", s.unexpected[c]));
      if (s.expected[c] > 0) {
        codes.push_back(absl::StrCat(CodeName(c), "=", s.expected[c], " (expected)"));
      }
    }
    if (s.bad_responses > 0) codes.push_back(absl::StrCat("bad_response=", s.bad_responses));
    std::printf("%-14s %9lld %9.1f %9lld %9lld %10.3f %10.3f  %s\n", kKindNames[k],
                static_cast<long long>(s.calls), static_cast<double>(s.calls) / elapsed_s,
                static_cast<long long>(s.Expected()), static_cast<long long>(s.Unexpected()),
                s.latency.QuantileMs(0.5), s.latency.QuantileMs(0.99),
                absl::StrJoin(codes, ", ").c_str());
  }
  absl::PrintF(
      "rss_kib: first %d, after warm-up (%.0f s) %d, max %d, last %d; growth %d KiB "
      "(limit %d MiB) %s\n",
      first.rss_kib, warm_s, warm.rss_kib, peak.rss_kib, last.rss_kib, growth_kib,
      o.max_rss_growth_mib, memory_ok ? "ok" : "GROWING");
  absl::PrintF(
      "heap_in_use_kib: first %d, after warm-up %d, max %d, last %d (of which the "
      "soak's record of deleted ids %d)\n",
      first.heap_kib, warm.heap_kib, peak.heap_kib, last.heap_kib,
      book.DeletedRecordBytes() / 1024);
  absl::PrintF("rss_mib:  %s\nheap_mib: %s\n", absl::StrJoin(rss_text, " "),
               absl::StrJoin(heap_text, " "));
  std::printf(
      "sets: %lld acknowledged and live, %lld deleted, %lld unknown (a failed push or "
      "delete)\n",
      static_cast<long long>(conv.live), static_cast<long long>(conv.deleted),
      static_cast<long long>(conv.unknown));
  for (size_t i = 0; i < conv.live_missing.size(); ++i) {
    std::printf("  %-11s live missing %lld, deleted present %lld, differs from registry %lld\n",
                i == 0 ? "registry" : absl::StrCat("predictor", i - 1).c_str(),
                static_cast<long long>(conv.live_missing[i]),
                static_cast<long long>(conv.deleted_present[i]),
                static_cast<long long>(conv.differs_from_registry[i]));
  }
  for (const std::string& e : conv.examples) std::printf("  %s\n", e.c_str());
  std::printf("convergence: %s after %.2f s (limit %lld s)\n", conv.converged ? "ok" : "FAILED",
              conv.waited_s, static_cast<long long>(o.converge_seconds));
  const bool pass = unexpected == 0 && memory_ok && conv.converged;
  std::printf("result: %s\n", pass ? "PASS" : "FAIL");

  if (o.json) {
    std::string kinds;
    for (int k = 0; k < kNumKinds; ++k) {
      const KindStats& s = total[k];
      std::vector<std::string> codes;
      for (int c = 0; c < 17; ++c) {
        if (s.unexpected[c] > 0)
          codes.push_back(absl::StrFormat("\"%s\":%d", CodeName(c), s.unexpected[c]));
      }
      absl::StrAppend(
          &kinds, k == 0 ? "" : ",",
          absl::StrFormat("\"%s\":{\"calls\":%d,\"calls_per_s\":%.2f,\"expected\":%d,"
                          "\"failures\":%d,\"bad_responses\":%d,\"failures_by_code\":{%s},"
                          "\"p50_ms\":%.3f,\"p99_ms\":%.3f}",
                          kKindNames[k], s.calls, static_cast<double>(s.calls) / elapsed_s,
                          s.Expected(), s.Unexpected(), s.bad_responses, absl::StrJoin(codes, ","),
                          s.latency.QuantileMs(0.5), s.latency.QuantileMs(0.99)));
    }
    absl::PrintF(
        "{\"clients\":%d,\"seconds\":%.1f,\"kinds\":{%s},"
        "\"rss_kib\":{\"first\":%d,\"after_warmup\":%d,\"max\":%d,\"last\":%d,\"ok\":%s},"
        "\"heap_in_use_kib\":{\"first\":%d,\"after_warmup\":%d,\"max\":%d,\"last\":%d,"
        "\"deleted_record\":%d},\"memory_series\":{\"interval_s\":%d,\"rss_kib\":[%s],"
        "\"heap_in_use_kib\":[%s]},"
        "\"sets\":{\"live\":%d,\"deleted\":%d,\"unknown\":%d},"
        "\"convergence\":{\"ok\":%s,\"waited_s\":%.2f,\"live_missing\":[%s],"
        "\"deleted_present\":[%s],\"differs_from_registry\":[%s]},\"pass\":%s}\n",
        o.clients, elapsed_s, kinds, first.rss_kib, warm.rss_kib, peak.rss_kib, last.rss_kib,
        memory_ok ? "true" : "false", first.heap_kib, warm.heap_kib, peak.heap_kib, last.heap_kib,
        book.DeletedRecordBytes() / 1024, o.rss_interval_seconds, absl::StrJoin(rss_series, ","),
        absl::StrJoin(heap_series, ","), conv.live, conv.deleted, conv.unknown,
        conv.converged ? "true" : "false", conv.waited_s, absl::StrJoin(conv.live_missing, ","),
        absl::StrJoin(conv.deleted_present, ","), absl::StrJoin(conv.differs_from_registry, ","),
        pass ? "true" : "false");
  }
  std::fflush(stdout);

  for (auto& p : predictors) p->Shutdown(absl::Seconds(1));
  registry->Shutdown(absl::Seconds(1));
  predictors.clear();
  registry.reset();
  fs::remove_all(dir);
  return pass ? 0 : 1;
}

absl::StatusOr<SoakOptions> ParseFlags(const std::vector<std::string>& args, bool& help) {
  common::FlagParser flags("soak_benchmark");
  flags.AddValue("clients", "N", "concurrent clients (default 64)");
  flags.AddValue("seconds", "S", "how long the load runs (default 600)");
  flags.AddValue("rss-interval-seconds", "S", "resident memory sampling period (default 5)");
  flags.AddValue("converge-seconds", "S", "how long predictors may take to converge (default 30)");
  flags.AddValue("max-rss-growth-mib", "MIB",
                 "resident memory growth after warm-up that fails the run (default 64)");
  flags.AddValue("seed", "N", "random seed (default 1)");
  flags.AddSwitch("json", "also print the figures as one JSON line");
  flags.AddSwitch("help", "this text");
  if (absl::Status s = flags.Parse(args); !s.ok()) return s;
  help = flags.Switch("help");
  if (help) {
    std::printf("usage: soak_benchmark [flags]\n%s", flags.Usage().c_str());
    return SoakOptions{};
  }
  SoakOptions o;
  o.json = flags.Switch("json");
  auto get = [&](const char* name, int64_t lo, int64_t& out) -> absl::Status {
    absl::StatusOr<std::optional<int64_t>> v = flags.GetInt(name);
    if (!v.ok()) return v.status();
    if (!v->has_value()) return absl::OkStatus();
    if (**v < lo) return absl::InvalidArgumentError(absl::StrCat("--", name, " must be >= ", lo));
    out = **v;
    return absl::OkStatus();
  };
  int64_t clients = o.clients, seed = static_cast<int64_t>(o.seed);
  for (absl::Status s :
       {get("clients", 1, clients), get("seconds", 1, o.seconds),
        get("rss-interval-seconds", 1, o.rss_interval_seconds),
        get("converge-seconds", 0, o.converge_seconds),
        get("max-rss-growth-mib", 0, o.max_rss_growth_mib), get("seed", 0, seed)}) {
    if (!s.ok()) return s;
  }
  if (clients > 4096) return absl::InvalidArgumentError("--clients must be <= 4096");
  o.clients = static_cast<int>(clients);
  o.seed = static_cast<uint64_t>(seed);
  return o;
}

}  // namespace
}  // namespace vtrain::server

int main(int argc, char** argv) {
  bool help = false;
  absl::StatusOr<vtrain::server::SoakOptions> o =
      vtrain::server::ParseFlags(std::vector<std::string>(argv + 1, argv + argc), help);
  if (!o.ok()) {
    std::fprintf(stderr, "soak_benchmark: %s\n", o.status().ToString().c_str());
    return 2;
  }
  if (help) return 0;
  return vtrain::server::Run(*o);
}
