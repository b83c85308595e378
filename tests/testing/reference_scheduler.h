// A deliberately naive scheduler with the engine's semantics, for
// differential tests of vtrain::Simulate (in the spirit of re2's testing
// against a simple backtracker).
#ifndef VTRAIN_TESTS_TESTING_REFERENCE_SCHEDULER_H_
#define VTRAIN_TESTS_TESTING_REFERENCE_SCHEDULER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/graph/task_graph.h"

namespace vtrain::testing {

struct ReferenceSchedule {
  int64_t makespan_ns = 0;         // the latest finish over all tasks
  std::vector<int64_t> finish_ns;  // per task id
};

// List scheduling in time order, not in id order: repeatedly take, among the
// first unscheduled task of every stream whose parents have all finished,
// the one with the smallest feasible start max(stream free, latest parent
// finish) (ties: lowest id), schedule it, and hold its stream until finish +
// gap. Quadratic; for graphs of a few thousand tasks. Returns INTERNAL if no
// task can ever run (impossible for a TaskGraph, whose ids are topological).
absl::StatusOr<ReferenceSchedule> ReferenceSimulate(const TaskGraph& graph);

}  // namespace vtrain::testing

#endif  // VTRAIN_TESTS_TESTING_REFERENCE_SCHEDULER_H_
