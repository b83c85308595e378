// What vtrainctl cluster-sim prints: one window's outcome per policy (table,
// per-job CSV, plots), or a study's line per window and summaries.
#ifndef VTRAIN_CLIENT_CLUSTER_SIM_OUTPUT_H_
#define VTRAIN_CLIENT_CLUSTER_SIM_OUTPUT_H_

#include <string>

#include "absl/status/status.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::client {

// One window: per policy its figures, then vtrain against elasticflow.
std::string WindowSummary(const v1::ClusterWindowOutcome& w);
// Every job's outcome under every policy, as CSV.
std::string WindowCsv(const v1::ClusterWindowOutcome& w);
// FILE.svg: GPUs allocated over time per policy; FILE-jct.svg: the JCT CDFs.
absl::Status WindowPlot(const std::string& path, const v1::ClusterWindowOutcome& w);
// A study: a line per window, a line per summary, and the whole matrix.
std::string StudyTable(const v1::ClusterSimResponse& r);

}  // namespace vtrain::client

#endif  // VTRAIN_CLIENT_CLUSTER_SIM_OUTPUT_H_
