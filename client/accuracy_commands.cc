// vtrainctl validate and calibrate: accuracy against measured runs.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/commands.h"
#include "client/json_writer.h"
#include "client/measurements.h"
#include "client/svg_plot.h"
#include "common/files.h"
#include "common/flag_parser.h"
#include "core/calibrate/bands.h"
#include "core/calibrate/calibration.h"
#include "core/profile/default_profiles.h"
#include "core/util/status_macros.h"

namespace vtrain::cli {
namespace {

void AddSetupFlags(common::FlagParser& f) {
  f.AddValue("measurements", "FILE[,FILE]", "CSV files of measured runs (required)");
  f.AddValue("nccl-dir", "DIR",
             "directory of nccl-tests all-reduce files allreduce_{N}gpu.txt (intra-node)");
  f.AddValue("threads", "N", "predictions in parallel (default: all cores)");
}

struct Inputs {
  std::vector<Measurement> measurements;
  ProfileSet profiles;
  std::vector<std::pair<int64_t, CollectiveCurve>> nccl_curves;
  int threads = 1;
};

absl::StatusOr<Inputs> LoadInputs(const common::FlagParser& flags) {
  Inputs in;
  std::optional<std::string> files = flags.Get("measurements");
  if (!files) return absl::InvalidArgumentError("--measurements FILE.csv is required");
  const MeasurementSetup setup = MegatronA100Setup();
  for (absl::string_view path : absl::StrSplit(*files, ',', absl::SkipEmpty())) {
    VTRAIN_ASSIGN_OR_RETURN(std::string text, common::ReadFile(std::string(path)));
    const std::string base = std::string(path.substr(path.rfind('/') + 1));
    VTRAIN_ASSIGN_OR_RETURN(std::vector<Measurement> rows, ParseMeasurementCsv(text, base, setup));
    in.measurements.insert(in.measurements.end(), rows.begin(), rows.end());
  }
  in.profiles = DefaultProfileSet(setup.cluster.gpu);
  if (std::optional<std::string> dir = flags.Get("nccl-dir")) {
    for (int64_t ranks = 2; ranks <= 64; ++ranks) {
      const std::string path = absl::StrCat(*dir, "/allreduce_", ranks, "gpu.txt");
      absl::StatusOr<std::string> text = common::ReadFile(path);
      if (!text.ok()) continue;
      VTRAIN_ASSIGN_OR_RETURN(CollectiveCurve curve, common::ParseNcclTests(*text, path));
      in.nccl_curves.emplace_back(ranks, curve);
    }
    if (in.nccl_curves.empty()) {
      return absl::NotFoundError(
          absl::StrCat("--nccl-dir ", *dir, " holds no allreduce_{N}gpu.txt files"));
    }
  }
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> threads, flags.GetInt("threads"));
  in.threads =
      static_cast<int>(threads.value_or(std::max(1u, std::thread::hardware_concurrency())));
  if (in.threads < 1 || in.threads > 1024) {
    return absl::InvalidArgumentError("--threads must be between 1 and 1024");
  }
  return in;
}

std::string Pct(double fraction) { return absl::StrFormat("%.2f%%", 100 * fraction); }

// Per regime: the error beside the interval's coverage and median width.
std::string RegimeTable(const std::vector<RegimeCoverage>& regimes, const std::string& title) {
  if (regimes.empty()) return "";
  std::string out =
      absl::StrFormat("\n%s:\n%-26s %6s %9s %9s %10s %9s %9s %12s\n", title, "regime", "rows",
                      "MAPE", "p90", "max|err|", "bias", "coverage", "median width");
  for (const RegimeCoverage& c : regimes) {
    absl::StrAppend(
        &out,
        absl::StrFormat("%-26s %6d %9s %9s %10s %9s %9s %12s\n", c.regime, c.error.count,
                        Pct(c.error.mape), Pct(c.error.p90_abs_error), Pct(c.error.max_abs_error),
                        Pct(c.error.bias), c.with_interval > 0 ? Pct(c.coverage) : "-",
                        c.with_interval > 0 ? Pct(c.median_width) : "-"));
  }
  return out;
}

std::string ReportTable(const std::vector<Measurement>& m, const ValidationReport& r, int worst) {
  std::string out;
  absl::StrAppend(&out, absl::StrFormat("rows %d (failed %d)   MAPE %s   p90 |error| %s   R^2 %.4f "
                                        "  max |error| %s   bias %s\n\n",
                                        r.overall.count, r.failed, Pct(r.overall.mape),
                                        Pct(r.overall.p90_abs_error), r.overall.r2,
                                        Pct(r.overall.max_abs_error), Pct(r.overall.bias)));
  absl::StrAppend(&out, absl::StrFormat("%-36s %6s %9s %9s %9s %10s %9s\n", "group", "rows", "MAPE",
                                        "p90", "R^2", "max|err|", "bias"));
  for (const auto& [name, s] : r.groups) {
    absl::StrAppend(
        &out, absl::StrFormat("%-36s %6d %9s %9s %9.4f %10s %9s\n", name, s.count, Pct(s.mape),
                              Pct(s.p90_abs_error), s.r2, Pct(s.max_abs_error), Pct(s.bias)));
  }
  absl::StrAppend(&out, RegimeTable(r.regimes, "90% intervals by regime"));
  std::vector<size_t> order(r.rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::abs(r.rows[a].error) > std::abs(r.rows[b].error);
  });
  absl::StrAppend(
      &out,
      absl::StrFormat("\nworst %d rows:\n%-34s %5s %6s %5s %5s %5s %4s %4s %4s %11s %11s %8s\n",
                      worst, "source", "gpus", "hidden", "layers", "gb", "mb", "tp", "dp", "pp",
                      "measured", "predicted", "error"));
  for (int k = 0; k < worst && k < static_cast<int>(order.size()); ++k) {
    const size_t i = order[k];
    const Job& j = m[i].job;
    absl::StrAppend(
        &out, absl::StrFormat(
                  "%-34s %5d %6d %6d %5d %5d %4d %4d %4d %11.1f %11.1f %8s\n", m[i].source,
                  j.cluster.num_gpus, j.model.hidden_size, j.model.num_layers, j.plan.global_batch,
                  j.plan.micro_batch, j.plan.tensor_parallel, j.plan.data_parallel,
                  j.plan.pipeline_parallel, r.rows[i].measured_ms, r.rows[i].predicted_ms,
                  r.rows[i].status.ok() ? Pct(r.rows[i].error)
                                        : std::string(r.rows[i].status.message())));
  }
  return out;
}

