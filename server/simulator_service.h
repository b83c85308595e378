// The Simulator gRPC service: Predict, Search and ThroughputCurve, translated from their
// messages into core calls over the profile sets a Registry holds, behind the
// admission gate.
#ifndef VTRAIN_SERVER_SIMULATOR_SERVICE_H_
#define VTRAIN_SERVER_SIMULATOR_SERVICE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"
#include "server/admission.h"
#include "server/curve_cache.h"
#include "server/method_runner.h"
#include "server/metrics.h"
#include "server/registry.h"
#include "server/server.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::server {

// Thread-safe. Every reference must outlive the service.
class SimulatorService final : public v1::Simulator::Service {
 public:
  SimulatorService(const ServerOptions& options, Registry& registry, AdmissionGate& admission,
                   const MethodRunner& runner, Metrics& metrics);

  grpc::Status Predict(grpc::ServerContext* ctx, const v1::PredictRequest* req,
                       v1::PredictResponse* resp) override;
  grpc::Status Search(grpc::ServerContext* ctx, const v1::SearchRequest* req,
                      grpc::ServerWriter<v1::SearchResponse>* writer) override;
  grpc::Status ThroughputCurve(grpc::ServerContext* ctx, const v1::ThroughputCurveRequest* req,
                               v1::ThroughputCurveResponse* resp) override;
  grpc::Status PlanModel(grpc::ServerContext* ctx, const v1::PlanModelRequest* req,
                         grpc::ServerWriter<v1::PlanModelResponse>* writer) override;

 private:
  absl::Status RunPredict(const grpc::ServerContext* ctx, const v1::PredictRequest* req,
                          v1::PredictResponse* resp);
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
  Registry& registry_;
  AdmissionGate& admission_;
  const MethodRunner& runner_;
  Metrics& metrics_;
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_SIMULATOR_SERVICE_H_
