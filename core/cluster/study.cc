#include "core/cluster/study.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "core/cluster/window.h"
#include "core/util/enum_names.h"
#include "core/util/status_macros.h"

namespace vtrain {
namespace {

constexpr EnumName<ClusterPolicy> kPolicies[] = {{ClusterPolicy::kDataParallel, "elasticflow"},
                                                 {ClusterPolicy::kBestPlan, "vtrain"}};

StudyJob JobOf(const TraceRow& row, const StudyCell& cell) {
  return {row.id, row.submit_s, row.deadline_s, row.duration_s,
          DrawLlmJob(cell.mix, row.id, row.gpus, cell.gpus)};
}

std::vector<WindowJob> WindowJobsOf(const std::vector<StudyJob>& jobs) {
  std::vector<WindowJob> out;
  out.reserve(jobs.size());
  for (const StudyJob& j : jobs)
    out.push_back({j.submit_s, j.deadline_s, j.duration_s, j.llm.gpus});
  return out;
}

// The first row of a seeded window: of the rows that can start one.
int64_t SeededRow(int64_t seed, int64_t starts) {
  std::mt19937_64 engine(static_cast<uint64_t>(seed));
  return static_cast<int64_t>(engine() % static_cast<uint64_t>(std::max<int64_t>(starts, 1)));
}

int64_t RowAtOrAfter(const std::vector<TraceRow>& trace, double t) {
  int64_t first = 0;
  const int64_t rows = static_cast<int64_t>(trace.size());
  while (first < rows && trace[static_cast<size_t>(first)].submit_s < t) ++first;
  return std::min(first, rows - 1);
}

// The trace's jobs from row `first` to `end` (one past), as the cell's mix
// draws them, on the trace's clock.
std::vector<StudyJob> Drawn(const std::vector<TraceRow>& trace, const StudyCell& cell,
                            int64_t first, int64_t end) {
  std::vector<StudyJob> jobs;
  for (int64_t i = first; i < end; ++i) jobs.push_back(JobOf(trace[static_cast<size_t>(i)], cell));
  return jobs;
}

// The end of the hour window from row `first` on the trace's clock.
int64_t HourEnd(const std::vector<TraceRow>& trace, int64_t first, double span_s) {
  const double t0 = trace[static_cast<size_t>(first)].submit_s;
  int64_t end = first;
  while (end < static_cast<int64_t>(trace.size()) &&
         trace[static_cast<size_t>(end)].submit_s < t0 + span_s) {
    ++end;
  }
  return end;
}

// RunningLoad of `jobs` over [start, start + span_s] with their arrivals
// compressed by `k` about `start`.
double CompressedLoad(const std::vector<StudyJob>& jobs, double start, double span_s,
                      int64_t total_gpus, double k) {
  if (!(span_s > 0) || total_gpus <= 0) return 0;
  double gpu_s = 0;
  for (const StudyJob& j : jobs) {
    const double at = start + (j.submit_s - start) / k;
    const double inside = std::min(start + span_s, at + j.duration_s) - std::max(start, at);
    if (inside > 0) gpu_s += inside * static_cast<double>(j.llm.gpus);
  }
  return gpu_s / (span_s * static_cast<double>(total_gpus));
}

// The jobs of `rest` (in submission order) submitted in the first `span_s`
// once their arrivals are compressed by `k` about the first's.
std::vector<StudyJob> Compressed(const std::vector<StudyJob>& rest, double span_s, double k) {
  std::vector<StudyJob> jobs;
  const double t0 = rest.front().submit_s;
  for (const StudyJob& r : rest) {
    const double at = t0 + (r.submit_s - t0) / k;
    if (at >= t0 + span_s) break;
    StudyJob j = r;
    j.deadline_s = at + (j.deadline_s - j.submit_s);
    j.submit_s = at;
    jobs.push_back(std::move(j));
  }
  return jobs;
}

// Hour window at a target running load: the trace's jobs from `first` on
// drawn once, and the compression factor found by bisection (the load never
// falls as arrivals come closer), capped where the window already holds
// the rest of the trace.
std::vector<StudyJob> HourJobsAtLoad(const std::vector<TraceRow>& trace, const StudyCell& cell,
                                     int64_t first, double span_s, double target) {
  const std::vector<StudyJob> rest = Drawn(trace, cell, first, static_cast<int64_t>(trace.size()));
  const double t0 = rest.front().submit_s;
  const double whole = (trace.back().submit_s - t0) / span_s * 1.0001 + 1e-9;
  double lo = 1e-3, hi = std::max(1.0, whole);
  auto load = [&](double k) { return CompressedLoad(rest, t0, span_s, cell.gpus, k); };
  if (load(hi) <= target) return Compressed(rest, span_s, hi);
  for (int i = 0; i < 60 && hi / lo > 1 + 1e-9; ++i) {
    const double mid = std::sqrt(lo * hi);
    (load(mid) < target ? lo : hi) = mid;
  }
  return Compressed(rest, span_s, hi);
}

absl::Status Slack(std::vector<StudyJob>& jobs, std::optional<double> slack) {
  if (!slack) return absl::OkStatus();
  std::vector<WindowJob> w = WindowJobsOf(jobs);
  VTRAIN_RETURN_IF_ERROR(ShapeWindow(w, 1, std::nullopt, slack));
  for (size_t i = 0; i < jobs.size(); ++i) jobs[i].deadline_s = w[i].deadline_s;
  return absl::OkStatus();
}

// Loads and peak of a window whose jobs are final.
void Measure(StudyWindow& w) {
  const std::vector<WindowJob> jobs = WindowJobsOf(w.jobs);
  w.peak_requested_gpus = PeakRequestedGpus(jobs);
  if (w.jobs.empty()) return;
  double first = w.jobs.front().submit_s, last = first;
  for (const StudyJob& j : w.jobs) {
    first = std::min(first, j.submit_s);
    last = std::max(last, j.submit_s);
  }
  const double span = w.cell.window.hours > 0 ? w.cell.window.hours * 3600 : last - first;
  w.running_load = RunningLoad(w.jobs, first, span, w.cell.gpus);
  w.offered_load = w.cell.window.hours > 0 ? w.running_load : OfferedLoad(jobs, w.cell.gpus);
}

absl::Status CheckLoad(std::optional<double> load) {
  if (load && !(*load > 0 && *load <= 100)) {
    return absl::InvalidArgumentError(
        absl::StrCat("target_load=", *load, " must be in (0, 100], e.g. 1"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view ClusterPolicyName(ClusterPolicy policy) { return NameIn(kPolicies, policy); }

absl::StatusOr<ClusterPolicy> ParseClusterPolicy(absl::string_view name, absl::string_view field) {
  return ParseIn(kPolicies, name, field);
}

std::vector<StudyCell> StudyCells(const StudySpec& spec) {
  const std::vector<JobMix> mixes = spec.mixes.empty() ? std::vector{JobMix::kItp} : spec.mixes;
  const std::vector<std::optional<double>> loads =
      spec.target_loads.empty() ? std::vector<std::optional<double>>{std::nullopt}
                                : spec.target_loads;
  const std::vector<int64_t> seeds = spec.seeds.empty() ? std::vector<int64_t>{1} : spec.seeds;
  std::vector<StudyCell> cells;
  for (JobMix mix : mixes) {
    for (int64_t gpus : spec.cluster_gpus) {
      for (const std::optional<double>& load : loads) {
        for (const WindowSpec& window : spec.windows) {
          for (int64_t seed : window.seeds.empty() ? seeds : window.seeds) {
            cells.push_back({mix, gpus, load, window, seed});
          }
        }
      }
    }
  }
  return cells;
}

double RunningLoad(const std::vector<StudyJob>& jobs, double start_s, double span_s,
                   int64_t total_gpus) {
  return CompressedLoad(jobs, start_s, span_s, total_gpus, 1);
}

absl::StatusOr<StudyWindow> BuildWindow(const StudySpec& spec, const StudyCell& cell) {
  VTRAIN_RETURN_IF_ERROR(CheckLoad(cell.target_load));
  const std::vector<TraceRow>& trace = spec.trace;
  if (trace.empty()) return absl::InvalidArgumentError("the trace has no job; give at least one");
  const int64_t rows = static_cast<int64_t>(trace.size());
  StudyWindow w;
  w.cell = cell;
  if (cell.window.hours > 0) {
    const double span = cell.window.hours * 3600;
    int64_t starts = 0;
    while (starts < rows &&
           trace[static_cast<size_t>(starts)].submit_s + span <= trace.back().submit_s) {
      ++starts;
    }
    w.first_row = cell.window.start_s ? RowAtOrAfter(trace, *cell.window.start_s)
                                      : SeededRow(cell.seed, starts);
    w.jobs = Drawn(trace, cell, w.first_row, HourEnd(trace, w.first_row, span));
    w.trace_load =
        RunningLoad(w.jobs, trace[static_cast<size_t>(w.first_row)].submit_s, span, cell.gpus);
    if (cell.target_load) {
      w.jobs = HourJobsAtLoad(trace, cell, w.first_row, span, *cell.target_load);
    }
    VTRAIN_RETURN_IF_ERROR(Slack(w.jobs, spec.deadline_slack));
    Measure(w);
    return w;
  }
  const int64_t take = std::min(std::max<int64_t>(cell.window.jobs, 1), rows);
  if (cell.window.start_s) {
    w.first_row = std::min(RowAtOrAfter(trace, *cell.window.start_s), rows - take);
  } else {
    w.first_row = SeededRow(cell.seed, rows - take + 1);
  }
  std::vector<TraceRow> window(trace.begin() + w.first_row, trace.begin() + w.first_row + take);
  VTRAIN_ASSIGN_OR_RETURN(StudyWindow shaped, WindowOfJobs(window, cell, spec.deadline_slack));
  shaped.first_row = w.first_row;
  return shaped;
}

absl::StatusOr<StudyWindow> WindowOfJobs(const std::vector<TraceRow>& rows, const StudyCell& cell,
                                         std::optional<double> deadline_slack) {
  VTRAIN_RETURN_IF_ERROR(CheckLoad(cell.target_load));
  StudyWindow w;
  w.cell = cell;
  w.cell.window.hours = 0;
  for (const TraceRow& row : rows) w.jobs.push_back(JobOf(row, cell));
  std::vector<WindowJob> jobs = WindowJobsOf(w.jobs);
  w.trace_load = OfferedLoad(jobs, cell.gpus);
  VTRAIN_RETURN_IF_ERROR(ShapeWindow(jobs, cell.gpus, cell.target_load, deadline_slack));
  for (size_t i = 0; i < jobs.size(); ++i) {
    w.jobs[i].submit_s = jobs[i].submit_s;
    w.jobs[i].deadline_s = jobs[i].deadline_s;
  }
  Measure(w);
  return w;
}

WindowComparison Compare(const ClusterOutcome& data_parallel, const ClusterOutcome& best) {
  WindowComparison c;
  c.data_parallel_deadline_satisfaction = data_parallel.deadline_satisfaction;
  c.deadline_ratio = data_parallel.deadline_satisfaction > 0
                         ? best.deadline_satisfaction / data_parallel.deadline_satisfaction
                         : 0;
  double dp_sum = 0, best_sum = 0;
  for (size_t j = 0; j < data_parallel.jobs.size() && j < best.jobs.size(); ++j) {
    if (!data_parallel.jobs[j].finished || !best.jobs[j].finished) continue;
    dp_sum += data_parallel.jobs[j].jct_s;
    best_sum += best.jobs[j].jct_s;
  }
  c.avg_jct_change = dp_sum > 0 ? best_sum / dp_sum - 1 : 0;
  return c;
}

StudySummary Summarise(const std::vector<WindowComparison>& windows) {
  StudySummary s;
  s.windows = static_cast<int64_t>(windows.size());
  if (windows.empty()) return s;
  s.worst_avg_jct_change = -1e300;
  s.worst_deadline_ratio = 1e300;
  for (const WindowComparison& w : windows) {
    s.mean_avg_jct_change += w.avg_jct_change;
    s.mean_deadline_ratio += w.deadline_ratio;
    s.mean_data_parallel_deadline_satisfaction += w.data_parallel_deadline_satisfaction;
    s.worst_avg_jct_change = std::max(s.worst_avg_jct_change, w.avg_jct_change);
    s.worst_deadline_ratio = std::min(s.worst_deadline_ratio, w.deadline_ratio);
  }
  const double n = static_cast<double>(windows.size());
  s.mean_avg_jct_change /= n;
  s.mean_deadline_ratio /= n;
  s.mean_data_parallel_deadline_satisfaction /= n;
  return s;
}

}  // namespace vtrain
