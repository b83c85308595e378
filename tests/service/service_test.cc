// The service layer both front ends call: answers equal to core's, named
// profile sets refused without a server, a lent curve store consulted, and
// progress and simulation reports delivered.
#include "service/service.h"

#include <atomic>
#include <cmath>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/job_convert.h"
#include "service/cluster_sim.h"
#include "tests/testing/status_matchers.h"

namespace vtrain::service {
namespace {

using ::testing::HasSubstr;
using ::vtrain::testing::StatusIs;

v1::PredictRequest SmallJob() {
  v1::PredictRequest r;
  r.mutable_model()->set_preset("gpt3-1.3b");
  r.mutable_cluster()->set_num_gpus(8);
  r.mutable_plan()->set_tensor_parallel(2);
  r.mutable_plan()->set_global_batch(64);
  return r;
}

TEST(ServiceTest, PredictAnswersAsCoreDoesOnTheBuiltInTables) {
  const BuiltinProfiles builtin;
  absl::StatusOr<v1::PredictResponse> r = Predict(SmallJob(), builtin);
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<Job> job = proto::JobFromProto(SmallJob());
  ASSERT_TRUE(job.ok());
  absl::StatusOr<Prediction> core = vtrain::Predict(*job, DefaultProfileSet(job->cluster.gpu));
  ASSERT_TRUE(core.ok());
  EXPECT_EQ(r->iteration_time_ns(), core->iteration_time_ns);
  EXPECT_EQ(r->plan().tensor_parallel(), 2);
  EXPECT_EQ(r->plan().data_parallel(), 4);
  // Named by content, as a server names the seeded set.
  EXPECT_EQ(r->profile_set_id(), BuiltinProfileSet(job->cluster.gpu).id);
  EXPECT_THAT(r->profile_set_id(), HasSubstr("sha256:"));
}

TEST(ServiceTest, BuiltinTablesAreMadeOncePerGpuAndNamedSetsAreRefused) {
  const BuiltinProfiles builtin;
  const GpuSpec a100 = *GpuByName("a100-sxm4-80gb");
  absl::StatusOr<std::shared_ptr<const ProfileSet>> first = builtin.TablesFor("", a100);
  absl::StatusOr<std::shared_ptr<const ProfileSet>> again = builtin.TablesFor("", a100);
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(first->get(), again->get());
  absl::StatusOr<std::shared_ptr<const ProfileSet>> h100 =
      builtin.TablesFor("", *GpuByName("h100-sxm5-80gb"));
  ASSERT_TRUE(h100.ok());
  EXPECT_NE(first->get(), h100->get());
  v1::PredictRequest named = SmallJob();
  named.set_profile_set_id("sha256:abc");
  EXPECT_THAT(Predict(named, builtin),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("profile_set_id='sha256:abc'")));
}

TEST(ServiceTest, BadRequestsAreRefusedBeforeAnyWork) {
  const BuiltinProfiles builtin;
  std::atomic<int> simulated{0};
  CallOptions options;
  options.simulated = [&](const char*, int64_t) { ++simulated; };
  v1::PredictRequest bad = SmallJob();
  bad.mutable_plan()->set_tensor_parallel(3);
  EXPECT_THAT(Predict(bad, builtin, options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("plan.tensor_parallel")));
  v1::SearchRequest search;
  search.mutable_model()->set_preset("gpt3-1.3b");
  EXPECT_THAT(PrepareSearch(search, builtin), StatusIs(absl::StatusCode::kInvalidArgument));
  v1::ThroughputCurveRequest curve;
  EXPECT_THAT(PrepareCurves(curve, builtin), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(simulated.load(), 0);
}

// A curve store that counts what it is asked.
class CountingStore final : public CurveStore {
 public:
  bool Get(const std::string& key, v1::Curve* out) const override {
    ++gets;
    auto it = curves.find(key);
    if (it == curves.end()) return false;
    *out = it->second;
    return true;
  }
  void Put(const std::string& key, const v1::Curve& curve) override { curves[key] = curve; }
  mutable int gets = 0;
  std::map<std::string, v1::Curve> curves;
};

TEST(ServiceTest, CurvesComeFromALentStoreWhenDrawnBefore) {
  const BuiltinProfiles builtin;
  v1::ThroughputCurveRequest request;
  v1::CurveJob* job = request.add_jobs();
  job->set_name("first");
  job->mutable_model()->set_preset("gpt3-1.3b");
  job->set_global_batch(64);
  request.add_gpu_counts(8);
  request.add_gpu_counts(16);
  int simulated = 0;
  CallOptions options;
  options.simulated = [&](const char* method, int64_t) {
    EXPECT_STREQ(method, "ThroughputCurve");
    ++simulated;
  };
  CountingStore store;
  absl::StatusOr<PreparedCurves> prepared = PrepareCurves(request, builtin);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  absl::StatusOr<v1::ThroughputCurveResponse> drawn = RunCurves(*prepared, options, &store);
  ASSERT_TRUE(drawn.ok()) << drawn.status();
  EXPECT_EQ(simulated, 1);
  EXPECT_EQ(store.curves.size(), 1u);
  // The same job under another name: from the store, renamed.
  request.mutable_jobs(0)->set_name("second");
  prepared = PrepareCurves(request, builtin);
  ASSERT_TRUE(prepared.ok());
  absl::StatusOr<v1::ThroughputCurveResponse> again = RunCurves(*prepared, options, &store);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(simulated, 1);
  EXPECT_EQ(again->curves(0).name(), "second");
  ASSERT_EQ(again->curves(0).points_size(), drawn->curves(0).points_size());
  EXPECT_EQ(again->curves(0).points(1).iteration_time_ms(),
            drawn->curves(0).points(1).iteration_time_ms());
  EXPECT_EQ(again->policy(), v1::CURVE_POLICY_BEST);
}

TEST(ServiceTest, SearchReportsProgressAndItsSimulation) {
  const BuiltinProfiles builtin;
  v1::SearchRequest request;
  request.mutable_model()->set_preset("gpt3-1.3b");
  request.set_global_batch(64);
  request.set_gpus(8);
  std::atomic<int64_t> last_done{0}, last_total{0};
  int simulated = 0;
  CallOptions options;
  options.threads = 2;
  options.progress = [&](int64_t done, int64_t total) {
    last_done = done;
    last_total = total;
  };
  options.simulated = [&](const char* method, int64_t) {
    EXPECT_STREQ(method, "Search");
    ++simulated;
  };
  absl::StatusOr<v1::SearchResult> r = Search(request, builtin, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->has_best());
  EXPECT_TRUE(r->no_plan_reason().empty());
  EXPECT_GT(last_total.load(), 0);
  EXPECT_EQ(last_done.load(), last_total.load());
  EXPECT_EQ(simulated, 1);
}

TEST(ServiceTest, CancelledWorkStops) {
  const BuiltinProfiles builtin;
  v1::SearchRequest request;
  request.mutable_model()->set_preset("gpt3-1.3b");
  request.set_global_batch(64);
  request.set_gpus(8);
  CallOptions options;
  options.cancelled = [] { return true; };
  EXPECT_THAT(Search(request, builtin, options), StatusIs(absl::StatusCode::kCancelled));
}

v1::ClusterSimRequest TwoJobs() {
  v1::ClusterSimRequest r;
  r.set_gpus(16);
  for (int i = 0; i < 2; ++i) {
    v1::ClusterTraceJob* j = r.add_jobs();
    j->set_id(absl::StrCat("job", i));
    j->set_submit_s(100.0 * i);
    j->set_deadline_s(100.0 * i + 7200);
    j->set_duration_s(1800);
    j->set_num_gpus(i == 0 ? 8 : 2);
  }
  return r;
}

TEST(ServiceTest, ClusterSimRunsEachPolicyOnTheSameJobs) {
  const BuiltinProfiles builtin;
  absl::StatusOr<v1::ClusterSimResponse> r = ClusterSim(TwoJobs(), builtin);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->outcomes_size(), 2);
  EXPECT_EQ(r->outcomes(0).policy(), "elasticflow");
  EXPECT_EQ(r->outcomes(1).policy(), "vtrain");
  for (const v1::ClusterPolicyOutcome& o : r->outcomes()) {
    ASSERT_EQ(o.jobs_size(), 2);
    EXPECT_EQ(o.jobs(0).id(), "job0");
    EXPECT_EQ(o.jobs(0).shape(), "gpt3-6.7b/128");  // 8 GPUs: 16 x 8 = 128 sequences
    EXPECT_EQ(o.jobs(1).shape(), "gpt3-1.3b/32");
    EXPECT_GT(o.makespan_s(), 0);
    EXPECT_FALSE(o.allocated().empty());
  }
  EXPECT_GT(r->simulation().predictions(), 0);
  // One policy when asked for one.
  v1::ClusterSimRequest one = TwoJobs();
  one.add_policies("vtrain");
  r = ClusterSim(one, builtin);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->outcomes_size(), 1);
  EXPECT_EQ(r->outcomes(0).policy(), "vtrain");
}

