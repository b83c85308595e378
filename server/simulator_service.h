// The Simulator gRPC service: Predict, Search, ThroughputCurve, PlanModel,
// ClusterSim and Presets.
// Each handler is admission -> cache -> service::X (service/service.h, over the
// profile sets a Registry holds) -> metrics; the answer itself is computed
// where vtrainctl --local computes it.
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
#include "server/batch_priority.h"
#include "server/curve_cache.h"
#include "server/memo_cache.h"
#include "server/method_runner.h"
#include "server/metrics.h"
#include "server/options.h"
#include "server/prediction_cache.h"
#include "server/registry.h"
#include "server/registry_link.h"
#include "service/service.h"
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
  // `link`: a predictor's contact with its registry (null in other roles);
  // while it is away every prediction answer carries its warning.
  SimulatorService(const ServerOptions& options, Registry& registry, AdmissionGate& admission,
                   const MethodRunner& runner, Metrics& metrics,
                   const RegistryLink* link = nullptr);

  grpc::ServerUnaryReactor* Predict(grpc::CallbackServerContext* ctx, const v1::PredictRequest* req,
                                    v1::PredictResponse* resp) override;
  grpc::Status Search(grpc::ServerContext* ctx, const v1::SearchRequest* req,
                      grpc::ServerWriter<v1::SearchResponse>* writer) override;
  grpc::Status ThroughputCurve(grpc::ServerContext* ctx, const v1::ThroughputCurveRequest* req,
                               v1::ThroughputCurveResponse* resp) override;
  grpc::Status PlanModel(grpc::ServerContext* ctx, const v1::PlanModelRequest* req,
                         grpc::ServerWriter<v1::PlanModelResponse>* writer) override;
  grpc::Status ClusterSim(grpc::ServerContext* ctx, const v1::ClusterSimRequest* req,
                          v1::ClusterSimResponse* resp) override;
  // Answered in every role: what the build knows, not a simulation.
  grpc::Status Presets(grpc::ServerContext* ctx, const v1::PresetsRequest* req,
                       v1::PresetsResponse* resp) override;

 private:
  // A Predict request converted and validated, ready to simulate.
  struct PreparedPrediction {
    service::PreparedPredict call;
    std::string cache_key;  // empty: the answer is not cached
  };
  // The profile sets of the registry, with the lookup memos of this service.
  class Source final : public service::ProfileSource {
   public:
    Source(const Registry& registry, MemoCache& memos) : registry_(registry), memos_(memos) {}
    absl::StatusOr<std::shared_ptr<const ProfileSet>> TablesFor(const std::string& profile_set_id,
                                                                const GpuSpec& gpu) const override {
      return registry_.TablesFor(profile_set_id, gpu);
    }
    absl::StatusOr<GpuSpec> GpuFor(absl::string_view name) const override {
      return registry_.GpuFor(name);
    }
    std::shared_ptr<LookupMemo> MemoFor(
        const std::shared_ptr<const ProfileSet>& tables) const override {
      return memos_.For(tables);
    }

   private:
    const Registry& registry_;
    MemoCache& memos_;
  };
  // The options of a call: the server's bounds, the caller's cancellation,
  // simulation times into the metrics.
  service::CallOptions OptionsFor(const grpc::ServerContextBase* ctx) const;
  absl::StatusOr<PreparedPrediction> PreparePredict(const grpc::ServerContextBase* ctx,
                                                    const v1::PredictRequest* req) const;
  // Adds the registry link's warning to an answer while the registry is away.
  void WarnIfRegistryAway(v1::PredictResponse* resp) const;
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
  absl::Status RunClusterSim(const grpc::ServerContext* ctx, const v1::ClusterSimRequest* req,
                             v1::ClusterSimResponse* resp);

  const int64_t max_tasks_;
  const int64_t max_graph_bytes_;
  const Method predict_;
  const Method search_;
  const Method curve_;
  const Method plan_model_;
  const Method cluster_sim_;
  const Method presets_;
  CurveCache curve_cache_;
  ArenaAllocator<v1::PredictRequest, v1::PredictResponse> predict_allocator_;
  MemoCache memos_;
  PredictionCache predictions_;
  Registry& registry_;
  const Source source_;  // after memos_ and registry_, which it refers to
  AdmissionGate& admission_;
  const MethodRunner& runner_;
  Metrics& metrics_;
  const RegistryLink* const link_;
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_SIMULATOR_SERVICE_H_
