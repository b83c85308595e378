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
  // The measured peak memory per GPU on the busiest rank, GiB: PyTorch's
  // max_memory_allocated and max_memory_reserved (0: not measured).
  double peak_alloc_gib = 0;
  double peak_reserved_gib = 0;
};

struct ValidationRow {
  double measured_ms = 0;
  double predicted_ms = 0;  // 0 when the prediction failed
  double error = 0;         // (predicted - measured) / measured
  absl::Status status;      // why the prediction failed, if it did
  std::string regime;       // RegimeOf the job
  // The prediction interval (0 when the profile set has no band for it).
  double interval_low_ms = 0;
  double interval_high_ms = 0;
  // The predicted peak memory per GPU (GiB; 0 when the prediction failed)
  // and its error against the measured peak allocated (0: none measured).
  double predicted_peak_gib = 0;
  double memory_error = 0;
};

struct ErrorSummary {
  int64_t count = 0;
  double mape = 0;           // mean |error|, as a fraction
  double r2 = 0;             // of predicted against measured time
  double max_abs_error = 0;  // as a fraction
  double p90_abs_error = 0;  // 90th percentile of |error| (nearest rank)
  double bias = 0;           // mean signed error
};

// Summarises the rows whose prediction succeeded.
ErrorSummary Summarize(absl::Span<const ValidationRow> rows);

// How the prediction intervals of one regime did: the fraction of its rows
// whose measured time fell inside, the median width relative to the
// prediction, and the errors.
struct RegimeCoverage {
  std::string regime;
  int64_t with_interval = 0;  // rows that had an interval
  double coverage = 0;
  double median_width = 0;
  ErrorSummary error;
};

struct ValidationReport {
  std::vector<ValidationRow> rows;  // parallel to the measurements
  ErrorSummary overall;
  // "dominant=tp", "gpus=8", "source=FILE" (the part of Measurement::source
  // before its last ':'), in a stable order.
  std::vector<std::pair<std::string, ErrorSummary>> groups;
  int64_t failed = 0;
  std::vector<RegimeCoverage> regimes;  // per RegimeOf, with interval coverage
  // The predicted peak memory against the measured peak allocated and
  // reserved, over the rows that measured it (count 0: none did).
  ErrorSummary memory_allocated, memory_reserved;
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

enum class FoldGrouping { kLayerShape, kModel, kRandom };

struct CalibrateOptions {
  std::vector<std::string> params;  // names from FittableParams(); empty: the defaults
  int folds = 5;                    // k of k-fold cross-validation; 0 or 1: none
  int max_evaluations = 300;        // per fit
  uint64_t seed = 1;                // shuffles the rows into folds
  // Minimise the mean of the per-file MAPEs (each measurement file weighs the
  // same) instead of the MAPE over all rows.
  bool balance_sources = true;
  // With balance_sources, a file of n rows weighs n^(1 - balance_power) in
  // total: 1 weighs every file the same, 0 every row the same (as
  // balance_sources = false), values between share the weight.
  double balance_power = 1;
  // The loss per row is Huber's on log(predicted / measured) with this
  // threshold: quadratic within it, linear beyond, so a few runs the model
  // cannot explain pull the fit no more than MAPE would, while rows near the
  // optimum give the simplex a smooth surface.
  double huber_delta = 0.05;
  // How rows are dealt into cross-validation folds: by layer shape
  // (ShapeFolds: a shape's runs are never split between training and test),
  // by model (ModelFolds: every run of a model is held out together, the
  // grouping for published runs of a few models at many plans), or shuffled
  // at random.
  FoldGrouping grouping = FoldGrouping::kLayerShape;
  int threads = 1;
  std::function<void(const std::string&)> progress;  // may be empty
};

struct CalibrationResult {
  AnalyticalParams params;  // fitted on every row
  double fit_mape = 0;      // in-sample MAPE of the final fit, for reference only
  // Each row predicted by the parameters fitted without its fold.
  ValidationReport cross_validated;
  std::vector<double> fold_mape;
  // 90% bands of the held-out errors per regime (BandsOf), for prediction
  // intervals; empty without cross-validation.
  std::vector<ErrorBand> bands;
  // Their coverage, honestly estimated: each fold's rows checked against
  // bands computed from the other folds' held-out errors only.
  std::vector<RegimeCoverage> band_coverage;
  // The cross-validation fold of every measurement.
  std::vector<int> fold_of;
};

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
