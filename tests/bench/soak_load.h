// The soak benchmark's load: the kinds of call and their mix, the book of
// pushed sets, and the clients that call until told to stop. Header-only: one
// program includes it.
#ifndef VTRAIN_TESTS_BENCH_SOAK_LOAD_H_
#define VTRAIN_TESTS_BENCH_SOAK_LOAD_H_

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "tests/bench/soak_stats.h"
#include "tests/testing/profile_sets.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::server {

inline constexpr char kToken[] = "soak-token";

// The kinds of call, with their share of the mix (percent).
// predict_moe: MoE models with expert parallelism; predict_long: 128K-token
// sequences with context parallelism; predict_oversized: a kernel-granularity
// MoE graph past the server's task bound, refused (RESOURCE_EXHAUSTED) before
// any work starts.
enum Kind {
  kPredict,
  kPredictNamed,
  kPredictMoe,
  kPredictLong,
  kPredictOversized,
  kSearch,
  kPush,
  kDelete,
  kNumKinds
};
constexpr const char* kKindNames[kNumKinds] = {
    "predict",           "predict_named", "predict_moe", "predict_long",
    "predict_oversized", "search",        "push",        "delete"};
constexpr int kMixPercent[kNumKinds] = {72, 5, 8, 4, 1, 2, 4, 4};
// The live pool of pushed sets stays under this (a push becomes a delete), so
// the registry's contents, and the process's memory, stay bounded.
constexpr size_t kMaxLiveSets = 256;

using ClientStats = std::array<KindStats, kNumKinds>;

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
inline v1::PredictRequest SmallJob(std::mt19937_64& rng) {
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

// A MoE job at operator granularity: 8 to 32 GPUs, t = 1, expert parallel
// 2 to 8 over the data-parallel ranks, bf16.
inline v1::PredictRequest MoeJob(std::mt19937_64& rng) {
  static constexpr const char* kModels[] = {"qwen3-30b-a3b", "mixtral-8x7b", "gpt-oss-20b"};
  v1::PredictRequest r;
  r.mutable_model()->set_preset(kModels[rng() % 3]);
  r.mutable_cluster()->set_num_gpus(int64_t{8} << (rng() % 3));
  r.mutable_plan()->set_pipeline_parallel(int64_t{1} << (rng() % 2));
  r.mutable_plan()->set_expert_parallel(int64_t{2} << (rng() % 2));  // divides d >= 4
  r.mutable_plan()->set_dtype(v1::DTYPE_BF16);
  r.mutable_plan()->set_global_batch(64);
  r.set_granularity(v1::GRANULARITY_OPERATOR);
  return r;
}

// Llama 3 8B on 128K-token sequences, context parallel 8, on 8 or 16 GPUs.
inline v1::PredictRequest LongContextJob(std::mt19937_64& rng) {
  v1::PredictRequest r;
  r.mutable_model()->set_preset("llama3-8b");
  r.mutable_model()->set_seq_len(131072);
  r.mutable_cluster()->set_num_gpus(rng() % 2 == 0 ? 8 : 16);
  r.mutable_plan()->set_context_parallel(8);
  r.mutable_plan()->set_dtype(v1::DTYPE_BF16);
  r.mutable_plan()->set_global_batch(8);
  r.set_granularity(v1::GRANULARITY_OPERATOR);
  return r;
}

// DeepSeek-V3 at kernel granularity with 4M sequences a batch: past the
// server's task bound.
inline v1::PredictRequest OversizedJob() {
  v1::PredictRequest r;
  r.mutable_model()->set_preset("deepseek-v3");
  r.mutable_cluster()->set_num_gpus(1024);
  r.mutable_plan()->set_pipeline_parallel(16);
  r.mutable_plan()->set_expert_parallel(64);
  r.mutable_plan()->set_dtype(v1::DTYPE_BF16);
  r.mutable_plan()->set_global_batch(int64_t{1} << 22);
  r.set_granularity(v1::GRANULARITY_KERNEL);
  return r;
}

inline std::unique_ptr<grpc::ClientContext> Context(absl::Duration deadline, bool with_token) {
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
          Predict(kPredict, SmallJob(rng_));
          break;
        case kPredictNamed:
          PredictNamed();
          break;
        case kPredictMoe:
          Predict(kPredictMoe, MoeJob(rng_));
          break;
        case kPredictLong:
          Predict(kPredictLong, LongContextJob(rng_));
          break;
        case kPredictOversized:
          PredictOversized();
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

  void Predict(Kind kind, const v1::PredictRequest& req) {
    v1::PredictResponse resp;
    const absl::Time start = absl::Now();
    grpc::Status s = AnyPredictor().Predict(Context(absl::Seconds(30), false).get(), req, &resp);
    Record(kind, start, s, false, resp.iteration_time_ns() <= 0);
  }

  // RESOURCE_EXHAUSTED naming max_tasks is the answer; OK is a bad one.
  void PredictOversized() {
    v1::PredictResponse resp;
    const absl::Time start = absl::Now();
    grpc::Status s =
        AnyPredictor().Predict(Context(absl::Seconds(30), false).get(), OversizedJob(), &resp);
    const bool refused = s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
                         s.error_message().find("max_tasks") != std::string::npos;
    Record(kPredictOversized, start, s, refused, s.ok());
  }

  // NOT_FOUND is expected here: the set may have been deleted a moment ago,
  // or not reached this predictor yet (predictors follow asynchronously).
  void PredictNamed() {
    std::optional<std::string> id = book_.AnyRecent(rng_);
    if (!id) return Predict(kPredict, SmallJob(rng_));
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

}  // namespace vtrain::server

#endif  // VTRAIN_TESTS_BENCH_SOAK_LOAD_H_
