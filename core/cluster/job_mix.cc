#include "core/cluster/job_mix.h"

#include <algorithm>
#include <string>

#include "core/util/enum_names.h"

namespace vtrain {
namespace {

constexpr EnumName<JobMix> kMixes[] = {
    {JobMix::kItp, "itp"}, {JobMix::kPaper, "paper"}, {JobMix::k2026, "2026"}};

// GPU demand of an LLM job: powers of two from one node to 1,024 GPUs, the
// median 32 and about two thirds of the GPU-time in jobs of 256 GPUs or more
// (durations being the trace's, independent of size). The shape of the
// training jobs of published LLM clusters: Acme (Hu et al., NSDI '24):
// pretraining jobs "often require over 100 GPUs", the largest 1,024; Meta's
// RSC clusters (Kokolis et al., HPCA '25, Fig. 6): jobs of 256+ GPUs hold
// 52-66% of the GPU-time. Evaluation and debugging jobs of 1-4 GPUs, most
// of those traces' job count but little of their GPU-time, are left out.
struct Demand {
  int64_t gpus;
  double share;
};
constexpr Demand kDemands[] = {{8, 0.20},   {16, 0.20},  {32, 0.20},  {64, 0.15},
                               {128, 0.10}, {256, 0.08}, {512, 0.05}, {1024, 0.02}};

struct Model {
  const char* preset;
  int64_t global_batch;
};
struct Row {
  int64_t gpus;
  Model models[3];  // drawn with equal odds among the set ones
};

// The GPT-3 family (Brown et al. 2020, Table 2.1) at the paper's batch in
// tokens over 2,048-token sequences: 1.3B and 2.7B 1M tokens (512), 6.7B and
// 13B 2M (1,024), 175B 3.2M (1,536); each on the demands it is trained at.
constexpr Row kPaperRows[] = {
    {8, {{"gpt3-1.3b", 512}, {"gpt3-2.7b", 512}}},
    {16, {{"gpt3-2.7b", 512}, {"gpt3-6.7b", 1024}}},
    {32, {{"gpt3-6.7b", 1024}, {"gpt3-13b", 1024}}},
    {64, {{"gpt3-13b", 1024}}},
    {128, {{"gpt3-13b", 1024}, {"gpt3-175b", 1536}}},
    {256, {{"gpt3-175b", 1536}}},
    {512, {{"gpt3-175b", 1536}}},
    {1024, {{"gpt3-175b", 1536}}},
};

// Dense Llama-style and MoE presets on H100 at the global batches of
// Megatron-Bridge's and NeMo's pretraining recipes for them (read from
// their configs, docs/settings.md): Llama 3 8B 128, 70B 256, 405B 1,536;
// Mixtral 8x7B and 8x22B 256; Qwen3-30B-A3B 512, 235B-A22B 2,048;
// GPT-OSS-120B 1,280; DeepSeek-V3 8,192.
constexpr Row k2026Rows[] = {
    {8, {{"llama3-8b", 128}, {"qwen3-30b-a3b", 512}}},
    {16, {{"llama3-8b", 128}, {"qwen3-30b-a3b", 512}}},
    {32, {{"llama3-8b", 128}, {"mixtral-8x7b", 256}}},
    {64, {{"llama3-70b", 256}, {"gpt-oss-120b", 1280}, {"mixtral-8x7b", 256}}},
    {128, {{"llama3-70b", 256}, {"mixtral-8x22b", 256}}},
    {256, {{"llama3-70b", 256}, {"qwen3-235b-a22b", 2048}}},
    {512, {{"llama3.1-405b", 1536}, {"qwen3-235b-a22b", 2048}}},
    {1024, {{"llama3.1-405b", 1536}, {"deepseek-v3", 8192}}},
};

// FNV-1a over the bytes, then SplitMix64's finaliser (Steele et al. 2014)
// for well-mixed high bits.
uint64_t Hash(absl::string_view a, absl::string_view b) {
  uint64_t h = 14695981039346656037ull;
  for (absl::string_view part : {a, absl::string_view("\x1f"), b}) {
    for (unsigned char c : part) {
      h ^= c;
      h *= 1099511628211ull;
    }
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

// A uniform draw in [0, 1) from 53 bits of `h`.
double Unit(uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

LlmJob FromRows(const Row (&rows)[8], JobMix mix, absl::string_view id, int64_t max_gpus) {
  const uint64_t h = Hash(JobMixName(mix), id);
  double u = Unit(h);
  size_t row = 0;
  while (row + 1 < std::size(kDemands) && u >= kDemands[row].share) {
    u -= kDemands[row].share;
    ++row;
  }
  while (row > 0 && rows[row].gpus > max_gpus) --row;
  const Row& r = rows[row];
  int set = 0;
  while (set < 3 && r.models[set].preset != nullptr) ++set;
  const Model& m = r.models[Hash(id, "model") % static_cast<uint64_t>(set)];
  LlmJob job;
  job.preset = m.preset;
  job.global_batch = m.global_batch;
  job.gpus = r.gpus;
  job.gpu = mix == JobMix::k2026 ? "h100-sxm5-80gb" : "a100-sxm4-80gb";
  job.paper_settings = mix == JobMix::kPaper;
  return job;
}

}  // namespace

absl::string_view JobMixName(JobMix mix) { return NameIn(kMixes, mix); }

absl::StatusOr<JobMix> ParseJobMix(absl::string_view name, absl::string_view field) {
  return ParseIn(kMixes, name, field);
}

LlmJob DrawLlmJob(JobMix mix, absl::string_view job_id, int64_t trace_gpus, int64_t max_gpus) {
  if (mix == JobMix::kPaper) return FromRows(kPaperRows, mix, job_id, max_gpus);
  if (mix == JobMix::k2026) return FromRows(k2026Rows, mix, job_id, max_gpus);
  // By the traced GPUs: 1: gpt3-350m, 2: gpt3-1.3b, 4: gpt3-2.7b, 8:
  // gpt3-6.7b, 16-32: gpt3-13b, more: gpt3-175b; a global batch of 16 x
  // the GPUs rounded up to a power of two in [32, 1536].
  const int64_t g = trace_gpus;
  LlmJob job;
  job.preset = g <= 1    ? "gpt3-350m"
               : g <= 2  ? "gpt3-1.3b"
               : g <= 4  ? "gpt3-2.7b"
               : g <= 8  ? "gpt3-6.7b"
               : g <= 32 ? "gpt3-13b"
                         : "gpt3-175b";
  int64_t batch = 32;
  while (batch < 16 * g && batch < 1536) batch *= 2;
  job.global_batch = std::min<int64_t>(batch, 1536);
  job.gpus = g;
  return job;
}

}  // namespace vtrain
