// What a prediction of a MoE or long-context job rests on that nobody
// measured: the pieces the analytical model (or Megatron-Core's source
// rather than a measurement) priced, in words, so that every answer says
// them (issue 43; docs/moe.md#what-every-answer-says-is-estimated).
#ifndef VTRAIN_CORE_PREDICT_ESTIMATED_H_
#define VTRAIN_CORE_PREDICT_ESTIMATED_H_

#include <string>
#include <vector>

#include "core/profile/lookup.h"
#include "core/spec/job.h"

namespace vtrain {

// The sequence length from which attention counts as long context here.
inline constexpr int64_t kLongContextTokens = 32768;

// The MoE and long-context pieces of `job` that `records` (the prediction's
// profile lookups) priced without a measurement, or that follow from a
// model of Megatron-Core rather than a measured run. Empty for a dense job
// at short context, or when every such piece was measured.
std::vector<std::string> EstimatedPieces(const Job& job, const std::vector<LookupRecord>& records);

}  // namespace vtrain

#endif  // VTRAIN_CORE_PREDICT_ESTIMATED_H_
