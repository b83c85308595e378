// A catalogue of bad inputs through the RPCs and the vtrainctl binary: each
// gets its specific error (INVALID_ARGUMENT naming the field, NOT_FOUND,
// RESOURCE_EXHAUSTED; exit 2 on the command line) and nothing is stored.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "tests/server/bad_input_cases.h"
#include "tests/server/server_testing.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::server {
namespace {

std::vector<Case<v1::PredictRequest>> PredictCases() {
  using R = v1::PredictRequest;
  using std::string_literals::operator""s;
  return {
      {"unknown preset", [](R& r) { r.mutable_model()->set_preset("gpt5"); }, kBad, "model.preset"},
      {"no model", [](R& r) { r.clear_model(); }, kBad, "model"},
      // A given 0 is refused, never read as "the default" (issue 28).
      {"tp given as 0", [](R& r) { r.mutable_plan()->set_tensor_parallel(0); }, kBad,
       "plan.tensor_parallel=0"},
      {"pp given as 0", [](R& r) { r.mutable_plan()->set_pipeline_parallel(0); }, kBad,
       "plan.pipeline_parallel=0"},
      {"micro-batch given as 0", [](R& r) { r.mutable_plan()->set_micro_batch(0); }, kBad,
       "plan.micro_batch=0"},
      {"gpus given as 0", [](R& r) { r.mutable_cluster()->set_num_gpus(0); }, kBad,
       "cluster.num_gpus=0"},
      {"seq given as 0", [](R& r) { r.mutable_model()->set_seq_len(0); }, kBad, "model.seq_len=0"},
      {"layers negative", [](R& r) { r.mutable_model()->set_num_layers(-4); }, kBad,
       "model.num_layers"},
      {"layers huge", [](R& r) { r.mutable_model()->set_num_layers(int64_t{1} << 40); }, kBad,
       "model.num_layers"},
      {"hidden negative", [](R& r) { r.mutable_model()->set_hidden_size(-1); }, kBad,
       "model.hidden_size"},
      {"hidden not divisible by heads", [](R& r) { r.mutable_model()->set_hidden_size(2050); },
       kBad, "model.hidden_size"},
      {"heads negative", [](R& r) { r.mutable_model()->set_num_heads(-16); }, kBad,
       "model.num_heads"},
      {"seq negative", [](R& r) { r.mutable_model()->set_seq_len(-1); }, kBad, "model.seq_len"},
      {"seq huge", [](R& r) { r.mutable_model()->set_seq_len(int64_t{1} << 40); }, kBad,
       "model.seq_len"},
      {"vocab negative", [](R& r) { r.mutable_model()->set_vocab_size(-5); }, kBad,
       "model.vocab_size"},
      {"ffn negative", [](R& r) { r.mutable_model()->set_ffn_hidden_size(-5); }, kBad,
       "model.ffn_hidden_size"},
      {"unknown gpu", [](R& r) { r.mutable_cluster()->set_gpu("b300"); }, kBad, "cluster.gpu"},
      {"gpus negative", [](R& r) { r.mutable_cluster()->set_num_gpus(-8); }, kBad,
       "cluster.num_gpus"},
      {"gpus not divisible", [](R& r) { r.mutable_cluster()->set_num_gpus(7); }, kBad,
       "cluster.num_gpus"},
      {"gpus per node negative", [](R& r) { r.mutable_cluster()->set_gpus_per_node(-1); }, kBad,
       "cluster.gpus_per_node"},
      {"intra bandwidth negative",
       [](R& r) { r.mutable_cluster()->set_intra_node_bandwidth_bytes_per_s(-1); }, kBad,
       "cluster.intra_node_bandwidth"},
      {"intra bandwidth NaN",
       [](R& r) { r.mutable_cluster()->set_intra_node_bandwidth_bytes_per_s(kNan); }, kBad,
       "cluster.intra_node_bandwidth"},
      {"inter bandwidth infinite",
       [](R& r) { r.mutable_cluster()->set_inter_node_bandwidth_bytes_per_s(kInf); }, kBad,
       "cluster.inter_node_bandwidth"},
      {"price negative", [](R& r) { r.mutable_cluster()->set_price_usd_per_gpu_hour(-2); }, kBad,
       "cluster.price_usd_per_gpu_hour"},
      {"price NaN", [](R& r) { r.mutable_cluster()->set_price_usd_per_gpu_hour(kNan); }, kBad,
       "cluster.price_usd_per_gpu_hour"},
      {"failure rate negative",
       [](R& r) {
         r.mutable_cluster()->mutable_reliability()->set_node_failures_per_1000_node_days(-1);
       },
       kBad, "cluster.reliability.node_failures_per_1000_node_days=-1"},
      {"checkpoint bandwidth zero",
       [](R& r) { r.mutable_cluster()->mutable_reliability()->set_checkpoint_gbps(0); }, kBad,
       "cluster.reliability.checkpoint_gbps=0"},
      {"restart NaN",
       [](R& r) { r.mutable_cluster()->mutable_reliability()->set_restart_minutes(kNan); }, kBad,
       "cluster.reliability.restart_minutes"},
      {"checkpoint interval infinite",
       [](R& r) { r.mutable_cluster()->mutable_reliability()->set_checkpoint_interval_s(kInf); },
       kBad, "cluster.reliability.checkpoint_interval_s"},
      {"tp negative", [](R& r) { r.mutable_plan()->set_tensor_parallel(-2); }, kBad,
       "plan.tensor_parallel"},
      {"tp not dividing heads",
       [](R& r) {
         r.mutable_plan()->set_tensor_parallel(3);
         r.mutable_cluster()->set_num_gpus(3);
       },
       kBad, "plan.tensor_parallel"},
      {"dp negative", [](R& r) { r.mutable_plan()->set_data_parallel(-1); }, kBad,
       "plan.data_parallel"},
      {"pp deeper than the layers",
       [](R& r) {
         r.mutable_plan()->set_pipeline_parallel(32);
         r.mutable_cluster()->set_num_gpus(32);
       },
       kBad, "plan.pipeline_parallel"},
      {"layout missing a layer",
       [](R& r) {
         r.mutable_plan()->set_pipeline_parallel(2);
         r.mutable_plan()->set_pipeline_layout("Et*12|t*11L");
       },
       kBad, "plan.pipeline_layout holds 23 decoder layers"},
      {"layout unknown token",
       [](R& r) {
         r.mutable_plan()->set_pipeline_parallel(2);
         r.mutable_plan()->set_pipeline_layout("Et*12|x*12L");
       },
       kBad, "unknown token 'x'"},
      {"first stage layers zero", [](R& r) { r.mutable_plan()->set_first_stage_layers(0); }, kBad,
       "plan.first_stage_layers=0"},
      {"micro batch negative", [](R& r) { r.mutable_plan()->set_micro_batch(-1); }, kBad,
       "plan.micro_batch"},
      {"micro batch not dividing", [](R& r) { r.mutable_plan()->set_micro_batch(3); }, kBad,
       "plan.micro_batch"},
      {"no global batch", [](R& r) { r.mutable_plan()->set_global_batch(0); }, kBad,
       "plan.global_batch"},
      {"global batch negative", [](R& r) { r.mutable_plan()->set_global_batch(-64); }, kBad,
       "plan.global_batch"},
      {"global batch not divisible by dp", [](R& r) { r.mutable_plan()->set_global_batch(66); },
       kBad, "plan.global_batch"},
      {"schedule unknown",
       [](R& r) { r.mutable_plan()->set_schedule(static_cast<v1::PipelineSchedule>(9)); }, kBad,
       "plan.schedule"},
      {"recompute unknown",
       [](R& r) { r.mutable_plan()->set_recompute(static_cast<v1::Recompute>(9)); }, kBad,
       "plan.recompute"},
      {"dtype unknown", [](R& r) { r.mutable_plan()->set_dtype(static_cast<v1::DType>(9)); }, kBad,
       "plan.dtype"},
      {"bucket negative", [](R& r) { r.mutable_plan()->set_bucket_size_bytes(-1); }, kBad,
       "plan.bucket_size_bytes"},
      {"granularity unknown", [](R& r) { r.set_granularity(static_cast<v1::Granularity>(7)); },
       kBad, "granularity"},
      {"tokens negative", [](R& r) { r.set_train_tokens(-1); }, kBad, "train_tokens"},
      {"tokens NaN", [](R& r) { r.set_train_tokens(kNan); }, kBad, "train_tokens"},
      {"tokens infinite", [](R& r) { r.set_train_tokens(kInf); }, kBad, "train_tokens"},
      {"unknown profile set", [](R& r) { r.set_profile_set_id("sha256:nope"); }, kAbsent,
       "profile_set_id"},
      {"kernel graph over the limits",
       [](R& r) {
         r.set_granularity(v1::GRANULARITY_KERNEL);
         r.mutable_plan()->set_global_batch(1 << 22);
       },
       kTooBig, "max_tasks"},
      {"weights far over a GPU",
       [](R& r) {
         r.mutable_model()->set_num_layers(100'000);
         r.mutable_model()->set_hidden_size(65536);
         r.mutable_model()->set_num_heads(512);
       },
       kTooBig, "parameters per GPU"},
      {"message over the limit", [](R& r) { r.set_profile_set_id(std::string(80'000, 'x')); },
       kTooBig, "--max-message-bytes"},
      // Launch scripts and framework configs are read, never run (issue 46).
      // Garbage stays valid UTF-8: proto3 strings refuse anything else on
      // the wire, before vtrain sees it.
      {"launch with a command substitution",
       [](R& r) {
         r.set_megatron_args("torchrun pretrain_gpt.py --num-layers $(touch /tmp/vtrain-pwned)");
       },
       kBad, "--num-layers"},
      {"launch of binary garbage",
       [](R& r) { r.set_megatron_args("torchrun\0\x01\x7f pretrain_gpt.py"s); }, kBad, "NUL byte"},
      {"launch and bridge config both",
       [](R& r) {
         r.set_megatron_args("torchrun pretrain_gpt.py --num-layers 2");
         r.set_megatron_bridge_config("model:\n  num_layers: 2\n");
       },
       kBad, "both set"},
      {"bridge config nested 100 deep",
       [](R& r) {
         r.set_megatron_bridge_config("a: " + std::string(100, '[') + std::string(100, ']'));
       },
       kBad, "nested deeper than 64 levels"},
      {"bridge config alias bomb",
       [](R& r) {
         std::string yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
         for (int i = 1; i < 9; ++i) {
           absl::StrAppend(&yaml, "a", i, ": &a", i, " [");
           for (int k = 0; k < 10; ++k) absl::StrAppend(&yaml, k ? ", " : "", "*a", i - 1);
           absl::StrAppend(&yaml, "]\n");
         }
         r.set_megatron_bridge_config(yaml);
       },
       kBad, "more than 1000000 nodes"},
      {"bridge config naming a Python object",
       [](R& r) {
         r.set_megatron_bridge_config(
             "model: !!python/object/apply:os.system [\"touch /tmp/vtrain-pwned\"]\n");
       },
       kBad, "is not read"},
      {"bridge config of binary garbage",
       [](R& r) { r.set_megatron_bridge_config("\x01\x02\0\x7f{["s); }, kBad,
       "megatron_bridge_config"},
  };
}

std::vector<Case<v1::SearchRequest>> SearchCases() {
  using R = v1::SearchRequest;
  return {
      {"no model", [](R& r) { r.clear_model(); }, kBad, "model"},
      {"unknown preset", [](R& r) { r.mutable_model()->set_preset("nope"); }, kBad, "model.preset"},
      {"unknown gpu", [](R& r) { r.mutable_cluster()->set_gpu("nope"); }, kBad, "cluster.gpu"},
      {"no global batch", [](R& r) { r.set_global_batch(0); }, kBad, "global_batch"},
      {"negative global batch", [](R& r) { r.set_global_batch(-5); }, kBad, "global_batch"},
      {"no gpus", [](R& r) { r.set_max_gpus(0); }, kBad, "max_gpus"},
      {"negative gpus", [](R& r) { r.set_gpus(-8); }, kBad, "gpus"},
      {"gpus huge", [](R& r) { r.set_max_gpus(int64_t{1} << 40); }, kBad, "max_gpus"},
      {"tp zero", [](R& r) { r.mutable_space()->add_tensor_parallel(0); }, kBad, "tensor_parallel"},
      {"tp huge", [](R& r) { r.mutable_space()->add_tensor_parallel(5000); }, kBad,
       "tensor_parallel"},
      {"too many tp values",
       [](R& r) {
         for (int t = 1; t <= 100; ++t) r.mutable_space()->add_tensor_parallel(t);
       },
       kBad, "distinct values"},
      {"negative max dp", [](R& r) { r.mutable_space()->set_max_data_parallel(-1); }, kBad,
       "max_data_parallel"},
      {"negative max micro batch", [](R& r) { r.mutable_space()->set_max_micro_batch(-1); }, kBad,
       "max_micro_batch"},
      {"schedule unknown",
       [](R& r) { r.mutable_space()->add_schedules(static_cast<v1::PipelineSchedule>(8)); }, kBad,
       "schedules[0]"},
      {"recompute unknown",
       [](R& r) { r.mutable_space()->add_recomputes(static_cast<v1::Recompute>(8)); }, kBad,
       "recomputes[0]"},
      {"dtype unknown", [](R& r) { r.set_dtype(static_cast<v1::DType>(8)); }, kBad, "dtype"},
      {"tokens negative", [](R& r) { r.set_train_tokens(-3); }, kBad, "train_tokens"},
      {"tokens NaN", [](R& r) { r.set_train_tokens(kNan); }, kBad, "train_tokens"},
      {"objective unknown", [](R& r) { r.set_objective(static_cast<v1::Objective>(42)); }, kBad,
       "objective"},
      {"deadline negative", [](R& r) { r.set_deadline_days(-1); }, kBad, "deadline_days"},
      {"deadline infinite", [](R& r) { r.set_deadline_days(kInf); }, kBad, "deadline_days"},
      {"top negative", [](R& r) { r.set_top(-1); }, kBad, "top"},
      {"top huge", [](R& r) { r.set_top(5000); }, kBad, "top"},
      {"price negative", [](R& r) { r.mutable_cluster()->set_price_usd_per_gpu_hour(-1); }, kBad,
       "price_usd_per_gpu_hour"},
      {"gpus per node huge", [](R& r) { r.mutable_cluster()->set_gpus_per_node(5000); }, kBad,
       "gpus_per_node"},
  };
}

std::vector<Case<v1::ThroughputCurveRequest>> CurveCases() {
  using R = v1::ThroughputCurveRequest;
  return {
      {"no jobs", [](R& r) { r.clear_jobs(); }, kBad, "jobs"},
      {"too many jobs",
       [](R& r) {
         for (int i = 0; i < 70; ++i) *r.add_jobs() = r.jobs(0);
       },
       kBad, "jobs"},
      {"no counts", [](R& r) { r.clear_gpu_counts(); }, kBad, "gpu_counts"},
      {"zero count", [](R& r) { r.add_gpu_counts(0); }, kBad, "gpu_counts"},
      {"too many points",
       [](R& r) {
         r.clear_gpu_counts();
         r.set_max_gpus(1 << 20);
         r.set_step(1);
       },
       kBad, "at most 1024"},
      {"negative step",
       [](R& r) {
         r.clear_gpu_counts();
         r.set_max_gpus(64);
         r.set_step(-8);
       },
       kBad, "max_gpus"},
      {"policy unknown", [](R& r) { r.set_policy(static_cast<v1::CurvePolicy>(9)); }, kBad,
       "policy"},
      {"unknown preset", [](R& r) { r.mutable_jobs(0)->mutable_model()->set_preset("nope"); }, kBad,
       "jobs[0].model.preset"},
      {"unknown gpu", [](R& r) { r.mutable_jobs(0)->mutable_cluster()->set_gpu("nope"); }, kBad,
       "jobs[0].cluster.gpu"},
      {"no global batch", [](R& r) { r.mutable_jobs(0)->set_global_batch(0); }, kBad,
       "jobs[0].global_batch"},
      {"dtype unknown", [](R& r) { r.mutable_jobs(0)->set_dtype(static_cast<v1::DType>(9)); }, kBad,
       "jobs[0].dtype"},
      {"tp zero", [](R& r) { r.mutable_space()->add_tensor_parallel(0); }, kBad, "tensor_parallel"},
      {"negative max micro batch", [](R& r) { r.mutable_space()->set_max_micro_batch(-1); }, kBad,
       "max_micro_batch"},
      {"schedule unknown",
       [](R& r) { r.mutable_space()->add_schedules(static_cast<v1::PipelineSchedule>(9)); }, kBad,
       "schedules[0]"},
  };
}

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.db_path = dir_.File("bad.db");
    o.push_token = kToken;
    o.max_message_bytes = 64 << 10;
    o.max_tasks = 5'000'000;
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    sim_ = v1::Simulator::NewStub(ChannelTo(*server_));
    reg_ = v1::ProfileRegistry::NewStub(ChannelTo(*server_));
  }

  int StoredSets() {
    v1::ListProfileSetsResponse list;
    EXPECT_TRUE(reg_->ListProfileSets(Ctx().get(), {}, &list).ok());
    return list.profile_sets_size();
  }

  TempDir dir_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<v1::Simulator::Stub> sim_;
  std::unique_ptr<v1::ProfileRegistry::Stub> reg_;
};

TEST_F(BadInputTest, EveryBadRpcGetsItsSpecificErrorAndNothingIsStored) {
  const int stored = StoredSets();
  int checked = 0;
  std::remove("/tmp/vtrain-pwned");
  for (const auto& c : PredictCases()) {
    v1::PredictRequest r = Gpt13bRequest();
    c.mutate(r);
    v1::PredictResponse resp;
    grpc::Status s = sim_->Predict(Ctx().get(), r, &resp);
    EXPECT_EQ(s.error_code(), c.code) << "Predict, " << c.name << ": " << s.error_message();
    EXPECT_NE(s.error_message().find(c.says), std::string::npos)
        << "Predict, " << c.name << ": " << s.error_message();
    ++checked;
  }
  // The launch and config cases that name a command: nothing ran it.
  EXPECT_FALSE(std::ifstream("/tmp/vtrain-pwned").good());
  for (const auto& c : SearchCases()) {
    v1::SearchRequest r;
    r.mutable_model()->set_preset("gpt3-1.3b");
    r.set_global_batch(64);
    r.set_max_gpus(16);
    c.mutate(r);
    auto ctx = Ctx();
    auto reader = sim_->Search(ctx.get(), r);
    v1::SearchResponse msg;
    while (reader->Read(&msg)) {
    }
    grpc::Status s = reader->Finish();
    EXPECT_EQ(s.error_code(), c.code) << "Search, " << c.name << ": " << s.error_message();
    EXPECT_NE(s.error_message().find(c.says), std::string::npos)
        << "Search, " << c.name << ": " << s.error_message();
    ++checked;
  }
  for (const auto& c : PushCases()) {
    v1::PushProfileSetRequest push;
    *push.mutable_profile_set() = MeasuredSet(90'000);
    c.mutate(*push.mutable_profile_set());
    v1::PushProfileSetResponse resp;
    grpc::Status s = reg_->PushProfileSet(Ctx(kToken).get(), push, &resp);
    EXPECT_EQ(s.error_code(), c.code) << "Push, " << c.name << ": " << s.error_message();
    EXPECT_NE(s.error_message().find(c.says), std::string::npos)
        << "Push, " << c.name << ": " << s.error_message();
    ++checked;
  }
  for (const auto& c : CurveCases()) {
    v1::ThroughputCurveRequest r;
    v1::CurveJob* job = r.add_jobs();
    job->mutable_model()->set_preset("gpt3-1.3b");
    job->set_global_batch(64);
    r.add_gpu_counts(8);
    c.mutate(r);
    v1::ThroughputCurveResponse resp;
    grpc::Status s = sim_->ThroughputCurve(Ctx().get(), r, &resp);
    EXPECT_EQ(s.error_code(), c.code) << "Curve, " << c.name << ": " << s.error_message();
    EXPECT_NE(s.error_message().find(c.says), std::string::npos)
        << "Curve, " << c.name << ": " << s.error_message();
    ++checked;
  }
  // The registry's other methods.
  v1::NextProfilingWorkRequest work;
  v1::NextProfilingWorkResponse work_resp;
  for (int items : {-1, 10'001}) {
    work.set_max_items(items);
    EXPECT_EQ(reg_->NextProfilingWork(Ctx().get(), work, &work_resp).error_code(), kBad) << items;
    ++checked;
  }
  v1::GetProfileSetRequest get;
  get.set_id("sha256:absent");
  v1::ProfileSet set;
  EXPECT_EQ(reg_->GetProfileSet(Ctx().get(), get, &set).error_code(), kAbsent);
  v1::DeleteProfileSetRequest del;
  del.set_id("sha256:absent");
  v1::DeleteProfileSetResponse del_resp;
  EXPECT_EQ(reg_->DeleteProfileSet(Ctx(kToken).get(), del, &del_resp).error_code(), kAbsent);
  checked += 2;

  EXPECT_GE(checked, 100);
  EXPECT_EQ(StoredSets(), stored) << "a refused push was stored";
}

}  // namespace
}  // namespace vtrain::server