std::string ReportCsv(const std::vector<Measurement>& m, const ValidationReport& r) {
  std::string out =
      "source,num_gpus,global_batch,micro_batch,hidden_size,num_heads,num_layers,seq_len,tp,dp,pp,"
      "measured_ms,predicted_ms,error\n";
  for (size_t i = 0; i < m.size(); ++i) {
    const Job& j = m[i].job;
    absl::StrAppend(
        &out,
        absl::StrFormat("%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%.3f,%.3f,%.6f\n", m[i].source,
                        j.cluster.num_gpus, j.plan.global_batch, j.plan.micro_batch,
                        j.model.hidden_size, j.model.num_heads, j.model.num_layers, j.model.seq_len,
                        j.plan.tensor_parallel, j.plan.data_parallel, j.plan.pipeline_parallel,
                        r.rows[i].measured_ms, r.rows[i].predicted_ms, r.rows[i].error));
  }
  return out;
}

void SummaryJson(JsonWriter& w, const ErrorSummary& s) {
  w.BeginObject();
  w.Key("rows").Int(s.count);
  w.Key("mape").Double(s.mape);
  w.Key("r2").Double(s.r2);
  w.Key("max_abs_error").Double(s.max_abs_error);
  w.Key("p90_abs_error").Double(s.p90_abs_error);
  w.Key("bias").Double(s.bias);
  w.EndObject();
}

