// vtrain-server on 127.0.0.1:0 with a real SQLite file in a temp dir:
// in-process for the services, and the built binary for kill -9.
#include "server/server.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/plan/search.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/convert.h"
#include "server/profile_store.h"
#include "tests/testing/subprocess.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::server {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "vtrain_server_test_XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string File(const std::string& name) const { return (fs::path(path_) / name).string(); }

 private:
  std::string path_;
};

constexpr char kToken[] = "s3cret-token";

std::unique_ptr<Server> StartServer(const std::string& db, Role role = Role::kAll,
                                    const std::string& registry = "") {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = db;
  o.role = role;
  o.registry = registry;
  o.push_token = kToken;
  o.max_tasks = 5'000'000;
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

std::shared_ptr<grpc::Channel> ChannelTo(const Server& s) {
  return grpc::CreateChannel(absl::StrCat("127.0.0.1:", s.port()),
                             grpc::InsecureChannelCredentials());
}

std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token = "") {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  if (!token.empty()) ctx->AddMetadata("authorization", absl::StrCat("Bearer ", token));
  return ctx;
}

v1::PredictRequest Gpt13bRequest() {
  v1::PredictRequest r;
  r.mutable_model()->set_preset("gpt3-1.3b");
  r.mutable_cluster()->set_num_gpus(8);
  r.mutable_plan()->set_tensor_parallel(2);
  r.mutable_plan()->set_global_batch(64);
  return r;
}

// A measured-looking set: one attention_fwd kernel table for the A100.
v1::ProfileSet MeasuredSet(int64_t duration_ns) {
  v1::ProfileSet set;
  set.set_name("test-set");
  set.set_gpu("a100-sxm4-80gb");
  *set.mutable_params() = convert::ProfileSetToProto(DefaultProfileSet(*GpuByName("a100-sxm4-80gb"))).params();
  v1::OperatorProfile* op = set.add_operators();
  op->mutable_key()->set_op(v1::OPERATOR_KIND_ATTENTION_FWD);
  op->mutable_key()->set_dtype(v1::DTYPE_FP16);
  op->mutable_key()->set_hidden(2048);
  op->mutable_key()->set_heads(16);
  op->mutable_key()->set_seq(2048);
  op->mutable_key()->set_micro_batch(1);
  op->mutable_key()->set_tensor_parallel(2);
  v1::Kernel* k = op->add_kernels();
  k->set_name("gemm");
  k->set_duration_ns(duration_ns);
  k->set_gap_ns(1000);
  return set;
}

