// A fake, fully MEASURED profile set in which every layer operator takes a
// round number of nanoseconds and everything else takes none, so that
// pipeline makespans have closed forms ((m + p - 1) * (f + b)).
#ifndef VTRAIN_TESTS_TESTING_UNIT_PROFILE_H_
#define VTRAIN_TESTS_TESTING_UNIT_PROFILE_H_

#include <cstdint>
#include <vector>

#include "core/profile/profile.h"
#include "core/spec/job.h"

namespace vtrain::testing {

// The kernels of the four layer operators. The defaults make one layer's
// forward 1,000,000 ns and its backward 2,000,000 ns, with a gap inside
// each operator and none after its last kernel.
struct UnitTimes {
  std::vector<KernelRecord> attention_fwd = {{"qkv", 250'000, 50'000}, {"proj", 100'000, 0}};
  std::vector<KernelRecord> mlp_fwd = {{"fc1", 350'000, 0}, {"fc2", 250'000, 0}};
  std::vector<KernelRecord> attention_bwd = {{"proj_bwd", 500'000, 100'000},
                                             {"qkv_bwd", 500'000, 0}};
  std::vector<KernelRecord> mlp_bwd = {{"fc2_bwd", 450'000, 0}, {"fc1_bwd", 450'000, 0}};
  // The attention core alone, which selective recomputation re-runs.
  std::vector<KernelRecord> attention_core_fwd = {{"core", 150'000, 0}};

  int64_t LayerForwardNs() const;   // attention_fwd span + mlp_fwd span
  int64_t LayerBackwardNs() const;  // attention_bwd span + mlp_bwd span
};

// Parameters the optimizer step of one GPU of virtual pipeline stage `stage`
// (chunk * p + stage with interleaving; the stage without) updates
// (its share when sharded), computed exactly as core/graph/pass_templates.cc
// does: the builder keys the optimizer step by it.
int64_t StageOptimizerParameters(const Job& job, int64_t stage);

// A profile set for job.cluster.gpu with a MEASURED entry for every operator
// key BuildIterationGraph looks up for `job` (keys made with MakeOperatorKey
// as the builder makes them): the layer operators from `times`, the
// embedding, logit, loss and optimizer operators one 0 ns kernel each.
// Analytical collectives have no latency and an absurd link efficiency, so
// with UseFreeLinks every transfer of a test-sized job rounds to 0 ns.
ProfileSet UnitProfileSet(const Job& job, const UnitTimes& times = {});

// Sets both bandwidths to the largest value ValidateJob accepts (1e15 B/s).
void UseFreeLinks(Job& job);

}  // namespace vtrain::testing

#endif  // VTRAIN_TESTS_TESTING_UNIT_PROFILE_H_
