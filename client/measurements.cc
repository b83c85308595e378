#include "client/measurements.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/job_flags.h"
#include "common/flag_parser.h"
#include "core/util/status_macros.h"

namespace vtrain::client {

MeasurementSetup MegatronA100Setup() {
  MeasurementSetup s;
  s.cluster = DefaultCluster(*GpuByName("a100-sxm4-80gb"), 0);
  s.cluster.gpus_per_node = 8;
  s.cluster.intra_node_bandwidth_bytes_per_s = 150e9;
  s.cluster.inter_node_bandwidth_bytes_per_s = 800e9 / 8;
  s.plan.schedule = PipelineSchedule::k1F1B;
  s.plan.recompute = Recompute::kFull;
  s.plan.dtype = DType::kFp16;
  s.plan.gradient_bucketing = false;
  s.attention_impl = AttentionImpl::kUnfused;
  s.plan.settings = SettingsBase::kPaper;
  return s;
}

namespace {

// A CSV text split into cells: the header (the first line that is neither
// blank nor a '#' comment) as column indices by name, then the rows.
struct CsvTable {
  size_t header_line = 0;  // 1-based; 0: no header
  std::map<std::string, size_t> column;
  std::vector<std::pair<size_t, std::vector<std::string>>> rows;  // line number, cells
};

CsvTable SplitCsv(absl::string_view text) {
  CsvTable t;
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  for (size_t n = 0; n < lines.size(); ++n) {
    const absl::string_view line = absl::StripAsciiWhitespace(lines[n]);
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    for (std::string& c : cells) c = std::string(absl::StripAsciiWhitespace(c));
    if (t.header_line == 0) {
      for (size_t i = 0; i < cells.size(); ++i) t.column[cells[i]] = i;
      t.header_line = n + 1;
      continue;
    }
    t.rows.emplace_back(n + 1, std::move(cells));
  }
  return t;
}

absl::StatusOr<std::vector<Measurement>> ParseMeasurementTable(const CsvTable& t,
                                                               absl::string_view name,
                                                               const MeasurementSetup& setup) {
  if (t.header_line == 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": no header line found"));
  }
  static const char* kRequired[] = {"num_gpus",  "global_batch", "micro_batch", "hidden_size",
                                    "num_heads", "num_layers",   "seq_len",     "tp",
                                    "dp",        "pp",           "iter_time_ms"};
  for (const char* req : kRequired) {
    if (!t.column.count(req)) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ":", t.header_line, ": the header has no column '", req,
          "'; measurement files need num_gpus, global_batch, micro_batch, hidden_size, "
          "num_heads, num_layers, seq_len, tp, dp, pp, iter_time_ms"));
    }
  }
  std::vector<Measurement> out;
  for (const auto& row : t.rows) {
    const size_t n = row.first - 1;  // 0-based, as the messages add 1
    const std::vector<std::string>& cells = row.second;
    auto cell = [&](const char* col) -> absl::StatusOr<double> {
      const size_t i = t.column.at(col);
      double v = 0;
      if (i >= cells.size() || !absl::SimpleAtod(cells[i], &v) || !std::isfinite(v)) {
        return absl::InvalidArgumentError(absl::StrCat(name, ":", n + 1, ": column '", col,
                                                       "' is not a finite number ('",
                                                       i < cells.size() ? cells[i] : "", "')"));
      }
      return v;
    };
    auto integer = [&](const char* col) -> absl::StatusOr<int64_t> {
      VTRAIN_ASSIGN_OR_RETURN(double v, cell(col));
      // Range first: casting a double outside int64 is undefined behaviour.
      if (!(std::abs(v) <= 0x1p53) || v != std::trunc(v)) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ":", n + 1, ": column '", col, "' must be an integer of magnitude at most 2^53"));
      }
      return static_cast<int64_t>(v);
    };
    Measurement m;
    m.source = absl::StrCat(name, ":", n + 1);
    m.job.cluster = setup.cluster;
    m.job.plan = setup.plan;
    m.job.model.name = "measured";
    m.job.model.vocab_size = setup.vocab_size;
    m.job.model.attention_impl = setup.attention_impl;
    VTRAIN_ASSIGN_OR_RETURN(m.job.cluster.num_gpus, integer("num_gpus"));
    VTRAIN_ASSIGN_OR_RETURN(m.job.plan.global_batch, integer("global_batch"));
    VTRAIN_ASSIGN_OR_RETURN(m.job.plan.micro_batch, integer("micro_batch"));
    VTRAIN_ASSIGN_OR_RETURN(m.job.model.hidden_size, integer("hidden_size"));
    VTRAIN_ASSIGN_OR_RETURN(m.job.model.num_heads, integer("num_heads"));
    VTRAIN_ASSIGN_OR_RETURN(m.job.model.num_layers, integer("num_layers"));
    VTRAIN_ASSIGN_OR_RETURN(m.job.model.seq_len, integer("seq_len"));
    VTRAIN_ASSIGN_OR_RETURN(m.job.plan.tensor_parallel, integer("tp"));
    VTRAIN_ASSIGN_OR_RETURN(m.job.plan.data_parallel, integer("dp"));
    VTRAIN_ASSIGN_OR_RETURN(m.job.plan.pipeline_parallel, integer("pp"));
    VTRAIN_ASSIGN_OR_RETURN(m.measured_ms, cell("iter_time_ms"));
    if (!(m.measured_ms > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ":", n + 1, ": iter_time_ms must be positive"));
    }
    if (absl::Status s = ValidateJob(m.job); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(name, ":", n + 1, ": ", s.message()));
    }
    out.push_back(std::move(m));
  }
  return out;
}