TEST(ServerTest, PredictRoundTripEqualsInProcessResult) {
  TempDir dir;
  auto server = StartServer(dir.File("a.db"));
  ASSERT_NE(server, nullptr);
  auto stub = v1::Simulator::NewStub(ChannelTo(*server));
  v1::PredictResponse resp;
  grpc::Status s = stub->Predict(Ctx().get(), Gpt13bRequest(), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();

  absl::StatusOr<Job> job = convert::JobFromProto(Gpt13bRequest());
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
  EXPECT_EQ(before.profile_sets_size(), 5);  // seeded built-in sets

  v1::PushProfileSetRequest push;
  *push.mutable_profile_set() = MeasuredSet(123'000);
  v1::PushProfileSetResponse first, second;
  ASSERT_TRUE(stub->PushProfileSet(Ctx(kToken).get(), push, &first).ok());
  EXPECT_FALSE(first.already_present());
  EXPECT_EQ(first.id(), convert::ContentId(push.profile_set()));
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
    EXPECT_EQ(listed.profile_sets_size(), 5);
  }
  absl::StatusOr<std::unique_ptr<ProfileStore>> store = ProfileStore::Open(dir.File("a.db"));
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(*(*store)->Count(), 5);
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
      {"tp does not divide heads", [](v1::PredictRequest& r) { r.mutable_plan()->set_tensor_parallel(3); r.mutable_cluster()->set_num_gpus(6); },
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
      {"absurd hidden", [](v1::PredictRequest& r) { r.mutable_model()->set_hidden_size(int64_t{1} << 50); },
       grpc::StatusCode::INVALID_ARGUMENT, "model.hidden_size"},
      {"bad bandwidth", [](v1::PredictRequest& r) { r.mutable_cluster()->set_intra_node_bandwidth_bytes_per_s(-5); },
       grpc::StatusCode::INVALID_ARGUMENT, "cluster.intra_node_bandwidth"},
      {"too many tasks", [](v1::PredictRequest& r) { r.mutable_plan()->set_global_batch(1 << 24); r.set_granularity(v1::GRANULARITY_KERNEL); },
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
    EXPECT_NE(s.error_message().find(c.field), std::string::npos) << c.name << ": " << s.error_message();
  }
  // Invalid pushes.
  auto reg = v1::ProfileRegistry::NewStub(ChannelTo(*server));
  v1::PushProfileSetRequest push;
  *push.mutable_profile_set() = MeasuredSet(1000);
  push.mutable_profile_set()->mutable_operators(0)->mutable_key()->set_op(static_cast<v1::OperatorKind>(99));
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

bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return condition();
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

// kill -9 of the built binary in the middle of a stream of pushes leaves a
// database that opens, passes the integrity check and holds only whole sets.
TEST(ServerBinaryTest, KillNineDuringPushesLeavesOnlyWholeSets) {
  const char* binary = std::getenv("VTRAIN_SERVER");
  if (binary == nullptr) binary = VTRAIN_TEST_SERVER;
  TempDir dir;
  const std::string db = dir.File("k.db");
  const std::string token_file = dir.File("token");
  std::ofstream(token_file) << kToken;
  // A fixed port found by binding 0 first.
  int port = 0;
  {
    auto probe = StartServer(dir.File("probe.db"));
    ASSERT_NE(probe, nullptr);
    port = probe->port();
  }
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string listen = absl::StrCat("--listen=127.0.0.1:", port);
    const std::string db_flag = absl::StrCat("--db=", db);
    const std::string token_flag = absl::StrCat("--push-token-file=", token_file);
    execl(binary, binary, listen.c_str(), db_flag.c_str(), token_flag.c_str(), nullptr);
    _exit(127);
  }
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20)));
  auto stub = v1::ProfileRegistry::NewStub(channel);
  std::atomic<int> accepted{0};
  std::atomic<bool> stop{false};
  std::thread pusher([&] {
    for (int i = 0; i < 100000 && !stop; ++i) {
      v1::PushProfileSetRequest push;
      *push.mutable_profile_set() = MeasuredSet(1000 + i);
      // Make each set large so that the kill lands inside writes.
      for (int k = 0; k < 200; ++k) {
        *push.mutable_profile_set()->mutable_operators(0)->add_kernels() =
            push.profile_set().operators(0).kernels(0);
      }
      v1::PushProfileSetResponse r;
      if (stub->PushProfileSet(Ctx(kToken).get(), push, &r).ok()) ++accepted;
    }
  });
  ASSERT_TRUE(WaitFor([&] { return accepted > 20; }, absl::Seconds(30)));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  stop = true;
  pusher.join();

  absl::StatusOr<std::unique_ptr<ProfileStore>> store = ProfileStore::Open(db);
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<std::vector<v1::ProfileSet>> sets = (*store)->LoadAll();
  ASSERT_TRUE(sets.ok()) << sets.status();
  EXPECT_GE(static_cast<int>(sets->size()), 5 + 20);
  for (const v1::ProfileSet& set : *sets) {
    EXPECT_EQ(convert::ContentId(set), set.id()) << "a partial set survived";
    if (set.operators_size() > 0) {
      EXPECT_EQ(set.operators(0).kernels_size(), 201);
    }
  }
}

TEST(ServerBinaryTest, SigtermExitsZero) {
  const char* binary = std::getenv("VTRAIN_SERVER");
  if (binary == nullptr) binary = VTRAIN_TEST_SERVER;
  TempDir dir;
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string db_flag = absl::StrCat("--db=", dir.File("t.db"));
    execl(binary, binary, "--listen=127.0.0.1:0", db_flag.c_str(), nullptr);
    _exit(127);
  }
  ASSERT_TRUE(WaitFor([&] { return fs::exists(dir.File("t.db")); }, absl::Seconds(10)));
  absl::SleepFor(absl::Milliseconds(500));
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace vtrain::server

