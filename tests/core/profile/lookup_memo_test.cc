// The lookup memo (profile/lookup.h): shared resolutions give the same
// predictions, records and missing keys as resolving per prediction, across
// threads, and stay out of the way when they do not apply.
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "core/profile/lookup.h"
#include "gtest/gtest.h"
#include "tests/testing/spec_builders.h"
#include "tests/testing/status_matchers.h"

namespace vtrain {
namespace {

using ::vtrain::testing::DescribeJob;
using ::vtrain::testing::RandomSmallJob;

// The replay step of TemplateWriter (template_writer.h), one kernel at a time.
void Step(const KernelRecord& k, int64_t& host, int64_t& gpu) {
  host += k.host_ns;
  gpu = std::max(gpu, host) + k.duration_ns;
}

TEST(KernelChainTest, EqualsPlacingTheKernelsOneByOne) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> ns(0, 20'000);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<KernelRecord> kernels(1 + trial % 40);
    for (KernelRecord& k : kernels) k = {"k", ns(rng), ns(rng) / 4, 1 + ns(rng) / 2};
    const KernelChain c = ChainOf(kernels);
    int64_t plain = 0, duration = 0, host_sum = 0;
    for (const KernelRecord& k : kernels) {
      plain += k.duration_ns + k.gap_ns;
      duration += k.duration_ns;
      host_sum += k.host_ns;
    }
    EXPECT_EQ(c.count, static_cast<int64_t>(kernels.size()));
    EXPECT_EQ(c.plain_ns, plain);
    EXPECT_EQ(c.duration_ns, duration);
    EXPECT_EQ(c.host_ns, host_sum);
    EXPECT_TRUE(c.host_known);
    // Any starting state, host ahead of or behind the GPU.
    for (int s = 0; s < 10; ++s) {
      int64_t host = ns(rng) - 10'000, gpu = ns(rng);
      const int64_t h0 = host, g0 = gpu;
      for (const KernelRecord& k : kernels) Step(k, host, gpu);
      EXPECT_EQ(h0 + c.host_ns, host);
      EXPECT_EQ(std::max(g0 + c.duration_ns, h0 + c.host_lead_ns), gpu);
    }
  }
  std::vector<KernelRecord> measured = {{"a", 10, 5, 0}, {"b", 20, 0, 3}};
  EXPECT_FALSE(ChainOf(measured).host_known);
}

void ExpectSamePrediction(const Prediction& a, const Prediction& b) {
  EXPECT_EQ(a.iteration_time_ns, b.iteration_time_ns);
  ASSERT_EQ(a.stages.size(), b.stages.size());
  for (size_t s = 0; s < a.stages.size(); ++s) {
    EXPECT_EQ(a.stages[s].compute_ns, b.stages[s].compute_ns);
    EXPECT_EQ(a.stages[s].tensor_parallel_ns, b.stages[s].tensor_parallel_ns);
    EXPECT_EQ(a.stages[s].pipeline_exposed_ns, b.stages[s].pipeline_exposed_ns);
    EXPECT_EQ(a.stages[s].data_parallel_exposed_ns, b.stages[s].data_parallel_exposed_ns);
    EXPECT_EQ(a.stages[s].idle_ns, b.stages[s].idle_ns);
  }
  ASSERT_EQ(a.fidelity.records.size(), b.fidelity.records.size());
  for (size_t i = 0; i < a.fidelity.records.size(); ++i) {
    EXPECT_EQ(a.fidelity.records[i].key, b.fidelity.records[i].key);
    EXPECT_EQ(a.fidelity.records[i].fidelity, b.fidelity.records[i].fidelity);
    EXPECT_EQ(a.fidelity.records[i].missing, b.fidelity.records[i].missing);
  }
  EXPECT_EQ(a.fidelity.missing_keys, b.fidelity.missing_keys);
}

TEST(LookupMemoTest, SharedResolutionsPredictExactlyAsFreshOnes) {
  const GpuSpec gpu = *GpuByName("a100-sxm4-80gb");
  const ProfileSet set = DefaultProfileSet(gpu);
  LookupMemo memo(set);
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    Job job = RandomSmallJob(seed);
    job.cluster.gpu = gpu;
    job.plan.dtype = DType::kFp16;  // the A100 has no fp8
    job.plan.fp8_recipe = Fp8Recipe::kDelayed;
    SCOPED_TRACE(absl::StrCat("seed ", seed, ": ", DescribeJob(job)));
    for (Granularity g : {Granularity::kOperator, Granularity::kKernel}) {
      PredictOptions fresh;
      fresh.granularity = g;
      PredictOptions shared = fresh;
      shared.memo = &memo;
      VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction a, Predict(job, set, fresh));
      VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction b, Predict(job, set, shared));
      // Twice: the second is answered from the memo throughout.
      VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction c, Predict(job, set, shared));
      ExpectSamePrediction(a, b);
      ExpectSamePrediction(a, c);
    }
  }
  EXPECT_GT(memo.operators(), 0u);
}

