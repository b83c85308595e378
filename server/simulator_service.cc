#include "server/simulator_service.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/predict/predictor.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"
#include "server/batch_priority.h"
#include "server/client_key.h"
#include "service/cluster_sim.h"
#include "service/service.h"

namespace vtrain::server {
namespace {

absl::Status RefusedByRegistry(Role role, const char* what) {
  if (role != Role::kRegistry) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat("a registry does not ", what, "; ask a predictor"));
}

// Core reports a stopped run as CANCELLED; when the caller's deadline is what
// stopped it, say so.
absl::Status ExplainCancellation(const grpc::ServerContextBase& ctx, absl::Status status,
                                 const char* during) {
  if (status.code() == absl::StatusCode::kCancelled &&
      ctx.deadline() < std::chrono::system_clock::now()) {
    return absl::DeadlineExceededError(absl::StrCat("the deadline passed during the ", during));
  }
  return status;
}

}  // namespace

SimulatorService::SimulatorService(const ServerOptions& options, Registry& registry,
                                   AdmissionGate& admission, const MethodRunner& runner,
                                   Metrics& metrics, const RegistryLink* link)
    : max_tasks_(options.max_tasks),
      max_graph_bytes_(options.max_request_memory_bytes),
      predict_{"Predict", Access::kRead, RefusedByRegistry(options.role, "predict")},
      search_{"Search", Access::kRead, RefusedByRegistry(options.role, "search")},
      curve_{"ThroughputCurve", Access::kRead, RefusedByRegistry(options.role, "draw curves")},
      plan_model_{"PlanModel", Access::kRead, RefusedByRegistry(options.role, "plan models")},
      cluster_sim_{"ClusterSim", Access::kRead,
                   RefusedByRegistry(options.role, "simulate clusters")},
      presets_{"Presets", Access::kRead, absl::OkStatus()},
      predictions_(static_cast<size_t>(options.prediction_cache_entries)),
      registry_(registry),
      source_(registry, memos_),
      admission_(admission),
      runner_(runner),
      metrics_(metrics),
      link_(link) {
  SetMessageAllocatorFor_Predict(&predict_allocator_);
}

grpc::Status SimulatorService::PlanModel(grpc::ServerContext* ctx, const v1::PlanModelRequest* req,
                                         grpc::ServerWriter<v1::PlanModelResponse>* writer) {
  return runner_.Run(*ctx, plan_model_, *req, [&] { return RunPlanModel(ctx, req, writer); });
}

service::CallOptions SimulatorService::OptionsFor(const grpc::ServerContextBase* ctx) const {
  service::CallOptions options;
  options.max_tasks = max_tasks_;
  options.max_graph_bytes = max_graph_bytes_;
  options.cancelled = [ctx] { return ctx->IsCancelled(); };
  options.simulated = [this](const char* method, int64_t wall_ns) {
    metrics_.SimulationTime(method, wall_ns);
  };
  return options;
}

absl::Status SimulatorService::RunPlanModel(const grpc::ServerContext* ctx,
                                            const v1::PlanModelRequest* req,
                                            grpc::ServerWriter<v1::PlanModelResponse>* writer) {
  VTRAIN_ASSIGN_OR_RETURN(service::PreparedPlanModel prepared,
                          service::PreparePlanModel(*req, source_));
  service::CallOptions options = OptionsFor(ctx);
  VTRAIN_ASSIGN_OR_RETURN(AdmissionGate::Slot slot,
                          admission_.Enter(ClientKey(*ctx), options.cancelled));
  // As a search: batch priority for the work, gRPC's thread for the rest.
  absl::StatusOr<v1::PlanModelResult> result = ComputeAtBatchPriority([&](CallerThread& caller) {
    options.progress = [writer, &caller](int64_t done, int64_t total) {
      v1::PlanModelResponse msg;
      msg.mutable_progress()->set_evaluated(done);
      msg.mutable_progress()->set_total(total);
      caller.Run([&] { writer->Write(msg); });
    };
    return service::RunPlanModel(prepared, options);
  });
  slot.Release();
  if (!result.ok()) return ExplainCancellation(*ctx, result.status(), "model planning");
  v1::PlanModelResponse msg;
  *msg.mutable_result() = *std::move(result);
  writer->Write(msg);
  return absl::OkStatus();
}

