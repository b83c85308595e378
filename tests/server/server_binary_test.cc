// The built vtrain-server and vtrainctl binaries on loopback: kill -9 during
// pushes, SIGTERM, and vtrainctl printing the same bytes with --local and
// --server.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/plan/search.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/convert.h"
#include "server/profile_store.h"
#include "server/server.h"
#include "tests/server/server_testing.h"
#include "tests/testing/subprocess.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::server {
namespace {

namespace fs = std::filesystem;

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
  auto channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  ASSERT_TRUE(
      channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20)));
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
  absl::StatusOr<std::vector<ProfileStore::StoredSet>> sets = (*store)->LoadAll();
  ASSERT_TRUE(sets.ok()) << sets.status();
  EXPECT_GE(static_cast<int>(sets->size()), 5 + 20);
  for (const auto& [set, builtin] : *sets) {
    EXPECT_EQ(proto::ContentId(set), set.id()) << "a partial set survived";
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

// --check-db reads a database without changing it and says what it holds, or
// why it cannot be served: 0 sound, 1 damaged or foreign, 2 missing.
TEST(ServerBinaryTest, CheckDbReportsWithoutChangingTheFile) {
  const char* binary = std::getenv("VTRAIN_SERVER");
  if (binary == nullptr) binary = VTRAIN_TEST_SERVER;
  TempDir dir;
  {
    absl::StatusOr<std::unique_ptr<ProfileStore>> store = ProfileStore::Open(dir.File("ok.db"));
    ASSERT_TRUE(store.ok()) << store.status();
  }
  auto check_db = [&](const std::string& db) {
    absl::StatusOr<testing::ProcessResult> r = testing::RunProcess(binary, {"--check-db", db});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : testing::ProcessResult{};
  };
  const auto size = fs::file_size(dir.File("ok.db"));
  testing::ProcessResult ok = check_db(dir.File("ok.db"));
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, ::testing::HasSubstr("integrity ok, schema version 1, 0 profile sets"));
  EXPECT_EQ(fs::file_size(dir.File("ok.db")), size);

  std::ofstream(dir.File("junk.db")) << std::string(8192, 'x');
  testing::ProcessResult junk = check_db(dir.File("junk.db"));
  EXPECT_EQ(junk.exit_code, 1);
  EXPECT_THAT(junk.err, ::testing::HasSubstr("junk.db' failed the integrity check"));

  testing::ProcessResult missing = check_db(dir.File("missing.db"));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, ::testing::HasSubstr("missing.db' does not exist"));
  EXPECT_FALSE(fs::exists(dir.File("missing.db")));
}

// The built vtrainctl against the server prints exactly what --local prints:
// the same request runs through the same conversion on either side, and the
// server's seeded built-in set has the id the local built-in set hashes to.
// Every answer carries the wall time it took, which differs run to run (and
// between the server and vtrainctl): the JSON's wall_ns values and the
// tables' "simulated ... in 85 µs" times, masked; every other byte, the
// simulated counts included, must match.
// Whether the server answered from its prediction cache is masked too (the
// local answer is never cached): it says how the answer was had, not what.
std::string MaskWallTimes(const std::string& out) {
  static const std::regex json("\"wall_ns\": [0-9]+");
  static const std::regex cached("\"cached\": (true|false)");
  static const std::regex line(
      "(simulated [^\n]* in )[0-9.]+ (ns|µs|ms|s)( \\(the server's cached answer to this "
      "same request\\))?\n");
  std::string masked = std::regex_replace(out, json, "\"wall_ns\": *");
  masked = std::regex_replace(masked, cached, "\"cached\": *");
  return std::regex_replace(masked, line, "$1*\n");
}

