#include "client/scheduler_formats.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace vtrain::client {
namespace {

// %.17g round-trips a double; ElasticFlow reads the cell with float().
std::string Number(double v) { return absl::StrFormat("%.17g", v); }

std::string Quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::map<std::string, std::string> ElasticFlowFiles(const v1::ThroughputCurveResponse& r,
                                                    const std::vector<CurveJobLabel>& labels) {
  // model -> global batch -> count -> iterations/s (NaN: no plan).
  std::map<std::string, std::map<int64_t, std::map<int64_t, std::string>>> table;
  std::map<std::string, std::set<int64_t>> counts;
  for (int i = 0; i < r.curves_size() && i < static_cast<int>(labels.size()); ++i) {
    const CurveJobLabel& l = labels[static_cast<size_t>(i)];
    for (const v1::CurvePoint& p : r.curves(i).points()) {
      table[l.model][l.global_batch][p.gpus()] = p.fits() ? Number(p.iterations_per_s()) : "nan";
      counts[l.model].insert(p.gpus());
    }
  }
  std::map<std::string, std::string> files;
  for (const auto& [model, rows] : table) {
    std::string csv = "global_batch_size";
    for (int64_t c : counts[model]) absl::StrAppend(&csv, ",", c);
    csv += "\n";
    for (const auto& [batch, by_count] : rows) {
      absl::StrAppend(&csv, batch);
      for (int64_t c : counts[model]) {
        auto it = by_count.find(c);
        absl::StrAppend(&csv, ",", it == by_count.end() ? "nan" : it->second);
      }
      csv += "\n";
    }
    files[model] = std::move(csv);
  }
  return files;
}

std::string ThroughputMatrixJson(const v1::ThroughputCurveResponse& r,
                                 const std::vector<CurveJobLabel>& labels) {
  std::map<std::string, std::map<std::string, std::map<int64_t, std::string>>> m;
  std::set<std::string> gpus;
  std::set<int64_t> counts;
  for (int i = 0; i < r.curves_size() && i < static_cast<int>(labels.size()); ++i) {
    const CurveJobLabel& l = labels[static_cast<size_t>(i)];
    const std::string job = absl::StrCat(l.model, "@", l.global_batch);
    gpus.insert(l.gpu);
    for (const v1::CurvePoint& p : r.curves(i).points()) {
      m[job][l.gpu][p.gpus()] = p.fits() ? Number(p.iterations_per_s()) : "null";
      counts.insert(p.gpus());
    }
  }
  std::vector<std::string> jobs_json, gpus_json, counts_json, rows;
  for (const auto& [job, by_gpu] : m) {
    jobs_json.push_back(Quoted(job));
    std::vector<std::string> gpu_rows;
    for (const auto& [gpu, by_count] : by_gpu) {
      std::vector<std::string> cells;
      for (const auto& [c, v] : by_count) cells.push_back(absl::StrCat("\"", c, "\": ", v));
      gpu_rows.push_back(absl::StrCat(Quoted(gpu), ": {", absl::StrJoin(cells, ", "), "}"));
    }
    rows.push_back(absl::StrCat("    ", Quoted(job), ": {", absl::StrJoin(gpu_rows, ", "), "}"));
  }
  for (const std::string& g : gpus) gpus_json.push_back(Quoted(g));
  for (int64_t c : counts) counts_json.push_back(absl::StrCat(c));
  return absl::StrCat("{\n  \"unit\": \"iterations_per_s\",\n  \"jobs\": [",
                      absl::StrJoin(jobs_json, ", "), "],\n  \"gpu_types\": [",
                      absl::StrJoin(gpus_json, ", "), "],\n  \"gpu_counts\": [",
                      absl::StrJoin(counts_json, ", "), "],\n  \"throughput\": {\n",
                      absl::StrJoin(rows, ",\n"), "\n  }\n}\n");
}

}  // namespace vtrain::client