namespace vtrain::server {
namespace {

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

// Runs the built vtrainctl with `args`; the test fails when it cannot start.
testing::ProcessResult Vtrainctl(const std::vector<std::string>& args) {
  const char* vtrainctl = std::getenv("VTRAIN_VTRAINCTL");
  if (vtrainctl == nullptr) vtrainctl = VTRAIN_TEST_VTRAINCTL;
  absl::StatusOr<testing::ProcessResult> r = testing::RunProcess(vtrainctl, args, 120);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : testing::ProcessResult{};
}

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The built vtrainctl against the server prints exactly what --local prints:
// the same request runs through the same conversion on either side, and the
// server's seeded built-in set has the id the local built-in set hashes to.
TEST(ServerBinaryTest, VtrainctlPrintsTheSameBytesLocallyAndRemotely) {
  TempDir dir;
  auto server = StartServer(dir.File("c.db"));
  ASSERT_NE(server, nullptr);
  const std::vector<std::string> remote = {"--server", absl::StrCat("127.0.0.1:", server->port())};
  const std::vector<std::string> local = {"--local"};
  const std::vector<std::vector<std::string>> commands = {
      {"predict", "--model", "gpt3-1.3b", "--gpus", "8", "--tp", "2", "--global-batch", "64"},
      {"predict", "--model", "gpt3-1.3b", "--gpus", "8", "--tp", "2", "--global-batch", "64",
       "--json"},
      {"predict", "--model", "gpt3-2.7b", "--gpus", "32", "--tp", "2", "--pp", "4",
       "--global-batch", "128", "--micro-batch", "2", "--schedule", "gpipe", "--dtype", "bf16",
       "--tokens", "1e10", "--price-usd-per-gpu-hour", "2.5", "--granularity", "kernel",
       "--show-lookups", "--json"},
      {"predict", "--layers", "4", "--hidden", "256", "--heads", "4", "--seq-len", "512",
       "--gpus", "4", "--dp", "4", "--global-batch", "16", "--gradient-bucketing", "on",
       "--json"},
      {"search", "--model", "gpt3-2.7b", "--global-batch", "128", "--max-gpus", "32",
       "--tokens", "1e10", "--price-usd-per-gpu-hour", "4", "--objective", "cost", "--top", "3",
       "--json"},
      {"search", "--model", "gpt3-1.3b", "--global-batch", "64", "--gpus", "16", "--csv"},
      {"search", "--model", "gpt3-1.3b", "--global-batch", "64", "--gpus", "16"},
  };
  for (const std::vector<std::string>& command : commands) {
    const testing::ProcessResult r = Vtrainctl(Concat(command, remote));
    const testing::ProcessResult l = Vtrainctl(Concat(command, local));
    const std::string what = absl::StrJoin(command, " ");
    ASSERT_EQ(r.exit_code, 0) << what << ": " << r.err;
    ASSERT_EQ(l.exit_code, 0) << what << ": " << l.err;
    EXPECT_GT(l.out.size(), 100u) << what;
    EXPECT_EQ(r.out, l.out) << what;
  }
  // Bad input through the server is bad input on the client too, with the
  // same message.
  const std::vector<std::string> bad = {"predict", "--model", "gpt3-1.3b", "--gpus", "8",
                                        "--tp", "3", "--global-batch", "64"};
  const testing::ProcessResult r = Vtrainctl(Concat(bad, remote));
  const testing::ProcessResult l = Vtrainctl(Concat(bad, local));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(l.exit_code, 2) << l.err;
  EXPECT_EQ(r.err, l.err);
  EXPECT_NE(r.err.find("plan.tensor_parallel"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace vtrain::server

namespace vtrain::server {
namespace {

TEST(ServerTest, MissingKeysBecomeProfilingWork) {
  TempDir dir;
  auto server = StartServer(dir.File("w.db"));
  ASSERT_NE(server, nullptr);
  auto sim = v1::Simulator::NewStub(ChannelTo(*server));
  for (int i = 0; i < 3; ++i) {
    v1::PredictResponse resp;
    ASSERT_TRUE(sim->Predict(Ctx().get(), Gpt13bRequest(), &resp).ok());
  }
  auto reg = v1::ProfileRegistry::NewStub(ChannelTo(*server));
  v1::NextProfilingWorkRequest req;
  req.set_gpu("a100-sxm4-80gb");
  req.set_max_items(5);
  v1::NextProfilingWorkResponse work;
  ASSERT_TRUE(reg->NextProfilingWork(Ctx().get(), req, &work).ok());
  ASSERT_EQ(work.work_size(), 5);
  EXPECT_EQ(work.work(0).requests(), 3);  // every prediction needed it
  EXPECT_NE(work.work(0).key().find("a100-sxm4-80gb"), std::string::npos);
  req.set_gpu("h100-sxm5-80gb");
  ASSERT_TRUE(reg->NextProfilingWork(Ctx().get(), req, &work).ok());
  EXPECT_EQ(work.work_size(), 0);
  req.set_max_items(-1);
  EXPECT_EQ(reg->NextProfilingWork(Ctx().get(), req, &work).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(ServerTest, ReadsNeedTheTokenWhenRequired) {
  TempDir dir;
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = dir.File("r.db");
  o.push_token = kToken;
  o.require_auth_for_reads = true;
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  auto sim = v1::Simulator::NewStub(ChannelTo(**server));
  v1::PredictResponse resp;
  EXPECT_EQ(sim->Predict(Ctx().get(), Gpt13bRequest(), &resp).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(sim->Predict(Ctx(kToken).get(), Gpt13bRequest(), &resp).ok());
  auto reg = v1::ProfileRegistry::NewStub(ChannelTo(**server));
  v1::ListProfileSetsResponse listed;
  EXPECT_EQ(reg->ListProfileSets(Ctx().get(), {}, &listed).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace vtrain::server

namespace vtrain::server {
namespace {

TEST(ServerTest, SearchStreamsProgressThenTheResultTheLocalSearchGives) {
  TempDir dir;
  auto server = StartServer(dir.File("s.db"));
  ASSERT_NE(server, nullptr);
  SearchSpace space;
  space.model = *ModelPreset("gpt3-2.7b");
  space.cluster = DefaultCluster(*GpuByName("a100-sxm4-80gb"), 0);
  space.cluster.price_usd_per_gpu_hour = 4.096;
  space.global_batch = 128;
  space.max_gpus = 32;
  space.train_tokens = 10e9;
  v1::SearchRequest req;
  req.mutable_model()->set_preset("gpt3-2.7b");
  req.mutable_cluster()->set_price_usd_per_gpu_hour(4.096);
  req.set_global_batch(128);
  req.set_max_gpus(32);
  req.set_train_tokens(10e9);
  req.set_objective(v1::OBJECTIVE_COST);
  req.set_top(5);
  auto stub = v1::Simulator::NewStub(ChannelTo(*server));
  auto ctx = Ctx();
  auto reader = stub->Search(ctx.get(), req);
  v1::SearchResponse msg;
  int progress = 0, results = 0;
  v1::SearchResult result;
  while (reader->Read(&msg)) {
    if (msg.has_progress()) {
      ++progress;
      EXPECT_EQ(results, 0) << "progress after the result";
      EXPECT_LE(msg.progress().evaluated(), msg.progress().total());
    }
    if (msg.has_result()) {
      ++results;
      result = msg.result();
    }
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_GT(progress, 0);
  ASSERT_EQ(results, 1);
  SearchOptions o;
  o.objective = Objective::kCost;
  absl::StatusOr<SearchResult> local =
      Search(space, DefaultProfileSet(space.cluster.gpu), o);
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(result.considered(), local->considered);
  ASSERT_TRUE(result.has_best());
  EXPECT_DOUBLE_EQ(result.best().cost_usd(), local->plans[local->best].cost_usd);
  EXPECT_EQ(result.pareto_size(), static_cast<int>(local->pareto.size()));
  EXPECT_EQ(result.fastest_size(), 5);

  // A bad objective is INVALID_ARGUMENT naming the field.
  req.set_objective(static_cast<v1::Objective>(42));
  auto bad_ctx = Ctx();
  auto bad = stub->Search(bad_ctx.get(), req);
  while (bad->Read(&msg)) {
  }
  grpc::Status s = bad->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("objective"), std::string::npos);
}

}  // namespace
}  // namespace vtrain::server

namespace vtrain::server {
namespace {

// Runs openssl; false (with its stderr in the failure) when it fails.
bool OpenSsl(const std::vector<std::string>& args) {
  absl::StatusOr<testing::ProcessResult> r = testing::RunProcess("/usr/bin/openssl", args, 60);
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r.ok() ? r->exit_code : -1, 0) << (r.ok() ? r->err : "");
  return r.ok() && r->exit_code == 0;
}

// A CA, and server and client certificates it signs, and an unrelated CA
// (ECDSA P-256, one day).
// The server's names are localhost and 127.0.0.1.
bool MakeCertificates(const TempDir& dir) {
  const std::string ext = dir.File("server.ext");
  std::ofstream(ext) << "subjectAltName=DNS:localhost,IP:127.0.0.1\n";
  const std::vector<std::string> key = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                        "-nodes"};
  auto req = [&](const std::string& name, const std::string& cn, bool self_signed) {
    std::vector<std::string> a = {"req"};
    if (self_signed) a.insert(a.end(), {"-x509", "-days", "1"});
    a.insert(a.end(), key.begin(), key.end());
    a.insert(a.end(), {"-keyout", dir.File(name + ".key"), "-out",
                       dir.File(name + (self_signed ? ".pem" : ".csr")), "-subj", "/CN=" + cn});
    return OpenSsl(a);
  };
  auto sign = [&](const std::string& name, bool with_ext) {
    std::vector<std::string> a = {"x509", "-req", "-in", dir.File(name + ".csr"), "-CA",
                                  dir.File("ca.pem"), "-CAkey", dir.File("ca.key"),
                                  "-CAcreateserial", "-days", "1", "-out", dir.File(name + ".pem")};
    if (with_ext) a.insert(a.end(), {"-extfile", ext});
    return OpenSsl(a);
  };
  return req("ca", "vtrain test CA", true) && req("other-ca", "another CA", true) &&
         req("server", "localhost", false) &&
         sign("server", true) && req("client", "vtrain test client", false) &&
         sign("client", false);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

grpc::StatusCode HealthOver(const std::string& target,
                            std::shared_ptr<grpc::ChannelCredentials> creds) {
  auto stub = v1::Simulator::NewStub(grpc::CreateChannel(target, creds));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::PredictResponse resp;
  return stub->Predict(&ctx, Gpt13bRequest(), &resp).error_code();
}

// TLS and mutual TLS on loopback with certificates made by openssl: a
// client that trusts the CA gets predictions, a plaintext one does not, and
// with --tls-client-ca-file a client needs its certificate; vtrainctl's
// --tls-* flags reach the same server.
TEST(ServerTest, ServesTlsAndMutualTls) {
  if (access("/usr/bin/openssl", X_OK) != 0) GTEST_SKIP() << "openssl is not installed";
  TempDir dir;
  ASSERT_TRUE(MakeCertificates(dir));
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = dir.File("tls.db");
  o.push_token = kToken;
  o.tls_cert_file = dir.File("server.pem");
  o.tls_key_file = dir.File("server.key");
  absl::StatusOr<std::unique_ptr<Server>> tls = Server::Start(o);
  ASSERT_TRUE(tls.ok()) << tls.status();
  const std::string target = absl::StrCat("localhost:", (*tls)->port());
  grpc::SslCredentialsOptions trust;
  trust.pem_root_certs = Slurp(dir.File("ca.pem"));
  EXPECT_EQ(HealthOver(target, grpc::SslCredentials(trust)), grpc::StatusCode::OK);
  EXPECT_NE(HealthOver(target, grpc::InsecureChannelCredentials()), grpc::StatusCode::OK);
  grpc::SslCredentialsOptions wrong_ca;
  wrong_ca.pem_root_certs = Slurp(dir.File("other-ca.pem"));
  EXPECT_NE(HealthOver(target, grpc::SslCredentials(wrong_ca)), grpc::StatusCode::OK);
  // vtrainctl with --tls-ca-file.
  absl::StatusOr<testing::ProcessResult> ctl = testing::RunProcess(
      VTRAIN_TEST_VTRAINCTL, {"predict", "--server", target, "--tls-ca-file", dir.File("ca.pem"),
                              "--model", "gpt3-125m", "--gpus", "1",
                              "--global-batch", "8"});
  ASSERT_TRUE(ctl.ok());
  EXPECT_EQ(ctl->exit_code, 0) << ctl->err;
  EXPECT_NE(ctl->out.find("iteration time"), std::string::npos);
  (*tls)->Shutdown(absl::Seconds(1));

  o.db_path = dir.File("mtls.db");
  o.tls_client_ca_file = dir.File("ca.pem");
  absl::StatusOr<std::unique_ptr<Server>> mtls = Server::Start(o);
  ASSERT_TRUE(mtls.ok()) << mtls.status();
  const std::string mtarget = absl::StrCat("localhost:", (*mtls)->port());
  EXPECT_NE(HealthOver(mtarget, grpc::SslCredentials(trust)), grpc::StatusCode::OK)
      << "a client without a certificate is refused";
  grpc::SslCredentialsOptions with_cert = trust;
  with_cert.pem_cert_chain = Slurp(dir.File("client.pem"));
  with_cert.pem_private_key = Slurp(dir.File("client.key"));
  EXPECT_EQ(HealthOver(mtarget, grpc::SslCredentials(with_cert)), grpc::StatusCode::OK);
  ctl = testing::RunProcess(VTRAIN_TEST_VTRAINCTL,
                            {"predict", "--server", mtarget, "--tls-ca-file", dir.File("ca.pem"),
                             "--tls-cert-file", dir.File("client.pem"), "--tls-key-file",
                             dir.File("client.key"), "--model", "gpt3-125m", "--gpus", "1",
                              "--global-batch", "8"});
  ASSERT_TRUE(ctl.ok());
  EXPECT_EQ(ctl->exit_code, 0) << ctl->err;
  (*mtls)->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace vtrain::server
