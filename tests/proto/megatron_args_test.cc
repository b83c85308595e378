// Megatron-LM launches as jobs (proto/megatron_args.h, proto/shell_words.h):
// launch scripts written as Megatron-LM's examples/ write them give the same
// prediction as the same job written as vtrainctl flags; every argument is
// mapped, listed as ignored or refused by name; the shell is read, never run.
#include "proto/megatron_args.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/job_convert.h"
#include "proto/shell_words.h"
#include "tests/testing/vtrainctl.h"

namespace vtrain::proto {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::vtrain::testing::RunVtrainctlInProcess;

std::string Fixture(const std::string& name) {
  const char* src = std::getenv("VTRAIN_SOURCE_DIR");
  return absl::StrCat(src != nullptr ? src : VTRAIN_TEST_SOURCE_DIR, "/data/megatron-launches/",
                      name);
}

int64_t JsonInt(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\": ");
  if (at == std::string::npos) return -1;
  return std::stoll(json.substr(at + key.size() + 4));
}

// The launch and the flags predict the same iteration, to the nanosecond.
void ExpectSamePrediction(const std::string& fixture, std::vector<std::string> extra,
                          std::vector<std::string> flags) {
  std::vector<std::string> from_launch = {"predict", "--megatron-args", Fixture(fixture), "--json"};
  from_launch.insert(from_launch.end(), extra.begin(), extra.end());
  const auto a = RunVtrainctlInProcess(from_launch);
  ASSERT_EQ(a.code, 0) << a.err;
  std::vector<std::string> from_flags = {"predict", "--json"};
  from_flags.insert(from_flags.end(), flags.begin(), flags.end());
  const auto b = RunVtrainctlInProcess(from_flags);
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_GT(JsonInt(a.out, "iteration_time_ns"), 0);
  EXPECT_EQ(JsonInt(a.out, "iteration_time_ns"), JsonInt(b.out, "iteration_time_ns"))
      << a.out.substr(0, 400) << "\n---\n"
      << b.out.substr(0, 400);
}

TEST(MegatronArgsTest, Gpt3ScriptIsTheSameJobAsItsFlags) {
  ExpectSamePrediction("gpt3_175b.sh", {"--gpu", "a100-sxm4-80gb"},
                       {"--settings",     "megatron-defaults",
                        "--arch",         "gpt",
                        "--layers",       "96",
                        "--hidden",       "12288",
                        "--heads",        "96",
                        "--seq-len",      "2048",
                        "--vocab",        "50257",
                        "--gpus",         "512",
                        "--tp",           "8",
                        "--pp",           "16",
                        "--micro-batch",  "1",
                        "--global-batch", "1536",
                        "--dtype",        "fp16",
                        "--recompute",    "none",
                        "--gpu",          "a100-sxm4-80gb"});
}

TEST(MegatronArgsTest, Llama3ScriptWithAnFp8BranchIsTheSameJobAsItsFlags) {
  ExpectSamePrediction("llama3_70b.sh", {"--gpu", "h100-sxm5-80gb"},
                       {"--settings",
                        "megatron-defaults",
                        "--arch",
                        "llama",
                        "--layers",
                        "80",
                        "--hidden",
                        "8192",
                        "--ffn",
                        "28672",
                        "--heads",
                        "64",
                        "--kv-heads",
                        "8",
                        "--seq-len",
                        "8192",
                        "--vocab",
                        "128256",
                        "--gpus",
                        "64",
                        "--tp",
                        "4",
                        "--pp",
                        "4",
                        "--cp",
                        "2",
                        "--virtual-stages",
                        "5",
                        "--sequence-parallel",
                        "on",
                        "--tp-comm-overlap",
                        "on",
                        "--data-parallel-sharding",
                        "optimizer",
                        "--gradient-bucketing",
                        "on",
                        "--overlap-param-gather",
                        "on",
                        "--dtype",
                        "fp8",
                        "--micro-batch",
                        "1",
                        "--global-batch",
                        "128",
                        "--recompute",
                        "none",
                        "--gpu",
                        "h100-sxm5-80gb"});
}

