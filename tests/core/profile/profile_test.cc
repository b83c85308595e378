#include "core/profile/profile.h"

#include <cmath>
#include <limits>
#include <vector>

#include "absl/hash/hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::testing::HasSubstr;
using ::vtrain::testing::StatusIs;

CollectiveCurve Curve(std::vector<CollectivePoint> points) {
  absl::StatusOr<CollectiveCurve> c = CollectiveCurve::Create(std::move(points));
  EXPECT_TRUE(c.ok()) << c.status();
  return *std::move(c);
}

TEST(CollectiveCurveTest, GeometricMeanSizeGivesGeometricMeanLatency) {
  // Log-log interpolation is linear in (log bytes, log latency): halfway in
  // log size between (1,000 B, 10,000 ns) and (100,000 B, 1,000,000 ns) is
  // 10,000 B, and the latency there is sqrt(10^4 * 10^6) = 100,000 ns.
  const CollectiveCurve c = Curve({{1e3, 1e4}, {1e5, 1e6}, {1e7, 2e6}});
  EXPECT_NEAR(c.LatencyNs(1e4), 1e5, 1e-6);
  // Between the second and third: sqrt(10^5 * 10^7) = 10^6 B gives
  // sqrt(10^6 * 2 * 10^6) = 1,414,213.56 ns.
  EXPECT_NEAR(c.LatencyNs(1e6), std::sqrt(2e12), 1e-3);
  // The same for arbitrary neighbours.
  const double pairs[][4] = {{64, 7'000, 4096, 9'000}, {3e5, 4e4, 7e8, 9e6}, {2, 3, 5, 7}};
  for (const auto& p : pairs) {
    const CollectiveCurve d = Curve({{p[0], p[1]}, {p[2], p[3]}});
    EXPECT_NEAR(d.LatencyNs(std::sqrt(p[0] * p[2])) / std::sqrt(p[1] * p[3]), 1.0, 1e-12);
  }
}

TEST(CollectiveCurveTest, ExactAtPointsAndMonotoneBetween) {
  const CollectiveCurve c = Curve({{1e3, 1e4}, {1e5, 1e6}, {1e7, 2e6}});
  EXPECT_DOUBLE_EQ(c.LatencyNs(1e3), 1e4);
  EXPECT_DOUBLE_EQ(c.LatencyNs(1e5), 1e6);
  EXPECT_DOUBLE_EQ(c.LatencyNs(1e7), 2e6);
  double previous = 0;
  for (double bytes = 1e3; bytes <= 1e7; bytes *= 1.1) {
    const double latency = c.LatencyNs(bytes);
    EXPECT_GE(latency, previous) << bytes;
    previous = latency;
  }
}

TEST(CollectiveCurveTest, ClampsOutsideTheRange) {
  const CollectiveCurve c = Curve({{1e3, 1e4}, {1e5, 1e6}});
  EXPECT_DOUBLE_EQ(c.LatencyNs(1), 1e4);
  EXPECT_DOUBLE_EQ(c.LatencyNs(999), 1e4);
  EXPECT_DOUBLE_EQ(c.LatencyNs(1e5 + 1), 1e6);
  EXPECT_DOUBLE_EQ(c.LatencyNs(1e12), 1e6);
  EXPECT_TRUE(c.Covers(1e3));
  EXPECT_TRUE(c.Covers(5e4));
  EXPECT_TRUE(c.Covers(1e5));
  EXPECT_FALSE(c.Covers(999));
  EXPECT_FALSE(c.Covers(1e5 + 1));
}

