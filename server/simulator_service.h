// The Simulator gRPC service: Predict, Search and ThroughputCurve, translated from their
// messages into core calls over the profile sets a Registry holds, behind the
// admission gate.
#ifndef VTRAIN_SERVER_SIMULATOR_SERVICE_H_
#define VTRAIN_SERVER_SIMULATOR_SERVICE_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/predict/predictor.h"
#include "grpcpp/grpcpp.h"
#include "server/admission.h"
#include "server/arena_allocator.h"
#include "server/curve_cache.h"
#include "server/memo_cache.h"
#include "server/method_runner.h"
#include "server/metrics.h"
#include "server/prediction_cache.h"
#include "server/registry.h"
#include "server/server.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::server {

// Thread-safe. Every reference must outlive the service.
//
// Predict is a callback method: an operator-granularity prediction (tens of
// microseconds) runs on the gRPC thread that read the request when an
// admission slot is free at once, so the answer costs no thread hand-off (a
// synchronous method is handed from the polling thread to a handler thread
// and back, which took most of a Predict call's time). A kernel-granularity
// prediction, or one that must wait for a slot, moves to a thread of its own,
// so gRPC's threads never block.
class SimulatorService final
    : public v1::Simulator::WithCallbackMethod_Predict<v1::Simulator::Service> {
 public:
  SimulatorService(const ServerOptions& options, Registry& registry, AdmissionGate& admission,
                   const MethodRunner& runner, Metrics& metrics);

  grpc::ServerUnaryReactor* Predict(grpc::CallbackServerContext* ctx, const v1::PredictRequest* req,
                                    v1::PredictResponse* resp) override;
  grpc::Status Search(grpc::ServerContext* ctx, const v1::SearchRequest* req,
                      grpc::ServerWriter<v1::SearchResponse>* writer) override;
  grpc::Status ThroughputCurve(grpc::ServerContext* ctx, const v1::ThroughputCurveRequest* req,
                               v1::ThroughputCurveResponse* resp) override;
  grpc::Status PlanModel(grpc::ServerContext* ctx, const v1::PlanModelRequest* req,
                         grpc::ServerWriter<v1::PlanModelResponse>* writer) override;

 private:
  // A Predict request converted and validated, ready to simulate.
  struct PreparedPrediction {
    Job job;
    std::shared_ptr<const ProfileSet> tables;
    std::shared_ptr<LookupMemo> memo;  // of `tables`; options.memo points to it
    PredictOptions options;
    std::string cache_key;  // empty: the answer is not cached
  };
  absl::StatusOr<PreparedPrediction> PreparePredict(const grpc::ServerContextBase* ctx,
                                                    const v1::PredictRequest* req) const;
  // Simulates `p` holding `slot` (released as soon as the simulation ends)
  // and fills `resp`; keeps the answer under p.cache_key (when not empty).
  absl::Status SimulatePredict(const grpc::ServerContextBase* ctx, const PreparedPrediction& p,
                               AdmissionGate::Slot slot, v1::PredictResponse* resp);
  // Counts the keys a prediction found no measurement for as profiling work
  // (only plans that fit: an agent could not run the others).
  void RecordMissing(const grpc::ServerContextBase* ctx, const std::string& gpu,
                     const std::vector<std::string>& missing_keys, bool fits);
  absl::Status RunSearch(const grpc::ServerContext* ctx, const v1::SearchRequest* req,
                         grpc::ServerWriter<v1::SearchResponse>* writer);
  absl::Status RunPlanModel(const grpc::ServerContext* ctx, const v1::PlanModelRequest* req,
                            grpc::ServerWriter<v1::PlanModelResponse>* writer);
  absl::Status RunCurve(const grpc::ServerContext* ctx, const v1::ThroughputCurveRequest* req,
                        v1::ThroughputCurveResponse* resp);

  const int64_t max_tasks_;
  const int64_t max_graph_bytes_;
  const Method predict_;
  const Method search_;
  const Method curve_;
  const Method plan_model_;
  CurveCache curve_cache_;
  ArenaAllocator<v1::PredictRequest, v1::PredictResponse> predict_allocator_;
  mutable MemoCache memos_;  // a cache: filled by const PreparePredict
  PredictionCache predictions_;
  Registry& registry_;
  AdmissionGate& admission_;
  const MethodRunner& runner_;
  Metrics& metrics_;
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_SIMULATOR_SERVICE_H_
