#include "service/service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/plan/search.h"
#include "core/util/status_macros.h"
#include "proto/job_convert.h"
#include "proto/model_design_convert.h"
#include "proto/prediction_convert.h"
#include "proto/presets_convert.h"

namespace vtrain::service {
namespace {

void ReportSimulation(const CallOptions& options, const char* method, int64_t wall_ns) {
  if (options.simulated) options.simulated(method, wall_ns);
}

// The GPUs `source` knows, for the request conversions.
auto GpusOf(const ProfileSource& source) {
  return [&source](absl::string_view name) { return source.GpuFor(name); };
}

}  // namespace

// ---- Predict

absl::StatusOr<PreparedPredict> PreparePredict(const v1::PredictRequest& request,
                                               const ProfileSource& source,
                                               const CallOptions& options) {
  VTRAIN_ASSIGN_OR_RETURN(Job job, proto::JobFromProto(request, GpusOf(source)));
  VTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<const ProfileSet> tables,
                          source.TablesFor(request.profile_set_id(), job.cluster.gpu));
  VTRAIN_ASSIGN_OR_RETURN(PredictOptions predict_options, proto::OptionsFromProto(request));
  predict_options.max_tasks = options.max_tasks;
  predict_options.max_graph_bytes = options.max_graph_bytes;
  predict_options.cancelled = options.cancelled;
  std::shared_ptr<LookupMemo> memo = source.MemoFor(tables);
  predict_options.memo = memo.get();
  std::optional<double> measured;
  if (request.has_measured_ms()) measured = request.measured_ms();
  return PreparedPredict{std::move(job), std::move(tables), std::move(memo),
                         std::move(predict_options), measured};
}

absl::Status RunPredict(const PreparedPredict& prepared, const CallOptions& options,
                        v1::PredictResponse* response) {
  VTRAIN_ASSIGN_OR_RETURN(Prediction prediction,
                          vtrain::Predict(prepared.job, *prepared.tables, prepared.options));
  proto::PredictionToProto(prepared.job, prediction, response);
  if (prepared.measured_ms) {
    VTRAIN_ASSIGN_OR_RETURN(Explanation e, Explain(prepared.job, prediction, *prepared.measured_ms,
                                                   *prepared.tables, prepared.options));
    proto::ExplanationToProto(e, response->mutable_explanation());
  }
  ReportSimulation(options, "Predict", prediction.simulation.wall_ns);
  return absl::OkStatus();
}

absl::StatusOr<v1::PredictResponse> Predict(const v1::PredictRequest& request,
                                            const ProfileSource& source,
                                            const CallOptions& options) {
  VTRAIN_ASSIGN_OR_RETURN(PreparedPredict prepared, PreparePredict(request, source, options));
  v1::PredictResponse response;
  VTRAIN_RETURN_IF_ERROR(RunPredict(prepared, options, &response));
  return response;
}

// ---- Search

absl::StatusOr<PreparedSearch> PrepareSearch(const v1::SearchRequest& request,
                                             const ProfileSource& source) {
  VTRAIN_ASSIGN_OR_RETURN(proto::SearchCall call, proto::SearchFromProto(request, GpusOf(source)));
  VTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<const ProfileSet> tables,
                          source.TablesFor(/*profile_set_id=*/"", call.space.cluster.gpu));
  std::shared_ptr<LookupMemo> memo = source.MemoFor(tables);
  return PreparedSearch{std::move(call), std::move(tables), std::move(memo)};
}

absl::StatusOr<v1::SearchResult> RunSearch(const PreparedSearch& prepared,
                                           const CallOptions& options) {
  SearchOptions search_options = prepared.call.options;
  search_options.threads = options.threads;
  search_options.progress = options.progress;
  search_options.cancelled = options.cancelled;
  search_options.memo = prepared.memo.get();
  VTRAIN_ASSIGN_OR_RETURN(SearchResult result,
                          vtrain::Search(prepared.call.space, *prepared.tables, search_options));
  v1::SearchResult out;
  proto::SearchResultToProto(result, prepared.call, &out);
  ReportSimulation(options, "Search", result.simulation.wall_ns);
  return out;
}

absl::StatusOr<v1::SearchResult> Search(const v1::SearchRequest& request,
                                        const ProfileSource& source, const CallOptions& options) {
  VTRAIN_ASSIGN_OR_RETURN(PreparedSearch prepared, PrepareSearch(request, source));
  return RunSearch(prepared, options);
}

// ---- ThroughputCurve

