#include "proto/convert.h"

#include "core/profile/default_profiles.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/sha256.h"
#include "tests/testing/spec_builders.h"

namespace vtrain::proto {
namespace {

TEST(Sha256Test, FipsExamples) {
  // FIPS 180-2 Appendix B.1 and B.2, and the empty string.
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(ConvertTest, JobRoundTripsThroughTheRequest) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Job job = testing::RandomSmallJob(seed);
    if (!ValidateJob(job).ok()) continue;
    absl::StatusOr<Job> back = JobFromProto(JobToProto(job));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->model.num_layers, job.model.num_layers);
    EXPECT_EQ(back->model.hidden_size, job.model.hidden_size);
    EXPECT_EQ(back->plan.tensor_parallel, job.plan.tensor_parallel);
    EXPECT_EQ(back->plan.data_parallel, job.plan.data_parallel);
    EXPECT_EQ(back->plan.pipeline_parallel, job.plan.pipeline_parallel);
    EXPECT_EQ(back->plan.schedule, job.plan.schedule);
    EXPECT_EQ(back->plan.recompute, job.plan.recompute);
    EXPECT_EQ(back->model.attention_impl, job.model.attention_impl);
    EXPECT_EQ(back->cluster.num_gpus, job.cluster.num_gpus);
    EXPECT_EQ(back->cluster.gpu.name, job.cluster.gpu.name);
  }
}

TEST(ConvertTest, FabricRoundTripsAndUnknownPlacementsAreRefused) {
  Job job = testing::Gpt13bJob();
  job.cluster.fabric.nodes_per_leaf = 4;
  job.cluster.fabric.oversubscription = 2.5;
  job.cluster.fabric.placement = Placement::kSpread;
  job.cluster.fabric.cluster_nodes = 64;
  v1::PredictRequest r = JobToProto(job);
  absl::StatusOr<Job> back = JobFromProto(r);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->cluster.fabric.nodes_per_leaf, 4);
  EXPECT_EQ(back->cluster.fabric.oversubscription, 2.5);
  EXPECT_EQ(back->cluster.fabric.placement, Placement::kSpread);
  EXPECT_EQ(back->cluster.fabric.cluster_nodes, 64);
  // A flat fabric leaves the message out.
  EXPECT_FALSE(JobToProto(testing::Gpt13bJob()).cluster().has_fabric());
  r.mutable_cluster()->mutable_fabric()->set_placement(static_cast<v1::Placement>(7));
  back = JobFromProto(r);
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("cluster.fabric.placement"), std::string::npos);
}

TEST(ConvertTest, DefaultsAndFieldPathsInErrors) {
  v1::PredictRequest r;
  r.mutable_model()->set_preset("gpt3-1.3b");
  r.mutable_cluster()->set_num_gpus(8);
  r.mutable_plan()->set_global_batch(64);
  absl::StatusOr<Job> job = JobFromProto(r);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->plan.data_parallel, 8);
  EXPECT_EQ(job->cluster.gpu.name, "a100-sxm4-80gb");
  r.mutable_plan()->set_tensor_parallel(5);
  r.mutable_cluster()->set_num_gpus(10);
  job = JobFromProto(r);
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(job.status().message().find("plan.tensor_parallel"), std::string::npos);
}

TEST(ConvertTest, LlamaModelsAndFp8ConvertAndValidate) {
  v1::PredictRequest r;
  r.mutable_model()->set_preset("llama3-70b");
  r.mutable_cluster()->set_gpu("h100-sxm5-80gb");
  r.mutable_cluster()->set_num_gpus(64);
  r.mutable_plan()->set_tensor_parallel(8);
  r.mutable_plan()->set_pipeline_parallel(4);
  r.mutable_plan()->set_global_batch(128);
  r.mutable_plan()->set_dtype(v1::DTYPE_FP8);
  absl::StatusOr<Job> job = JobFromProto(r);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->model.arch, Architecture::kLlama);
  EXPECT_EQ(job->model.kv_heads(), 8);
  EXPECT_EQ(job->plan.dtype, DType::kFp8);
  // Back to a request and again: the same model.
  absl::StatusOr<Job> back = JobFromProto(JobToProto(*job));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->model.arch, Architecture::kLlama);
  EXPECT_EQ(back->model.kv_heads(), 8);
  EXPECT_EQ(back->model.ffn(), 28672);
  EXPECT_EQ(back->model.vocab_size, 128256);

  // A custom Llama from fields, then the rules: t divides the KV heads.
  v1::PredictRequest custom;
  custom.mutable_model()->set_num_layers(4);
  custom.mutable_model()->set_hidden_size(1024);
  custom.mutable_model()->set_num_heads(16);
  custom.mutable_model()->set_seq_len(512);
  custom.mutable_model()->set_arch(v1::ARCHITECTURE_LLAMA);
  custom.mutable_model()->set_num_kv_heads(4);
  custom.mutable_cluster()->set_num_gpus(8);
  custom.mutable_plan()->set_tensor_parallel(8);
  custom.mutable_plan()->set_global_batch(8);
  job = JobFromProto(custom);
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.status().message().find("does not divide model.num_kv_heads=4"), std::string::npos)
      << job.status();
  custom.mutable_plan()->set_tensor_parallel(4);
  job = JobFromProto(custom);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->model.arch, Architecture::kLlama);
  // An architecture number this build does not know names the field.
  custom.mutable_model()->set_arch(static_cast<v1::Architecture>(77));
  job = JobFromProto(custom);
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.status().message().find("model.arch"), std::string::npos) << job.status();
  custom.mutable_model()->set_arch(v1::ARCHITECTURE_LLAMA);
  custom.mutable_model()->set_attention_impl(static_cast<v1::AttentionImpl>(9));
  job = JobFromProto(custom);
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.status().message().find("model.attention_impl"), std::string::npos) << job.status();
  custom.mutable_model()->set_attention_impl(v1::ATTENTION_IMPL_UNFUSED);
  job = JobFromProto(custom);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->model.attention_impl, AttentionImpl::kUnfused);
}

