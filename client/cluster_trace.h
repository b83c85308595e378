// Job traces of a shared GPU cluster in the ElasticFlow/ITP CSV form (job_id,
// submission_time, num_iteration, model_name, deadline, batch_size, num_gpu,
// duration), as vtrainctl cluster-sim replays them.
#ifndef VTRAIN_CLIENT_CLUSTER_TRACE_H_
#define VTRAIN_CLIENT_CLUSTER_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace vtrain::client {

struct TraceJob {
  std::string id;
  double submit_s = 0, deadline_s = 0, duration_s = 0;
  int64_t num_gpu = 0;
};

// The trace's jobs, in submission order (line 1 is the header).
// INVALID_ARGUMENT naming `name` and the line for a row that is not a job:
// fewer than 8 columns, a number that does not parse or is not finite,
// num_gpu outside [1, 10^6], duration not positive, the deadline before the
// submission; or no job at all.
absl::StatusOr<std::vector<TraceJob>> ParseTrace(const std::string& text, const std::string& name);

}  // namespace vtrain::client

#endif  // VTRAIN_CLIENT_CLUSTER_TRACE_H_
