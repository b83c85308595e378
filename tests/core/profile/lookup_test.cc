#include "core/profile/lookup.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/profile/analytical.h"
#include "core/profile/default_profiles.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vtrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kGpu[] = "a100-sxm4-80gb";

class ProfileLookupTest : public ::testing::Test {
 protected:
  ProfileLookupTest() : gpu_(*GpuByName(kGpu)), set_(DefaultProfileSet(gpu_)) {}

  static OperatorKey AttentionKey(int64_t micro_batch, const std::string& gpu = kGpu) {
    return MakeOperatorKey(gpu, DType::kFp16, OperatorKind::kAttentionFwd, 1024, 16, 4096, 1024,
                           micro_batch, 1, 50257, 0);
  }
  static OperatorProfile Profile(std::vector<KernelRecord> kernels) {
    OperatorProfile p;
    p.kernels = std::move(kernels);
    return p;
  }
  static int64_t Span(const std::vector<KernelRecord>& kernels) {
    return Profile(kernels).SpanNs();
  }
  LinkBandwidths links() const {
    return {gpu_.default_intra_node_bandwidth_bytes_per_s,
            gpu_.default_inter_node_bandwidth_bytes_per_s};
  }

  const GpuSpec gpu_;
  ProfileSet set_;
};

TEST_F(ProfileLookupTest, ExactMeasuredKey) {
  const std::vector<KernelRecord> measured = {{"k1", 1000, 50}, {"k2", 2000, 0}};
  set_.operators[AttentionKey(1)] = Profile(measured);
  ProfileLookup lookup(set_, gpu_, links());
  const OperatorProfile& p = lookup.Operator(AttentionKey(1));
  EXPECT_EQ(p.fidelity, Fidelity::kMeasured);
  ASSERT_EQ(p.kernels.size(), 2u);
  EXPECT_EQ(p.kernels[0].name, "k1");
  EXPECT_EQ(p.kernels[0].duration_ns, 1000);
  EXPECT_EQ(p.kernels[0].gap_ns, 50);
  EXPECT_EQ(p.kernels[1].duration_ns, 2000);
  ASSERT_EQ(lookup.records().size(), 1u);
  EXPECT_EQ(lookup.records()[0].key, AttentionKey(1).ToString());
  EXPECT_EQ(lookup.records()[0].fidelity, Fidelity::kMeasured);
  EXPECT_FALSE(lookup.records()[0].missing);
  EXPECT_TRUE(lookup.MissingKeys().empty());
}