TEST(ServerBinaryTest, MaskWallTimesMasksOnlyTheTimes) {
  EXPECT_EQ(MaskWallTimes("{\"wall_ns\": 81234, \"tasks\": 12}"),
            "{\"wall_ns\": *, \"tasks\": 12}");
  EXPECT_EQ(MaskWallTimes("x\nsimulated 201,600 actions (200,242 by periodic jumps) in 85 µs\n"),
            "x\nsimulated 201,600 actions (200,242 by periodic jumps) in *\n");
  EXPECT_EQ(MaskWallTimes("simulated 3 predictions, 6 actions in 1.5 ms\n"),
            "simulated 3 predictions, 6 actions in *\n");
  EXPECT_EQ(MaskWallTimes("simulated 6 actions in 1.5 ms (the server's cached answer to this "
                          "same request)\n\"cached\": true, \"tasks\": 3"),
            "simulated 6 actions in *\n\"cached\": *, \"tasks\": 3");
}

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
      {"predict", "--model",        "gpt3-2.7b", "--gpus",
       "32",      "--tp",           "2",         "--pp",
       "4",       "--global-batch", "128",       "--micro-batch",
       "2",       "--schedule",     "gpipe",     "--dtype",
       "bf16",    "--tokens",       "1e10",      "--price-usd-per-gpu-hour",
       "2.5",     "--granularity",  "kernel",    "--show-lookups",
       "--json"},
      {"predict", "--layers", "4", "--hidden", "256", "--heads", "4", "--seq-len", "512", "--gpus",
       "4", "--dp", "4", "--global-batch", "16", "--gradient-bucketing", "on", "--json"},
      {"search", "--model", "gpt3-2.7b", "--global-batch", "128", "--max-gpus", "32", "--tokens",
       "1e10", "--price-usd-per-gpu-hour", "4", "--objective", "cost", "--top", "3", "--json"},
      {"search", "--model", "gpt3-1.3b", "--global-batch", "64", "--gpus", "16", "--csv"},
      {"search", "--model", "gpt3-1.3b", "--global-batch", "64", "--gpus", "16"},
      {"curve", "--model", "gpt3-2.7b", "--global-batch", "128", "--gpu-counts", "8,16,24,32",
       "--json"},
      {"curve", "--model", "gpt3-2.7b", "--global-batch", "128", "--max-gpus", "64", "--step", "16",
       "--compare", "--csv"},
      {"curve", "--model", "gpt3-1.3b", "--global-batch", "64", "--gpu-counts", "8,16,32",
       "--policy", "data-parallel", "--monotone", "--format", "elasticflow"},
      {"curve", "--model", "gpt3-1.3b", "--global-batch", "64", "--gpu-counts", "8,16,32",
       "--policy", "data-parallel", "--monotone", "--format", "elasticflow"},  // cached
      {"presets"},
      {"presets", "--json"},
      {"plan-model", "--gpu", "a100-sxm4-80gb", "--gpus", "64", "--days", "1", "--min-params",
       "3e8", "--max-params", "8e9", "--global-batch", "256", "--json"},
      {"plan-model", "--gpu", "a100-sxm4-80gb", "--gpus", "64", "--days", "1", "--min-params",
       "3e8", "--max-params", "8e9", "--global-batch", "256", "--scaling-law", "hoffmann"},
      // The scheduling study on a window of a real trace (read from data/
      // at test time): every curve from the server's ThroughputCurve.
      {"cluster-sim", "--trace",
       absl::StrCat(VTRAIN_TEST_SOURCE_DIR, "/data/itp-job-traces/cluster10.csv"), "--gpus", "128",
       "--jobs", "24", "--seed", "3", "--json"},
  };
  for (const std::vector<std::string>& command : commands) {
    const testing::ProcessResult r = Vtrainctl(Concat(command, remote));
    const testing::ProcessResult l = Vtrainctl(Concat(command, local));
    const std::string what = absl::StrJoin(command, " ");
    ASSERT_EQ(r.exit_code, 0) << what << ": " << r.err;
    ASSERT_EQ(l.exit_code, 0) << what << ": " << l.err;
    EXPECT_GT(l.out.size(), 60u) << what;
    EXPECT_EQ(MaskWallTimes(r.out), MaskWallTimes(l.out)) << what;
  }
  // Bad input through the server is bad input on the client too, with the
  // same message.
  const std::vector<std::string> bad = {"predict", "--model", "gpt3-1.3b",      "--gpus", "8",
                                        "--tp",    "3",       "--global-batch", "64"};
  const testing::ProcessResult r = Vtrainctl(Concat(bad, remote));
  const testing::ProcessResult l = Vtrainctl(Concat(bad, local));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(l.exit_code, 2) << l.err;
  EXPECT_EQ(r.err, l.err);
  EXPECT_NE(r.err.find("plan.tensor_parallel"), std::string::npos) << r.err;
}

// Failed calls are errors, not throughput: a registry answers Predict with
// UNIMPLEMENTED, so none of the requests counts.
TEST(ServerBinaryTest, BenchCountsFailedCallsAsErrors) {
  TempDir dir;
  auto registry = StartServer(dir.File("r.db"), Role::kRegistry);
  ASSERT_NE(registry, nullptr);
  const testing::ProcessResult r = Vtrainctl(
      {"bench", "--server", absl::StrCat("127.0.0.1:", registry->port()), "--requests", "6",
       "--concurrency", "2", "--model", "gpt3-125m", "--global-batch", "8", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("\"requests\":0,\"errors\":6"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace vtrain::server