TEST(LookupMemoTest, OneMemoServesManyThreads) {
  const GpuSpec gpu = *GpuByName("a100-sxm4-80gb");
  const ProfileSet set = DefaultProfileSet(gpu);
  std::vector<Job> jobs;
  std::vector<Prediction> expected;
  for (uint64_t seed = 100; seed < 140; ++seed) {
    Job job = RandomSmallJob(seed);
    job.cluster.gpu = gpu;
    job.plan.dtype = DType::kFp16;  // the A100 has no fp8
    job.plan.fp8_recipe = Fp8Recipe::kDelayed;
    absl::StatusOr<Prediction> p = Predict(job, set);
    ASSERT_TRUE(p.ok()) << p.status();
    jobs.push_back(job);
    expected.push_back(*p);
  }
  LookupMemo memo(set);
  std::vector<std::vector<Prediction>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      PredictOptions o;
      o.memo = &memo;
      // Each thread walks the jobs from its own start, so they race on keys.
      for (size_t i = 0; i < jobs.size(); ++i) {
        const size_t j = (i + static_cast<size_t>(t) * 10) % jobs.size();
        absl::StatusOr<Prediction> p = Predict(jobs[j], set, o);
        got[t].push_back(p.ok() ? *p : Prediction{});
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < 4; ++t) {
    for (size_t i = 0; i < jobs.size(); ++i) {
      SCOPED_TRACE(absl::StrCat("thread ", t, " job ", i));
      ExpectSamePrediction(expected[(i + static_cast<size_t>(t) * 10) % jobs.size()], got[t][i]);
    }
  }
}

TEST(LookupMemoTest, IgnoredForAnotherSetAnotherGpuSpecAndPastItsBound) {
  const GpuSpec gpu = *GpuByName("a100-sxm4-80gb");
  const ProfileSet set = DefaultProfileSet(gpu);
  const Job job = ::vtrain::testing::Gpt13bJob();
  ASSERT_EQ(job.cluster.gpu, gpu);
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction expected, Predict(job, set));

  // A memo of another set (equal content, another object) is not used.
  const ProfileSet other = set;
  LookupMemo other_memo(other);
  PredictOptions o;
  o.memo = &other_memo;
  VTRAIN_ASSERT_OK_AND_ASSIGN(Prediction p, Predict(job, set, o));
  ExpectSamePrediction(expected, p);
  EXPECT_EQ(other_memo.operators(), 0u);

  // A GPU spec that differs from the one the memo saw under its name
  // resolves afresh: its operators are not the memo's.
  LookupMemo memo(set);
  o.memo = &memo;
  VTRAIN_ASSERT_OK_AND_ASSIGN(p, Predict(job, set, o));
  const size_t stored = memo.operators();
  ASSERT_GT(stored, 0u);
  Job faster = job;
  faster.cluster.gpu.peak_fp16_flops_per_s *= 2;
  faster.cluster.gpu.peak_bf16_flops_per_s *= 2;
  faster.cluster.gpu.hbm_bandwidth_bytes_per_s *= 2;
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction fresh_fast, Predict(faster, set));
  VTRAIN_ASSERT_OK_AND_ASSIGN(const Prediction memo_fast, Predict(faster, set, o));
  EXPECT_LT(fresh_fast.iteration_time_ns, expected.iteration_time_ns);
  ExpectSamePrediction(fresh_fast, memo_fast);
  EXPECT_EQ(memo.operators(), stored);

  // A full memo stops adding and predictions stay the same.
  LookupMemo small(set, /*max_entries=*/2);
  o.memo = &small;
  VTRAIN_ASSERT_OK_AND_ASSIGN(p, Predict(job, set, o));
  ExpectSamePrediction(expected, p);
  EXPECT_EQ(small.operators(), 2u);
}

}  // namespace
}  // namespace vtrain
