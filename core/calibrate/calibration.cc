#include "core/calibrate/calibration.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/calibrate/bands.h"
#include "core/calibrate/minimize.h"
#include "core/predict/predictor.h"
#include "core/profile/analytical.h"
#include "core/util/parallel.h"

namespace vtrain {
namespace {

const FittableParam* FindParam(absl::string_view name) {
  for (const FittableParam& p : AnalyticalParamInfos()) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

// Predicts rows [begin, end) of `indices` into `rows`.
void PredictRange(absl::Span<const Measurement> m, absl::Span<const size_t> indices,
                  const ProfileSet& profiles, std::vector<ValidationRow>& rows) {
  for (size_t i : indices) {
    ValidationRow& r = rows[i];
    r.measured_ms = m[i].measured_ms;
    absl::StatusOr<Prediction> p = Predict(m[i].job, profiles);
    if (!p.ok()) {
      r.status = p.status();
      r.predicted_ms = 0;
      r.error = 0;
      continue;
    }
    r.status = absl::OkStatus();
    r.predicted_ms = p->iteration_time_ms();
    r.error = (r.predicted_ms - r.measured_ms) / r.measured_ms;
    r.regime = p->regime;
    r.interval_low_ms = p->interval_low_ns * 1e-6;
    r.interval_high_ms = p->interval_high_ns * 1e-6;
    r.predicted_peak_gib = p->memory.peak_bytes / static_cast<double>(int64_t{1} << 30);
    r.memory_error = m[i].peak_alloc_gib > 0 ? r.predicted_peak_gib / m[i].peak_alloc_gib - 1 : 0;
  }
}

// The predicted peak memory against a measured one (`measured` of each
// measurement, 0: not measured), over the rows that predicted.
ErrorSummary MemorySummary(absl::Span<const Measurement> m, const std::vector<ValidationRow>& rows,
                           double Measurement::*measured) {
  std::vector<ValidationRow> memory;
  for (size_t i = 0; i < m.size(); ++i) {
    const double gib = m[i].*measured;
    if (!(gib > 0) || !rows[i].status.ok()) continue;
    ValidationRow r;
    r.measured_ms = gib;
    r.predicted_ms = rows[i].predicted_peak_gib;
    r.error = r.predicted_ms / gib - 1;
    memory.push_back(r);
  }
  return Summarize(memory);
}

// Predicts the rows named by `indices`, spreading them over `threads`.
void PredictRows(absl::Span<const Measurement> m, const std::vector<size_t>& indices,
                 const ProfileSet& profiles, int threads, std::vector<ValidationRow>& rows) {
  rows.resize(m.size());
  // Each row is its own item: the pool hands the next one to a free thread,
  // which balances small and large jobs.
  ParallelFor(static_cast<int64_t>(indices.size()), threads, [&](int64_t k) {
    PredictRange(m, absl::MakeConstSpan(&indices[static_cast<size_t>(k)], 1), profiles, rows);
    return true;
  });
}

double MapeOf(const std::vector<ValidationRow>& rows, const std::vector<size_t>& indices) {
  double sum = 0;
  for (size_t i : indices) {
    // A failed prediction counts as a 100% error, so the fit avoids it.
    sum += rows[i].status.ok() ? std::abs(rows[i].error) : 1.0;
  }
  return indices.empty() ? 0 : sum / static_cast<double>(indices.size());
}

// The source file of a measurement ("a.csv" of "a.csv:17").
std::string SourceFile(const Measurement& m) { return m.source.substr(0, m.source.rfind(':')); }

// Weights that give every source file the same total weight, so that a small
// multi-node file is not outvoted by a large single-node one (fitting one
// regime transfers poorly to the other:
// docs/architecture.md#calibrate-on-both-regimes); with power < 1 a file
// of n rows weighs n^(1 - power) instead (0: every row the same). They sum
// to 1.
std::vector<double> BalancedWeights(absl::Span<const Measurement> m,
                                    const std::vector<size_t>& indices, double power) {
  std::map<std::string, double> count;
  for (size_t i : indices) count[SourceFile(m[i])] += 1;
  double total = 0;
  for (const auto& [file, n] : count) total += std::pow(n, 1 - power);
  std::vector<double> w(m.size(), 0.0);
  for (size_t i : indices) w[i] = std::pow(count[SourceFile(m[i])], -power) / total;
  return w;
}

// Huber's loss of x with threshold delta, scaled to |x| - delta / 2 beyond
// it (so far from the optimum it is the absolute log error).
double Huber(double x, double delta) {
  const double a = std::abs(x);
  return a <= delta ? a * a / (2 * delta) : a - delta / 2;
}

double WeightedLoss(const std::vector<ValidationRow>& rows, const std::vector<size_t>& indices,
                    const std::vector<double>& weights, double delta) {
  double sum = 0;
  for (size_t i : indices) {
    const ValidationRow& r = rows[i];
    // A failed prediction counts as a 100% error, so the fit avoids it.
    const double x = r.status.ok() && r.predicted_ms > 0 ? std::log(r.predicted_ms / r.measured_ms)
                                                         : std::log(2.0);
    sum += weights[i] * (delta > 0 ? Huber(x, delta) : std::abs(x));
  }
  return sum;
}

// Fits `fit` parameters on the rows in `train`.
AnalyticalParams Fit(absl::Span<const Measurement> m, const std::vector<size_t>& train,
                     const ProfileSet& base, const std::vector<const FittableParam*>& fit,
                     const CalibrateOptions& options, double* mape) {
  ProfileSet trial = base;
  std::vector<ValidationRow> rows;
  // Each parameter is searched in units of its starting value (or of its
  // typical value when it starts at zero), clamped to its bounds.
  std::vector<double> scale(fit.size());
  std::vector<double> x0(fit.size(), 1.0);
  for (size_t k = 0; k < fit.size(); ++k) {
    const double v = base.params.*(fit[k]->member);
    scale[k] = v > 0 ? v : fit[k]->typical;
    x0[k] = v / scale[k];
  }
  auto decode = [&](const std::vector<double>& x) {
    AnalyticalParams p = base.params;
    for (size_t k = 0; k < fit.size(); ++k) {
      p.*(fit[k]->member) = std::clamp(x[k] * scale[k], fit[k]->min, fit[k]->max);
    }
    return p;
  };
  const std::vector<double> weights = options.balance_sources
                                          ? BalancedWeights(m, train, options.balance_power)
                                          : std::vector<double>(m.size(), 1.0 / train.size());
  // Outside a parameter's bounds the model sees the bound, and the loss
  // grows with the distance beyond it, so the simplex comes back instead of
  // wandering in a flat clamped region.
  auto objective = [&](const std::vector<double>& x) {
    trial.params = decode(x);
    double outside = 0;
    for (size_t k = 0; k < fit.size(); ++k) {
      const double v = x[k] * scale[k];
      const double width = fit[k]->max - fit[k]->min;
      if (v < fit[k]->min) outside += (fit[k]->min - v) / width;
      if (v > fit[k]->max) outside += (v - fit[k]->max) / width;
    }
    PredictRows(m, train, trial, options.threads, rows);
    return WeightedLoss(rows, train, weights, options.huber_delta) + outside;
  };
  MinimizeOptions mo;
  mo.max_evaluations = options.max_evaluations;
  MinimizeResult r = Minimize(objective, x0, mo);
  // Restarts from the optimum escape a collapsed simplex; stop when one no
  // longer helps.
  for (int restart = 0; restart < 4; ++restart) {
    mo.initial_step = restart % 2 == 0 ? 0.1 : 0.3;
    MinimizeResult next = Minimize(objective, r.x, mo);
    const bool better = next.value < r.value * (1 - 1e-3);
    if (next.value < r.value) r = next;
    if (!better) break;
  }
  *mape = r.value;
  return decode(r.x);
}

// Each fold's held-out rows against bands from the other folds' held-out
// errors: the coverage a new shape's prediction interval can be expected to
// have.
std::vector<RegimeCoverage> HeldOutCoverage(absl::Span<const Measurement> m,
                                            const std::vector<int>& fold_of, int folds,
                                            const std::vector<ValidationRow>& cv_rows) {
  std::vector<ValidationRow> checked = cv_rows;
  for (int f = 0; f < folds; ++f) {
    std::vector<ValidationRow> others = cv_rows;
    for (size_t i = 0; i < m.size(); ++i) {
      if (fold_of[i] == f) others[i].status = absl::CancelledError("held out");
    }
    const std::vector<ErrorBand> bands = BandsOf(m, others, 0.9);
    std::vector<ValidationRow> mine = cv_rows;
    ApplyBands(m, bands, mine);
    for (size_t i = 0; i < m.size(); ++i) {
      if (fold_of[i] == f) checked[i] = mine[i];
    }
  }
  return CoverageByRegime(m, checked);
}

}  // namespace

ErrorSummary Summarize(absl::Span<const ValidationRow> rows) {
  ErrorSummary s;
  double sum_abs = 0, sum_err = 0, sum_meas = 0;
  for (const ValidationRow& r : rows) {
    if (!r.status.ok()) continue;
    ++s.count;
    sum_abs += std::abs(r.error);
    sum_err += r.error;
    sum_meas += r.measured_ms;
    s.max_abs_error = std::max(s.max_abs_error, std::abs(r.error));
  }
  if (s.count == 0) return s;
  std::vector<double> abs_errors;
  for (const ValidationRow& r : rows) {
    if (r.status.ok()) abs_errors.push_back(std::abs(r.error));
  }
  std::sort(abs_errors.begin(), abs_errors.end());
  const size_t rank = static_cast<size_t>(std::ceil(0.9 * static_cast<double>(abs_errors.size())));
  s.p90_abs_error = abs_errors[std::clamp<size_t>(rank, 1, abs_errors.size()) - 1];
  const double n = static_cast<double>(s.count);
  s.mape = sum_abs / n;
  s.bias = sum_err / n;
  const double mean = sum_meas / n;
  double ss_res = 0, ss_tot = 0;
  for (const ValidationRow& r : rows) {
    if (!r.status.ok()) continue;
    ss_res += (r.predicted_ms - r.measured_ms) * (r.predicted_ms - r.measured_ms);
    ss_tot += (r.measured_ms - mean) * (r.measured_ms - mean);
  }
  s.r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 0;
  return s;
}

std::string DominantParallelism(const ParallelPlan& plan) {
  const int64_t t = plan.tensor_parallel, d = plan.data_parallel, p = plan.pipeline_parallel;
  if (t == 1 && d == 1 && p == 1) return "none";
  if (t >= p && t >= d) return "tp";
  if (p >= d) return "pp";
  return "dp";
}

namespace {

// Fills report.overall, groups and failed from report.rows.
void Group(absl::Span<const Measurement> measurements, ValidationReport& report) {
  report.overall = Summarize(report.rows);
  report.failed = 0;
  report.groups.clear();
  std::map<std::string, std::vector<ValidationRow>> groups;
  for (size_t i = 0; i < measurements.size(); ++i) {
    const Job& job = measurements[i].job;
    if (!report.rows[i].status.ok()) ++report.failed;
    groups[absl::StrFormat("gpus=%05d", job.cluster.num_gpus)].push_back(report.rows[i]);
    groups[absl::StrCat("dominant=", DominantParallelism(job.plan))].push_back(report.rows[i]);
    const std::string& src = measurements[i].source;
    if (!src.empty()) {
      groups[absl::StrCat("source=", src.substr(0, src.rfind(':')))].push_back(report.rows[i]);
    }
  }
  for (auto& [name, rows] : groups) {
    std::string label = name;
    if (absl::StartsWith(label, "gpus=")) {
      label = absl::StrCat("gpus=", std::stoll(label.substr(5)));  // drop the sort padding
    }
    report.groups.emplace_back(label, Summarize(rows));
  }
}

}  // namespace

ValidationReport Validate(absl::Span<const Measurement> measurements, const ProfileSet& profiles,
                          const ValidateOptions& options) {
  ValidationReport report;
  std::vector<size_t> all(measurements.size());
  std::iota(all.begin(), all.end(), 0);
  PredictRows(measurements, all, profiles, options.threads, report.rows);
  Group(measurements, report);
  report.regimes = CoverageByRegime(measurements, report.rows);
  report.memory_allocated = MemorySummary(measurements, report.rows, &Measurement::peak_alloc_gib);
  report.memory_reserved =
      MemorySummary(measurements, report.rows, &Measurement::peak_reserved_gib);
  return report;
}

absl::Span<const FittableParam> FittableParams() { return AnalyticalParamInfos(); }

// inter_node_efficiency is not fitted: the calibration runs' network traffic
// is mostly data-parallel (its own dp_bandwidth_factor) and hidden pipeline
// sends, so it was free to drift, and a held-out fold that lacked the one
// run with tensor parallelism across nodes (t = 16) predicted that run 3.7x
// too slow. The uncalibrated 0.8 of the line rate is roughly what NCCL's
// ring reaches over InfiniBand.
std::vector<std::string> DefaultFitParams() {
  return {"gemm_max_efficiency",      "gemm_overhead_ns",
          "gemm_misaligned_factor",   "gemm_k_overhead",
          "gemm_wave_quantization",   "gemm_small_tile_efficiency",
          "memory_efficiency",        "memory_overhead_ns",
          "host_dispatch_ns",         "tp_bandwidth_factor",
          "dp_bandwidth_factor",      "pipeline_p2p_latency_ns",
          "tp_host_sync_per_rank_ns", "tp_collective_overhead_per_rank_ns",
          "tp_host_sync_exponent"};
}

absl::StatusOr<CalibrationResult> Calibrate(absl::Span<const Measurement> measurements,
                                            const ProfileSet& profiles,
                                            const CalibrateOptions& options) {
  std::vector<const FittableParam*> fit;
  for (const std::string& name : options.params.empty() ? DefaultFitParams() : options.params) {
    const FittableParam* p = FindParam(name);
    if (p == nullptr) {
      std::string known;
      for (const FittableParam& k : AnalyticalParamInfos())
        absl::StrAppend(&known, known.empty() ? "" : ", ", k.name);
      return absl::InvalidArgumentError(
          absl::StrCat("calibration parameter '", name, "' is unknown; use one of: ", known));
    }
    fit.push_back(p);
  }
  const int folds = std::max(1, options.folds);
  if (measurements.size() < static_cast<size_t>(std::max(2, folds))) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibration needs at least ", std::max(2, folds), " measurements, got ",
                     measurements.size(), "; add rows or lower the number of folds"));
  }
  auto progress = [&](const std::string& s) {
    if (options.progress) options.progress(s);
  };

  CalibrationResult result;
  std::vector<int> fold_of(measurements.size());
  if (options.grouping == FoldGrouping::kLayerShape) {
    fold_of = ShapeFolds(measurements, folds, options.seed);
  } else if (options.grouping == FoldGrouping::kModel) {
    fold_of = ModelFolds(measurements, folds, options.seed);
  } else {
    std::vector<size_t> order(measurements.size());
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(options.seed);
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t k = 0; k < order.size(); ++k) fold_of[order[k]] = static_cast<int>(k % folds);
  }
  result.cross_validated.rows.resize(measurements.size());
  if (folds > 1) {
    for (int f = 0; f < folds; ++f) {
      std::vector<size_t> train, test;
      for (size_t i = 0; i < measurements.size(); ++i) {
        (fold_of[i] == f ? test : train).push_back(i);
      }
      if (test.empty()) continue;
      double train_mape = 0;
      ProfileSet fitted = profiles;
      fitted.params = Fit(measurements, train, profiles, fit, options, &train_mape);
      std::vector<ValidationRow> rows;
      PredictRows(measurements, test, fitted, options.threads, rows);
      for (size_t i : test) result.cross_validated.rows[i] = rows[i];
      result.fold_mape.push_back(MapeOf(rows, test));
      progress(
          absl::StrFormat("fold %d/%d (%d rows held out): train loss %.4f, held-out MAPE %.2f%%",
                          f + 1, folds, test.size(), train_mape, 100 * result.fold_mape.back()));
    }
    Group(measurements, result.cross_validated);
    result.bands = BandsOf(measurements, result.cross_validated.rows, 0.9);
    if (ErrorBand paired = PairedBandOf(measurements, result.cross_validated.rows, 0.9);
        paired.rows > 0) {
      result.bands.push_back(paired);
    }
    result.band_coverage =
        HeldOutCoverage(measurements, fold_of, folds, result.cross_validated.rows);
    result.fold_of = fold_of;
    ApplyBands(measurements, result.bands, result.cross_validated.rows);
    result.cross_validated.regimes = CoverageByRegime(measurements, result.cross_validated.rows);
  }
  std::vector<size_t> all(measurements.size());
  std::iota(all.begin(), all.end(), 0);
  double loss = 0;
  result.params = Fit(measurements, all, profiles, fit, options, &loss);
  ProfileSet fitted = profiles;
  fitted.params = result.params;
  std::vector<ValidationRow> rows;
  PredictRows(measurements, all, fitted, options.threads, rows);
  result.fit_mape = MapeOf(rows, all);
  progress(absl::StrFormat("final fit on all %d rows: loss %.4f, in-sample MAPE %.2f%%", all.size(),
                           loss, 100 * result.fit_mape));
  return result;
}

