#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "profiler_agent/agent_commands.h"
#include "profiler_agent/importers.h"
#include "server/server.h"

namespace vtrain::agent {
namespace {

TEST(ImportersTest, NcclTestsBecomesACollectiveCurve) {
  absl::StatusOr<ProfileSet> set = ImportNcclTests(
      "#  size count type redop root time algbw busbw\n#  (B) (elements) (us)\n"
      "1048576 262144 float sum -1 45.0 23.3 40.8 0\n4194304 1048576 float sum -1 90.0 46 80 0\n",
      "a.txt", "a100-sxm4-80gb", 4, LinkScope::kIntraNode, Collective::kAllReduce);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->collectives.size(), 1u);
  const CollectiveCurve& c = set->collectives.begin()->second;
  EXPECT_DOUBLE_EQ(c.LatencyNs(1048576), 45000);
  EXPECT_DOUBLE_EQ(c.LatencyNs(4194304), 90000);
  EXPECT_EQ(set->collectives.begin()->first.ranks, 4);
  EXPECT_FALSE(ImportNcclTests("garbage\n", "b", "a100-sxm4-80gb", 4, LinkScope::kIntraNode,
                               Collective::kAllReduce).ok());
  EXPECT_FALSE(ImportNcclTests("1048576 1 float 5\n", "c", "tpu", 4, LinkScope::kIntraNode,
                               Collective::kAllReduce).ok());
}

// A kernel belongs to the section its launch was issued in, even when it
// runs after the section's end marker.
TEST(ImportersTest, VtrainTraceAttributesKernelsByCorrelationId) {
  const std::string trace =
      "100,0,TIMESTAMP,\"forward start transformer\"\n"
      "110,5,RUNTIME,211,1,2,7\n"
      "120,5,RUNTIME,211,1,2,8\n"
      "130,0,TIMESTAMP,\"forward end transformer\"\n"
      "140,0,TIMESTAMP,\"forward start loss\"\n"
      "150,5,RUNTIME,211,1,2,9\n"
      "160,0,TIMESTAMP,\"forward end loss\"\n"
      "200,50,KERNEL,\"gemm_a\",0,1,7,1,1,1,128,1,1,7\n"
      "270,30,KERNEL,\"softmax, fused\",0,1,7,1,1,1,128,1,1,8\n"
      "400,20,KERNEL,\"xent\",0,1,7,1,1,1,128,1,1,9\n";
  TraceShape shape{1024, 16, 0, 2048, 1, 2, 50257, DType::kFp16};
  absl::StatusOr<ProfileSet> set = ImportVtrainTrace(trace, "t", "a100-sxm4-80gb", shape);
  ASSERT_TRUE(set.ok()) << set.status();
  const OperatorKey attention = MakeOperatorKey("a100-sxm4-80gb", DType::kFp16,
                                                OperatorKind::kAttentionFwd, 1024, 16, 4096, 2048,
                                                1, 2, 50257, 0);
  auto it = set->operators.find(attention);
  ASSERT_NE(it, set->operators.end());
  ASSERT_EQ(it->second.kernels.size(), 2u);
  EXPECT_EQ(it->second.kernels[0].name, "gemm_a");
  EXPECT_EQ(it->second.kernels[0].gap_ns, 20);  // 270 - (200 + 50)
  EXPECT_EQ(it->second.kernels[1].name, "softmax, fused");
  const OperatorKey loss = MakeOperatorKey("a100-sxm4-80gb", DType::kFp16, OperatorKind::kLossFwd,
                                           1024, 16, 4096, 2048, 1, 2, 50257, 0);
  ASSERT_TRUE(set->operators.count(loss));
  EXPECT_EQ(set->operators.at(loss).kernels[0].duration_ns, 20);
  EXPECT_FALSE(ImportVtrainTrace("1,2\n", "u", "a100-sxm4-80gb", shape).ok());
}

TEST(AgentCommandsTest, PushRetriesThenStoresIdempotently) {
  // A set to push, written by the importer command.
  const std::string dir = ::testing::TempDir();
  const std::string nccl = dir + "/nccl.txt", json = dir + "/set.json", token = dir + "/token";
  {
    std::ofstream(nccl) << "#  (us)\n1048576 262144 float sum -1 45.0 1 1 0\n";
    std::ofstream(token) << "tok";
  }
  std::ostringstream out, err;
  ASSERT_EQ(RunAgent({"import", "nccl-tests", nccl, "--gpu", "a100-sxm4-80gb", "--ranks", "8", "-o",
                      json},
                     out, err),
            0)
      << err.str();
  // Nobody listens: every attempt fails, with a retry message in between.
  std::ostringstream out1, err1;
  EXPECT_EQ(RunAgent({"push", json, "--server", "127.0.0.1:1", "--token-file", token, "--retries",
                      "2", "--timeout", "1"},
                     out1, err1),
            1);
  EXPECT_NE(err1.str().find("attempt 1 failed"), std::string::npos) << err1.str();

  server::ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = absl::StrCat(dir, "/agent_", getpid(), ".db");
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((o.db_path + suffix).c_str());
  o.push_token = "tok";
  absl::StatusOr<std::unique_ptr<server::Server>> srv = server::Server::Start(o);
  ASSERT_TRUE(srv.ok()) << srv.status();
  const std::string address = absl::StrCat("127.0.0.1:", (*srv)->port());
  std::ostringstream out2, err2, out3, err3;
  ASSERT_EQ(RunAgent({"push", json, "--server", address, "--token-file", token}, out2, err2), 0)
      << err2.str();
  EXPECT_NE(out2.str().find("(stored)"), std::string::npos);
  ASSERT_EQ(RunAgent({"push", json, "--server", address, "--token-file", token}, out3, err3), 0);
  EXPECT_NE(out3.str().find("already present"), std::string::npos);
  // Without a GPU part, profiling says so and fails.
  std::ostringstream out4, err4;
  EXPECT_EQ(RunAgent({"profile"}, out4, err4), 1);
  EXPECT_NE(err4.str().find("GPU part"), std::string::npos);
}

}  // namespace
}  // namespace vtrain::agent