std::string ReportJson(const std::vector<Measurement>& m, const ValidationReport& r) {
  JsonWriter w;
  w.BeginObject();
  w.Key("overall");
  SummaryJson(w, r.overall);
  w.Key("failed").Int(r.failed);
  w.Key("groups").BeginObject();
  for (const auto& [name, s] : r.groups) {
    w.Key(name);
    SummaryJson(w, s);
  }
  w.EndObject();
  w.Key("regimes").BeginObject();
  for (const RegimeCoverage& c : r.regimes) {
    w.Key(c.regime).BeginObject();
    w.Key("error");
    SummaryJson(w, c.error);
    w.Key("rows_with_interval").Int(c.with_interval);
    w.Key("coverage").Double(c.coverage);
    w.Key("median_width").Double(c.median_width);
    w.EndObject();
  }
  w.EndObject();
  w.Key("rows").BeginArray();
  for (size_t i = 0; i < m.size(); ++i) {
    w.BeginObject();
    w.Key("source").String(m[i].source);
    w.Key("measured_ms").Double(r.rows[i].measured_ms);
    w.Key("predicted_ms").Double(r.rows[i].predicted_ms);
    w.Key("error").Double(r.rows[i].error);
    w.Key("regime").String(r.rows[i].regime);
    w.Key("interval_low_ms").Double(r.rows[i].interval_low_ms);
    w.Key("interval_high_ms").Double(r.rows[i].interval_high_ms);
    if (!r.rows[i].status.ok()) w.Key("failure").String(r.rows[i].status.message());
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.str() + "\n";
}

// The fitted parameters and bands as C++ (core/profile/a100_params.inc), with
// the held-out figures in its header.
void PrintCpp(const CalibrationResult& result, const CalibrateOptions& options, size_t measurements,
              double nccl_mape, std::ostream& out) {
  out << "// Generated by: vtrainctl calibrate --measurements <the calibration CSVs> "
         "--nccl-dir <nccl-tests dir> --cpp\n";
  out << absl::StrFormat(
      "// %d measured runs; %d-fold cross-validation grouped by layer shape (hidden, heads,\n"
      "// ffn, seq, t, micro-batch: no shape in both training and test folds); Huber loss\n"
      "// (delta %.3g) on log(predicted / measured). Held-out MAPE %.2f%%, R^2 %.4f.\n",
      measurements, options.folds, options.huber_delta, 100 * result.cross_validated.overall.mape,
      result.cross_validated.overall.r2);
  for (const auto& [name, g] : result.cross_validated.groups) {
    if (!absl::StartsWith(name, "source=")) continue;
    out << absl::StrFormat(
        "//   %s: %d runs, held-out MAPE %.2f%%, p90 %.2f%%, max %.2f%%, R^2 %.4f.\n",
        name.substr(7), g.count, 100 * g.mape, 100 * g.p90_abs_error, 100 * g.max_abs_error, g.r2);
  }
  if (nccl_mape >= 0) {
    out << absl::StrFormat("// Intra-node all-reduce model: MAPE %.2f%% against nccl-tests.\n",
                           100 * nccl_mape);
  }
  for (const FittableParam& f : FittableParams()) {
    out << absl::StrFormat("params.%s = %.6g;\n", f.name, result.params.*(f.member));
  }
  for (const RegimeCoverage& c : result.band_coverage) {
    out << absl::StrFormat(
        "//   %s: %d runs, held-out MAPE %.2f%%, p90 %.2f%%, max %.2f%%; 90%% interval "
        "coverage %.1f%%, median width %.1f%%.\n",
        c.regime, c.error.count, 100 * c.error.mape, 100 * c.error.p90_abs_error,
        100 * c.error.max_abs_error, 100 * c.coverage, 100 * c.median_width);
  }
  out << "// Prediction intervals: symmetric in log space, the 90% quantile of the\n"
         "// held-out |log(predicted / measured)| by regime (core/calibrate/bands.h).\n";
  for (const ErrorBand& b : result.bands) {
    out << absl::StrFormat("bands.push_back({\"%s\", %.6g, %.6g, %.2f, %d});\n", b.regime,
                           b.error_low, b.error_high, b.coverage, b.rows);
  }
}

}  // namespace

