#include "core/predict/estimated.h"

#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/spec/moe.h"

namespace vtrain {
namespace {

// Whether a lookup whose key contains `part` was not measured.
bool Unmeasured(const std::vector<LookupRecord>& records, absl::string_view part) {
  for (const LookupRecord& r : records) {
    if (r.fidelity != Fidelity::kMeasured && absl::StrContains(r.key, part)) return true;
  }
  return false;
}

void MoePieces(const Job& job, const std::vector<LookupRecord>& records,
               std::vector<std::string>& out) {
  const ParallelPlan& plan = job.plan;
  if (Unmeasured(records, "/moe_fwd ") || Unmeasured(records, "/moe_bwd ")) {
    out.push_back(
        "MoE layer kernels (router, auxiliary loss, permutation, per-expert GEMMs, SwiGLU, shared "
        "experts): analytical roofline, no measured MoE kernels in this profile set");
  }
  const bool exchanges = ExchangesTokens(plan);
  const bool gathers = plan.moe.dispatcher == MoeDispatcher::kAllGather;
  if (exchanges && Unmeasured(records, gathers ? "/all_gather " : "/all_to_all ")) {
    out.push_back(
        "token dispatch and combine: analytical collective model (the off-node share through "
        "the rank's NICs), no measured all-to-all curve");
  }
  if (MoeHostSyncs(plan)) {
    out.push_back(
        "the host's wait for the token counts before each dispatch: modelled from "
        "Megatron-Core's dispatchers, not measured");
  }
  if (plan.moe.overlap && exchanges) {
    out.push_back(
        "all-to-all overlap with the paired micro-batch: analytical phase model (it hides more "
        "than the one measured pair showed: docs/moe.md)");
  }
  if (plan.moe.routing_sigma > 0) {
    out.push_back(
        absl::StrFormat("routing skew: log-normal sigma %.2f, an assumption (no measured routing)",
                        plan.moe.routing_sigma));
  } else if (exchanges && plan.moe.capacity_factor <= 0) {
    out.push_back(absl::StrFormat(
        "routing: forced balance, each micro-batch's experts drawn uniformly (the busiest EP rank "
        "%.1f%% above the mean, binomial spread); real routing is not measured",
        100 * (ForcedBalanceSpread(job.model, plan) - 1)));
  }
}

}  // namespace

std::vector<std::string> EstimatedPieces(const Job& job, const std::vector<LookupRecord>& records) {
  std::vector<std::string> out;
  if (job.model.is_moe()) MoePieces(job, records, out);
  const bool attention_unmeasured =
      Unmeasured(records, "/attention_fwd ") || Unmeasured(records, "/attention_bwd ");
  if (job.model.attention == AttentionKind::kMla && attention_unmeasured) {
    out.push_back("MLA projections and attention: analytical, no measured MLA kernels");
  }
  if (job.model.seq_len >= kLongContextTokens && attention_unmeasured) {
    out.push_back(
        absl::StrCat("attention at ", job.model.seq_len,
                     " tokens: analytical FlashAttention efficiency, not measured at this length"));
  }
  if (job.plan.context_parallel > 1) {
    out.push_back("context-parallel key/value exchange and its overlap with attention: analytical");
  }
  return out;
}

}  // namespace vtrain
