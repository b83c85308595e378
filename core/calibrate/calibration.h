// Accuracy against measured iteration times: validation (predicted against
// measured, with error statistics) and calibration (fitting the analytical
// model's free parameters, reporting k-fold cross-validated error).
#ifndef VTRAIN_CORE_CALIBRATE_CALIBRATION_H_
#define VTRAIN_CORE_CALIBRATE_CALIBRATION_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/profile/profile.h"
#include "core/spec/job.h"

namespace vtrain {

// One measured training run.
struct Measurement {
  Job job;
  double measured_ms = 0;
  std::string source;  // where it came from, e.g. "single_node.csv:17"
};

struct ValidationRow {
  double measured_ms = 0;
  double predicted_ms = 0;  // 0 when the prediction failed
  double error = 0;         // (predicted - measured) / measured
  absl::Status status;      // why the prediction failed, if it did
};

struct ErrorSummary {
  int64_t count = 0;
  double mape = 0;           // mean |error|, as a fraction
  double r2 = 0;             // of predicted against measured time
  double max_abs_error = 0;  // as a fraction
  double bias = 0;           // mean signed error
};

// Summarises the rows whose prediction succeeded.
ErrorSummary Summarize(absl::Span<const ValidationRow> rows);

struct ValidationReport {
  std::vector<ValidationRow> rows;  // parallel to the measurements
  ErrorSummary overall;
  // "dominant=tp", "gpus=8", "source=FILE" (the part of Measurement::source
  // before its last ':'), in a stable order.
  std::vector<std::pair<std::string, ErrorSummary>> groups;
  int64_t failed = 0;
};

// "tp", "dp", "pp" (the largest degree; ties in that order) or "none".
std::string DominantParallelism(const ParallelPlan& plan);

struct ValidateOptions {
  int threads = 1;
};

// Predicts every measurement with `profiles` and compares.
ValidationReport Validate(absl::Span<const Measurement> measurements, const ProfileSet& profiles,
                          const ValidateOptions& options = {});

// A parameter of AnalyticalParams that calibration may fit (all of them).
using FittableParam = ParamInfo;
absl::Span<const FittableParam> FittableParams();
// Names of the parameters fitted when none are named.
std::vector<std::string> DefaultFitParams();

struct CalibrateOptions {
  std::vector<std::string> params;  // names from FittableParams(); empty: the defaults
  int folds = 5;                    // k of k-fold cross-validation; 0 or 1: none
  int max_evaluations = 300;        // per fit
  uint64_t seed = 1;                // shuffles the rows into folds
  // Minimise the mean of the per-file MAPEs (each measurement file weighs the
  // same) instead of the MAPE over all rows.
  bool balance_sources = true;
  int threads = 1;
  std::function<void(const std::string&)> progress;  // may be empty
};

struct CalibrationResult {
  AnalyticalParams params;  // fitted on every row
  double fit_mape = 0;      // in-sample objective, for reference only
  // Each row predicted by the parameters fitted without its fold.
  ValidationReport cross_validated;
  std::vector<double> fold_mape;
  // 90% bands of the held-out errors per regime (RegimeOf), for prediction
  // intervals; empty without cross-validation.
  std::vector<ErrorBand> bands;
};

// The central `coverage` band of the signed errors of `rows` whose
// measurement is in `regime`.
ErrorBand BandOf(absl::Span<const Measurement> measurements, absl::Span<const ValidationRow> rows,
                 const std::string& regime, double coverage);

// Fits options.params of profiles.params to the measurements, minimising the
// mean absolute percentage error, and cross-validates the fit.
// INVALID_ARGUMENT for an unknown parameter name or fewer rows than folds.
absl::StatusOr<CalibrationResult> Calibrate(absl::Span<const Measurement> measurements,
                                            const ProfileSet& profiles,
                                            const CalibrateOptions& options);

// Fits intra_node_latency_ns, intra_node_latency_per_rank_ns and
// intra_node_efficiency to measured intra-node all-reduce curves, by ranks,
// given the per-GPU bandwidth the model divides by. Returns the updated
// parameters and the MAPE of the fit.
std::pair<AnalyticalParams, double> FitIntraNodeAllReduce(
    const std::vector<std::pair<int64_t, CollectiveCurve>>& curves_by_ranks,
    double intra_node_bandwidth_bytes_per_s, AnalyticalParams params);

}  // namespace vtrain

#endif  // VTRAIN_CORE_CALIBRATE_CALIBRATION_H_
