#include "core/spec/reliability.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace vtrain {
namespace {

void InRange(double value, double lo, double hi, const char* field, const char* flag,
             std::vector<std::string>& problems) {
  if (std::isfinite(value) && value >= lo && value <= hi) return;
  problems.push_back(absl::StrCat("cluster.reliability.", field, "=", value, " (", flag,
                                  ") must be in [", lo, ", ", hi, "]"));
}

}  // namespace

void CheckReliability(const ReliabilitySpec& r, std::vector<std::string>& problems) {
  // 1,000 failures per 1,000 node-days is a node failing daily: no cluster.
  InRange(r.node_failures_per_1000_node_days, 0, 1000, "node_failures_per_1000_node_days",
          "--node-failure-rate", problems);
  InRange(r.checkpoint_gbps, 0.001, 1e5, "checkpoint_gbps", "--checkpoint-gbps", problems);
  InRange(r.restart_minutes, 0, 10080, "restart_minutes", "--restart-minutes", problems);
  InRange(r.checkpoint_interval_s, 0, 1e8, "checkpoint_interval_s", "--checkpoint-interval",
          problems);
}

}  // namespace vtrain