TEST(MegatronArgsTest, MixtralScriptIsTheSameJobAsItsFlags) {
  ExpectSamePrediction("mixtral_8x7b.sh", {"--gpu", "h100-sxm5-80gb"},
                       {"--settings",
                        "megatron-defaults",
                        "--arch",
                        "llama",
                        "--layers",
                        "32",
                        "--hidden",
                        "4096",
                        "--ffn",
                        "14336",
                        "--heads",
                        "32",
                        "--kv-heads",
                        "8",
                        "--seq-len",
                        "4096",
                        "--vocab",
                        "32000",
                        "--num-experts",
                        "8",
                        "--moe-top-k",
                        "2",
                        "--moe-ffn",
                        "14336",
                        "--moe-dispatcher",
                        "alltoall",
                        "--gpus",
                        "64",
                        "--pp",
                        "4",
                        "--ep",
                        "8",
                        "--etp",
                        "1",
                        "--sequence-parallel",
                        "on",
                        "--data-parallel-sharding",
                        "optimizer",
                        "--gradient-bucketing",
                        "on",
                        "--overlap-param-gather",
                        "on",
                        "--dtype",
                        "bf16",
                        "--micro-batch",
                        "1",
                        "--global-batch",
                        "256",
                        "--recompute",
                        "none",
                        "--gpu",
                        "h100-sxm5-80gb"});
}

TEST(MegatronArgsTest, DeepSeekArgumentListIsThePresetsJob) {
  // A bare argument list (no launcher: the world size comes from --gpus).
  ExpectSamePrediction("deepseek_v3.args", {"--gpu", "h100-sxm5-80gb", "--gpus", "1024"},
                       {"--model",
                        "deepseek-v3",
                        "--settings",
                        "megatron-defaults",
                        "--gpu",
                        "h100-sxm5-80gb",
                        "--gpus",
                        "1024",
                        "--tp",
                        "2",
                        "--pp",
                        "8",
                        "--virtual-stages",
                        "4",
                        "--pipeline-layout",
                        "Et|(tt|)*30mL",
                        "--ep",
                        "64",
                        "--etp",
                        "1",
                        "--sequence-parallel",
                        "on",
                        "--moe-dispatcher",
                        "flex",
                        "--micro-batch",
                        "1",
                        "--global-batch",
                        "8192",
                        "--dtype",
                        "fp8",
                        "--data-parallel-sharding",
                        "optimizer",
                        "--overlap-param-gather",
                        "on",
                        "--recompute",
                        "selective",
                        "--recompute-modules",
                        "mlp,mla_up_proj"});
}

