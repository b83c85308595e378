// The one place a vtrain.v1 request is answered: a request and a profile
// source in, the response out. The server's handlers (admission, caches and
// metrics around it) and vtrainctl's in-process path (--local) both call
// these, so both front ends give the same answer to the same request.
//
// Each call is in two steps, so that a server can wait for an admission slot
// between them: Prepare* converts and validates the request and finds its
// profile tables (cheap; INVALID_ARGUMENT naming the field, NOT_FOUND for an
// unknown profile set), and the second step computes the answer. The one-call
// forms do both.
#ifndef VTRAIN_SERVICE_SERVICE_H_
#define VTRAIN_SERVICE_SERVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/curve.h"
#include "core/plan/model_design.h"
#include "core/predict/predictor.h"
#include "proto/curve_convert.h"
#include "proto/search_convert.h"
#include "service/profile_source.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::service {

// The largest simulation a call runs unless the caller says otherwise.
inline constexpr int64_t kDefaultMaxTasks = 100'000'000;

// What the caller decides about a call, besides the request itself.
struct CallOptions {
  // The defaults with `threads` workers.
  static CallOptions WithThreads(int threads) {
    CallOptions options;
    options.threads = threads;
    return options;
  }

  int64_t max_tasks = kDefaultMaxTasks;         // graphs with more tasks: RESOURCE_EXHAUSTED
  int64_t max_graph_bytes = int64_t{16} << 30;  // kernel-granularity graphs above: the same
  int threads = 1;                              // worker threads of a search or curve
  // Polled during long work; true stops it with CANCELLED. May be empty.
  std::function<bool()> cancelled;
  // (done, total) of a search or a model plan, from worker threads. May be empty.
  std::function<void(int64_t, int64_t)> progress;
  // Called once per simulation run (not for a cached curve) with the method
  // name ("Predict", "Search", "ThroughputCurve", "PlanModel") and its wall
  // time. May be empty.
  std::function<void(const char* method, int64_t wall_ns)> simulated;
};

// A cache of drawn throughput curves that a caller may lend ThroughputCurve
// (the server's: schedulers ask for the same curves again and again).
class CurveStore {
 public:
  virtual ~CurveStore() = default;
  virtual bool Get(const std::string& key, v1::Curve* out) const = 0;
  virtual void Put(const std::string& key, const v1::Curve& curve) = 0;
};

// ---- Predict

// A Predict request converted and validated, with its tables; ready to run.
struct PreparedPredict {
  Job job;
  std::shared_ptr<const ProfileSet> tables;
  std::shared_ptr<LookupMemo> memo;  // of `tables`, or null; options.memo points to it
  PredictOptions options;
  std::optional<double> measured_ms;  // explain the difference (PredictRequest.measured_ms)
};
absl::StatusOr<PreparedPredict> PreparePredict(const v1::PredictRequest& request,
                                               const ProfileSource& source,
                                               const CallOptions& options);
// Simulates and fills `response` (which may live on a caller's arena).
absl::Status RunPredict(const PreparedPredict& prepared, const CallOptions& options,
                        v1::PredictResponse* response);
absl::StatusOr<v1::PredictResponse> Predict(const v1::PredictRequest& request,
                                            const ProfileSource& source,
                                            const CallOptions& options = {});

// ---- Search

struct PreparedSearch {
  proto::SearchCall call;
  std::shared_ptr<const ProfileSet> tables;
  std::shared_ptr<LookupMemo> memo;
};
absl::StatusOr<PreparedSearch> PrepareSearch(const v1::SearchRequest& request,
                                             const ProfileSource& source);
absl::StatusOr<v1::SearchResult> RunSearch(const PreparedSearch& prepared,
                                           const CallOptions& options);
absl::StatusOr<v1::SearchResult> Search(const v1::SearchRequest& request,
                                        const ProfileSource& source,
                                        const CallOptions& options = {});

// ---- ThroughputCurve

struct PreparedCurves {
  v1::ThroughputCurveRequest request;  // for the cache keys
  proto::CurveCall call;
  std::vector<std::shared_ptr<const ProfileSet>> tables;  // one per job
};
absl::StatusOr<PreparedCurves> PrepareCurves(const v1::ThroughputCurveRequest& request,
                                             const ProfileSource& source);
// One curve per job, in order. With a `store`, a curve already drawn for the
// same job shape, plan space, counts and profile set is taken from it.
absl::StatusOr<v1::ThroughputCurveResponse> RunCurves(const PreparedCurves& prepared,
                                                      const CallOptions& options,
                                                      CurveStore* store = nullptr);
absl::StatusOr<v1::ThroughputCurveResponse> ThroughputCurve(
    const v1::ThroughputCurveRequest& request, const ProfileSource& source,
    const CallOptions& options = {});

// ---- PlanModel

struct PreparedPlanModel {
  DesignSpec spec;
  std::shared_ptr<const ProfileSet> tables;
  // The inverse question, when both are positive (DesignForModel).
  double target_parameters = 0;
  double target_tokens = 0;
};
absl::StatusOr<PreparedPlanModel> PreparePlanModel(const v1::PlanModelRequest& request,
                                                   const ProfileSource& source);
absl::StatusOr<v1::PlanModelResult> RunPlanModel(const PreparedPlanModel& prepared,
                                                 const CallOptions& options);
absl::StatusOr<v1::PlanModelResult> PlanModel(const v1::PlanModelRequest& request,
                                              const ProfileSource& source,
                                              const CallOptions& options = {});

// ---- Presets

// The model presets and GPU models of this build; nothing to simulate, so no
// profile source and no admission. The request has no fields yet.
v1::PresetsResponse Presets(const v1::PresetsRequest& request);

}  // namespace vtrain::service

#endif  // VTRAIN_SERVICE_SERVICE_H_
