// Explicit presence in vtrain.v1 requests (a given 0 is refused, naming the
// field; a missing field takes its default) and the strict reading of vTrain
// configurations (unknown keys, wrong types and repeated keys refused).
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/job_convert.h"
#include "proto/json.h"
#include "proto/vtrain_config.h"
#include "tests/testing/status_matchers.h"

namespace vtrain::proto {
namespace {

using ::testing::HasSubstr;
using ::vtrain::testing::StatusIs;

v1::PredictRequest Minimal() {
  v1::PredictRequest r;
  r.mutable_model()->set_preset("gpt3-1.3b");
  r.mutable_cluster()->set_num_gpus(8);
  r.mutable_plan()->set_global_batch(64);
  return r;
}

TEST(PresenceTest, MissingFieldsTakeTheirDefaults) {
  absl::StatusOr<Job> job = JobFromProto(Minimal());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->plan.tensor_parallel, 1);
  EXPECT_EQ(job->plan.pipeline_parallel, 1);
  EXPECT_EQ(job->plan.micro_batch, 1);
  EXPECT_EQ(job->plan.data_parallel, 8);
  EXPECT_EQ(job->cluster.gpus_per_node, 8);
}

TEST(PresenceTest, EveryGivenZeroIsRefusedNamingItsField) {
  struct Case {
    void (*zero)(v1::PredictRequest&);
    const char* field;
  };
  const Case cases[] = {
      {[](v1::PredictRequest& r) { r.mutable_plan()->set_tensor_parallel(0); },
       "plan.tensor_parallel=0"},
      {[](v1::PredictRequest& r) { r.mutable_plan()->set_data_parallel(0); },
       "plan.data_parallel=0"},
      {[](v1::PredictRequest& r) { r.mutable_plan()->set_pipeline_parallel(0); },
       "plan.pipeline_parallel=0"},
      {[](v1::PredictRequest& r) { r.mutable_plan()->set_micro_batch(0); }, "plan.micro_batch=0"},
      {[](v1::PredictRequest& r) { r.mutable_plan()->set_global_batch(0); },
       "plan.global_batch=0 (--global-batch) must be at least 1"},
      {[](v1::PredictRequest& r) { r.mutable_plan()->set_context_parallel(0); },
       "plan.context_parallel=0"},
      {[](v1::PredictRequest& r) { r.mutable_plan()->set_virtual_stages(0); },
       "plan.virtual_stages=0"},
      {[](v1::PredictRequest& r) { r.mutable_plan()->set_bucket_size_bytes(0); },
       "plan.bucket_size_bytes=0"},
      {[](v1::PredictRequest& r) { r.mutable_cluster()->set_num_gpus(0); }, "cluster.num_gpus=0"},
      {[](v1::PredictRequest& r) { r.mutable_cluster()->set_gpus_per_node(0); },
       "cluster.gpus_per_node=0"},
      {[](v1::PredictRequest& r) { r.mutable_cluster()->set_intra_node_bandwidth_bytes_per_s(0); },
       "cluster.intra_node_bandwidth_bytes_per_s=0"},
      {[](v1::PredictRequest& r) { r.mutable_model()->set_seq_len(0); }, "model.seq_len=0"},
      {[](v1::PredictRequest& r) { r.mutable_model()->set_num_layers(-2); }, "model.num_layers=-2"},
      {[](v1::PredictRequest& r) { r.mutable_model()->set_num_kv_heads(0); },
       "model.num_kv_heads=0"},
  };
  for (const Case& c : cases) {
    v1::PredictRequest r = Minimal();
    c.zero(r);
    EXPECT_THAT(JobFromProto(r), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.field)))
        << c.field;
  }
}

TEST(PresenceTest, AJsonZeroIsTellableFromAMissingField) {
  v1::PredictRequest r;
  VTRAIN_ASSERT_OK(FromJson(R"({"model": {"preset": "gpt3-1.3b"}, "cluster": {"num_gpus": 8},
                               "plan": {"global_batch": 64, "tensor_parallel": 0}})",
                            &r));
  EXPECT_TRUE(r.plan().has_tensor_parallel());
  EXPECT_FALSE(r.plan().has_pipeline_parallel());
  EXPECT_THAT(JobFromProto(r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("plan.tensor_parallel=0")));
  // Printed back, only what was given appears.
  const std::string json = ToJson(r);
  EXPECT_THAT(json, HasSubstr("\"tensor_parallel\": 0"));
  EXPECT_THAT(json, ::testing::Not(HasSubstr("pipeline_parallel")));
}

constexpr char kConfigBase[] =
    R"("num_gpus": 8, "tensor_parallel_size": 1, "data_parallel_size": 8,
       "pipeline_parallel_size": 1, "global_batch_size": 64, "micro_batch_size": 1,
       "num_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "max_length": 128)";

std::string Config(const std::string& extra) {
  return std::string("{") + kConfigBase + extra + "}";
}

TEST(VtrainConfigTest, VtrainsOwnKeysAndNullsAreAccepted) {
  // vTrain writes None as null and keeps model_arch and trace_path.
  absl::StatusOr<v1::PredictRequest> r = RequestFromVtrainConfig(
      Config(R"(, "vocab_size": null, "ddp_bucket_size": null, "model_arch": "ShardedGptModel",
               "trace_path": "trace/", "use_checkpoint": false, "gpu_name": "A100")"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->model().has_vocab_size());
  EXPECT_FALSE(r->plan().has_bucket_size_bytes());
  EXPECT_EQ(r->plan().recompute(), v1::RECOMPUTE_NONE);
  EXPECT_EQ(r->cluster().gpu(), "a100-sxm4-80gb");
  VTRAIN_EXPECT_OK(JobFromProto(*r).status());
}

TEST(VtrainConfigTest, UnknownKeysWrongTypesAndRepeatsAreRefused) {
  EXPECT_THAT(
      RequestFromVtrainConfig(Config(R"(, "micro_batch_sizee": 2)")),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown key 'micro_batch_sizee'")));
  EXPECT_THAT(RequestFromVtrainConfig(Config(R"(, "use_checkpoint": "false")")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'use_checkpoint' must be true or false, not a string")));
  EXPECT_THAT(RequestFromVtrainConfig(Config(R"(, "pipeline_scheduling": 1)")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'pipeline_scheduling' must be a string, not a number")));
  EXPECT_THAT(
      RequestFromVtrainConfig(Config(R"(, "num_layers": 4)")),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'num_layers' appears twice")));
  EXPECT_THAT(RequestFromVtrainConfig(Config(R"(, "ddp_bucket_size": 0)")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'ddp_bucket_size'")));
}

}  // namespace
}  // namespace vtrain::proto