// The iteration time a published row states, in ms, for `job`.
absl::StatusOr<double> PublishedMs(const std::string& column, double value, const Job& job) {
  if (column == "iter_time_ms") return value;
  if (column == "step_time_s") return value * 1e3;
  // tokens/s/GPU: global batch x sequence tokens over the whole cluster.
  return 1e3 * static_cast<double>(job.plan.global_batch) * static_cast<double>(job.model.seq_len) /
         (static_cast<double>(job.cluster.num_gpus) * value);
}

absl::StatusOr<std::vector<Measurement>> ParsePublishedTable(const CsvTable& t,
                                                             absl::string_view name) {
  if (t.header_line == 0) return absl::InvalidArgumentError(absl::StrCat(name, ": no header line"));
  std::string measure;
  for (const char* c : {"tokens_per_sec_per_gpu", "step_time_s", "iter_time_ms"}) {
    if (t.column.count(c)) measure = c;
  }
  if (!t.column.count("flags") || measure.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name,
                     ": published rows need a header with 'flags' and one of "
                     "tokens_per_sec_per_gpu, step_time_s, iter_time_ms"));
  }
  std::vector<Measurement> out;
  for (const auto& row : t.rows) {
    // Not a structured binding: clang 14 cannot capture one in the lambda.
    const size_t line = row.first;
    const std::vector<std::string>& cells = row.second;
    const std::string where = absl::StrCat(name, ":", line);
    auto at = [&](const std::string& col) -> std::string {
      const size_t i = t.column.at(col);
      return i < cells.size() ? cells[i] : "";
    };
    if (cells.size() != t.column.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": ", cells.size(), " cells for ", t.column.size(),
          " columns (the flags cell may not hold a comma; write lists with --flag=a:b)"));
    }
    common::FlagParser flags("published row");
    AddJobFlags(flags);
    std::vector<std::string> args = absl::StrSplit(at("flags"), ' ', absl::SkipEmpty());
    // A published row states its settings as flags; what it leaves unset
    // is Megatron-LM's default (every overlap off), not vtrain's tuned run.
    if (std::find(args.begin(), args.end(), "--settings") == args.end()) {
      args.push_back("--settings");
      args.push_back("megatron-defaults");
    }
    if (absl::Status s = flags.Parse(args); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": column 'flags': ", s.message()));
    }
    absl::StatusOr<Job> job = JobFromFlags(flags);
    if (!job.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": column 'flags': ", job.status().message()));
    }
    double value = 0;
    if (!absl::SimpleAtod(at(measure), &value) || !std::isfinite(value) || !(value > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": column '", measure, "' must be a positive number ('", at(measure), "')"));
    }
    Measurement m;
    m.job = *std::move(job);
    VTRAIN_ASSIGN_OR_RETURN(m.measured_ms, PublishedMs(measure, value, m.job));
    m.source = where;
    // Optional measured peak memory (GiB); an empty cell: not measured.
    for (auto [column, field] : {std::pair{"peak_alloc_gib", &Measurement::peak_alloc_gib},
                                 std::pair{"peak_reserved_gib", &Measurement::peak_reserved_gib}}) {
      if (!t.column.count(column) || at(column).empty()) continue;
      double gib = 0;
      if (!absl::SimpleAtod(at(column), &gib) || !std::isfinite(gib) || !(gib > 0)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": column '", column,
                         "' must be a positive number of GiB or empty ('", at(column), "')"));
      }
      m.*field = gib;
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<Measurement>> ParseMeasurementCsv(absl::string_view text,
                                                             absl::string_view name,
                                                             const MeasurementSetup& setup) {
  return ParseMeasurementTable(SplitCsv(text), name, setup);
}

absl::StatusOr<std::vector<Measurement>> ParsePublishedCsv(absl::string_view text,
                                                           absl::string_view name) {
  return ParsePublishedTable(SplitCsv(text), name);
}

absl::StatusOr<std::vector<Measurement>> ParseAnyMeasurementCsv(absl::string_view text,
                                                                absl::string_view name,
                                                                const MeasurementSetup& setup) {
  const CsvTable t = SplitCsv(text);
  if (t.column.count("flags")) return ParsePublishedTable(t, name);
  return ParseMeasurementTable(t, name, setup);
}

}  // namespace vtrain::client