int RunValidate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  common::FlagParser flags("vtrainctl validate");
  AddSetupFlags(flags);
  flags.AddValue("worst", "N", "list the N worst rows (default 10)");
  flags.AddValue("set", "NAME=V[,NAME=V]", "override analytical parameters (see calibrate --help)");
  flags.AddSwitch("csv", "print every row as CSV");
  flags.AddSwitch("json", "print the report as JSON");
  flags.AddValue("plot", "FILE.svg", "also draw predicted against measured, with the +/-10% band");
  flags.AddSwitch("help", "show this help");
  if (absl::Status s = flags.Parse(args); !s.ok()) return Fail(err, "validate", s);
  if (flags.Switch("help")) {
    out << "usage: vtrainctl validate --measurements FILE.csv[,FILE.csv] [--nccl-dir DIR]\n\n"
           "Predicts every measured run with the built-in profiles (plus measured intra-node\n"
           "all-reduce curves from --nccl-dir) and reports MAPE, R^2, the maximum error,\n"
           "errors by GPU count, dominant parallelism and file, and the worst rows.\n"
           "Runs use the setup of ../shared/data/a100-megatron-measured: A100-SXM4-80GB,\n"
           "8 per node, NVLink 150 GB/s, 800 Gb/s per node, fp16, full recomputation, 1F1B.\n\n"
           "example:\n  vtrainctl validate --measurements "
           "../shared/data/a100-megatron-measured/single_node_calibration.csv\n\nflags:\n"
        << flags.Usage();
    return common::kExitOk;
  }
  absl::StatusOr<Inputs> in = LoadInputs(flags);
  if (!in.ok()) return Fail(err, "validate", in.status());
  for (const auto& [ranks, curve] : in->nccl_curves) {
    in->profiles.collectives.insert_or_assign(
        CollectiveKey{in->profiles.gpu, LinkScope::kIntraNode, Collective::kAllReduce, ranks},
        curve);
  }
  if (auto overrides = flags.Get("set")) {
    for (absl::string_view kv : absl::StrSplit(*overrides, ',', absl::SkipEmpty())) {
      std::pair<std::string, std::string> parts = absl::StrSplit(kv, absl::MaxSplits('=', 1));
      const FittableParam* param = nullptr;
      for (const FittableParam& f : FittableParams()) {
        if (parts.first == f.name) param = &f;
      }
      double value = 0;
      if (param == nullptr || !absl::SimpleAtod(parts.second, &value) || value < param->min ||
          value > param->max) {
        return Fail(err, "validate",
                    absl::InvalidArgumentError(absl::StrCat(
                        "--set '", kv,
                        "' must be NAME=VALUE with a parameter from "
                        "'vtrainctl calibrate --help' and a value within its bounds")));
      }
      in->profiles.params.*(param->member) = value;
    }
  }
  absl::StatusOr<std::optional<int64_t>> worst = flags.GetInt("worst");
  if (!worst.ok()) return Fail(err, "validate", worst.status());
  ValidateOptions options;
  options.threads = in->threads;
  const ValidationReport report = Validate(in->measurements, in->profiles, options);
  if (auto plot = flags.Get("plot")) {
    std::vector<ScatterPoint> points;
    for (size_t i = 0; i < report.rows.size(); ++i) {
      const ValidationRow& r = report.rows[i];
      if (!r.status.ok()) continue;
      points.push_back({r.measured_ms, r.predicted_ms,
                        absl::StrFormat("%s: measured %.1f ms, predicted %.1f ms (%+.1f%%)",
                                        in->measurements[i].source, r.measured_ms, r.predicted_ms,
                                        100 * r.error),
                        in->measurements[i].job.cluster.num_gpus >
                            in->measurements[i].job.cluster.gpus_per_node});
    }
    const std::string title =
        absl::StrFormat("vtrain: %d runs, MAPE %.2f%%, R^2 %.3f (red: multi-node)",
                        report.overall.count, 100 * report.overall.mape, report.overall.r2);
    if (absl::Status s = common::WriteFile(*plot, PredictedVsMeasuredSvg(points, 0.10, title));
        !s.ok()) {
      return Fail(err, "validate", s);
    }
  }
  if (flags.Switch("json")) {
    out << ReportJson(in->measurements, report);
  } else if (flags.Switch("csv")) {
    out << ReportCsv(in->measurements, report);
  } else {
    out << ReportTable(in->measurements, report, static_cast<int>(worst->value_or(10)));
  }
  return common::kExitOk;
}

