#include "core/engine/streaming.h"

#include <utility>

#include "core/engine/periodic.h"
#include "core/engine/timeline_sink.h"
#include "core/graph/walker.h"
#include "core/util/status_macros.h"

namespace vtrain {

absl::StatusOr<IterationSimulation> SimulateIteration(const Job& job, ProfileLookup& lookup,
                                                      const BuildOptions& options) {
  VTRAIN_RETURN_IF_ERROR(ValidateJob(job));
  TimelineSink sink(options.cancelled);
  IterationWalker<TimelineSink> walker(job, lookup, options, sink);
  VTRAIN_RETURN_IF_ERROR(walker.Begin());
  PeriodicStats periodic;
  if (options.periodic) periodic = AdvancePeriodically(walker, sink);
  VTRAIN_RETURN_IF_ERROR(walker.Finish());
  IterationSimulation out;
  out.result = sink.timeline().Finish();
  out.stages = std::move(walker.stages());
  out.num_micro_batches = walker.num_micro_batches();
  out.num_tasks = sink.num_tasks();
  const int64_t actions = 2 * job.plan.pipeline_parallel * out.num_micro_batches;
  out.actions_skipped = periodic.actions_skipped;
  out.actions_stepped = actions - periodic.actions_skipped;
  out.periods_skipped = periodic.periods_skipped;
  out.tasks_skipped = periodic.tasks_skipped;
  return out;
}

}  // namespace vtrain
