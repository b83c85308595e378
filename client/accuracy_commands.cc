// vtrainctl validate, and what validate and calibrate share: the measured
// runs they read and the error tables they print.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/accuracy_common.h"
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

namespace vtrain::client {

void AddSetupFlags(common::FlagParser& f) {
  f.AddValue("measurements", "FILE[,FILE]", "CSV files of measured runs (required)");
  f.AddValue("nccl-dir", "DIR",
             "directory of nccl-tests all-reduce files allreduce_{N}gpu.txt (intra-node)");
  f.AddValue("threads", "N", "predictions in parallel (default: all cores)");
}

absl::StatusOr<Inputs> LoadInputs(const common::FlagParser& flags) {
  Inputs in;
  std::optional<std::string> files = flags.Get("measurements");
  if (!files) return absl::InvalidArgumentError("--measurements FILE.csv is required");
  const MeasurementSetup setup = MegatronA100Setup();
  for (absl::string_view path : absl::StrSplit(*files, ',', absl::SkipEmpty())) {
    VTRAIN_ASSIGN_OR_RETURN(std::string text, common::ReadFile(std::string(path)));
    const std::string base = std::string(path.substr(path.rfind('/') + 1));
    VTRAIN_ASSIGN_OR_RETURN(std::vector<Measurement> rows,
                            ParseAnyMeasurementCsv(text, base, setup));
    in.measurements.insert(in.measurements.end(), rows.begin(), rows.end());
  }
  if (in.measurements.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--measurements ", *files, " holds no rows"));
  }
  // One GPU's built-in set (its calibration and bands) for every row.
  const GpuSpec& gpu = in.measurements.front().job.cluster.gpu;
  for (const Measurement& m : in.measurements) {
    if (m.job.cluster.gpu.name != gpu.name) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--measurements: ", m.source, " runs on ", m.job.cluster.gpu.name, ", ",
          in.measurements.front().source, " on ", gpu.name, "; give one GPU's runs at a time"));
    }
  }
  in.profiles = DefaultProfileSet(gpu);
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

// The peak memory's error where the rows measured it ("" where none did).
std::string MemoryLines(const ValidationReport& r) {
  std::string out;
  for (const auto& [what, s] :
       {std::pair{"allocated", &r.memory_allocated}, std::pair{"reserved", &r.memory_reserved}}) {
    if (s->count == 0) continue;
    absl::StrAppend(
        &out, absl::StrFormat("peak memory vs measured %-9s rows %d   MAPE %s   "
                              "max |error| %s   bias %s\n",
                              what, s->count, Pct(s->mape), Pct(s->max_abs_error), Pct(s->bias)));
  }
  return out.empty() ? out : out + "\n";
}

