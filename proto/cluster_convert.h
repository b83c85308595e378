// The cluster study as vtrain.v1 messages: a ClusterSimRequest as the core
// study it asks for (core/cluster/study.h), every violation named by its
// field, and the scheduler's outcomes as ClusterSimResponse parts.
#ifndef VTRAIN_PROTO_CLUSTER_CONVERT_H_
#define VTRAIN_PROTO_CLUSTER_CONVERT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cluster/scheduler.h"
#include "core/cluster/study.h"
#include "core/spec/job.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::proto {

inline constexpr int64_t kMaxClusterJobs = 100'000;  // rows of a trace or jobs of a window
inline constexpr int64_t kMaxClusterGpus = 65'536;
inline constexpr int64_t kMaxStudyWindows = 10'000;  // cells of one study

struct ClusterSimCall {
  // A study; for a request of `jobs`, one window of them (`jobs` below).
  StudySpec study;
  std::vector<StudyCell> cells;  // StudyCells(study), or the one window's
  std::vector<TraceRow> jobs;    // the request's own window (empty for a study)
  bool is_study = false;
  bool keep_jobs = true;  // per-job outcomes and allocations in the answer
  ClusterSpec cluster;    // num_gpus aside; a job mix may name another GPU
  std::vector<ClusterPolicy> policies;
  // total_gpus, nodes_per_leaf and contended_background: per cell.
  ClusterSimOptions options;
  bool leaves = false;  // a leaf/spine fabric: placement figures are drawn
  // > 0: the best-plan policy runs on the data-parallel tables made this
  // much faster (ClusterSimRequest.sensitivity).
  double sensitivity = 0;
};

// INVALID_ARGUMENT listing every violation, each naming the field
// ("jobs[3].duration_s", "study.windows[1].hours", "policies[0]", "gpus")
// and the flag that sets it.
absl::StatusOr<ClusterSimCall> ClusterSimFromProto(const v1::ClusterSimRequest& request);

// One policy's outcome; per-job outcomes (with `shapes[j]`, the job's
// "preset/global batch") and allocations only with `keep_jobs`.
void PolicyOutcomeToProto(ClusterPolicy policy, const ClusterOutcome& outcome,
                          const std::vector<std::string>& shapes, bool keep_jobs,
                          v1::ClusterPolicyOutcome* out);

// A window's description and loads (its outcomes are added by the caller).
void WindowToProto(const StudyWindow& window, v1::ClusterWindowOutcome* out);

void SummaryToProto(const StudyCell& group, const StudySummary& summary,
                    v1::ClusterStudySummary* out);

}  // namespace vtrain::proto

#endif  // VTRAIN_PROTO_CLUSTER_CONVERT_H_
