// The LLM training job a trace job becomes in the cluster study. A trace
// gives each job its arrival, duration and deadline; the job mix gives it a
// model, a global batch, a GPU type and the GPUs it asks for:
//  - kItp: by the GPUs the traced job used (1: gpt3-350m ... 64+: gpt3-175b),
//    the study's first mapping; ITP jobs mostly use 1-8 GPUs, so nearly all
//    become models of 6.7B or less, where data parallelism is already best.
//  - kPaper: the GPT-3 family on A100, at the GPU demands of LLM jobs.
//  - k2026: dense Llama-style and MoE presets on H100, at the same demands.
// docs/commands.md#job-mixes says where each mix's shape comes from.
#ifndef VTRAIN_CORE_CLUSTER_JOB_MIX_H_
#define VTRAIN_CORE_CLUSTER_JOB_MIX_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vtrain {

enum class JobMix { kItp, kPaper, k2026 };

absl::string_view JobMixName(JobMix mix);  // "itp", "paper", "2026"
// INVALID_ARGUMENT "<field>='x' is unknown; use itp, paper or 2026".
absl::StatusOr<JobMix> ParseJobMix(absl::string_view name, absl::string_view field);

struct LlmJob {
  std::string preset{};  // a model preset (vtrainctl presets)
  int64_t global_batch = 0;
  int64_t gpus = 0;            // the GPUs it asks for (the trace job's under kItp)
  std::string gpu{};           // the GPU the mix runs on; empty: the cluster's
  bool paper_settings = true;  // fp16, full recomputation, Megatron's defaults (vTrain §VI)
};

// The job a trace job (its id and the GPUs it used) becomes under `mix` on a
// cluster of `max_gpus`. Under kPaper and k2026 the draw is a hash of (mix,
// id): one job gets the same model and size in every window, policy and
// run, and no draw depends on which other jobs a window holds; a demand
// larger than the cluster becomes the largest the cluster has, with a model
// drawn for that size.
LlmJob DrawLlmJob(JobMix mix, absl::string_view job_id, int64_t trace_gpus, int64_t max_gpus);

}  // namespace vtrain

#endif  // VTRAIN_CORE_CLUSTER_JOB_MIX_H_