TEST(ConvertTest, NewPlanFieldsRoundTripAndDeriveTheDataParallelDegree) {
  v1::PredictRequest r;
  r.mutable_model()->set_preset("gpt3-1.3b");
  r.mutable_cluster()->set_num_gpus(32);
  v1::ParallelPlan* p = r.mutable_plan();
  p->set_global_batch(64);
  p->set_tensor_parallel(2);
  p->set_pipeline_parallel(4);
  p->set_context_parallel(2);
  p->set_virtual_stages(2);
  p->set_sequence_parallel(true);
  p->set_recompute(v1::RECOMPUTE_SELECTIVE);
  p->set_data_parallel_sharding(v1::DATA_PARALLEL_SHARDING_OPTIMIZER);
  absl::StatusOr<Job> job = JobFromProto(r);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->plan.data_parallel, 2);  // 32 / (2 * 4 * 2)
  EXPECT_EQ(job->plan.context_parallel, 2);
  EXPECT_EQ(job->plan.virtual_stages, 2);
  EXPECT_TRUE(job->plan.sequence_parallel);
  EXPECT_EQ(job->plan.recompute, Recompute::kSelective);
  EXPECT_EQ(job->plan.data_parallel_sharding, DataParallelSharding::kOptimizer);
  absl::StatusOr<Job> back = JobFromProto(JobToProto(*job));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->plan.context_parallel, 2);
  EXPECT_EQ(back->plan.virtual_stages, 2);
  EXPECT_TRUE(back->plan.sequence_parallel);
  EXPECT_EQ(back->plan.data_parallel_sharding, DataParallelSharding::kOptimizer);
  // Unset fields take their defaults; a GPU count t * p * c does not divide
  // is refused naming --cp.
  v1::PredictRequest plain;
  plain.mutable_model()->set_preset("gpt3-1.3b");
  plain.mutable_cluster()->set_num_gpus(8);
  plain.mutable_plan()->set_global_batch(64);
  job = JobFromProto(plain);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->plan.context_parallel, 1);
  EXPECT_EQ(job->plan.virtual_stages, 1);
  // The tuned settings' distributed optimizer; Megatron-LM's defaults have none.
  EXPECT_EQ(job->plan.data_parallel_sharding, DataParallelSharding::kOptimizer);
  plain.mutable_plan()->set_settings(v1::SETTINGS_MEGATRON_DEFAULTS);
  job = JobFromProto(plain);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->plan.data_parallel_sharding, DataParallelSharding::kNone);
  plain.mutable_plan()->set_context_parallel(3);
  EXPECT_THAT(JobFromProto(plain).status().message(), ::testing::HasSubstr("--cp"));
}

TEST(ConvertTest, PredictionRoundTripKeepsTheNumbers) {
  Job job = testing::Gpt13bJob();
  absl::StatusOr<Prediction> p = Predict(job, DefaultProfileSet(job.cluster.gpu));
  ASSERT_TRUE(p.ok());
  v1::PredictResponse r;
  PredictionToProto(job, *p, &r);
  Prediction back = PredictionFromProto(r);
  EXPECT_EQ(back.iteration_time_ns, p->iteration_time_ns);
  ASSERT_EQ(back.stages.size(), p->stages.size());
  for (size_t s = 0; s < back.stages.size(); ++s) {
    EXPECT_EQ(back.stages[s].compute_ns, p->stages[s].compute_ns);
    EXPECT_EQ(back.stages[s].idle_ns, p->stages[s].idle_ns);
  }
  EXPECT_EQ(back.fidelity.missing_keys, p->fidelity.missing_keys);
}

