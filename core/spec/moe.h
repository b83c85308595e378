// Mixture-of-Experts rules and figures: the checks of a MoE job's fields as
// Megatron-Core makes them, the expert groups' sizes under "parallel
// folding", the tokens an expert-parallel rank computes, and the expected
// load of the slowest rank under a routing distribution.
#ifndef VTRAIN_CORE_SPEC_MOE_H_
#define VTRAIN_CORE_SPEC_MOE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/spec/job.h"

namespace vtrain {

// Appends one message per violation of the MoE and MLA fields of `job`
// (model.moe.*, model.mla.*, model.head_dim, model.mtp_layers,
// plan.expert_parallel, plan.expert_tensor_parallel, plan.capacity_factor,
// plan.routing_sigma), each naming the field and the fix. ValidateJob calls
// it.
void CheckMoeFields(const Job& job, std::vector<std::string>& problems);

// edp: the ranks holding the same experts, t*c*d / (etp*ep) (Megatron-Core's
// expert data-parallel group); at least 1.
int64_t ExpertDataParallel(const ParallelPlan& plan);

// The expected load of the busiest expert-parallel rank, and the routed
// token copies kept after the capacity cut.
struct ExpertLoad {
  // The slowest EP rank's token copies over the mean rank's under balanced
  // routing (1: balanced, dropless); it sets the pace of the grouped GEMMs and
  // of the all-to-all.
  double max_over_mean = 1;
  // Kept copies / routed copies (1: dropless).
  double kept = 1;
};

// Under plan.routing_sigma (log-normal per-expert loads of mean 1; 0:
// balanced) and plan.capacity_factor (each expert keeps at most that multiple
// of the mean, its input padded to it; 0: dropless), over
// plan.expert_parallel ranks of num_experts / ep experts each. Log-normal
// loads are estimated from 128 deterministic draws (the same numbers on every
// machine); balanced routing is Megatron-Core's forced balance, uniform
// random per micro-batch (ForcedBalanceSpread).
ExpertLoad ExpectedExpertLoad(const ModelSpec& model, const ParallelPlan& plan);

// The busiest EP rank's token copies over the mean under forced-balance
// routing: each token's top_k experts drawn uniformly anew every micro-batch,
// so the ranks' counts spread binomially (about 1% at EP 16 and 2% at EP 64
// with 4K-token sequences). 1 without expert parallelism.
double ForcedBalanceSpread(const ModelSpec& model, const ParallelPlan& plan);

// The expected maximum of n independent standard normal draws (0 for n <= 1).
double ExpectedMaxOfNormals(int64_t n);

// Tokens one rank routes per micro-batch in a MoE layer: b * s / c, and / t
// with sequence parallelism (each tensor-parallel rank routes its own slice).
double MoeTokensPerRank(const ModelSpec& model, const ParallelPlan& plan);

// Whether the plan exchanges tokens between ranks (ep x etp > 1).
bool ExchangesTokens(const ParallelPlan& plan);

// Whether a MoE forward's host waits for the GPU before the dispatch:
// Megatron-Core's dropless dispatchers size their buffers from the token
// counts on the host (alltoall: a D2H copy synchronised before the
// all-to-all; DeepEP and HybridEP: the host spins until every EP peer's
// counts arrive; allgather: .cpu() on the counts), so every EP rank waits
// for its GPU to reach the dispatch. A capacity factor, taken as padded to
// capacity (--moe-pad-expert-input-to-capacity, as the recipes that set one
// do), fixes the sizes and needs no wait; nor does a plan without EP.
bool MoeHostSyncs(const ParallelPlan& plan);

}  // namespace vtrain

#endif  // VTRAIN_CORE_SPEC_MOE_H_
