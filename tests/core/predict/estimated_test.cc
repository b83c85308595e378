// What every MoE or long-context answer says was estimated (EstimatedPieces):
// each piece appears exactly when the job has it and nothing measured it.
#include "core/predict/estimated.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "core/spec/model.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

Job SmallQwen3Job(int64_t ep) {
  Job job;
  job.model = *ModelPreset("qwen3-30b-a3b");
  job.cluster = DefaultCluster(*GpuByName("h100-sxm5-80gb"), 16);
  job.plan.data_parallel = 16;
  job.plan.expert_parallel = ep;
  job.plan.global_batch = 64;
  job.plan.dtype = DType::kBf16;
  return job;
}

std::vector<std::string> EstimatedOf(const Job& job) {
  absl::StatusOr<Prediction> p = Predict(job, DefaultProfileSet(job.cluster.gpu));
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? p->fidelity.estimated : std::vector<std::string>{};
}

bool SaysPiece(const std::vector<std::string>& pieces, const std::string& part) {
  for (const std::string& s : pieces) {
    if (absl::StrContains(s, part)) return true;
  }
  return false;
}

TEST(EstimatedPiecesTest, ADenseShortContextJobHasNone) {
  Job job;
  job.model = *ModelPreset("llama3-8b");
  job.cluster = DefaultCluster(*GpuByName("h100-sxm5-80gb"), 8);
  job.plan.data_parallel = 8;
  job.plan.global_batch = 16;
  EXPECT_TRUE(EstimatedOf(job).empty());
}

TEST(EstimatedPiecesTest, AMoeJobNamesItsAnalyticalPieces) {
  const std::vector<std::string> ep8 = EstimatedOf(SmallQwen3Job(8));
  EXPECT_TRUE(SaysPiece(ep8, "MoE layer kernels"));
  EXPECT_TRUE(SaysPiece(ep8, "token dispatch and combine"));
  EXPECT_TRUE(SaysPiece(ep8, "wait for the token counts"));
  EXPECT_TRUE(SaysPiece(ep8, "forced balance"));
  EXPECT_FALSE(SaysPiece(ep8, "overlap"));
  // Without expert parallelism nothing is exchanged.
  const std::vector<std::string> ep1 = EstimatedOf(SmallQwen3Job(1));
  EXPECT_TRUE(SaysPiece(ep1, "MoE layer kernels"));
  EXPECT_FALSE(SaysPiece(ep1, "token dispatch"));
  EXPECT_FALSE(SaysPiece(ep1, "wait for the token counts"));
  // Padded to capacity: no wait; a skew says its sigma.
  Job padded = SmallQwen3Job(8);
  padded.plan.moe.capacity_factor = 1.0;
  padded.plan.moe.routing_sigma = 0.5;
  const std::vector<std::string> p = EstimatedOf(padded);
  EXPECT_FALSE(SaysPiece(p, "wait for the token counts"));
  EXPECT_TRUE(SaysPiece(p, "log-normal sigma 0.50"));
}

TEST(EstimatedPiecesTest, MeasuredKernelsAreNotCalledEstimated) {
  const Job job = SmallQwen3Job(8);
  std::vector<LookupRecord> records = {
      {"h100-sxm5-80gb/bf16/moe_fwd arch=llama", Fidelity::kMeasured, false},
      {"h100-sxm5-80gb/bf16/moe_bwd arch=llama", Fidelity::kMeasured, false},
      {"h100-sxm5-80gb/intra_node/all_to_all ranks=8", Fidelity::kAnalytical, true}};
  const std::vector<std::string> pieces = EstimatedPieces(job, records);
  EXPECT_FALSE(SaysPiece(pieces, "MoE layer kernels"));
  EXPECT_TRUE(SaysPiece(pieces, "token dispatch"));
  records[2].fidelity = Fidelity::kInterpolated;  // still not a measurement
  EXPECT_TRUE(SaysPiece(EstimatedPieces(job, records), "token dispatch"));
}

TEST(EstimatedPiecesTest, LongContextNamesAttentionAndTheRing) {
  Job job;
  job.model = *ModelPreset("llama3-8b");
  job.model.seq_len = 65536;
  job.cluster = DefaultCluster(*GpuByName("h100-sxm5-80gb"), 8);
  job.plan.tensor_parallel = 2;
  job.plan.context_parallel = 4;
  job.plan.global_batch = 1;
  job.plan.dtype = DType::kBf16;
  const std::vector<std::string> pieces = EstimatedOf(job);
  EXPECT_TRUE(SaysPiece(pieces, "attention at 65536 tokens"));
  EXPECT_TRUE(SaysPiece(pieces, "context-parallel"));
  EXPECT_FALSE(SaysPiece(pieces, "MoE"));
}

}  // namespace
}  // namespace vtrain