absl::StatusOr<PreparedCurves> PrepareCurves(const v1::ThroughputCurveRequest& request,
                                             const ProfileSource& source) {
  PreparedCurves prepared;
  VTRAIN_ASSIGN_OR_RETURN(prepared.call, proto::CurveCallFromProto(request, GpusOf(source)));
  for (const CurveSpec& spec : prepared.call.specs) {
    VTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<const ProfileSet> tables,
                            source.TablesFor(/*profile_set_id=*/"", spec.cluster.gpu));
    prepared.tables.push_back(std::move(tables));
  }
  prepared.request = request;
  return prepared;
}

absl::StatusOr<v1::ThroughputCurveResponse> RunCurves(const PreparedCurves& prepared,
                                                      const CallOptions& options,
                                                      CurveStore* store) {
  const v1::ThroughputCurveRequest& request = prepared.request;
  v1::ThroughputCurveResponse response;
  response.set_policy(request.policy() == v1::CURVE_POLICY_UNSPECIFIED ? v1::CURVE_POLICY_BEST
                                                                       : request.policy());
  CurveOptions curve_options;
  curve_options.threads = options.threads;
  curve_options.cancelled = options.cancelled;
  for (size_t i = 0; i < prepared.call.specs.size(); ++i) {
    const ProfileSet& tables = *prepared.tables[i];
    v1::Curve* curve = response.add_curves();
    std::string key;
    if (store != nullptr) {
      // Keyed by the job's shape (not its name), the plan space, the counts
      // and the profile set.
      v1::ThroughputCurveRequest key_request = request;
      key_request.clear_jobs();
      *key_request.add_jobs() = request.jobs(static_cast<int>(i));
      key_request.mutable_jobs(0)->clear_name();
      key = absl::StrCat(tables.id, "/", tables.name, "/", key_request.SerializeAsString());
      if (store->Get(key, curve)) {
        curve->set_name(prepared.call.names[i]);
        continue;
      }
    }
    VTRAIN_ASSIGN_OR_RETURN(std::vector<CurvePoint> points,
                            vtrain::ThroughputCurve(prepared.call.specs[i], tables, curve_options));
    proto::CurveToProto(prepared.call.names[i], points, curve);
    ReportSimulation(options, "ThroughputCurve", curve->simulation().wall_ns());
    if (store != nullptr) store->Put(key, *curve);
  }
  return response;
}

absl::StatusOr<v1::ThroughputCurveResponse> ThroughputCurve(
    const v1::ThroughputCurveRequest& request, const ProfileSource& source,
    const CallOptions& options) {
  VTRAIN_ASSIGN_OR_RETURN(PreparedCurves prepared, PrepareCurves(request, source));
  return RunCurves(prepared, options);
}

// ---- PlanModel

absl::StatusOr<PreparedPlanModel> PreparePlanModel(const v1::PlanModelRequest& request,
                                                   const ProfileSource& source) {
  VTRAIN_ASSIGN_OR_RETURN(DesignSpec spec, proto::DesignSpecFromProto(request, GpusOf(source)));
  VTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<const ProfileSet> tables,
                          source.TablesFor(/*profile_set_id=*/"", spec.cluster.gpu));
  return PreparedPlanModel{std::move(spec), std::move(tables), request.target_parameters(),
                           request.target_tokens()};
}

absl::StatusOr<v1::PlanModelResult> RunPlanModel(const PreparedPlanModel& prepared,
                                                 const CallOptions& options) {
  DesignOptions design_options;
  design_options.cancelled = options.cancelled;
  design_options.progress = options.progress;
  v1::PlanModelResult out;
  if (prepared.target_parameters > 0 || prepared.target_tokens > 0) {
    VTRAIN_ASSIGN_OR_RETURN(
        InverseResult inverse,
        DesignForModel(prepared.spec, prepared.target_parameters, prepared.target_tokens,
                       *prepared.tables, design_options));
    proto::InverseResultToProto(inverse, &out);
    ReportSimulation(options, "PlanModel", inverse.simulation.wall_ns);
    return out;
  }
  VTRAIN_ASSIGN_OR_RETURN(DesignResult result,
                          DesignModel(prepared.spec, *prepared.tables, design_options));
  proto::DesignResultToProto(result, &out);
  ReportSimulation(options, "PlanModel", result.simulation.wall_ns);
  return out;
}

absl::StatusOr<v1::PlanModelResult> PlanModel(const v1::PlanModelRequest& request,
                                              const ProfileSource& source,
                                              const CallOptions& options) {
  VTRAIN_ASSIGN_OR_RETURN(PreparedPlanModel prepared, PreparePlanModel(request, source));
  return RunPlanModel(prepared, options);
}

v1::PresetsResponse Presets(const v1::PresetsRequest& /*request*/) {
  return proto::PresetsToProto();
}

}  // namespace vtrain::service