TEST(ConvertTest, ProfileSetRoundTripAndContentId) {
  ProfileSet set = DefaultProfileSet(*GpuByName("h100-sxm5-80gb"));
  OperatorProfile op;
  op.kernels = {{"gemm", 1000, 10, 0}, {"softmax", 200, 5, 0}};
  set.operators.emplace(MakeOperatorKey("h100-sxm5-80gb", DType::kBf16, OperatorKind::kMlpFwd, 4096,
                                        32, 16384, 2048, 2, 4, 0, 0),
                        op);
  const OperatorKey llama =
      MakeOperatorKey("h100-sxm5-80gb", DType::kFp8, OperatorKind::kAttentionFwd, 4096, 32, 0, 8192,
                      1, 2, 0, 0, Architecture::kLlama, 8);
  set.operators.emplace(llama, op);
  set.collectives.insert_or_assign(
      CollectiveKey{"h100-sxm5-80gb", LinkScope::kIntraNode, Collective::kAllReduce, 8},
      *CollectiveCurve::Create({{1e6, 5e4}, {1e8, 6e5}}));
  v1::ProfileSet proto = ProfileSetToProto(set);
  absl::StatusOr<ProfileSet> back = ProfileSetFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->operators.size(), 2u);
  EXPECT_EQ(back->operators.begin()->second.kernels[1].duration_ns, 200);
  EXPECT_EQ(back->operators.count(llama), 1u);  // arch, kv_heads and fp8 survive
  EXPECT_EQ(back->collectives.size(), 1u);
  EXPECT_EQ(back->params.host_dispatch_ns, set.params.host_dispatch_ns);

  // The id ignores id and created_at, and changes with the content.
  const std::string id = ContentId(proto);
  v1::ProfileSet stamped = proto;
  stamped.set_id("whatever");
  stamped.mutable_created_at()->set_seconds(12345);
  EXPECT_EQ(ContentId(stamped), id);
  stamped.mutable_operators(0)->mutable_kernels(0)->set_duration_ns(1001);
  EXPECT_NE(ContentId(stamped), id);

  // JSON round trip.
  const std::string json = ToJson(proto);
  v1::ProfileSet parsed;
  ASSERT_TRUE(FromJson(json, &parsed).ok()) << json;
  EXPECT_EQ(ContentId(parsed), id);
  EXPECT_FALSE(FromJson("{\"gpu\": 3, \"bogus\": 1}", &parsed).ok());
}

TEST(ConvertTest, InvalidProfileSetsNameTheField) {
  v1::ProfileSet set;
  EXPECT_NE(ProfileSetFromProto(set).status().message().find("profile_set.gpu"), std::string::npos);
  set.set_gpu("a100-sxm4-80gb");
  v1::CollectiveCurve* c = set.add_collectives();
  c->set_collective(v1::COLLECTIVE_ALL_REDUCE);
  c->set_scope(v1::LINK_SCOPE_INTRA_NODE);
  c->set_ranks(4);
  c->add_points()->set_bytes(-1);
  absl::Status s = ProfileSetFromProto(set).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("collectives[0].points"), std::string::npos) << s;
}

}  // namespace
}  // namespace vtrain::proto

namespace vtrain::proto {
namespace {

// Core's parameter table and the AnalyticalParams message name the same
// fields, so one table serves both directions.
TEST(ConvertTest, EveryAnalyticalParameterHasItsProtoField) {
  const google::protobuf::Descriptor& d = *v1::AnalyticalParams::descriptor();
  EXPECT_EQ(static_cast<size_t>(d.field_count()), AnalyticalParamInfos().size());
  for (const ParamInfo& info : AnalyticalParamInfos()) {
    const google::protobuf::FieldDescriptor* f = d.FindFieldByName(info.name);
    ASSERT_NE(f, nullptr) << info.name;
    EXPECT_TRUE(f->has_presence())
        << info.name << " must be optional (a missing value takes its default)";
  }
}

TEST(ConvertTest, MissingParametersTakeTheirDefaults) {
  v1::ProfileSet in;
  in.set_gpu("a100-sxm4-80gb");
  in.mutable_params()->set_host_dispatch_ns(1234);
  absl::StatusOr<ProfileSet> set = ProfileSetFromProto(in);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->params.host_dispatch_ns, 1234);
  EXPECT_EQ(set->params.gemm_max_efficiency, DefaultAnalyticalParams().gemm_max_efficiency);
  in.mutable_params()->set_memory_efficiency(7);
  EXPECT_NE(ProfileSetFromProto(in).status().message().find("params.memory_efficiency=7"),
            std::string::npos);
}

}  // namespace
}  // namespace vtrain::proto
