// The cluster study as one computation: a job trace, and the windows,
// seeds, loads, job mixes and cluster sizes to replay it at. Each cell of
// that matrix is a window of the trace whose jobs became LLM jobs
// (core/cluster/job_mix.h), reshaped to its load; the service draws each
// job shape's throughput tables and runs the scheduler
// (core/cluster/scheduler.h) once per policy. Here: the matrix, the windows
// and the summary over seeds, not the tables.
#ifndef VTRAIN_CORE_CLUSTER_STUDY_H_
#define VTRAIN_CORE_CLUSTER_STUDY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/cluster/job_mix.h"
#include "core/cluster/scheduler.h"

namespace vtrain {

// What the scheduler plans with; the only difference between the runs.
enum class ClusterPolicy {
  kDataParallel,  // "elasticflow": data-parallel scaling of the smallest footprint
  kBestPlan,      // "vtrain": the best 3D plan at every count
};
absl::string_view ClusterPolicyName(ClusterPolicy policy);
absl::StatusOr<ClusterPolicy> ParseClusterPolicy(absl::string_view name, absl::string_view field);

// One job of the trace, in its own terms.
struct TraceRow {
  std::string id;
  double submit_s = 0, deadline_s = 0, duration_s = 0;
  int64_t gpus = 0;  // the GPUs it used
};

// A window of the trace: `jobs` consecutive jobs, or the jobs submitted in
// `hours` hours; from a seeded row, or the first submitted at or after
// `start_s`.
struct WindowSpec {
  int64_t jobs = 0;
  double hours = 0;
  std::optional<double> start_s{};
  std::vector<int64_t> seeds{};  // this window's; empty: the study's
};

struct StudySpec {
  std::vector<TraceRow> trace;  // in submission order
  std::vector<int64_t> cluster_gpus;
  std::vector<WindowSpec> windows;
  std::vector<int64_t> seeds;
  std::vector<std::optional<double>> target_loads;  // nullopt: as traced
  std::vector<JobMix> mixes;
  std::optional<double> deadline_slack;  // deadline = submit + slack x duration
};

// One cell of the matrix.
struct StudyCell {
  JobMix mix = JobMix::kItp;
  int64_t gpus = 0;
  std::optional<double> target_load;
  WindowSpec window;
  int64_t seed = 1;
};

// Every cell: mixes, then cluster sizes, loads, windows and seeds, in the
// spec's orders (an empty list counts as one default: itp, no target load).
std::vector<StudyCell> StudyCells(const StudySpec& spec);

struct StudyJob {
  std::string id;
  double submit_s = 0, deadline_s = 0, duration_s = 0;
  LlmJob llm;  // llm.gpus: what it asks for, at most the cluster's GPUs
};

struct StudyWindow {
  StudyCell cell;
  int64_t first_row = 0;  // 0-based row of its first job in the trace
  std::vector<StudyJob> jobs;
  // The offered load as traced and as replayed: the jobs' GPU-time at the
  // GPUs they ask for over the cluster's GPU-time, from the first arrival
  // to the last for a window of `jobs`, over its `hours` for an hour window
  // (counting only the part of each job inside them: RunningLoad).
  double trace_load = 0, offered_load = 0;
  // RunningLoad over the replayed window's span, whatever its kind.
  double running_load = 0;
  int64_t peak_requested_gpus = 0;  // PeakRequestedGpus
};

// The window of `cell`. A window of `jobs` at a target load compresses its
// arrivals about the first (OfferedLoad, ShapeWindow). An hour window at a
// target load compresses the trace's arrivals from its first job on, by the
// one factor that makes the window's RunningLoad the target: the window
// keeps its hours and gains or loses jobs (reported when the trace runs out
// before the target). Deadlines keep their slack over the submission, or
// take the spec's deadline_slack. INVALID_ARGUMENT naming the field for a
// target load or slack out of range.
absl::StatusOr<StudyWindow> BuildWindow(const StudySpec& spec, const StudyCell& cell);

// A window of jobs (not a trace): the request's own jobs, shaped the same way.
absl::StatusOr<StudyWindow> WindowOfJobs(const std::vector<TraceRow>& jobs, const StudyCell& cell,
                                         std::optional<double> deadline_slack);

// GPU-time of the jobs inside [start_s, start_s + span_s], at the GPUs they
// ask for from their submission for their duration, over the cluster's
// GPU-time in it. 0 for an empty span.
double RunningLoad(const std::vector<StudyJob>& jobs, double start_s, double span_s,
                   int64_t total_gpus);

// One policy against the other over one window.
struct WindowComparison {
  double data_parallel_deadline_satisfaction = 0;
  double deadline_ratio = 0;  // best-plan / data-parallel deadline satisfaction (0 when DP is 0)
  double avg_jct_change = 0;  // best-plan / data-parallel average JCT - 1
};
// The two policies' outcomes of one window (the same jobs, in the same
// order). The average JCT is taken over the jobs both finished: a job one
// policy has no plan for would otherwise drop out of its average only.
WindowComparison Compare(const ClusterOutcome& data_parallel, const ClusterOutcome& best);

// Over the seeds of one (mix, GPUs, load, window kind).
struct StudySummary {
  int64_t windows = 0;
  double mean_avg_jct_change = 0, worst_avg_jct_change = 0;
  double mean_deadline_ratio = 0, worst_deadline_ratio = 0;
  double mean_data_parallel_deadline_satisfaction = 0;
};
StudySummary Summarise(const std::vector<WindowComparison>& windows);

}  // namespace vtrain

#endif  // VTRAIN_CORE_CLUSTER_STUDY_H_