std::pair<AnalyticalParams, double> FitIntraNodeAllReduce(
    const std::vector<std::pair<int64_t, CollectiveCurve>>& curves_by_ranks,
    double intra_node_bandwidth_bytes_per_s, AnalyticalParams params) {
  LinkBandwidths links{intra_node_bandwidth_bytes_per_s, intra_node_bandwidth_bytes_per_s};
  const double s0 = params.intra_node_latency_ns > 0 ? params.intra_node_latency_ns : 1e4;
  const double s1 =
      params.intra_node_latency_per_rank_ns > 0 ? params.intra_node_latency_per_rank_ns : 1e3;
  const double s2 = params.intra_node_efficiency > 0 ? params.intra_node_efficiency : 1;
  auto decode = [&](const std::vector<double>& x) {
    AnalyticalParams p = params;
    p.intra_node_latency_ns = std::max(0.0, x[0] * s0);
    p.intra_node_latency_per_rank_ns = std::max(0.0, x[1] * s1);
    p.intra_node_efficiency = std::clamp(x[2] * s2, 0.05, kMaxIntraNodeEfficiency);
    return p;
  };
  auto objective = [&](const std::vector<double>& x) {
    const AnalyticalParams p = decode(x);
    double sum = 0;
    int64_t count = 0;
    for (const auto& [ranks, curve] : curves_by_ranks) {
      const CommGroup group{ranks, ranks, 1.0, CommUse::kOther};
      for (const CollectivePoint& point : curve.points()) {
        const double model =
            AnalyticalCollectiveNs(Collective::kAllReduce, point.bytes, group, links, p);
        sum += std::abs(model - point.latency_ns) / point.latency_ns;
        ++count;
      }
    }
    return count > 0 ? sum / static_cast<double>(count) : 0;
  };
  MinimizeOptions mo;
  mo.max_evaluations = 2000;
  MinimizeResult r = Minimize(objective, {1, 1, 1}, mo);
  r = Minimize(objective, r.x, mo);
  return {decode(r.x), r.value};
}

}  // namespace vtrain