grpc::Status SimulatorService::ClusterSim(grpc::ServerContext* ctx,
                                          const v1::ClusterSimRequest* req,
                                          v1::ClusterSimResponse* resp) {
  return runner_.Run(*ctx, cluster_sim_, *req, [&] { return RunClusterSim(ctx, req, resp); });
}

absl::Status SimulatorService::RunClusterSim(const grpc::ServerContext* ctx,
                                             const v1::ClusterSimRequest* req,
                                             v1::ClusterSimResponse* resp) {
  VTRAIN_ASSIGN_OR_RETURN(service::PreparedClusterSim prepared,
                          service::PrepareClusterSim(*req, source_));
  service::CallOptions options = OptionsFor(ctx);
  VTRAIN_ASSIGN_OR_RETURN(std::vector<AdmissionGate::Slot> slots,
                          admission_.EnterWide(ClientKey(*ctx), options.cancelled));
  options.threads = static_cast<int>(slots.size());
  // The tables go through the curve cache: a scheduler replaying windows of
  // one trace asks for the same shapes again. As a search: slots on gRPC's
  // thread, the work at batch priority.
  absl::StatusOr<v1::ClusterSimResponse> result = ComputeAtBatchPriority(
      [&](CallerThread&) { return service::RunClusterSim(prepared, options, &curve_cache_); });
  slots.clear();
  if (!result.ok()) return ExplainCancellation(*ctx, result.status(), "cluster simulation");
  *resp = *std::move(result);
  return absl::OkStatus();
}

grpc::Status SimulatorService::Presets(grpc::ServerContext* ctx, const v1::PresetsRequest* req,
                                       v1::PresetsResponse* resp) {
  return runner_.Run(*ctx, presets_, *req, [&] {
    *resp = service::Presets(*req);
    return absl::OkStatus();
  });
}

grpc::Status SimulatorService::ThroughputCurve(grpc::ServerContext* ctx,
                                               const v1::ThroughputCurveRequest* req,
                                               v1::ThroughputCurveResponse* resp) {
  return runner_.Run(*ctx, curve_, *req, [&] { return RunCurve(ctx, req, resp); });
}