TEST(ServiceTest, ClusterSimSensitivityRunsTheDataParallelTablesFaster) {
  // One job alone: its run after the start is the iterations over the
  // table's throughput, so on tables 10% faster it runs 1 / 1.1 as long,
  // whatever its 3D plans would do.
  const BuiltinProfiles builtin;
  v1::ClusterSimRequest r = TwoJobs();
  r.mutable_jobs()->DeleteSubrange(1, 1);
  r.set_sensitivity(0.1);
  absl::StatusOr<v1::ClusterSimResponse> out = ClusterSim(r, builtin);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->outcomes_size(), 2);
  const double restart = 30;
  const double dp = out->outcomes(0).jobs(0).jct_s() - restart;
  const double faster = out->outcomes(1).jobs(0).jct_s() - restart;
  ASSERT_GT(dp, 0);
  EXPECT_NEAR(faster, dp / 1.1, 1e-6 * dp);
}

TEST(ServiceTest, ClusterSimShapesTheWindowToTheTargetLoadAndSlack) {
  const BuiltinProfiles builtin;
  // Two jobs 100 s apart on 16 GPUs: (1800 x 8 + 1800 x 2) / (100 x 16) =
  // 11.25 as traced; at load 1 they arrive 1125 s apart.
  v1::ClusterSimRequest r = TwoJobs();
  r.set_target_load(1);
  r.set_deadline_slack(2);
  r.add_policies("vtrain");
  absl::StatusOr<PreparedClusterSim> p = PrepareClusterSim(r, builtin);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->windows.size(), 1u);
  const StudyWindow& w = p->windows[0];
  EXPECT_DOUBLE_EQ(w.trace_load, 11.25);
  EXPECT_DOUBLE_EQ(w.offered_load, 1);
  EXPECT_DOUBLE_EQ(w.jobs[0].submit_s, 0);
  EXPECT_DOUBLE_EQ(w.jobs[1].submit_s, 1125);
  EXPECT_DOUBLE_EQ(w.jobs[1].deadline_s, 1125 + 2 * 1800);
  absl::StatusOr<v1::ClusterSimResponse> out = RunClusterSim(*p, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_DOUBLE_EQ(out->offered_load(), 1);
  EXPECT_DOUBLE_EQ(out->trace_load(), 11.25);
  // 1,125 s apart, each 1,800 s long: both at once, 8 + 2 GPUs.
  EXPECT_EQ(out->peak_requested_gpus(), 10);
}