TEST_F(ProfileLookupTest, NearbyShapeIsScaledByTheAnalyticalRatio) {
  // Measured at micro-batch 1 and 8; micro-batch 2 is nearer to 1 (log 2 <
  // log 4), so the micro-batch-1 kernels are scaled by the analytical model's
  // span ratio between micro-batch 2 and 1.
  const std::vector<KernelRecord> measured = {{"k1", 100'000, 7}, {"k2", 300'000, 0}};
  set_.operators[AttentionKey(1)] = Profile(measured);
  set_.operators[AttentionKey(8)] = Profile({{"far", 1, 0}});
  ProfileLookup lookup(set_, gpu_, links());
  const OperatorProfile& p = lookup.Operator(AttentionKey(2));
  EXPECT_EQ(p.fidelity, Fidelity::kInterpolated);
  const double ratio =
      static_cast<double>(Span(GenerateOperatorKernels(gpu_, AttentionKey(2), set_.params))) /
      static_cast<double>(Span(GenerateOperatorKernels(gpu_, AttentionKey(1), set_.params)));
  EXPECT_GT(ratio, 1.0);  // twice the tokens is more work
  ASSERT_EQ(p.kernels.size(), 2u);
  EXPECT_EQ(p.kernels[0].name, "k1");
  EXPECT_EQ(p.kernels[0].duration_ns, std::llround(100'000 * ratio));
  EXPECT_EQ(p.kernels[1].duration_ns, std::llround(300'000 * ratio));
  EXPECT_EQ(p.kernels[0].gap_ns, 7);  // gaps are host time, not scaled
  EXPECT_TRUE(lookup.records()[0].missing);
  EXPECT_THAT(lookup.MissingKeys(), ElementsAre(AttentionKey(2).ToString()));
}

TEST_F(ProfileLookupTest, NothingMeasuredIsAnalytical) {
  // A measurement of another operator, or of the same one on another GPU,
  // does not count.
  set_.operators[MakeOperatorKey(kGpu, DType::kFp16, OperatorKind::kMlpFwd, 1024, 16, 4096, 1024, 1,
                                 1, 50257, 0)] = Profile({{"mlp", 5, 0}});
  set_.operators[AttentionKey(1, "h100-sxm5-80gb")] = Profile({{"other_gpu", 5, 0}});
  ProfileLookup lookup(set_, gpu_, links());
  const OperatorProfile& p = lookup.Operator(AttentionKey(1));
  EXPECT_EQ(p.fidelity, Fidelity::kAnalytical);
  const std::vector<KernelRecord> expected =
      GenerateOperatorKernels(gpu_, AttentionKey(1), set_.params);
  ASSERT_EQ(p.kernels.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(p.kernels[i].name, expected[i].name);
    EXPECT_EQ(p.kernels[i].duration_ns, expected[i].duration_ns);
    EXPECT_EQ(p.kernels[i].gap_ns, expected[i].gap_ns);
  }
  EXPECT_THAT(lookup.MissingKeys(), ElementsAre(AttentionKey(1).ToString()));
}

// A measured GPT attention never stands in for a Llama one of the same
// shape (different kernels), so the Llama key stays analytical.
TEST_F(ProfileLookupTest, ArchitecturesDoNotInterpolateFromEachOther) {
  set_.operators[AttentionKey(1)] = Profile({{"k1", 1000, 0}});
  ProfileLookup lookup(set_, gpu_, links());
  const OperatorKey llama =
      MakeOperatorKey(kGpu, DType::kFp16, OperatorKind::kAttentionFwd, 1024, 16, 4096, 1024, 1, 1,
                      50257, 0, Architecture::kLlama, 4);
  EXPECT_EQ(lookup.Operator(llama).fidelity, Fidelity::kAnalytical);
}

TEST_F(ProfileLookupTest, OperatorLookupsAreMemoised) {
  ProfileLookup lookup(set_, gpu_, links());
  const OperatorProfile& a = lookup.Operator(AttentionKey(1));
  const OperatorProfile& b = lookup.Operator(AttentionKey(1));
  EXPECT_EQ(&a, &b);
  lookup.Operator(AttentionKey(2));
  EXPECT_EQ(&lookup.Operator(AttentionKey(1)), &a);  // still valid after inserts
  EXPECT_EQ(lookup.records().size(), 2u);
}

class CollectiveLookupTest : public ProfileLookupTest {
 protected:
  CollectiveLookupTest() {
    // Intra-node all-reduce over 2 ranks: 20,000 ns at 1 kB, 50,000 ns at 1 MB.
    set_.collectives.emplace(CollectiveKey{kGpu, LinkScope::kIntraNode, Collective::kAllReduce, 2},
                             *CollectiveCurve::Create({{1e3, 20'000}, {1e6, 50'000}}));
  }
  const CommGroup pair_{2, 2, 0.25};  // two ranks on one node
};

TEST_F(CollectiveLookupTest, MeasuredPoint) {
  ProfileLookup lookup(set_, gpu_, links());
  const ProfileLookup::CollectiveTime t = lookup.CollectiveNs(Collective::kAllReduce, 1e3, pair_);
  EXPECT_EQ(t.fidelity, Fidelity::kMeasured);
  EXPECT_EQ(t.latency_ns, 20'000);
  EXPECT_EQ(lookup.CollectiveNs(Collective::kAllReduce, 1e6, pair_).latency_ns, 50'000);
  EXPECT_TRUE(lookup.MissingKeys().empty());
}

TEST_F(CollectiveLookupTest, BetweenPointsIsInterpolatedAndNotMissing) {
  ProfileLookup lookup(set_, gpu_, links());
  const ProfileLookup::CollectiveTime t = lookup.CollectiveNs(Collective::kAllReduce, 1e4, pair_);
  EXPECT_EQ(t.fidelity, Fidelity::kInterpolated);
  // 10 kB is a third of the way from 1 kB to 1 MB in log size:
  // 20,000 * (50,000 / 20,000)^(1/3) = 20,000 * 1.35721 = 27,144 ns.
  EXPECT_EQ(t.latency_ns, std::llround(20'000 * std::cbrt(2.5)));
  EXPECT_EQ(t.latency_ns, 27'144);
  EXPECT_TRUE(lookup.MissingKeys().empty());
}

TEST_F(CollectiveLookupTest, OutsideTheRangeIsScaledFromTheEdgeAndMissing) {
  ProfileLookup lookup(set_, gpu_, links());
  const ProfileLookup::CollectiveTime t = lookup.CollectiveNs(Collective::kAllReduce, 1e8, pair_);
  EXPECT_EQ(t.fidelity, Fidelity::kInterpolated);
  const double ratio =
      AnalyticalCollectiveNs(Collective::kAllReduce, 1e8, pair_, links(), set_.params) /
      AnalyticalCollectiveNs(Collective::kAllReduce, 1e6, pair_, links(), set_.params);
  EXPECT_EQ(t.latency_ns, std::llround(50'000 * ratio));
  EXPECT_THAT(lookup.MissingKeys(), ElementsAre(HasSubstr("bytes=1e+08")));
}

TEST_F(CollectiveLookupTest, NoTableIsAnalytical) {
  ProfileLookup lookup(set_, gpu_, links());
  // Another collective, another rank count, and an inter-node group (2 nodes
  // of 8) have no table.
  const CommGroup eight{8, 8, 1.0};
  const CommGroup sixteen{16, 8, 1.0};
  for (const auto& [collective, group] :
       {std::pair{Collective::kAllGather, pair_}, std::pair{Collective::kAllReduce, eight},
        std::pair{Collective::kAllReduce, sixteen}}) {
    const ProfileLookup::CollectiveTime t = lookup.CollectiveNs(collective, 1e4, group);
    EXPECT_EQ(t.fidelity, Fidelity::kAnalytical);
    EXPECT_EQ(t.latency_ns,
              std::llround(AnalyticalCollectiveNs(collective, 1e4, group, links(), set_.params)));
  }
  EXPECT_EQ(lookup.MissingKeys().size(), 3u);
}

// All four collectives have tables of their own, intra- and inter-node: a
// measured all-gather, reduce-scatter or send/recv curve is read for its
// collective only, never for another.
TEST_F(CollectiveLookupTest, EachCollectiveReadsItsOwnTable) {
  const CommGroup eight{8, 8, 1.0};
  const CommGroup two_nodes{16, 8, 1.0};
  set_.collectives.emplace(CollectiveKey{kGpu, LinkScope::kIntraNode, Collective::kAllGather, 8},
                           *CollectiveCurve::Create({{1e6, 31'000}}));
  set_.collectives.emplace(
      CollectiveKey{kGpu, LinkScope::kIntraNode, Collective::kReduceScatter, 8},
      *CollectiveCurve::Create({{1e6, 33'000}}));
  set_.collectives.emplace(CollectiveKey{kGpu, LinkScope::kIntraNode, Collective::kSendRecv, 2},
                           *CollectiveCurve::Create({{1e6, 12'000}}));
  set_.collectives.emplace(
      CollectiveKey{kGpu, LinkScope::kInterNode, Collective::kReduceScatter, 16},
      *CollectiveCurve::Create({{1e6, 90'000}}));
  ProfileLookup lookup(set_, gpu_, links());
  const struct {
    Collective collective;
    CommGroup group;
    int64_t ns;
  } kCases[] = {{Collective::kAllGather, eight, 31'000},
                {Collective::kReduceScatter, eight, 33'000},
                {Collective::kSendRecv, pair_, 12'000},
                {Collective::kReduceScatter, two_nodes, 90'000}};
  for (const auto& c : kCases) {
    const ProfileLookup::CollectiveTime t = lookup.CollectiveNs(c.collective, 1e6, c.group);
    EXPECT_EQ(t.fidelity, Fidelity::kMeasured) << CollectiveName(c.collective);
    EXPECT_EQ(t.latency_ns, c.ns) << CollectiveName(c.collective);
  }
  // The all-gather table does not answer an all-reduce over the same ranks.
  EXPECT_EQ(lookup.CollectiveNs(Collective::kAllReduce, 1e6, eight).fidelity,
            Fidelity::kAnalytical);
}

TEST_F(CollectiveLookupTest, TablesOfAnotherGpuAreIgnored) {
  const GpuSpec h100 = *GpuByName("h100-sxm5-80gb");
  ProfileLookup lookup(set_, h100, links());  // set_ is for the A100
  const ProfileLookup::CollectiveTime t = lookup.CollectiveNs(Collective::kAllReduce, 1e3, pair_);
  EXPECT_EQ(t.fidelity, Fidelity::kAnalytical);
}

}  // namespace
}  // namespace vtrain