std::string ReportTable(const std::vector<Measurement>& m, const ValidationReport& r, int worst) {
  std::string out;
  absl::StrAppend(&out, absl::StrFormat("rows %d (failed %d)   MAPE %s   p90 |error| %s   R^2 %.4f "
                                        "  max |error| %s   bias %s\n\n",
                                        r.overall.count, r.failed, Pct(r.overall.mape),
                                        Pct(r.overall.p90_abs_error), r.overall.r2,
                                        Pct(r.overall.max_abs_error), Pct(r.overall.bias)));
  absl::StrAppend(&out, MemoryLines(r));
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

namespace {

std::string ReportCsv(const std::vector<Measurement>& m, const ValidationReport& r) {
  std::string out =
      "source,num_gpus,global_batch,micro_batch,hidden_size,num_heads,num_layers,seq_len,tp,dp,pp,"
      "measured_ms,predicted_ms,error,peak_alloc_gib,predicted_peak_gib,memory_error\n";
  for (size_t i = 0; i < m.size(); ++i) {
    const Job& j = m[i].job;
    const bool memory = m[i].peak_alloc_gib > 0;
    absl::StrAppend(
        &out,
        absl::StrFormat("%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%.3f,%.3f,%.6f,%s,%.3f,%s\n", m[i].source,
                        j.cluster.num_gpus, j.plan.global_batch, j.plan.micro_batch,
                        j.model.hidden_size, j.model.num_heads, j.model.num_layers, j.model.seq_len,
                        j.plan.tensor_parallel, j.plan.data_parallel, j.plan.pipeline_parallel,
                        r.rows[i].measured_ms, r.rows[i].predicted_ms, r.rows[i].error,
                        memory ? absl::StrFormat("%.2f", m[i].peak_alloc_gib) : "",
                        r.rows[i].predicted_peak_gib,
                        memory ? absl::StrFormat("%.6f", r.rows[i].memory_error) : ""));
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
  for (const auto& [key, s] : {std::pair{"memory_allocated", &r.memory_allocated},
                               std::pair{"memory_reserved", &r.memory_reserved}}) {
    if (s->count == 0) continue;
    w.Key(key);
    SummaryJson(w, *s);
  }
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
    w.Key("predicted_peak_gib").Double(r.rows[i].predicted_peak_gib);
    if (m[i].peak_alloc_gib > 0) {
      w.Key("peak_alloc_gib").Double(m[i].peak_alloc_gib);
      w.Key("memory_error").Double(r.rows[i].memory_error);
    }
    if (!r.rows[i].status.ok()) w.Key("failure").String(r.rows[i].status.message());
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.str() + "\n";
}

// The rows' 90% bands by regime (core/calibrate/bands.h) as C++ lines for a
// built-in set's .inc file, headed by the command and the rows' errors.
std::string BandsCpp(const std::vector<Measurement>& measurements, const ValidationReport& report,
                     const std::vector<std::string>& args) {
  std::string out =
      absl::StrCat("// Generated by: vtrainctl validate ", absl::StrJoin(args, " "), "\n");
  absl::StrAppend(
      &out, absl::StrFormat("// %d runs, none fitted on: MAPE %.2f%%, p90 %.2f%%, max %.2f%%, "
                            "bias %+.2f%%.\n",
                            report.overall.count, 100 * report.overall.mape,
                            100 * report.overall.p90_abs_error, 100 * report.overall.max_abs_error,
                            100 * report.overall.bias));
  out += "// 90% bands: the 90% quantile of |log(predicted / measured)| by regime.\n";
  for (const ErrorBand& b : BandsOf(measurements, report.rows, 0.90)) {
    absl::StrAppend(&out, absl::StrFormat("bands.push_back({\"%s\", %.6g, %.6g, %.2f, %d});\n",
                                          b.regime, b.error_low, b.error_high, b.coverage, b.rows));
  }
  return out;
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
  flags.AddSwitch("bands-cpp",
                  "print the 90% bands of these rows' errors by regime as C++ (a built-in set's "
                  "bands from runs its parameters were not fitted on)");
  flags.AddSwitch("help", "show this help");
  if (absl::Status s = flags.Parse(args); !s.ok()) return Fail(err, "validate", s);
  if (flags.Switch("help")) {
    out << "usage: vtrainctl validate --measurements FILE.csv[,FILE.csv] [--nccl-dir DIR]\n\n"
           "Predicts every measured run with the built-in profiles (plus measured intra-node\n"
           "all-reduce curves from --nccl-dir) and reports MAPE, R^2, the maximum error,\n"
           "errors by GPU count, dominant parallelism and file, and the worst rows.\n"
           "Runs use the setup of data/a100-megatron-measured: A100-SXM4-80GB,\n"
           "8 per node, NVLink 150 GB/s, 800 Gb/s per node, fp16, full recomputation, 1F1B.\n\n"
           "example:\n  vtrainctl validate --measurements "
           "data/a100-megatron-measured/single_node_calibration.csv\n\nflags:\n"
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
  if (flags.Switch("bands-cpp")) {
    out << BandsCpp(in->measurements, report, args);
  } else if (flags.Switch("json")) {
    out << ReportJson(in->measurements, report);
  } else if (flags.Switch("csv")) {
    out << ReportCsv(in->measurements, report);
  } else {
    out << ReportTable(in->measurements, report, static_cast<int>(worst->value_or(10)));
  }
  return common::kExitOk;
}

}  // namespace vtrain::client