TEST(CollectiveCurveTest, OnePointIsConstant) {
  const CollectiveCurve c = Curve({{4096, 25'000}});
  EXPECT_DOUBLE_EQ(c.LatencyNs(1), 25'000);
  EXPECT_DOUBLE_EQ(c.LatencyNs(4096), 25'000);
  EXPECT_DOUBLE_EQ(c.LatencyNs(1e9), 25'000);
}

TEST(CollectiveCurveTest, CreateSortsAndKnowsItsPoints) {
  const CollectiveCurve c = Curve({{1e5, 1e6}, {1e3, 1e4}, {1e4, 3e4}});
  ASSERT_EQ(c.points().size(), 3u);
  EXPECT_EQ(c.points()[0].bytes, 1e3);
  EXPECT_EQ(c.points()[1].bytes, 1e4);
  EXPECT_EQ(c.points()[2].bytes, 1e5);
  EXPECT_TRUE(c.IsPoint(1e4));
  EXPECT_FALSE(c.IsPoint(1e4 + 1));
  EXPECT_FALSE(c.IsPoint(1));
  EXPECT_FALSE(c.IsPoint(1e6));
}

TEST(CollectiveCurveTest, CreateRejectsBadPoints) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_THAT(CollectiveCurve::Create({}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no points")));
  const std::vector<std::vector<CollectivePoint>> bad = {
      {{0, 10}},   {{-1, 10}},  {{10, 0}},
      {{10, -5}},  {{nan, 10}}, {{10, nan}},
      {{inf, 10}}, {{10, inf}}, {{1, 1}, {2, 2}, {3, 0}},
  };
  for (const auto& points : bad) {
    EXPECT_THAT(CollectiveCurve::Create(points),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("positive")));
  }
  EXPECT_THAT(CollectiveCurve::Create({{100, 1}, {200, 2}, {100, 3}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bytes=100")));
}

TEST(OperatorKeyTest, ParallelSplitsPrintParseAndHashOnlyWhereTheyApply) {
  const OperatorKey attention =
      MakeOperatorKey("a100-sxm4-80gb", DType::kFp16, OperatorKind::kAttentionFwd, 2048, 16, 8192,
                      2048, 2, 4, 50257, 0);
  const OperatorKey split = WithParallelSplits(attention, true, 2, false);
  EXPECT_EQ(split.ToString(),
            "a100-sxm4-80gb/fp16/attention_fwd h=2048 a=16 s=2048 b=2 t=4 sp=1 c=2");
  VTRAIN_ASSERT_OK_AND_ASSIGN(const OperatorKey parsed, ParseOperatorKey(split.ToString()));
  EXPECT_EQ(parsed, split);
  EXPECT_NE(absl::HashOf(split), absl::HashOf(attention));
  const OperatorKey core = WithParallelSplits(attention, true, 1, true);
  // The attention core has no layer norm or dropout of its own to split.
  EXPECT_EQ(core.ToString(), "a100-sxm4-80gb/fp16/attention_fwd h=2048 a=16 s=2048 b=2 t=4 core=1");
  VTRAIN_ASSERT_OK_AND_ASSIGN(const OperatorKey core_parsed, ParseOperatorKey(core.ToString()));
  EXPECT_EQ(core_parsed, core);
  // Sequence parallelism is a no-op at t = 1; core=1 only marks attention_fwd;
  // the optimizer takes no split; the loss runs on gathered logits.
  OperatorKey t1 = attention;
  t1.tensor_parallel = 1;
  EXPECT_FALSE(WithParallelSplits(t1, true, 1, false).sequence_parallel);
  OperatorKey mlp = attention;
  mlp.op = OperatorKind::kMlpBwd;
  EXPECT_FALSE(WithParallelSplits(mlp, false, 1, true).attention_core_only);
  OperatorKey optimizer = attention;
  optimizer.op = OperatorKind::kOptimizerStep;
  EXPECT_EQ(WithParallelSplits(optimizer, true, 4, true), optimizer);
  OperatorKey loss = attention;
  loss.op = OperatorKind::kLossFwd;
  EXPECT_FALSE(WithParallelSplits(loss, true, 1, false).sequence_parallel);
  EXPECT_FALSE(ParseOperatorKey("g/fp16/attention_fwd h=64 s=128 b=1 t=2 sp=2").ok());
  EXPECT_FALSE(ParseOperatorKey("g/fp16/attention_fwd h=64 s=128 b=1 t=2 c=0").ok());
}

TEST(OperatorKeyTest, MakeOperatorKeyKeepsOnlyTheFieldsTheOperatorUses) {
  const auto make = [](OperatorKind op) {
    return MakeOperatorKey("a100-sxm4-80gb", DType::kFp16, op, 2048, 16, 8192, 2048, 2, 4, 50257,
                           123'456);
  };
  const OperatorKey attention = make(OperatorKind::kAttentionFwd);
  EXPECT_EQ(attention.heads, 16);
  EXPECT_EQ(attention.ffn, 0);
  EXPECT_EQ(attention.vocab, 0);
  EXPECT_EQ(attention.num_parameters, 0);
  EXPECT_EQ(attention.ToString(), "a100-sxm4-80gb/fp16/attention_fwd h=2048 a=16 s=2048 b=2 t=4");
  const OperatorKey mlp = make(OperatorKind::kMlpBwd);
  EXPECT_EQ(mlp.heads, 0);
  EXPECT_EQ(mlp.ffn, 8192);
  EXPECT_EQ(mlp.ToString(), "a100-sxm4-80gb/fp16/mlp_bwd h=2048 f=8192 s=2048 b=2 t=4");
  const OperatorKey logit = make(OperatorKind::kLogitFwd);
  EXPECT_EQ(logit.vocab, 50257);
  EXPECT_EQ(logit.ToString(), "a100-sxm4-80gb/fp16/logit_fwd h=2048 s=2048 b=2 t=4 v=50257");
  const OperatorKey optimizer = make(OperatorKind::kOptimizerStep);
  EXPECT_EQ(optimizer.hidden, 0);
  EXPECT_EQ(optimizer.micro_batch, 0);
  EXPECT_EQ(optimizer.num_parameters, 123'456);
  EXPECT_EQ(optimizer.ToString(), "a100-sxm4-80gb/fp16/optimizer_step params=123456");
  // Llama keys carry the architecture (and, for attention, the key/value
  // heads) except for the loss and the optimizer step, which are shared.
  const auto llama = [](OperatorKind op) {
    return MakeOperatorKey("h100-sxm5-80gb", DType::kBf16, op, 4096, 32, 14336, 8192, 1, 1, 128256,
                           99, Architecture::kLlama, 8);
  };
  EXPECT_EQ(llama(OperatorKind::kAttentionBwd).kv_heads, 8);
  EXPECT_EQ(llama(OperatorKind::kAttentionBwd).arch, Architecture::kLlama);
  EXPECT_EQ(llama(OperatorKind::kMlpFwd).kv_heads, 0);
  EXPECT_EQ(llama(OperatorKind::kMlpFwd).arch, Architecture::kLlama);
  EXPECT_EQ(llama(OperatorKind::kLogitFwd).arch, Architecture::kLlama);
  EXPECT_EQ(llama(OperatorKind::kLossFwd).arch, Architecture::kGpt);
  EXPECT_EQ(llama(OperatorKind::kOptimizerStep).arch, Architecture::kGpt);
  EXPECT_NE(llama(OperatorKind::kMlpFwd),
            MakeOperatorKey("h100-sxm5-80gb", DType::kBf16, OperatorKind::kMlpFwd, 4096, 32, 14336,
                            8192, 1, 1, 128256, 99));
  // Fields an operator ignores do not split its keys.
  EXPECT_EQ(MakeOperatorKey("g", DType::kBf16, OperatorKind::kAttentionBwd, 64, 4, 256, 128, 1, 1,
                            512, 7),
            MakeOperatorKey("g", DType::kBf16, OperatorKind::kAttentionBwd, 64, 4, 999, 128, 1, 1,
                            1000, 8));
}

TEST(OperatorProfileTest, SpanCountsGapsBetweenKernelsOnly) {
  OperatorProfile p;
  p.kernels = {{"a", 100, 10}, {"b", 50, 20}, {"c", 30, 999}};
  // 100 + 10 + 50 + 20 + 30; the last gap is not part of the span.
  EXPECT_EQ(p.SpanNs(), 210);
  EXPECT_EQ(OperatorProfile{}.SpanNs(), 0);
}

TEST(ProfileNamesTest, RoundTrip) {
  for (int i = 0; i < kNumOperatorKinds; ++i) {
    const auto kind = static_cast<OperatorKind>(i);
    EXPECT_EQ(*ParseOperatorKind(OperatorKindName(kind)), kind);
  }
  for (Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                       Collective::kSendRecv}) {
    EXPECT_EQ(*ParseCollective(CollectiveName(c)), c);
  }
  EXPECT_THAT(ParseOperatorKind("conv2d"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseCollective("broadcast"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("all_reduce")));
  EXPECT_EQ(FidelityName(Fidelity::kMeasured), "measured");
  EXPECT_EQ(FidelityName(Fidelity::kInterpolated), "interpolated");
  EXPECT_EQ(FidelityName(Fidelity::kAnalytical), "analytical");
  EXPECT_EQ(CollectiveKey({"g", LinkScope::kInterNode, Collective::kAllGather, 16}).ToString(),
            "g/inter_node/all_gather ranks=16");
}

// Work items carry keys as text; the agent parses them back.
TEST(OperatorKeyTest, ParseIsTheInverseOfToString) {
  for (int i = 0; i < kNumOperatorKinds; ++i) {
    const OperatorKey key =
        MakeOperatorKey("h200-sxm-141gb", DType::kBf16, static_cast<OperatorKind>(i), 12288, 96,
                        49152, 2048, 2, 8, 51200, 1'234'567);
    absl::StatusOr<OperatorKey> parsed = ParseOperatorKey(key.ToString());
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, key) << key.ToString();
    // Llama keys in fp8 too: arch and key/value heads survive the text.
    const OperatorKey llama =
        MakeOperatorKey("h100-sxm5-80gb", DType::kFp8, static_cast<OperatorKind>(i), 8192, 64,
                        28672, 8192, 1, 8, 129024, 1'234'567, Architecture::kLlama, 8);
    absl::StatusOr<OperatorKey> parsed_llama = ParseOperatorKey(llama.ToString());
    ASSERT_TRUE(parsed_llama.ok()) << parsed_llama.status();
    EXPECT_EQ(*parsed_llama, llama) << llama.ToString();
  }
  EXPECT_EQ(MakeOperatorKey("h100-sxm5-80gb", DType::kBf16, OperatorKind::kAttentionFwd, 4096, 32,
                            14336, 8192, 1, 2, 128256, 0, Architecture::kLlama, 8)
                .ToString(),
            "h100-sxm5-80gb/bf16/attention_fwd arch=llama h=4096 a=32 kv=8 s=8192 b=1 t=2");
  EXPECT_FALSE(ParseOperatorKey("").ok());
  EXPECT_FALSE(ParseOperatorKey("a100/fp16 h=1").ok());
  EXPECT_FALSE(ParseOperatorKey("a100/fp4/mlp_fwd h=1").ok());
  EXPECT_FALSE(ParseOperatorKey("a100/fp8/mlp_fwd arch=mamba h=1").ok());
  EXPECT_FALSE(ParseOperatorKey("a100/fp16/conv h=1").ok());
  EXPECT_FALSE(ParseOperatorKey("a100/fp16/mlp_fwd h=-1").ok());
  absl::StatusOr<OperatorKey> bad = ParseOperatorKey("a100/fp16/mlp_fwd h=1 z=3");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("'z' is not a key field"));
}

}  // namespace
}  // namespace vtrain