TEST(MegatronArgsTest, EveryArgumentIsMappedIgnoredOrRefused) {
  std::ifstream f(Fixture("gpt3_175b.sh"));
  std::stringstream text;
  text << f.rdbuf();
  absl::StatusOr<MegatronJob> job = RequestFromMegatronArgs(text.str(), "gpt3_175b.sh");
  ASSERT_TRUE(job.ok()) << job.status();
  // Listed once each, with why they do not matter.
  EXPECT_THAT(job->ignored, Contains("--lr (learning rate)"));
  EXPECT_THAT(job->ignored, Contains("--save (checkpoints)"));
  EXPECT_THAT(job->ignored, Contains("--data-path (data)"));
  EXPECT_EQ(job->request.cluster().num_gpus(), 512);    // --nproc_per_node 8 x --nnodes 64
  EXPECT_EQ(job->request.model().vocab_size(), 50257);  // GPT-2 BPE: its merge file
  // An argument vtrain does not know is refused with its name and line.
  absl::StatusOr<MegatronJob> unknown = RequestFromMegatronArgs(
      "torchrun pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 2 \\\n"
      "  --seq-length 128 --bf16 --global-batch-size 8 --vocab-size 100 \\\n"
      "  --hybrid-layer-pattern M*M*\n",
      "s.sh");
  EXPECT_THAT(unknown.status().message(), HasSubstr("s.sh:1: --hybrid-layer-pattern is not "
                                                    "modelled by vtrain"));
  const struct {
    const char* args;
    const char* says;
  } refused[] = {
      {"--recompute-granularity full --recompute-method block --recompute-num-layers 5",
       "--recompute-method block"},
      {"--moe-layer-freq [1,0,0,1]", "--moe-layer-freq without --num-experts"},
      {"--cp-comm-type p2p a2a", "one type per layer is not modelled"},
      {"--tensor-model-parallel-size two", "takes one integer"},
      {"--moe-router-score-function sqrtsoftplus", "'sqrtsoftplus' is not modelled"},
  };
  for (const auto& c : refused) {
    SCOPED_TRACE(c.args);
    absl::StatusOr<MegatronJob> j = RequestFromMegatronArgs(
        absl::StrCat("--num-layers 4 --hidden-size 64 --num-attention-heads 2 --seq-length 128 "
                     "--bf16 --global-batch-size 8 --vocab-size 100 ",
                     c.args),
        "list");
    EXPECT_THAT(j.status().message(), HasSubstr(c.says));
  }
  // The precision-aware optimizer with bf16 moments is mapped; fp32 ones are
  // the default.
  absl::StatusOr<MegatronJob> pao = RequestFromMegatronArgs(
      "--num-layers 4 --hidden-size 64 --num-attention-heads 2 --seq-length 128 --bf16 "
      "--global-batch-size 8 --vocab-size 100 --use-precision-aware-optimizer "
      "--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16",
      "list");
  ASSERT_TRUE(pao.ok()) << pao.status();
  EXPECT_TRUE(pao->request.plan().bf16_moments());
  // The flex dispatcher's HybridEP backend, given before or after the type.
  for (const char* order :
       {"--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep",
        "--moe-flex-dispatcher-backend hybridep --moe-token-dispatcher-type flex"}) {
    absl::StatusOr<MegatronJob> j = RequestFromMegatronArgs(
        absl::StrCat("--num-layers 4 --hidden-size 64 --num-attention-heads 2 --seq-length 128 "
                     "--bf16 --global-batch-size 8 --vocab-size 100 --num-experts 4 "
                     "--expert-model-parallel-size 2 ",
                     order),
        "list");
    ASSERT_TRUE(j.ok()) << j.status();
    EXPECT_EQ(j->request.plan().moe_dispatcher(), v1::MOE_DISPATCHER_HYBRIDEP) << order;
  }
  // With --bf16 the gradient buffer is fp32 unless turned off.
  EXPECT_TRUE(pao->request.plan().fp32_grads());
  for (const char* off :
       {"--grad-reduce-in-bf16", "--use-precision-aware-optimizer --main-grads-dtype bf16"}) {
    absl::StatusOr<MegatronJob> j = RequestFromMegatronArgs(
        absl::StrCat("--num-layers 4 --hidden-size 64 --num-attention-heads 2 --seq-length 128 "
                     "--bf16 --global-batch-size 8 --vocab-size 100 ",
                     off),
        "list");
    ASSERT_TRUE(j.ok()) << j.status();
    EXPECT_FALSE(j->request.plan().fp32_grads()) << off;
  }
  // fp32 training (Megatron's default without --bf16 or --fp16).
  EXPECT_THAT(RequestFromMegatronArgs("--num-layers 4 --hidden-size 64 --num-attention-heads 2 "
                                      "--seq-length 128 --global-batch-size 8 --vocab-size 100",
                                      "list")
                  .status()
                  .message(),
              HasSubstr("fp32 training is not modelled"));
}

TEST(MegatronArgsTest, FlagsWinOverTheLaunch) {
  const auto r = RunVtrainctlInProcess({"predict", "--megatron-args", Fixture("gpt3_175b.sh"),
                                        "--tp", "4", "--gpus", "256", "--print-flags"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("--gpus 256"));
  EXPECT_THAT(r.out, HasSubstr("--tp 4 --pp 16"));
  EXPECT_THAT(r.err, HasSubstr("megatron-args: ignored, no step time: "));
  // A launch with no vocabulary asks for --vocab; with it, it runs.
  const auto no_vocab =
      RunVtrainctlInProcess({"predict", "--megatron-args", Fixture("llama3_70b.sh"), "--vocab",
                             "32000", "--print-flags"});
  EXPECT_EQ(no_vocab.code, 0) << no_vocab.err;
  EXPECT_THAT(no_vocab.out, HasSubstr("--vocab 32000"));
}

TEST(ShellWordsTest, ExpandsAsBashWould) {
  absl::StatusOr<ShellScript> s = ReadShell(
      "N=${NODES:-4}\n"
      "G=8 ; W=$((G*N + 0))\n"
      "A=( --a 1 \"--b two\"  # a comment\n"
      "    --c \"x y\" )\n"
      "A+=( --d )\n"
      "if [[ \"$W\" == \"32\" ]]; then\n"
      "  B=( yes )\n"
      "elif [ -n \"$N\" ]; then B=( elif ); else B=( no ); fi\n"
      "run ${A[@]} \"${A[@]}\" ${B[0]} $W '$W' \"$UNSET\"x\n",
      "t.sh");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->commands.size(), 1u);
  EXPECT_THAT(s->commands[0].words,
              ElementsAre("run", "--a", "1", "--b", "two", "--c", "x", "y", "--d", "--a", "1",
                          "--b two", "--c", "x y", "--d", "yes", "32", "$W", "x"));
  EXPECT_EQ(s->variables.at("W"), "32");
}

