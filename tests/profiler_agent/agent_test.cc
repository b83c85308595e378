#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/commands.h"
#include "common/files.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "profiler_agent/agent_commands.h"
#include "profiler_agent/importers.h"
#include "profiler_agent/work.h"
#include "server/server.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

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
                               Collective::kAllReduce)
                   .ok());
  EXPECT_FALSE(ImportNcclTests("1048576 1 float 5\n", "c", "tpu", 4, LinkScope::kIntraNode,
                               Collective::kAllReduce)
                   .ok());
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
  const OperatorKey attention =
      MakeOperatorKey("a100-sxm4-80gb", DType::kFp16, OperatorKind::kAttentionFwd, 1024, 16, 4096,
                      2048, 1, 2, 50257, 0);
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

TEST(ImportersTest, RankCountsComeFromTheFile) {
  EXPECT_EQ(InferNcclRanks("# nThread 1 nGpus 4 minBytes 8 maxBytes 128\n", "a.txt"), 4);
  EXPECT_EQ(InferNcclRanks("#  Rank  0 Group  0 Pid 1 on n1 device  0 [0x07] A100\n"
                           "#  Rank  1 Group  0 Pid 2 on n2 device  0 [0x07] A100\n"
                           "# nThread 1 nGpus 1\n",
                           "b.txt"),
            2);  // one GPU per process (MPI): the Rank lines count
  EXPECT_EQ(InferNcclRanks("1024 256 float 5.0\n", "dir/allreduce_16gpu.txt"), 16);
  EXPECT_EQ(InferNcclRanks("1024 256 float 5.0\n", "results.txt"), std::nullopt);
}

// Several nccl-tests files (one per GPU count) become one set of curves.
TEST(AgentCommandsTest, ImportsSeveralNcclTestsFiles) {
  const std::string dir = ::testing::TempDir();
  const std::string a = dir + "/allreduce_2gpu.txt", b = dir + "/run_b.txt",
                    c = dir + "/nothing.txt", json = dir + "/curves.json";
  std::ofstream(a) << "#  (us)\n1048576 262144 float sum -1 30.0 1 1 0\n";
  std::ofstream(b)
      << "# nThread 1 nGpus 4 minBytes 8\n#  (us)\n1048576 262144 float sum -1 40.0 1 1 0\n";
  std::ofstream(c) << "#  (us)\n1048576 262144 float sum -1 40.0 1 1 0\n";
  std::ostringstream out, err;
  ASSERT_EQ(
      RunAgent({"import", "nccl-tests", a, b, "--gpu", "a100-sxm4-80gb", "-o", json}, out, err), 0)
      << err.str();
  EXPECT_NE(out.str().find("2 collectives"), std::string::npos) << out.str();
  std::ostringstream out2, err2;
  EXPECT_EQ(
      RunAgent({"import", "nccl-tests", a, c, "--gpu", "a100-sxm4-80gb", "-o", json}, out2, err2),
      2);
  EXPECT_NE(err2.str().find("vtrain-agent import: " + c + ": cannot tell the rank count"),
            std::string::npos)
      << err2.str();
  std::ostringstream out3, err3;
  EXPECT_EQ(
      RunAgent({"import", "nccl-tests", a, a, "--gpu", "a100-sxm4-80gb", "-o", json}, out3, err3),
      2);
  EXPECT_NE(err3.str().find("a second curve"), std::string::npos) << err3.str();
}