TEST(ServiceTest, ClusterSimTakesATenThousandGpuCluster) {
  // Its tables thin out past 128 nodes: every node up to 1,024 GPUs, then
  // 64 counts per doubling, under the curve's limit of 1,024 counts.
  const BuiltinProfiles builtin;
  v1::ClusterSimRequest r = TwoJobs();
  r.set_gpus(10'000);
  absl::StatusOr<PreparedClusterSim> p = PrepareClusterSim(r, builtin);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_FALSE(p->shapes.empty());
  const v1::ThroughputCurveRequest& curve = p->shapes[0].best.request;
  EXPECT_LE(curve.gpu_counts_size(), 1024);
  EXPECT_EQ(curve.gpu_counts(2 + 128), 1024);  // 1, 2, 4, then 8 .. 1,024 by 8
  EXPECT_EQ(curve.gpu_counts(2 + 129), 1040);  // then by 16
  EXPECT_LE(curve.gpu_counts(curve.gpu_counts_size() - 1), 10'000);
}

TEST(ServiceTest, ClusterSimPlacesJobsOnTheLeavesOfTheWholeCluster) {
  // Two nodes, one per leaf, 4:1 uplinks: the scheduler gets the leaves,
  // and each table's spread figures spread over the whole cluster's nodes.
  const BuiltinProfiles builtin;
  v1::ClusterSimRequest r = TwoJobs();
  r.mutable_cluster()->mutable_fabric()->set_nodes_per_leaf(1);
  r.mutable_cluster()->mutable_fabric()->set_oversubscription(4);
  absl::StatusOr<PreparedClusterSim> p = PrepareClusterSim(r, builtin);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->call.options.nodes_per_leaf, 1);
  // Jobs crossing the same uplinks share them, at the curve's contended
  // background of a leaf's uplinks: K / R = 1 / 4 of a node.
  EXPECT_DOUBLE_EQ(p->call.options.contended_background, 0.25);
  EXPECT_EQ(p->shapes[0].best.request.jobs(0).cluster().fabric().cluster_nodes(), 2);
  absl::StatusOr<v1::ClusterSimResponse> out = RunClusterSim(*p, {});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->outcomes_size(), 2);
  // With one node per leaf a job always spans exactly the leaves it needs.
  for (const v1::ClusterPolicyOutcome& o : out->outcomes()) {
    EXPECT_EQ(o.fragmented_placements(), 0) << o.policy();
    EXPECT_GT(o.makespan_s(), 0);
    EXPECT_GE(o.spine_shared_gpu_s(), 0);
  }
  // Flat: no leaves for the scheduler, nothing shared.
  p = PrepareClusterSim(TwoJobs(), builtin);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->call.options.nodes_per_leaf, 0);
  EXPECT_EQ(p->call.options.contended_background, 0);
}

