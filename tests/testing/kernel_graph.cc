#include "tests/testing/kernel_graph.h"

#include <utility>

#include "core/profile/default_profiles.h"
#include "core/profile/lookup.h"
#include "core/util/status_macros.h"

namespace vtrain::testing {

IterationGraph BuildKernelGraph(const Job& job) {
  const ProfileSet profiles = DefaultProfileSet(job.cluster.gpu);
  ProfileLookup lookup(profiles, job.cluster.gpu,
                       LinkBandwidths{job.cluster.intra_node_bandwidth_bytes_per_s,
                                      job.cluster.inter_node_bandwidth_bytes_per_s});
  BuildOptions build;
  build.granularity = Granularity::kKernel;
  absl::StatusOr<IterationGraph> graph = BuildIterationGraph(job, lookup, build);
  VTRAIN_CHECK(graph.ok());
  return *std::move(graph);
}

}  // namespace vtrain::testing