// Files of the five nccl-tests binaries become curves of their collectives.
TEST(AgentCommandsTest, ImportsEachFilesCollective) {
  const std::string dir = ::testing::TempDir();
  const std::string ag = dir + "/all_gather_perf_8gpu.txt", rs = dir + "/rs8.txt",
                    sr = dir + "/sendrecv_perf_2gpu.txt", a2a = dir + "/alltoall_perf_8gpu.txt",
                    json = dir + "/four.json";
  std::ofstream(ag) << "#       size count type redop root time algbw busbw #wrong\n"
                       "#  (B) (elements) (us)\n"
                       "1048576 32768 float none -1 24.71 42.44 37.13 0\n";
  std::ofstream(rs) << "# Collective test starting: reduce_scatter_perf\n"
                       "# nThread 1 nGpus 8 minBytes 8\n"
                       "#       size count type redop root time algbw busbw #wrong\n"
                       "#  (B) (elements) (us)\n"
                       "1048576 32768 float sum -1 26.30 39.87 34.89 0\n";
  std::ofstream(sr) << "#       size count type redop root time algbw busbw #wrong\n"
                       "#  (B) (elements) (us)\n"
                       "1048576 262144 float sum -1 10.52 99.68 99.68 0\n";
  std::ofstream(a2a) << "#       size count type redop root time algbw busbw #wrong\n"
                        "#  (B) (elements) (us)\n"
                        "8388608 2097152 float none -1 61.20 137.07 119.93 0\n";
  std::ostringstream out, err;
  ASSERT_EQ(
      RunAgent({"import", "nccl-tests", ag, rs, sr, a2a, "--gpu", "h100-sxm5-80gb", "-o", json},
               out, err),
      0)
      << err.str();
  absl::StatusOr<std::string> text = common::ReadFile(json);
  ASSERT_TRUE(text.ok()) << text.status();
  for (const char* c : {"COLLECTIVE_ALL_GATHER", "COLLECTIVE_REDUCE_SCATTER",
                        "COLLECTIVE_SEND_RECV", "COLLECTIVE_ALL_TO_ALL"}) {
    EXPECT_NE(text->find(c), std::string::npos) << c << " in " << *text;
  }
  EXPECT_EQ(text->find("COLLECTIVE_ALL_REDUCE"), std::string::npos) << *text;
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
  // Without the GPU part beside it, profiling says so and fails.
  unsetenv("VTRAIN_AGENT_GPU");
  std::ostringstream out4, err4;
  EXPECT_EQ(RunAgent({"profile"}, out4, err4), 1);
  EXPECT_NE(err4.str().find("needs vtrain-agent-gpu"), std::string::npos) << err4.str();
}

TEST(WorkPlanTest, KeysBecomeLayerAndNcclRuns) {
  const std::string g = "h200-sxm-141gb";
  const WorkPlan plan = PlanProfilingWork(
      {g + "/fp16/attention_fwd h=4096 a=32 s=2048 b=1 t=2",
       g + "/fp16/mlp_bwd h=4096 f=16384 s=2048 b=1 t=2",
       g + "/fp16/logit_fwd h=4096 s=2048 b=1 t=2 v=51200",
       g + "/fp16/optimizer_step params=1000000", g + "/bf16/mlp_fwd h=1024 f=4096 s=512 b=4 t=1",
       g + "/intra_node/all_reduce ranks=4 bytes=8192",
       g + "/intra_node/all_gather ranks=4 bytes=1.5e+09", g + "/intra_node/all_reduce ranks=16",
       g + "/inter_node/all_reduce ranks=2",
       "a100-sxm4-80gb/fp16/mlp_fwd h=1024 f=4096 s=512 b=4 t=1", "gibberish"},
      g, 8);
  ASSERT_EQ(plan.runs.size(), 3u);
  const std::vector<std::string> layer = {
      "profile", "--hidden",      "4096",   "--heads",       "32",   "--ffn",
      "16384",   "--seq-len",     "2048",   "--micro-batch", "1",    "--tp",
      "2",       "--vocab",       "51200",  "--dtype",       "fp16", "--gpu",
      g,         "--adam-params", "1000000"};
  EXPECT_EQ(plan.runs[0].args, layer);
  EXPECT_EQ(plan.runs[0].keys.size(), 4u);  // three layer keys and the optimizer
  // The bf16 layer: heads default to a head size of 128 (1024 / 128 = 8).
  EXPECT_EQ(plan.runs[1].args[4], "8");
  EXPECT_EQ(plan.runs[1].args[16], "bf16");
  const std::vector<std::string> nccl = {"nccl",
                                         "--min-gpus",
                                         "4",
                                         "--max-gpus",
                                         "4",
                                         "--max-bytes",
                                         "2147483648",
                                         "--collectives",
                                         "all_gather,all_reduce",
                                         "--gpu",
                                         g};
  EXPECT_EQ(plan.runs[2].args, nccl);
  ASSERT_EQ(plan.skipped.size(), 4u);  // 16 ranks, inter-node, other GPU, gibberish
  EXPECT_NE(plan.skipped[0].find("needs 16 GPUs"), std::string::npos) << plan.skipped[0];
  EXPECT_NE(plan.skipped[1].find("spans nodes"), std::string::npos);
}