// Every held-out row of a cross-validated calibration, for analysis.
std::string RowsCsv(const std::vector<Measurement>& m, const CalibrationResult& r) {
  std::string csv =
      "source,fold,regime,layer_shape,measured_ms,predicted_ms,error,interval_low_ms,"
      "interval_high_ms\n";
  const std::vector<ValidationRow>& rows = r.cross_validated.rows;
  for (size_t i = 0; i < m.size() && i < rows.size(); ++i) {
    const ValidationRow& row = rows[i];
    absl::StrAppend(
        &csv, absl::StrFormat("%s,%d,%s,%s,%.6f,%.6f,%.6f,%.6f,%.6f\n", m[i].source,
                              i < r.fold_of.size() ? r.fold_of[i] : -1, row.regime,
                              LayerShapeKey(m[i].job), row.measured_ms, row.predicted_ms, row.error,
                              row.interval_low_ms, row.interval_high_ms));
  }
  return csv;
}

namespace {

void AddCalibrateFlags(common::FlagParser& flags) {
  AddSetupFlags(flags);
  flags.AddValue("params", "A,B,...",
                 "parameters to fit (default: the fifteen of the built-in calibration)");
  flags.AddValue("folds", "K", "k-fold cross-validation, folds grouped by layer shape (default 5)");
  flags.AddSwitch("random-folds", "shuffle rows into folds at random instead of by layer shape");
  flags.AddValue(
      "huber-delta", "X",
      "Huber threshold on |log(predicted/measured)| (default 0.05; 0: absolute log error)");
  flags.AddValue("max-evaluations", "N", "objective evaluations per fit (default 300)");
  flags.AddValue("seed", "N", "shuffles rows into folds (default 1)");
  flags.AddValue("worst", "N", "list the N worst held-out rows (default 10)");
  flags.AddValue("rows-csv", "FILE",
                 "also write every held-out row (source, fold, regime, layer shape, measured, "
                 "predicted, error, interval) as CSV");
  flags.AddSwitch("unbalanced", "weigh every row the same (default: every file the same)");
  flags.AddValue("balance-power", "A",
                 "a file of n rows weighs n^(1-A) in total (default 1: every file the same; "
                 "0: every row, as --unbalanced)");
  flags.AddSwitch("cpp", "print the fitted parameters as C++ (core/profile/a100_params.inc)");
  flags.AddSwitch("help", "show this help");
}

std::string CalibrateHelp(const common::FlagParser& flags) {
  std::string out =
      "usage: vtrainctl calibrate --measurements FILE.csv[,FILE.csv] [--nccl-dir DIR]\n\n"
      "Fits the analytical model's free parameters to measured iteration times and\n"
      "reports k-fold cross-validated error: every row is predicted by parameters\n"
      "fitted without it. With --nccl-dir the intra-node all-reduce model is first\n"
      "fitted to the nccl-tests curves. Progress goes to stderr.\n\n"
      "example (regenerates the built-in A100 parameters):\n"
      "  vtrainctl calibrate --measurements ../shared/data/a100-megatron-measured/"
      "single_node_calibration.csv,\\\n"
      "      ../shared/data/a100-megatron-measured/multi_node_calibration.csv \\\n"
      "      --nccl-dir ../shared/data/a100-nccl-allreduce --cpp > "
      "core/profile/a100_params.inc\n"
      "\nparameters:";
  for (const FittableParam& p : FittableParams()) absl::StrAppend(&out, " ", p.name);
  absl::StrAppend(&out, "\n\nflags:\n", flags.Usage());
  return out;
}

// The fit's options from the flags (threads and progress are the caller's).
absl::StatusOr<CalibrateOptions> CalibrateOptionsFromFlags(const common::FlagParser& flags) {
  CalibrateOptions options;
  if (auto power = flags.Get("balance-power")) {
    if (!absl::SimpleAtod(*power, &options.balance_power) || !(options.balance_power >= 0) ||
        options.balance_power > 1) {
      return absl::InvalidArgumentError(
          "--balance-power must be a number in [0, 1] (1: every file weighs the same, 0: every "
          "row)");
    }
  }
  if (auto p = flags.Get("params")) options.params = absl::StrSplit(*p, ',', absl::SkipEmpty());
  for (auto [flag, target] : {std::pair<const char*, int*>{"folds", &options.folds},
                              {"max-evaluations", &options.max_evaluations}}) {
    VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> v, flags.GetIntIn(flag, 0, 100000));
    if (v) *target = static_cast<int>(*v);
  }
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> seed, flags.GetInt("seed"));
  if (seed) options.seed = static_cast<uint64_t>(*seed);
  options.balance_sources = !flags.Switch("unbalanced");
  options.group_by_shape = !flags.Switch("random-folds");
  if (auto delta = flags.Get("huber-delta")) {
    if (!absl::SimpleAtod(*delta, &options.huber_delta) || !(options.huber_delta >= 0) ||
        options.huber_delta > 1) {
      return absl::InvalidArgumentError("--huber-delta must be a number in [0, 1]");
    }
  }
  return options;
}

