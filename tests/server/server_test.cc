// vtrain-server on 127.0.0.1:0 with a real SQLite file in a temp dir: the
// services in-process (predict, push/list/get/delete, auth, invalid requests,
// concurrency, registry and predictors, a corrupt database, deadlines).
#include "server/server.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/plan/search.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "core/spec/gpu.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/convert.h"
#include "server/profile_store.h"
#include "tests/server/server_testing.h"
#include "tests/testing/subprocess.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::server {
namespace {

namespace fs = std::filesystem;

TEST(ServerTest, PredictRoundTripEqualsInProcessResult) {
  TempDir dir;
  auto server = StartServer(dir.File("a.db"));
  ASSERT_NE(server, nullptr);
  auto stub = v1::Simulator::NewStub(ChannelTo(*server));
  v1::PredictResponse resp;
  grpc::Status s = stub->Predict(Ctx().get(), Gpt13bRequest(), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();

  absl::StatusOr<Job> job = proto::JobFromProto(Gpt13bRequest());
  ASSERT_TRUE(job.ok());
  absl::StatusOr<Prediction> local = Predict(*job, DefaultProfileSet(job->cluster.gpu));
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(resp.iteration_time_ns(), local->iteration_time_ns);
  EXPECT_EQ(resp.stages_size(), 1);
  EXPECT_EQ(resp.fidelity().worst(), v1::FIDELITY_ANALYTICAL);
  EXPECT_GT(resp.fidelity().missing_keys_size(), 0);
  EXPECT_EQ(resp.plan().data_parallel(), 4);
}

TEST(ServerTest, PushListGetDeleteAndIdempotentRepush) {
  TempDir dir;
  auto server = StartServer(dir.File("a.db"));
  ASSERT_NE(server, nullptr);
  auto stub = v1::ProfileRegistry::NewStub(ChannelTo(*server));
  v1::ListProfileSetsResponse before;
  ASSERT_TRUE(stub->ListProfileSets(Ctx().get(), {}, &before).ok());
  // One seeded built-in set per GPU model.
  const int builtin = static_cast<int>(GpuNames().size());
  EXPECT_EQ(before.profile_sets_size(), builtin);

  v1::PushProfileSetRequest push;
  *push.mutable_profile_set() = MeasuredSet(123'000);
  v1::PushProfileSetResponse first, second;
  ASSERT_TRUE(stub->PushProfileSet(Ctx(kToken).get(), push, &first).ok());
  EXPECT_FALSE(first.already_present());
  EXPECT_EQ(first.id(), proto::ContentId(push.profile_set()));
  ASSERT_TRUE(stub->PushProfileSet(Ctx(kToken).get(), push, &second).ok());
  EXPECT_TRUE(second.already_present());
  EXPECT_EQ(second.id(), first.id());

  v1::ListProfileSetsRequest by_gpu;
  by_gpu.set_gpu("a100-sxm4-80gb");
  v1::ListProfileSetsResponse listed;
  ASSERT_TRUE(stub->ListProfileSets(Ctx().get(), by_gpu, &listed).ok());
  EXPECT_EQ(listed.profile_sets_size(), 2);

  v1::GetProfileSetRequest get;
  get.set_id(first.id());
  v1::ProfileSet got;
  ASSERT_TRUE(stub->GetProfileSet(Ctx().get(), get, &got).ok());
  EXPECT_EQ(got.operators(0).kernels(0).duration_ns(), 123'000);

  // A prediction now uses the measured set (the newest for the GPU).
  auto sim = v1::Simulator::NewStub(ChannelTo(*server));
  v1::PredictResponse resp;
  ASSERT_TRUE(sim->Predict(Ctx().get(), Gpt13bRequest(), &resp).ok());
  EXPECT_EQ(resp.profile_set_id(), first.id());
  EXPECT_EQ(resp.fidelity().measured(), 1);

  v1::DeleteProfileSetRequest del;
  del.set_id(first.id());
  v1::DeleteProfileSetResponse deleted;
  ASSERT_TRUE(stub->DeleteProfileSet(Ctx(kToken).get(), del, &deleted).ok());
  EXPECT_TRUE(deleted.deleted());
  EXPECT_EQ(stub->GetProfileSet(Ctx().get(), get, &got).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST(ServerTest, PushWithoutOrWithWrongTokenIsUnauthenticatedAndStoresNothing) {
  TempDir dir;
  {
    auto server = StartServer(dir.File("a.db"));
    ASSERT_NE(server, nullptr);
    auto stub = v1::ProfileRegistry::NewStub(ChannelTo(*server));
    v1::PushProfileSetRequest push;
    *push.mutable_profile_set() = MeasuredSet(5'000);
    v1::PushProfileSetResponse resp;
    EXPECT_EQ(stub->PushProfileSet(Ctx().get(), push, &resp).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(stub->PushProfileSet(Ctx("wrong").get(), push, &resp).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(stub->PushProfileSet(Ctx(std::string(kToken) + "x").get(), push, &resp).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    v1::ListProfileSetsResponse listed;
    ASSERT_TRUE(stub->ListProfileSets(Ctx().get(), {}, &listed).ok());
    EXPECT_EQ(listed.profile_sets_size(), static_cast<int>(GpuNames().size()));
  }
  absl::StatusOr<std::unique_ptr<ProfileStore>> store = ProfileStore::Open(dir.File("a.db"));
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(*(*store)->Count(), static_cast<int64_t>(GpuNames().size()));
}

// An acknowledged push survives a power cut: the store syncs its write-ahead
// log before a commit returns (synchronous=FULL) unless told otherwise.
TEST(ServerTest, TheStoreSyncsEveryCommitByDefault) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<ProfileStore>> full = ProfileStore::Open(dir.File("full.db"));
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(*(*full)->SynchronousForTest(), 2);
  absl::StatusOr<std::unique_ptr<ProfileStore>> normal =
      ProfileStore::Open(dir.File("normal.db"), ProfileStore::Durability::kProcessCrash);
  ASSERT_TRUE(normal.ok()) << normal.status();
  EXPECT_EQ(*(*normal)->SynchronousForTest(), 1);
}

TEST(ServerTest, InvalidRequestsGetTheirSpecificErrors) {
  TempDir dir;
  auto server = StartServer(dir.File("a.db"));
  ASSERT_NE(server, nullptr);
  auto sim = v1::Simulator::NewStub(ChannelTo(*server));
  struct Case {
    const char* name;
    std::function<void(v1::PredictRequest&)> mutate;
    grpc::StatusCode code;
    const char* field;
  };
  const Case cases[] = {
      {"tp does not divide heads",
       [](v1::PredictRequest& r) {
         r.mutable_plan()->set_tensor_parallel(3);
         r.mutable_cluster()->set_num_gpus(6);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "plan.tensor_parallel"},
      {"no global batch", [](v1::PredictRequest& r) { r.mutable_plan()->set_global_batch(0); },
       grpc::StatusCode::INVALID_ARGUMENT, "plan.global_batch"},
      {"negative layers", [](v1::PredictRequest& r) { r.mutable_model()->set_num_layers(-4); },
       grpc::StatusCode::INVALID_ARGUMENT, "model.num_layers"},
      {"unknown preset", [](v1::PredictRequest& r) { r.mutable_model()->set_preset("gpt5"); },
       grpc::StatusCode::INVALID_ARGUMENT, "model.preset"},
      {"unknown gpu", [](v1::PredictRequest& r) { r.mutable_cluster()->set_gpu("tpu"); },
       grpc::StatusCode::INVALID_ARGUMENT, "cluster.gpu"},
      {"gpus not divisible", [](v1::PredictRequest& r) { r.mutable_cluster()->set_num_gpus(7); },
       grpc::StatusCode::INVALID_ARGUMENT, "cluster.num_gpus"},
      {"absurd hidden",
       [](v1::PredictRequest& r) { r.mutable_model()->set_hidden_size(int64_t{1} << 50); },
       grpc::StatusCode::INVALID_ARGUMENT, "model.hidden_size"},
      {"bad bandwidth",
       [](v1::PredictRequest& r) { r.mutable_cluster()->set_intra_node_bandwidth_bytes_per_s(-5); },
       grpc::StatusCode::INVALID_ARGUMENT, "cluster.intra_node_bandwidth"},
      {"too many tasks",
       [](v1::PredictRequest& r) {
         r.mutable_plan()->set_global_batch(1 << 24);
         r.set_granularity(v1::GRANULARITY_KERNEL);
       },
       grpc::StatusCode::RESOURCE_EXHAUSTED, "max_tasks"},
      {"unknown profile set", [](v1::PredictRequest& r) { r.set_profile_set_id("sha256:nope"); },
       grpc::StatusCode::NOT_FOUND, "profile_set_id"},
  };
  for (const Case& c : cases) {
    v1::PredictRequest r = Gpt13bRequest();
    c.mutate(r);
    v1::PredictResponse resp;
    grpc::Status s = sim->Predict(Ctx().get(), r, &resp);
    EXPECT_EQ(s.error_code(), c.code) << c.name << ": " << s.error_message();
    EXPECT_NE(s.error_message().find(c.field), std::string::npos)
        << c.name << ": " << s.error_message();
  }
  // Invalid pushes.
  auto reg = v1::ProfileRegistry::NewStub(ChannelTo(*server));
  v1::PushProfileSetRequest push;
  *push.mutable_profile_set() = MeasuredSet(1000);
  push.mutable_profile_set()->mutable_operators(0)->mutable_key()->set_op(
      static_cast<v1::OperatorKind>(99));
  v1::PushProfileSetResponse pr;
  grpc::Status s = reg->PushProfileSet(Ctx(kToken).get(), push, &pr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("operators[0].key.op"), std::string::npos) << s.error_message();
  *push.mutable_profile_set() = MeasuredSet(1000);
  push.mutable_profile_set()->set_id("sha256:forged");
  EXPECT_EQ(reg->PushProfileSet(Ctx(kToken).get(), push, &pr).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(ServerTest, ManyConcurrentClientsAllGetTheSameAnswer) {
  TempDir dir;
  auto server = StartServer(dir.File("a.db"));
  ASSERT_NE(server, nullptr);
  std::atomic<int> ok{0};
  std::atomic<int64_t> mismatches{0};
  int64_t expected = 0;
  {
    auto sim = v1::Simulator::NewStub(ChannelTo(*server));
    v1::PredictResponse resp;
    ASSERT_TRUE(sim->Predict(Ctx().get(), Gpt13bRequest(), &resp).ok());
    expected = resp.iteration_time_ns();
  }
  std::vector<std::thread> clients;
  for (int c = 0; c < 16; ++c) {
    clients.emplace_back([&] {
      auto sim = v1::Simulator::NewStub(ChannelTo(*server));
      for (int i = 0; i < 20; ++i) {
        v1::PredictResponse resp;
        if (sim->Predict(Ctx().get(), Gpt13bRequest(), &resp).ok()) {
          ++ok;
          if (resp.iteration_time_ns() != expected) ++mismatches;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 16 * 20);
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(ServerTest, PushReachesBothPredictorsWhichKeepServingWithoutTheRegistry) {
  TempDir dir;
  auto registry = StartServer(dir.File("registry.db"), Role::kRegistry);
  ASSERT_NE(registry, nullptr);
  const std::string address = absl::StrCat("127.0.0.1:", registry->port());
  auto p1 = StartServer(dir.File("p1.db"), Role::kPredictor, address);
  auto p2 = StartServer(dir.File("p2.db"), Role::kPredictor, address);
  ASSERT_NE(p1, nullptr);
  ASSERT_NE(p2, nullptr);

  v1::PushProfileSetRequest push;
  *push.mutable_profile_set() = MeasuredSet(77'000);
  v1::PushProfileSetResponse pushed;
  ASSERT_TRUE(v1::ProfileRegistry::NewStub(ChannelTo(*registry))
                  ->PushProfileSet(Ctx(kToken).get(), push, &pushed)
                  .ok());
  for (Server* p : {p1.get(), p2.get()}) {
    auto stub = v1::ProfileRegistry::NewStub(ChannelTo(*p));
    EXPECT_TRUE(WaitFor(
        [&] {
          v1::GetProfileSetRequest get;
          get.set_id(pushed.id());
          v1::ProfileSet set;
          return stub->GetProfileSet(Ctx().get(), get, &set).ok();
        },
        absl::Seconds(10)))
        << "the push did not reach a predictor";
  }
  // A predictor refuses pushes: the registry is the authority.
  v1::PushProfileSetResponse refused;
  EXPECT_EQ(v1::ProfileRegistry::NewStub(ChannelTo(*p1))
                ->PushProfileSet(Ctx(kToken).get(), push, &refused)
                .error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);

  registry->Shutdown(absl::Milliseconds(100));
  registry.reset();
  auto sim = v1::Simulator::NewStub(ChannelTo(*p1));
  v1::PredictResponse resp;
  grpc::Status s = sim->Predict(Ctx().get(), Gpt13bRequest(), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.profile_set_id(), pushed.id());
}

TEST(ServerTest, CorruptDatabaseIsRefusedAndKeptAsItWas) {
  TempDir dir;
  const std::string db = dir.File("bad.db");
  {
    std::ofstream out(db, std::ios::binary);
    out << std::string(8192, 'x');
  }
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = db;
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find(db), std::string::npos) << s.status();
  EXPECT_EQ(fs::file_size(db), 8192u);  // never recreated
}

// Regression (issue 12): a database deleted (or replaced) while the server
// ran was silently written to an unlinked file and later pushes were lost.
// Now every write checks the file first and the push fails, saying why.
TEST(ServerTest, ADatabaseDeletedOrReplacedAtRunTimeRefusesWritesSayingWhy) {
  TempDir dir;
  const std::string db = dir.File("gone.db");
  auto server = StartServer(db);
  ASSERT_NE(server, nullptr);
  auto reg = v1::ProfileRegistry::NewStub(ChannelTo(*server));
  v1::PushProfileSetRequest push;
  *push.mutable_profile_set() = MeasuredSet(81'000);
  v1::PushProfileSetResponse resp;
  ASSERT_TRUE(reg->PushProfileSet(Ctx(kToken).get(), push, &resp).ok());

  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db + suffix);
  *push.mutable_profile_set() = MeasuredSet(82'000);
  grpc::Status s = reg->PushProfileSet(Ctx(kToken).get(), push, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("was deleted"), std::string::npos) << s.error_message();
  EXPECT_FALSE(fs::exists(db)) << "the database was silently recreated";

  { std::ofstream(db) << "another file"; }
  s = reg->PushProfileSet(Ctx(kToken).get(), push, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("was replaced"), std::string::npos) << s.error_message();
  v1::DeleteProfileSetRequest del;
  del.set_id(resp.id());
  v1::DeleteProfileSetResponse deleted;
  EXPECT_EQ(reg->DeleteProfileSet(Ctx(kToken).get(), del, &deleted).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST(ServerTest, DeadlineStopsARunningSimulation) {
  TempDir dir;
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = dir.File("d.db");
  o.max_tasks = 100'000'000;
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  auto sim = v1::Simulator::NewStub(ChannelTo(**server));
  // MT-NLG 530B at kernel granularity: millions of tasks, far longer than
  // the 20 ms deadline.
  v1::PredictRequest r;
  r.mutable_model()->set_preset("mtnlg-530b");
  r.mutable_cluster()->set_num_gpus(3360);
  r.mutable_plan()->set_tensor_parallel(16);
  r.mutable_plan()->set_pipeline_parallel(105);
  r.mutable_plan()->set_global_batch(1920);
  r.set_granularity(v1::GRANULARITY_KERNEL);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(20));
  v1::PredictResponse resp;
  grpc::Status s = sim->Predict(&ctx, r, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  // The server is free again: a small prediction still answers.
  v1::PredictResponse small;
  EXPECT_TRUE(sim->Predict(Ctx().get(), Gpt13bRequest(), &small).ok());
}

}  // namespace
}  // namespace vtrain::server

namespace vtrain::server {
namespace {

// Regression (issue 12): a pushed set could poison every prediction for its
// GPU. Missing parameters now take their defaults explicitly; values out of
// range, non-finite error bands and unphysical predictions refuse the push,
// and nothing is stored.
TEST(ServerTest, PushedSetsThatWouldPoisonPredictionsAreRefused) {
  TempDir dir;
  auto server = StartServer(dir.File("p.db"));
  ASSERT_NE(server, nullptr);
  auto reg = v1::ProfileRegistry::NewStub(ChannelTo(*server));
  auto count = [&] {
    v1::ListProfileSetsResponse list;
    EXPECT_TRUE(reg->ListProfileSets(Ctx().get(), {}, &list).ok());
    return list.profile_sets_size();
  };
  const int before = count();
  struct Case {
    const char* name;
    std::function<void(v1::ProfileSet&)> mutate;
    const char* field;
  };
  const Case cases[] = {
      {"zero efficiency", [](v1::ProfileSet& s) { s.mutable_params()->set_gemm_max_efficiency(0); },
       "profile_set.params.gemm_max_efficiency=0"},
      {"NaN band",
       [](v1::ProfileSet& s) {
         s.clear_error_bands();  // the one band, at index 0
         v1::ErrorBand* b = s.add_error_bands();
         b->set_regime("single_node");
         b->set_error_low(std::nan(""));
         b->set_error_high(0.1);
         b->set_coverage(0.9);
       },
       "profile_set.error_bands[0]"},
      {"negative dispatch", [](v1::ProfileSet& s) { s.mutable_params()->set_host_dispatch_ns(-5); },
       "profile_set.params.host_dispatch_ns=-5"},
  };
  for (const Case& c : cases) {
    v1::PushProfileSetRequest push;
    *push.mutable_profile_set() = MeasuredSet(1000);
    c.mutate(*push.mutable_profile_set());
    v1::PushProfileSetResponse resp;
    grpc::Status s = reg->PushProfileSet(Ctx(kToken).get(), push, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.name;
    EXPECT_NE(s.error_message().find(c.field), std::string::npos)
        << c.name << ": " << s.error_message();
  }
  EXPECT_EQ(count(), before) << "a refused set was stored";

  // A set holding one parameter (and the error bands that make it a
  // complete set): the others take the built-in defaults (they used to
  // become 0 and predict 0 ms), written out in the stored set.
  v1::PushProfileSetRequest push;
  push.mutable_profile_set()->set_gpu("a100-sxm4-80gb");
  push.mutable_profile_set()->mutable_params()->set_host_dispatch_ns(60000);
  *push.mutable_profile_set()->mutable_error_bands() =
      proto::ProfileSetToProto(DefaultProfileSet(*GpuByName("a100-sxm4-80gb"))).error_bands();
  v1::PushProfileSetResponse pushed;
  ASSERT_TRUE(reg->PushProfileSet(Ctx(kToken).get(), push, &pushed).ok());
  v1::GetProfileSetRequest get;
  get.set_id(pushed.id());
  v1::ProfileSet stored;
  ASSERT_TRUE(reg->GetProfileSet(Ctx().get(), get, &stored).ok());
  EXPECT_TRUE(stored.params().has_gemm_max_efficiency());
  EXPECT_GT(stored.params().gemm_max_efficiency(), 0);
  v1::PredictRequest req = Gpt13bRequest();
  req.set_profile_set_id(pushed.id());
  v1::PredictResponse resp;
  auto sim = v1::Simulator::NewStub(ChannelTo(*server));
  ASSERT_TRUE(sim->Predict(Ctx().get(), req, &resp).ok());
  EXPECT_GT(resp.iteration_time_ms(), 100);
  EXPECT_LE(resp.mfu(), 1);
}

}  // namespace
}  // namespace vtrain::server

namespace vtrain::server {
namespace {

// Regression (issue 12): with gRPC's default SO_REUSEPORT two servers could
// listen on one port and split the requests between two databases.
TEST(ServerTest, ASecondServerOnATakenPortFailsToStart) {
  TempDir dir;
  auto first = StartServer(dir.File("a.db"));
  ASSERT_NE(first, nullptr);
  ServerOptions o;
  o.listen = absl::StrCat("127.0.0.1:", first->port());
  o.db_path = dir.File("b.db");
  absl::StatusOr<std::unique_ptr<Server>> second = Server::Start(o);
  ASSERT_FALSE(second.ok()) << "two servers listen on port " << first->port();
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("in use"), std::string::npos) << second.status();
}

TEST(ServerTest, OutOfRangePortsAreRefused) {
  TempDir dir;
  for (const char* listen : {":99999", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1", "host:"}) {
    ServerOptions o;
    o.listen = listen;
    o.db_path = dir.File("c.db");
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << listen;
    if (!s.ok()) {
      EXPECT_NE(s.status().message().find("--listen="), std::string::npos) << s.status();
    }
  }
  EXPECT_TRUE(ValidateListenAddress("[::1]:0", "--listen").ok());
  EXPECT_TRUE(ValidateListenAddress(":65535", "--listen").ok());
}

}  // namespace
}  // namespace vtrain::server