// The agent's GPT layer runs unfused attention and its Llama layer
// FlashAttention: keys asking for the other are skipped, saying why, not
// answered with kernels of the wrong core.
TEST(WorkPlanTest, AttentionTheAgentDoesNotRunIsSkippedSayingWhy) {
  const std::string g = "a100-sxm4-80gb";
  const WorkPlan plan = PlanProfilingWork(
      {g + "/fp16/attention_fwd h=2048 a=16 s=2048 b=1 t=1 attn=flash",
       g + "/bf16/attention_bwd arch=llama h=4096 a=32 kv=8 s=8192 b=1 t=1 attn=unfused",
       g + "/fp16/attention_fwd h=2048 a=16 s=2048 b=1 t=1",
       g + "/fp16/mlp_fwd h=2048 f=8192 s=2048 b=1 t=1"},
      g, 8);
  ASSERT_EQ(plan.skipped.size(), 2u);
  EXPECT_NE(plan.skipped[0].find("gpt layer runs unfused attention, not flash"), std::string::npos)
      << plan.skipped[0];
  EXPECT_NE(plan.skipped[1].find("llama layer runs flash attention, not unfused"),
            std::string::npos)
      << plan.skipped[1];
  ASSERT_EQ(plan.runs.size(), 1u);
  EXPECT_EQ(plan.runs[0].keys.size(), 2u);  // the unfused attention and the MLP
}

// The agent's fp8 layers use delayed scaling: keys of another recipe are
// skipped, saying why.
TEST(WorkPlanTest, Fp8RecipesTheAgentDoesNotRunAreSkippedSayingWhy) {
  const std::string g = "h100-sxm5-80gb";
  const WorkPlan plan =
      PlanProfilingWork({g + "/fp8/mlp_fwd arch=llama h=4096 f=14336 s=8192 b=1 t=1 fp8=current",
                         g + "/fp8/mlp_fwd arch=llama h=4096 f=14336 s=8192 b=1 t=1"},
                        g, 8);
  ASSERT_EQ(plan.skipped.size(), 1u);
  EXPECT_NE(plan.skipped[0].find("delayed scaling, not current"), std::string::npos)
      << plan.skipped[0];
  ASSERT_EQ(plan.runs.size(), 1u);
  EXPECT_EQ(plan.runs[0].keys.size(), 1u);
}

// Llama keys get Llama runs (their KV heads from the attention key), fp8
// keys fp8 runs of their architecture; the loss and optimizer keys, which
// carry no architecture, ride with a GPT run of their dtype.
TEST(WorkPlanTest, LlamaAndFp8KeysBecomeRunsOfTheirArchitecture) {
  const std::string g = "h100-sxm5-80gb";
  const WorkPlan plan = PlanProfilingWork(
      {g + "/bf16/attention_fwd arch=llama h=4096 a=32 kv=8 s=8192 b=1 t=1",
       g + "/bf16/mlp_fwd arch=llama h=4096 f=14336 s=8192 b=1 t=1",
       g + "/fp8/mlp_bwd arch=llama h=4096 f=14336 s=2048 b=1 t=2",
       g + "/fp8/loss_fwd h=4096 s=2048 b=1 t=2 v=128256",
       g + "/fp8/mlp_fwd h=4096 f=16384 s=2048 b=1 t=1", g + "/fp8/optimizer_step params=5000"},
      g, 8);
  ASSERT_EQ(plan.runs.size(), 4u);
  EXPECT_TRUE(plan.skipped.empty());
  const std::vector<std::string> bf16 = {
      "profile", "--hidden",      "4096", "--heads", "32",    "--ffn",      "14336", "--seq-len",
      "8192",    "--micro-batch", "1",    "--tp",    "1",     "--vocab",    "50257", "--dtype",
      "bf16",    "--gpu",         g,      "--arch",  "llama", "--kv-heads", "8"};
  EXPECT_EQ(plan.runs[0].args, bf16);
  EXPECT_EQ(plan.runs[0].keys.size(), 2u);
  // fp8 groups in the map's order (architecture, hidden, seq, b, t): the GPT
  // mlp_fwd (t 1, the optimizer key riding along), the GPT loss (t 2), then
  // the Llama mlp_bwd.
  const std::vector<std::string>& gpt = plan.runs[1].args;
  EXPECT_EQ(gpt[16], "fp8");
  EXPECT_EQ(gpt.size(), 21u) << "GPT (no --arch) with --adam-params";
  EXPECT_EQ(gpt.back(), "5000");
  EXPECT_EQ(plan.runs[2].args[14], "128256");  // the loss key's vocabulary
  const std::vector<std::string>& llama = plan.runs[3].args;
  EXPECT_EQ(llama[16], "fp8");
  EXPECT_EQ(std::vector<std::string>(llama.begin() + 19, llama.begin() + 21),
            (std::vector<std::string>{"--arch", "llama"}));
}