absl::Status SimulatorService::RunCurve(const grpc::ServerContext* ctx,
                                        const v1::ThroughputCurveRequest* req,
                                        v1::ThroughputCurveResponse* resp) {
  VTRAIN_ASSIGN_OR_RETURN(service::PreparedCurves prepared, service::PrepareCurves(*req, source_));
  service::CallOptions options = OptionsFor(ctx);
  VTRAIN_ASSIGN_OR_RETURN(std::vector<AdmissionGate::Slot> slots,
                          admission_.EnterWide(ClientKey(*ctx), options.cancelled));
  options.threads = static_cast<int>(slots.size());
  absl::StatusOr<v1::ThroughputCurveResponse> curves = ComputeAtBatchPriority(  // as a search
      [&](CallerThread&) { return service::RunCurves(prepared, options, &curve_cache_); });
  slots.clear();
  if (!curves.ok()) return ExplainCancellation(*ctx, curves.status(), "curve");
  *resp = *std::move(curves);
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* SimulatorService::Predict(grpc::CallbackServerContext* ctx,
                                                    const v1::PredictRequest* req,
                                                    v1::PredictResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const absl::Time start = absl::Now();
  absl::Status status = runner_.Admit(*ctx, predict_, *req);
  // The cache key and the id of the set it was made with.
  std::string cache_key, keyed_set_id;
  if (status.ok() && predictions_.enabled()) {
    // The same question about the same profile set: the same answer. Only
    // valid requests were answered, so a hit needs no conversion.
    const std::string& gpu = req->cluster().gpu();
    if (std::shared_ptr<const ProfileSet> tables = registry_.LoadedTablesFor(
            req->profile_set_id(), gpu.empty() ? proto::kDefaultGpu : gpu)) {
      keyed_set_id = tables->id;
      cache_key = PredictionCache::Key(keyed_set_id, *req);
      if (std::shared_ptr<const PredictionCache::Answer> hit = predictions_.Get(cache_key)) {
        *resp = hit->response;
        resp->mutable_simulation()->set_cached(true);
        WarnIfRegistryAway(resp);
        metrics_.PredictionCacheHit();
        RecordMissing(ctx, hit->gpu, hit->missing_keys, hit->fits);
        reactor->Finish(runner_.Finish(*ctx, predict_, start, absl::OkStatus()));
        return reactor;
      }
    }
  }
  absl::StatusOr<PreparedPrediction> prepared =
      status.ok() ? PreparePredict(ctx, req) : absl::StatusOr<PreparedPrediction>(status);
  status = prepared.status();
  if (status.ok() && predictions_.enabled()) {
    // The set conversion picked is normally the one keyed above (unless a
    // push came in between, or the GPU has only built-in tables).
    const std::string& set_id = prepared->call.tables->id;
    prepared->cache_key = set_id == keyed_set_id && !cache_key.empty()
                              ? std::move(cache_key)
                              : PredictionCache::Key(set_id, *req);
  }
  if (status.ok()) {
    std::optional<AdmissionGate::Slot> slot;
    if (prepared->call.options.granularity == Granularity::kOperator) {
      slot = admission_.TryEnter(ClientKey(*ctx));
    }
    if (!slot.has_value()) {
      // Long or queued: off gRPC's thread. The call stays open until Finish,
      // so the server's shutdown waits for this thread's answer (a queued
      // call sees the cancellation within 50 ms).
      auto p = std::make_unique<PreparedPrediction>(*std::move(prepared));
      std::thread([this, ctx, resp, reactor, start, p = std::move(p)]() mutable {
        absl::Status s = [&]() -> absl::Status {
          // Held for the simulation only; queued calls wait until their
          // deadline or cancellation.
          VTRAIN_ASSIGN_OR_RETURN(AdmissionGate::Slot waited,
                                  admission_.Enter(ClientKey(*ctx), p->call.options.cancelled));
          // Kernel granularity is long work, simulated at batch priority;
          // a queued operator prediction keeps its priority. This thread
          // answers (gRPC is never entered at batch priority).
          if (p->call.options.granularity == Granularity::kOperator) {
            return SimulatePredict(ctx, *p, std::move(waited), resp);
          }
          return RunAtBatchPriority(
              [&] { return SimulatePredict(ctx, *p, std::move(waited), resp); });
        }();
        // Nothing of the call may outlive Finish: the server's shutdown
        // returns once every call has finished.
        p.reset();
        reactor->Finish(runner_.Finish(*ctx, predict_, start, s));
      }).detach();
      return reactor;
    }
    status = SimulatePredict(ctx, *prepared, *std::move(slot), resp);
  }
  reactor->Finish(runner_.Finish(*ctx, predict_, start, status));
  return reactor;
}

grpc::Status SimulatorService::Search(grpc::ServerContext* ctx, const v1::SearchRequest* req,
                                      grpc::ServerWriter<v1::SearchResponse>* writer) {
  return runner_.Run(*ctx, search_, *req, [&] { return RunSearch(ctx, req, writer); });
}

absl::StatusOr<SimulatorService::PreparedPrediction> SimulatorService::PreparePredict(
    const grpc::ServerContextBase* ctx, const v1::PredictRequest* req) const {
  VTRAIN_ASSIGN_OR_RETURN(service::PreparedPredict call,
                          service::PreparePredict(*req, source_, OptionsFor(ctx)));
  return PreparedPrediction{std::move(call), /*cache_key=*/""};
}

absl::Status SimulatorService::SimulatePredict(const grpc::ServerContextBase* ctx,
                                               const PreparedPrediction& prepared,
                                               AdmissionGate::Slot slot,
                                               v1::PredictResponse* resp) {
  absl::Status status = service::RunPredict(prepared.call, OptionsFor(ctx), resp);
  slot.Release();
  if (!status.ok()) return ExplainCancellation(*ctx, status, "simulation");
  // Metrics and profiling work read the answer, as any client could.
  const v1::FidelitySummary& fidelity = resp->fidelity();
  metrics_.SimulatedTasks(static_cast<double>(resp->simulation().tasks()));
  const std::pair<Fidelity, int64_t> lookups[] = {
      {Fidelity::kMeasured, fidelity.measured()},
      {Fidelity::kInterpolated, fidelity.interpolated()},
      {Fidelity::kAnalytical, fidelity.analytical()}};
  for (const auto& [f, count] : lookups) {
    if (count > 0) metrics_.Lookups(std::string(FidelityName(f)), static_cast<double>(count));
  }
  std::vector<std::string> missing(fidelity.missing_keys().begin(), fidelity.missing_keys().end());
  const bool fits = resp->memory().fits();
  const std::string& gpu = prepared.call.job.cluster.gpu.name;
  RecordMissing(ctx, gpu, missing, fits);
  if (!prepared.cache_key.empty()) {
    auto answer = std::make_shared<PredictionCache::Answer>();
    answer->response = *resp;
    answer->missing_keys = std::move(missing);
    answer->fits = fits;
    answer->gpu = gpu;
    predictions_.Put(prepared.cache_key, std::move(answer));
  }
  WarnIfRegistryAway(resp);  // not cached: it holds for now only
  return absl::OkStatus();
}

void SimulatorService::WarnIfRegistryAway(v1::PredictResponse* resp) const {
  if (link_ == nullptr) return;
  if (std::string warning = link_->Warning(); !warning.empty()) {
    resp->add_warnings(std::move(warning));
  }
}

void SimulatorService::RecordMissing(const grpc::ServerContextBase* ctx, const std::string& gpu,
                                     const std::vector<std::string>& missing_keys, bool fits) {
  // Only shapes a GPU can run become profiling work: an agent would try to
  // run them (a plan that does not fit in memory cannot be profiled).
  if (fits) registry_.RecordMissing(gpu, missing_keys, [ctx] { return ctx->peer(); });
}

absl::Status SimulatorService::RunSearch(const grpc::ServerContext* ctx,
                                         const v1::SearchRequest* req,
                                         grpc::ServerWriter<v1::SearchResponse>* writer) {
  VTRAIN_ASSIGN_OR_RETURN(service::PreparedSearch prepared, service::PrepareSearch(*req, source_));
  service::CallOptions options = OptionsFor(ctx);
  // Admission covers searches too: one slot, waited for like a prediction's,
  // then as many more as are free now; the search runs a thread per slot.
  // Slots are taken and given back on gRPC's thread, the search itself runs
  // at batch priority, and its messages are written from gRPC's thread
  // (server/batch_priority.h).
  VTRAIN_ASSIGN_OR_RETURN(std::vector<AdmissionGate::Slot> slots,
                          admission_.EnterWide(ClientKey(*ctx), options.cancelled));
  options.threads = static_cast<int>(slots.size());
  absl::StatusOr<v1::SearchResult> result = ComputeAtBatchPriority([&](CallerThread& caller) {
    // Progress as results finish, at most every 2%, in order.
    absl::Mutex progress_mu;
    int64_t last_reported = 0;
    options.progress = [&](int64_t done, int64_t total) {
      absl::MutexLock lock(&progress_mu);
      if (done != total && (done - last_reported) * 50 < total) return;
      last_reported = done;
      v1::SearchResponse msg;
      msg.mutable_progress()->set_evaluated(done);
      msg.mutable_progress()->set_total(total);
      caller.Run([&] { writer->Write(msg); });
    };
    return service::RunSearch(prepared, options);
  });
  slots.clear();
  if (!result.ok()) return ExplainCancellation(*ctx, result.status(), "search");
  v1::SearchResponse msg;
  *msg.mutable_result() = *std::move(result);
  writer->Write(msg);
  return absl::OkStatus();
}

}  // namespace vtrain::server