TEST(ShellWordsTest, NothingIsRunAndHostileInputIsBounded) {
  const std::string sentinel = absl::StrCat(::testing::TempDir(), "/vtrain_sentinel_", getpid());
  std::remove(sentinel.c_str());
  absl::StatusOr<ShellScript> s = ReadShell(
      absl::StrCat("X=$(touch ", sentinel, ")\nY=`touch ", sentinel, "`\necho $X$Y\n"), "h.sh");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_NE(access(sentinel.c_str(), F_OK), 0) << "a command substitution ran";
  EXPECT_THAT(absl::StrJoin(s->notes, "\n"), HasSubstr("was not run"));
  EXPECT_THAT(ReadShell("cat <<EOF\n--x\nEOF\n", "h.sh").status().message(),
              HasSubstr("h.sh:1: a heredoc"));
  EXPECT_THAT(ReadShell("A='open\n", "h.sh").status().message(), HasSubstr("unterminated"));
  EXPECT_THAT(ReadShell(std::string("a\0b", 3), "h.sh").status().message(), HasSubstr("NUL"));
  EXPECT_THAT(ReadShell(std::string(kMaxShellBytes + 1, 'a'), "h.sh").status().message(),
              HasSubstr("at most"));
  // An array doubled again and again stops at the word limit.
  std::string doubling = "A=( x x x x x x x x )\n";
  for (int i = 0; i < 40; ++i) doubling += "A+=( ${A[@]} )\n";
  EXPECT_THAT(ReadShell(doubling, "h.sh").status().message(), HasSubstr("more than"));
  std::string nested;
  for (int i = 0; i < 70; ++i) nested += "if [ 1 ]; then\n";
  EXPECT_THAT(ReadShell(nested, "h.sh").status().message(), HasSubstr("deeper than 64"));
  // A condition it cannot decide is refused by line, not guessed.
  EXPECT_THAT(ReadShell("if grep -q x f; then A=1; fi\n", "h.sh").status().message(),
              HasSubstr("h.sh:1: cannot decide"));
}

}  // namespace
}  // namespace vtrain::proto

namespace vtrain::proto {
namespace {

TEST(MegatronArgsTest, MegatronFlagNamesGetAHintAndSizesTakeSuffixes) {
  const auto hint = RunVtrainctlInProcess(
      {"predict", "--model", "llama3-8b", "--tensor-model-parallel-size", "2"});
  EXPECT_EQ(hint.code, 2);
  EXPECT_THAT(hint.err,
              HasSubstr("--tensor-model-parallel-size is Megatron-LM's: here it is --tp"));
  const auto sized = RunVtrainctlInProcess(
      {"predict", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "2Ki", "--print-flags"});
  ASSERT_EQ(sized.code, 0) << sized.err;
  EXPECT_THAT(sized.out, HasSubstr("--global-batch 2048"));
  const auto tokens = RunVtrainctlInProcess({"predict", "--model", "llama3-8b", "--gpus", "8",
                                             "--global-batch", "1k", "--tokens", "15T", "--json"});
  ASSERT_EQ(tokens.code, 0) << tokens.err;
  EXPECT_THAT(tokens.out, HasSubstr("\"global_batch\": 1000"));
  EXPECT_THAT(tokens.out, HasSubstr("\"tokens\": 1.5e+13"));
  const auto bad = RunVtrainctlInProcess(
      {"predict", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "2x"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--global-batch='2x' is not an integer (suffixes"));
}

}  // namespace
}  // namespace vtrain::proto