// A study over a synthetic trace: 40 jobs an hour apart, 3 h each.
v1::ClusterSimRequest SmallStudy() {
  v1::ClusterSimRequest r;
  r.set_gpus(64);
  v1::ClusterStudy* s = r.mutable_study();
  for (int i = 0; i < 40; ++i) {
    v1::ClusterTraceJob* j = s->add_trace();
    j->set_id(absl::StrCat("t", i));
    j->set_submit_s(3600.0 * i);
    j->set_deadline_s(3600.0 * i + 4 * 3600);
    j->set_duration_s(3 * 3600);
    j->set_num_gpus(i % 3 == 0 ? 8 : 1);
  }
  s->add_windows()->set_jobs(10);
  s->add_seeds(1);
  s->add_seeds(2);
  s->add_target_loads(0.8);
  s->add_target_loads(1.0);
  s->add_job_mixes(v1::JOB_MIX_PAPER);
  return r;
}

TEST(ServiceTest, ClusterSimAnswersAWholeStudy) {
  const BuiltinProfiles builtin;
  absl::StatusOr<v1::ClusterSimResponse> r = ClusterSim(SmallStudy(), builtin);
  ASSERT_TRUE(r.ok()) << r.status();
  // 2 loads x 2 seeds, in the matrix's order; one summary per load.
  ASSERT_EQ(r->windows_size(), 4);
  ASSERT_EQ(r->summaries_size(), 2);
  EXPECT_TRUE(r->outcomes().empty());
  for (const v1::ClusterWindowOutcome& w : r->windows()) {
    EXPECT_EQ(w.job_mix(), v1::JOB_MIX_PAPER);
    EXPECT_EQ(w.jobs(), 10);
    EXPECT_NEAR(w.offered_load(), w.target_load(), 1e-9);
    ASSERT_EQ(w.outcomes_size(), 2);
    EXPECT_TRUE(w.outcomes(0).jobs().empty());  // keep_jobs unset
    EXPECT_GT(w.outcomes(1).avg_jct_s(), 0);
  }
  EXPECT_EQ(r->windows(0).seed(), 1);
  EXPECT_EQ(r->windows(1).seed(), 2);
  EXPECT_DOUBLE_EQ(r->summaries(1).target_load(), 1.0);
  EXPECT_EQ(r->summaries(1).windows(), 2);
  EXPECT_DOUBLE_EQ(r->summaries(1).mean_avg_jct_change(),
                   (r->windows(2).avg_jct_change() + r->windows(3).avg_jct_change()) / 2);
  // With keep_jobs, every job's shape is a GPT-3 preset of the paper mix.
  v1::ClusterSimRequest keep = SmallStudy();
  keep.mutable_study()->set_keep_jobs(true);
  r = ClusterSim(keep, builtin);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->windows(0).outcomes(0).jobs_size(), 10);
  EXPECT_THAT(r->windows(0).outcomes(0).jobs(0).shape(), HasSubstr("gpt3-"));
}

TEST(ServiceTest, ClusterSimRefusesWhatIsNotAStudyOfATrace) {
  const BuiltinProfiles builtin;
  struct Case {
    void (*change)(v1::ClusterSimRequest&);
    absl::StatusCode code;
    const char* says;
  };
  const Case cases[] = {
      {[](v1::ClusterSimRequest& r) { r.mutable_study()->mutable_windows(0)->set_hours(5); },
       absl::StatusCode::kInvalidArgument, "study.windows[0]: give jobs"},
      {[](v1::ClusterSimRequest& r) { r.mutable_study()->clear_windows(); },
       absl::StatusCode::kInvalidArgument, "study.windows is empty"},
      {[](v1::ClusterSimRequest& r) { r.mutable_study()->set_target_loads(0, 0); },
       absl::StatusCode::kInvalidArgument, "study.target_loads[0]=0"},
      {[](v1::ClusterSimRequest& r) { r.mutable_study()->add_gpus(4); },
       absl::StatusCode::kInvalidArgument, "study.gpus[0]=4"},
      {[](v1::ClusterSimRequest& r) {
         r.mutable_study()->add_job_mixes(static_cast<v1::JobMix>(9));
       },
       absl::StatusCode::kInvalidArgument, "study.job_mixes[1]=9"},
      {[](v1::ClusterSimRequest& r) { r.mutable_study()->mutable_trace(2)->set_num_gpus(0); },
       absl::StatusCode::kInvalidArgument, "study.trace[2].num_gpus=0"},
      {[](v1::ClusterSimRequest& r) { r.add_jobs()->set_id("x"); },
       absl::StatusCode::kInvalidArgument, "jobs and study are both given"},
      {[](v1::ClusterSimRequest& r) {
         for (int i = 0; i < 6000; ++i) r.mutable_study()->add_seeds(i);
       },
       absl::StatusCode::kResourceExhausted, "at most 10000"},
  };
  for (const Case& c : cases) {
    v1::ClusterSimRequest r = SmallStudy();
    c.change(r);
    EXPECT_THAT(PrepareClusterSim(r, builtin).status(), StatusIs(c.code, HasSubstr(c.says)))
        << c.says;
  }
}

