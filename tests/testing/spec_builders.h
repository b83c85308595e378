// Small, valid jobs for tests, and a helper to change a job's plan while
// keeping cluster.num_gpus consistent.
#ifndef VTRAIN_TESTS_TESTING_SPEC_BUILDERS_H_
#define VTRAIN_TESTS_TESTING_SPEC_BUILDERS_H_

#include <cstdint>
#include <string>

#include "core/spec/job.h"

namespace vtrain::testing {

// A valid job small enough to simulate at kernel granularity in a few
// milliseconds: 8 layers, hidden 64, 4 heads, seq 128, vocab 512 (FFN 256)
// on a100-sxm4-80gb with its default bandwidths; t = d = p = 1, micro-batch
// 1, global batch 4, 1F1B, no recomputation, fp16.
Job TinyJob();

// `job` with the plan's degrees and batch sizes replaced and
// cluster.num_gpus set to t * d * p.
Job WithPlan(Job job, int64_t t, int64_t d, int64_t p, int64_t micro_batch, int64_t global_batch);

// The model preset `preset` on t * d * p A100-80GB GPUs with the GPU's
// default bandwidths and the given plan (the other plan fields default).
Job PresetJob(const std::string& preset, int64_t t, int64_t d, int64_t p, int64_t micro_batch,
              int64_t global_batch);

// gpt3-1.3b on 8 A100-80GB GPUs, t=2 d=4 p=1, micro-batch 1, global batch
// 64: a realistic valid job.
Job Gpt13bJob();

// A random valid job small enough to simulate at kernel granularity in a few
// milliseconds: 1-12 layers, hidden 64-256, 1-8 heads, t in {1, 2, 4, 8},
// d in 1..4, p in 1..4, 1-9 micro-batches of 1-4, any GPU, 1-16 GPUs per
// node, any schedule (the split-backward ones where the shape allows) and
// recomputation, either attention core, bucketing on or off with buckets
// from 1 byte to 25 MiB, sometimes sequence parallelism (with or without the
// TP overlap), the distributed optimizer (with or without the parameter-gather
// overlap), an NVLink domain of 1-4 nodes, fp8 with any recipe the GPU
// allows, and c = 2 over a ring or by all-to-all. The same seed gives the same job with any
// standard library.
Job RandomSmallJob(uint64_t seed);

// One line naming the shape, plan and cluster of `job`, for failure messages.
std::string DescribeJob(const Job& job);

}  // namespace vtrain::testing

#endif  // VTRAIN_TESTS_TESTING_SPEC_BUILDERS_H_
