#include "server/simulator_service.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/plan/curve.h"
#include "core/plan/model_design.h"
#include "core/plan/search.h"
#include "core/predict/predictor.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"

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
                                   Metrics& metrics)
    : max_tasks_(options.max_tasks),
      max_graph_bytes_(options.max_request_memory_bytes),
      predict_{"Predict", Access::kRead, RefusedByRegistry(options.role, "predict")},
      search_{"Search", Access::kRead, RefusedByRegistry(options.role, "search")},
      curve_{"ThroughputCurve", Access::kRead, RefusedByRegistry(options.role, "draw curves")},
      plan_model_{"PlanModel", Access::kRead, RefusedByRegistry(options.role, "plan models")},
      predictions_(static_cast<size_t>(options.prediction_cache_entries)),
      registry_(registry),
      admission_(admission),
      runner_(runner),
      metrics_(metrics) {
  SetMessageAllocatorFor_Predict(&predict_allocator_);
}

grpc::Status SimulatorService::PlanModel(grpc::ServerContext* ctx, const v1::PlanModelRequest* req,
                                         grpc::ServerWriter<v1::PlanModelResponse>* writer) {
  return runner_.Run(*ctx, plan_model_, *req, [&] { return RunPlanModel(ctx, req, writer); });
}

absl::Status SimulatorService::RunPlanModel(const grpc::ServerContext* ctx,
                                            const v1::PlanModelRequest* req,
                                            grpc::ServerWriter<v1::PlanModelResponse>* writer) {
  VTRAIN_ASSIGN_OR_RETURN(DesignSpec spec, convert::DesignSpecFromProto(*req));
  VTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<const ProfileSet> tables,
                          registry_.TablesFor(/*profile_set_id=*/"", spec.cluster.gpu));
  DesignOptions options;
  options.cancelled = [ctx] { return ctx->IsCancelled(); };
  options.progress = [writer](int64_t done, int64_t total) {
    v1::PlanModelResponse msg;
    msg.mutable_progress()->set_evaluated(done);
    msg.mutable_progress()->set_total(total);
    writer->Write(msg);
  };
  VTRAIN_ASSIGN_OR_RETURN(AdmissionGate::Slot slot, admission_.Enter(options.cancelled));
  absl::StatusOr<DesignResult> result = DesignModel(spec, *tables, options);
  if (!result.ok()) return ExplainCancellation(*ctx, result.status(), "model planning");
  v1::PlanModelResponse msg;
  convert::DesignResultToProto(*result, msg.mutable_result());
  metrics_.SimulationTime("PlanModel", result->simulation.wall_ns);
  writer->Write(msg);
  return absl::OkStatus();
}

grpc::Status SimulatorService::ThroughputCurve(grpc::ServerContext* ctx,
                                               const v1::ThroughputCurveRequest* req,
                                               v1::ThroughputCurveResponse* resp) {
  return runner_.Run(*ctx, curve_, *req, [&] { return RunCurve(ctx, req, resp); });
}

absl::Status SimulatorService::RunCurve(const grpc::ServerContext* ctx,
                                        const v1::ThroughputCurveRequest* req,
                                        v1::ThroughputCurveResponse* resp) {
  VTRAIN_ASSIGN_OR_RETURN(convert::CurveCall call, convert::CurveCallFromProto(*req));
  resp->set_policy(req->policy() == v1::CURVE_POLICY_UNSPECIFIED ? v1::CURVE_POLICY_BEST
                                                                 : req->policy());
  CurveOptions options;
  options.cancelled = [ctx] { return ctx->IsCancelled(); };
  VTRAIN_ASSIGN_OR_RETURN(std::vector<AdmissionGate::Slot> slots,
                          admission_.EnterWide(options.cancelled));
  options.threads = static_cast<int>(slots.size());
  for (size_t i = 0; i < call.specs.size(); ++i) {
    const CurveSpec& spec = call.specs[i];
    VTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<const ProfileSet> tables,
                            registry_.TablesFor(/*profile_set_id=*/"", spec.cluster.gpu));
    // Cached per (job shape, plan space, counts, profile set): schedulers ask
    // for the same curves again and again.
    v1::ThroughputCurveRequest key_request = *req;
    key_request.clear_jobs();
    *key_request.add_jobs() = req->jobs(static_cast<int>(i));
    key_request.mutable_jobs(0)->clear_name();
    const std::string key =
        absl::StrCat(tables->id, "/", tables->name, "/", key_request.SerializeAsString());
    v1::Curve* curve = resp->add_curves();
    if (curve_cache_.Get(key, curve)) {
      curve->set_name(call.names[i]);
      continue;
    }
    absl::StatusOr<std::vector<CurvePoint>> points =
        vtrain::ThroughputCurve(spec, *tables, options);
    if (!points.ok()) return ExplainCancellation(*ctx, points.status(), "curve");
    convert::CurveToProto(call.names[i], *points, curve);
    metrics_.SimulationTime("ThroughputCurve", curve->simulation().wall_ns());
    curve_cache_.Put(key, *curve);
  }
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
            req->profile_set_id(), gpu.empty() ? convert::kDefaultGpu : gpu)) {
      keyed_set_id = tables->id;
      cache_key = PredictionCache::Key(keyed_set_id, *req);
      if (std::shared_ptr<const PredictionCache::Answer> hit = predictions_.Get(cache_key)) {
        *resp = hit->response;
        resp->mutable_simulation()->set_cached(true);
        metrics_.PredictionCacheHit();
        RecordMissing(ctx, hit->gpu, hit->missing_keys, hit->fits);
        reactor->Finish(runner_.Finish(predict_, start, absl::OkStatus()));
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
    prepared->cache_key = prepared->tables->id == keyed_set_id && !cache_key.empty()
                              ? std::move(cache_key)
                              : PredictionCache::Key(prepared->tables->id, *req);
  }
  if (status.ok()) {
    std::optional<AdmissionGate::Slot> slot;
    if (prepared->options.granularity == Granularity::kOperator) slot = admission_.TryEnter();
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
                                  admission_.Enter(p->options.cancelled));
          return SimulatePredict(ctx, *p, std::move(waited), resp);
        }();
        // Nothing of the call may outlive Finish: the server's shutdown
        // returns once every call has finished.
        p.reset();
        reactor->Finish(runner_.Finish(predict_, start, s));
      }).detach();
      return reactor;
    }
    status = SimulatePredict(ctx, *prepared, *std::move(slot), resp);
  }
  reactor->Finish(runner_.Finish(predict_, start, status));
  return reactor;
}