// The fitted parameters, the in-sample and held-out errors and the bands.
std::string CalibrationReport(const CalibrationResult& result, const CalibrateOptions& options,
                              const std::vector<Measurement>& measurements, int worst) {
  std::string out = "fitted parameters:\n";
  for (const FittableParam& f : FittableParams()) {
    absl::StrAppend(&out, absl::StrFormat("  %-32s %.6g\n", f.name, result.params.*(f.member)));
  }
  absl::StrAppend(
      &out, absl::StrFormat("\nin-sample MAPE %s (fitted on every row; not an accuracy figure)\n",
                            Pct(result.fit_mape)));
  if (result.fold_mape.empty()) return out;
  absl::StrAppend(&out,
                  absl::StrFormat("%d-fold cross-validated (held-out) error:\n", options.folds),
                  ReportTable(measurements, result.cross_validated, worst),
                  "\nprediction intervals (90% quantile of held-out |log error|):\n");
  for (const ErrorBand& b : result.bands) {
    absl::StrAppend(&out, absl::StrFormat("  %-26s error from %s to %s over %d rows\n", b.regime,
                                          Pct(b.error_low), Pct(b.error_high), b.rows));
  }
  absl::StrAppend(&out, RegimeTable(result.band_coverage,
                                    "held-out interval coverage (each fold "
                                    "against the other folds' bands)"));
  return out;
}

}  // namespace

int RunCalibrate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  common::FlagParser flags("vtrainctl calibrate");
  AddCalibrateFlags(flags);
  if (absl::Status s = flags.Parse(args); !s.ok()) return Fail(err, "calibrate", s);
  if (flags.Switch("help")) {
    out << CalibrateHelp(flags);
    return common::kExitOk;
  }
  absl::StatusOr<CalibrateOptions> options = CalibrateOptionsFromFlags(flags);
  if (!options.ok()) return Fail(err, "calibrate", options.status());
  absl::StatusOr<std::optional<int64_t>> worst = flags.GetIntIn("worst", 0, 100000);
  if (!worst.ok()) return Fail(err, "calibrate", worst.status());
  absl::StatusOr<Inputs> in = LoadInputs(flags);
  if (!in.ok()) return Fail(err, "calibrate", in.status());
  // Start from the uncalibrated model, not the built-in calibration, so that
  // regenerating core/profile/a100_params.inc is reproducible.
  in->profiles.params = AnalyticalParams{};
  options->threads = in->threads;
  options->progress = [&err](const std::string& line) { err << "calibrate: " << line << "\n"; };

  double nccl_mape = -1;
  if (!in->nccl_curves.empty()) {
    auto [params, mape] = FitIntraNodeAllReduce(
        in->nccl_curves, MegatronA100Setup().cluster.intra_node_bandwidth_bytes_per_s,
        in->profiles.params);
    in->profiles.params = params;
    nccl_mape = mape;
    err << absl::StrFormat(
        "calibrate: intra-node all-reduce model fitted to %d nccl-tests curves, "
        "MAPE %.2f%%\n",
        in->nccl_curves.size(), 100 * mape);
  }
  absl::StatusOr<CalibrationResult> result = Calibrate(in->measurements, in->profiles, *options);
  if (!result.ok()) return Fail(err, "calibrate", result.status());
  // Written with --cpp too: the rows behind a regenerated parameter file.
  if (std::optional<std::string> path = flags.Get("rows-csv"); path && !result->fold_mape.empty()) {
    if (absl::Status s = common::WriteFile(*path, RowsCsv(in->measurements, *result)); !s.ok()) {
      return Fail(err, "calibrate", s);
    }
  }
  if (flags.Switch("cpp")) {
    PrintCpp(*result, *options, in->measurements.size(), nccl_mape, out);
    return common::kExitOk;
  }
  out << CalibrationReport(*result, *options, in->measurements,
                           static_cast<int>(worst->value_or(10)));
  return common::kExitOk;
}

}  // namespace vtrain::cli