TEST(ServiceTest, ClusterSimRefusesWhatIsNotAStudy) {
  const BuiltinProfiles builtin;
  struct Case {
    void (*change)(v1::ClusterSimRequest&);
    const char* says;
  };
  const Case cases[] = {
      {[](v1::ClusterSimRequest& r) { r.set_gpus(4); }, "gpus=4"},
      {[](v1::ClusterSimRequest& r) { r.clear_jobs(); }, "jobs has 0 entries"},
      {[](v1::ClusterSimRequest& r) { r.add_policies("random"); }, "policies[0]='random'"},
      {[](v1::ClusterSimRequest& r) { r.mutable_jobs(1)->set_duration_s(std::nan("")); },
       "jobs[1]"},
      {[](v1::ClusterSimRequest& r) { r.mutable_jobs(0)->set_num_gpus(0); }, "jobs[0].num_gpus=0"},
      {[](v1::ClusterSimRequest& r) { r.set_rescale_overhead_s(-1); }, "rescale_overhead_s"},
      {[](v1::ClusterSimRequest& r) { r.mutable_cluster()->set_gpu("tpu"); }, "cluster.gpu"},
      {[](v1::ClusterSimRequest& r) { r.set_target_load(0); }, "target_load=0"},
      {[](v1::ClusterSimRequest& r) { r.set_deadline_slack(-1); }, "deadline_slack=-1"},
      {[](v1::ClusterSimRequest& r) { r.set_promise_limit(-0.5); }, "promise_limit=-0.5"},
      {[](v1::ClusterSimRequest& r) { r.set_promise_limit(std::nan("")); }, "promise_limit=nan"},
      {[](v1::ClusterSimRequest& r) { r.set_displacement_limit(-1); }, "displacement_limit=-1"},
      {[](v1::ClusterSimRequest& r) { r.set_sensitivity(-0.001); }, "sensitivity=-0.001"},
      {[](v1::ClusterSimRequest& r) { r.set_sensitivity(std::nan("")); }, "sensitivity=nan"},
      {[](v1::ClusterSimRequest& r) { r.set_displacement_limit(std::nan("")); },
       "displacement_limit=nan"},
      {[](v1::ClusterSimRequest& r) {
         r.mutable_jobs(1)->set_submit_s(0);
         r.set_target_load(1);
       },
       "target_load (--target-load) needs a window whose jobs arrive at two or more"},
      {[](v1::ClusterSimRequest& r) {
         r.mutable_cluster()->mutable_fabric()->set_nodes_per_leaf(1);
         r.mutable_cluster()->mutable_fabric()->set_placement(v1::PLACEMENT_SPREAD);
       },
       "cluster.fabric.placement (--placement) places one job"},
      {[](v1::ClusterSimRequest& r) {
         r.mutable_cluster()->mutable_fabric()->set_nodes_per_leaf(1);
         r.mutable_cluster()->mutable_fabric()->set_cluster_nodes(5);
       },
       "cluster.fabric.cluster_nodes=5"},
      {[](v1::ClusterSimRequest& r) {
         r.mutable_cluster()->mutable_fabric()->set_nodes_per_leaf(1);
         r.mutable_cluster()->mutable_fabric()->add_nodes(0);
       },
       "cluster.fabric.nodes (--nodes) places one job"},
  };
  for (const Case& c : cases) {
    v1::ClusterSimRequest r = TwoJobs();
    c.change(r);
    EXPECT_THAT(PrepareClusterSim(r, builtin).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.says)))
        << c.says;
  }
}

}  // namespace
}  // namespace vtrain::service