grpc::Status SimulatorService::Search(grpc::ServerContext* ctx, const v1::SearchRequest* req,
                                      grpc::ServerWriter<v1::SearchResponse>* writer) {
  return runner_.Run(*ctx, search_, *req, [&] { return RunSearch(ctx, req, writer); });
}

absl::StatusOr<SimulatorService::PreparedPrediction> SimulatorService::PreparePredict(
    const grpc::ServerContextBase* ctx, const v1::PredictRequest* req) const {
  VTRAIN_ASSIGN_OR_RETURN(Job job, convert::JobFromProto(*req));
  VTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<const ProfileSet> tables,
                          registry_.TablesFor(req->profile_set_id(), job.cluster.gpu));
  VTRAIN_ASSIGN_OR_RETURN(PredictOptions options, convert::OptionsFromProto(*req));
  options.max_tasks = max_tasks_;
  options.max_graph_bytes = max_graph_bytes_;
  options.cancelled = [ctx] { return ctx->IsCancelled(); };
  std::shared_ptr<LookupMemo> memo = memos_.For(tables);
  options.memo = memo.get();
  return PreparedPrediction{std::move(job), std::move(tables), std::move(memo), std::move(options),
                            /*cache_key=*/""};
}

absl::Status SimulatorService::SimulatePredict(const grpc::ServerContextBase* ctx,
                                               const PreparedPrediction& prepared,
                                               AdmissionGate::Slot slot,
                                               v1::PredictResponse* resp) {
  const Job& job = prepared.job;
  absl::StatusOr<Prediction> p = vtrain::Predict(job, *prepared.tables, prepared.options);
  slot.Release();
  if (!p.ok()) return ExplainCancellation(*ctx, p.status(), "simulation");
  convert::PredictionToProto(job, *p, resp);
  metrics_.SimulatedTasks(static_cast<double>(p->simulation.tasks));
  metrics_.SimulationTime("Predict", p->simulation.wall_ns);
  for (int f = 0; f < kNumFidelities; ++f) {
    if (p->fidelity.lookups[f] > 0) {
      metrics_.Lookups(std::string(FidelityName(static_cast<Fidelity>(f))),
                       static_cast<double>(p->fidelity.lookups[f]));
    }
  }
  RecordMissing(ctx, job.cluster.gpu.name, p->fidelity.missing_keys, p->memory.fits);
  if (!prepared.cache_key.empty()) {
    auto answer = std::make_shared<PredictionCache::Answer>();
    answer->response = *resp;
    answer->missing_keys = std::move(p->fidelity.missing_keys);
    answer->fits = p->memory.fits;
    answer->gpu = job.cluster.gpu.name;
    predictions_.Put(prepared.cache_key, std::move(answer));
  }
  return absl::OkStatus();
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
  VTRAIN_ASSIGN_OR_RETURN(convert::SearchCall call, convert::SearchFromProto(*req));
  const SearchSpace& space = call.space;
  SearchOptions& options = call.options;
  VTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<const ProfileSet> tables,
                          registry_.TablesFor(/*profile_set_id=*/"", space.cluster.gpu));
  options.cancelled = [ctx] { return ctx->IsCancelled(); };
  const std::shared_ptr<LookupMemo> memo = memos_.For(tables);
  options.memo = memo.get();
  // Admission covers searches too: one slot, waited for like a prediction's,
  // then as many more as are free now; the search runs a thread per slot.
  VTRAIN_ASSIGN_OR_RETURN(std::vector<AdmissionGate::Slot> slots,
                          admission_.EnterWide(options.cancelled));
  options.threads = static_cast<int>(slots.size());
  // Progress as results finish, at most every 2% (writes are serialised).
  absl::Mutex write_mu;
  int64_t last_reported = 0;
  options.progress = [&](int64_t done, int64_t total) {
    absl::MutexLock lock(&write_mu);
    if (done != total && (done - last_reported) * 50 < total) return;
    last_reported = done;
    v1::SearchResponse msg;
    msg.mutable_progress()->set_evaluated(done);
    msg.mutable_progress()->set_total(total);
    writer->Write(msg);
  };
  absl::StatusOr<SearchResult> result = vtrain::Search(space, *tables, options);
  if (!result.ok()) return ExplainCancellation(*ctx, result.status(), "search");
  v1::SearchResponse msg;
  convert::SearchResultToProto(*result, call, msg.mutable_result());
  metrics_.SimulationTime("Search", result->simulation.wall_ns);
  {
    absl::MutexLock lock(&write_mu);
    writer->Write(msg);
  }
  return absl::OkStatus();
}

}  // namespace vtrain::server
