// A GPU this build has no datasheet for becomes predictable once a profile
// set carries its figures (profile_set.datasheet): the push is refused
// without them or with any missing, and requests naming the GPU then use the
// pushed figures, over RPC, for predictions, searches and curves.
#include <memory>
#include <string>

#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/convert.h"
#include "tests/server/server_testing.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::server {
namespace {

// AMD Instinct MI300X data sheet (2023): 1,307.4 TFLOPS dense FP16/BF16,
// 2,614.9 TFLOPS dense FP8, 192 GB HBM3 at 5.3 TB/s, 304 compute units,
// Infinity Fabric 128 GB/s per link one way; 8 x 400 Gb/s NICs per node.
GpuSpec Mi300x() {
  GpuSpec g;
  g.name = "mi300x-192gb";
  g.peak_fp16_flops_per_s = 1307.4e12;
  g.peak_bf16_flops_per_s = 1307.4e12;
  g.peak_fp8_flops_per_s = 2614.9e12;
  g.hbm_bandwidth_bytes_per_s = 5.3e12;
  g.memory_bytes = 192'000'000'000;
  g.num_sms = 304;
  g.default_intra_node_bandwidth_bytes_per_s = 128e9;
  g.default_inter_node_bandwidth_bytes_per_s = 400e9;
  return g;
}

// The GPU's built-in-style set (analytical parameters and error bands: a
// complete set), carrying its figures.
v1::ProfileSet SetWithDatasheet(const GpuSpec& gpu) {
  ProfileSet set = DefaultProfileSet(gpu);
  set.id.clear();
  set.datasheet = gpu;
  return proto::ProfileSetToProto(set);
}

v1::PredictRequest Mi300xRequest() {
  v1::PredictRequest r = Gpt13bRequest();
  r.mutable_cluster()->set_gpu("mi300x-192gb");
  return r;
}

absl::StatusOr<GpuSpec> FindMi300x(absl::string_view name) {
  if (name == "mi300x-192gb") return Mi300x();
  return GpuByName(name);
}

TEST(GpuDatasheetTest, APushedDatasheetMakesItsGpuPredictable) {
  TempDir dir;
  auto server = StartServer(dir.File("d.db"));
  ASSERT_NE(server, nullptr);
  auto sim = v1::Simulator::NewStub(ChannelTo(*server));
  auto reg = v1::ProfileRegistry::NewStub(ChannelTo(*server));

  // Before the push the GPU is unknown, and the message says how to add it.
  v1::PredictResponse resp;
  grpc::Status s = sim->Predict(Ctx().get(), Mi300xRequest(), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("cluster.gpu"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("profile_set.datasheet"), std::string::npos);

  v1::PushProfileSetRequest push;
  *push.mutable_profile_set() = SetWithDatasheet(Mi300x());
  v1::PushProfileSetResponse pushed;
  s = reg->PushProfileSet(Ctx(kToken).get(), push, &pushed);
  ASSERT_TRUE(s.ok()) << s.error_message();

  s = sim->Predict(Ctx().get(), Mi300xRequest(), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.profile_set_id(), pushed.id());
  // The same job predicted in-process with the figures and tables: equal.
  absl::StatusOr<Job> job = proto::JobFromProto(Mi300xRequest(), FindMi300x);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->cluster.gpu.memory_bytes, 192'000'000'000);
  absl::StatusOr<Prediction> local = Predict(*job, DefaultProfileSet(Mi300x()), PredictOptions());
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(resp.iteration_time_ns(), local->iteration_time_ns);
  // Faster than the A100 it would otherwise have been taken for.
  v1::PredictResponse a100;
  ASSERT_TRUE(sim->Predict(Ctx().get(), Gpt13bRequest(), &a100).ok());
  EXPECT_LT(resp.iteration_time_ns(), a100.iteration_time_ns());

  v1::SearchRequest search;
  search.mutable_model()->set_preset("gpt3-1.3b");
  search.mutable_cluster()->set_gpu("mi300x-192gb");
  search.set_global_batch(64);
  search.set_max_gpus(16);
  auto ctx = Ctx();
  auto reader = sim->Search(ctx.get(), search);
  v1::SearchResponse msg;
  bool result = false;
  while (reader->Read(&msg)) result = result || msg.has_result();
  s = reader->Finish();
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(result);
}

TEST(GpuDatasheetTest, PushesWithoutEveryFigureAreRefusedAndNotStored) {
  TempDir dir;
  auto server = StartServer(dir.File("r.db"));
  ASSERT_NE(server, nullptr);
  auto reg = v1::ProfileRegistry::NewStub(ChannelTo(*server));
  auto refused = [&](const v1::ProfileSet& set, const std::string& field) {
    v1::PushProfileSetRequest push;
    *push.mutable_profile_set() = set;
    v1::PushProfileSetResponse resp;
    grpc::Status s = reg->PushProfileSet(Ctx(kToken).get(), push, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << field;
    EXPECT_NE(s.error_message().find(field), std::string::npos) << s.error_message();
  };
  v1::ProfileSet none = SetWithDatasheet(Mi300x());
  none.clear_datasheet();
  refused(none, "profile_set.gpu='mi300x-192gb' has no datasheet");
  v1::ProfileSet no_memory = SetWithDatasheet(Mi300x());
  no_memory.mutable_datasheet()->set_memory_bytes(0);
  refused(no_memory, "profile_set.datasheet.memory_bytes is missing");
  v1::ProfileSet absurd = SetWithDatasheet(Mi300x());
  absurd.mutable_datasheet()->set_peak_bf16_flops_per_s(1e30);
  absurd.mutable_datasheet()->set_default_inter_node_bandwidth_bytes_per_s(-1);
  refused(absurd, "profile_set.datasheet.peak_bf16_flops_per_s=1e+30");
  refused(absurd, "default_inter_node_bandwidth_bytes_per_s=-1");
  GpuSpec h100 = *GpuByName("h100-sxm5-80gb");
  refused(SetWithDatasheet(h100), "profile_set.datasheet is given for gpu 'h100-sxm5-80gb'");

  v1::ListProfileSetsResponse list;
  ASSERT_TRUE(reg->ListProfileSets(Ctx().get(), v1::ListProfileSetsRequest(), &list).ok());
  for (const auto& entry : list.profile_sets()) EXPECT_NE(entry.gpu(), "mi300x-192gb");
}

}  // namespace
}  // namespace vtrain::server