// serve against a real registry, with a stand-in for vtrain-agent-gpu that
// writes a one-kernel table for the shape it is asked to profile: the work
// predictions left behind is answered, pushed and taken off the queue.
TEST(AgentCommandsTest, ServeAnswersProfilingWork) {
  const std::string dir = ::testing::TempDir();
  const std::string fake = absl::StrCat(dir, "/fake-agent-gpu-", getpid()), token = dir + "/tok2",
                    log = absl::StrCat(dir, "/fake-", getpid(), ".log");
  std::remove(log.c_str());
  {
    std::ofstream(token) << "tok";
    std::ofstream f(fake);
    f << "#!/bin/bash\n"
         "echo \"$*\" >> "
      << log
      << "\n"
         "if [ \"$1\" = info ]; then printf 'host h\\ngpus 8\\nvtrain name a100-sxm4-80gb\\n'; "
         "exit 0; fi\n"
         "declare -A v; cmd=$1; shift\n"
         "while [ $# -gt 0 ]; do v[$1]=$2; shift 2; done\n"
         "if [ \"$cmd\" = profile ]; then\n"
         "  dt=$(echo ${v[--dtype]} | tr a-z A-Z)\n"
         "  cat > ${v[-o]} <<EOF\n"
         "{\"name\": \"fake\", \"gpu\": \"${v[--gpu]}\", \"operators\": [{\"key\": {\"op\": "
         "\"OPERATOR_KIND_ATTENTION_FWD\",\n"
         " \"dtype\": \"DTYPE_$dt\", \"hidden\": ${v[--hidden]}, \"heads\": ${v[--heads]},\n"
         " \"seq\": ${v[--seq-len]}, \"micro_batch\": ${v[--micro-batch]}, \"tensor_parallel\": "
         "${v[--tp]}},\n"
         " \"kernels\": [{\"name\": \"k\", \"duration_ns\": 1000}]}]}\n"
         "EOF\n"
         "else exit 3; fi\n";
  }
  chmod(fake.c_str(), 0755);
  setenv("VTRAIN_AGENT_GPU", fake.c_str(), 1);

  server::ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = absl::StrCat(dir, "/serve_", getpid(), ".db");
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((o.db_path + suffix).c_str());
  o.push_token = "tok";
  absl::StatusOr<std::unique_ptr<server::Server>> srv = server::Server::Start(o);
  ASSERT_TRUE(srv.ok()) << srv.status();
  const std::string address = absl::StrCat("127.0.0.1:", (*srv)->port());
  // A prediction on a GPU with only analytical tables leaves work behind.
  std::ostringstream pout, perr;
  ASSERT_EQ(client::RunVtrainctl({"predict", "--server", address, "--model", "gpt3-1.3b",
                                  "--settings", "paper", "--gpu", "a100-sxm4-80gb", "--gpus", "8",
                                  "--tp", "2", "--dp", "4", "--global-batch", "64"},
                                 pout, perr),
            0)
      << perr.str();

  auto work_keys = [&] {
    auto stub = v1::ProfileRegistry::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    v1::NextProfilingWorkRequest req;
    req.set_gpu("a100-sxm4-80gb");
    req.set_max_items(1000);
    v1::NextProfilingWorkResponse resp;
    EXPECT_TRUE(stub->NextProfilingWork(&ctx, req, &resp).ok());
    std::vector<std::string> keys;
    for (const auto& w : resp.work()) keys.push_back(w.key());
    return keys;
  };
  const std::vector<std::string> before = work_keys();
  auto attention_it = std::find_if(before.begin(), before.end(), [](const std::string& k) {
    return k.rfind("a100-sxm4-80gb/fp16/attention_fwd h=2048 ", 0) == 0;
  });
  ASSERT_NE(attention_it, before.end()) << absl::StrJoin(before, "\n");
  const std::string attention = *attention_it;

  std::ostringstream out, err;
  // The stand-in fails NCCL runs: serve reports them and exits non-zero, but
  // pushes what the profile runs measured.
  // The GPU model and count come from `info`.
  EXPECT_EQ(RunAgent({"serve", "--server", address, "--token-file", token, "--once", "--max-items",
                      "1000", "--work-dir", dir},
                     out, err),
            1)
      << out.str() << err.str();
  EXPECT_NE(out.str().find("serve: asking for a100-sxm4-80gb work; 8 GPU(s) here"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("(stored)"), std::string::npos) << out.str() << err.str();
  std::ifstream in(log);
  std::stringstream ran;
  ran << in.rdbuf();
  EXPECT_NE(ran.str().find("profile --hidden 2048 --heads "), std::string::npos) << ran.str();
  EXPECT_NE(ran.str().find("nccl --min-gpus 2 --max-gpus 2"), std::string::npos) << ran.str();
  const std::vector<std::string> after = work_keys();
  EXPECT_EQ(std::find(after.begin(), after.end(), attention), after.end())
      << "the pushed table answers the attention key";
  EXPECT_LT(after.size(), before.size());
  unsetenv("VTRAIN_AGENT_GPU");
}

}  // namespace
}  // namespace vtrain::agent
