#include "tests/testing/spec_builders.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "core/spec/gpu.h"
#include "core/spec/model.h"
#include "core/util/status_macros.h"
#include "tests/testing/random.h"

namespace vtrain::testing {
Job TinyJob() {
  Job job;
  job.model.name = "tiny";
  job.model.num_layers = 8;
  job.model.hidden_size = 64;
  job.model.num_heads = 4;
  job.model.seq_len = 128;
  job.model.vocab_size = 512;
  absl::StatusOr<GpuSpec> gpu = GpuByName("a100-sxm4-80gb");
  VTRAIN_CHECK(gpu.ok());
  job.cluster = DefaultCluster(*gpu, 1);
  job.plan.micro_batch = 1;
  job.plan.global_batch = 4;
  job.plan.schedule = PipelineSchedule::k1F1B;
  job.plan.recompute = Recompute::kNone;
  return job;
}

Job WithPlan(Job job, int64_t t, int64_t d, int64_t p, int64_t micro_batch, int64_t global_batch) {
  job.plan.tensor_parallel = t;
  job.plan.data_parallel = d;
  job.plan.pipeline_parallel = p;
  job.plan.micro_batch = micro_batch;
  job.plan.global_batch = global_batch;
  job.cluster.num_gpus = t * d * p;
  return job;
}

Job PresetJob(const std::string& preset, int64_t t, int64_t d, int64_t p, int64_t micro_batch,
              int64_t global_batch) {
  absl::StatusOr<ModelSpec> model = ModelPreset(preset);
  absl::StatusOr<GpuSpec> gpu = GpuByName("a100-sxm4-80gb");
  VTRAIN_CHECK(model.ok() && gpu.ok());
  Job job;
  job.model = *std::move(model);
  job.cluster = DefaultCluster(*gpu, 1);
  return WithPlan(std::move(job), t, d, p, micro_batch, global_batch);
}

Job Gpt13bJob() {
  Job job;
  absl::StatusOr<ModelSpec> model = ModelPreset("gpt3-1.3b");
  absl::StatusOr<GpuSpec> gpu = GpuByName("a100-sxm4-80gb");
  VTRAIN_CHECK(model.ok() && gpu.ok());
  job.model = *model;
  job.cluster = DefaultCluster(*gpu, 8);
  return WithPlan(job, 2, 4, 1, 1, 64);
}

}  // namespace vtrain::testing

namespace vtrain::testing {

Job RandomSmallJob(uint64_t seed) {
  Random r(seed);
  Job job;
  job.model.name = "random";
  job.model.hidden_size = r.Pick<int64_t>({64, 128, 192, 256});
  job.model.num_heads = r.Pick<int64_t>({1, 2, 4, 8});
  job.model.seq_len = r.Pick<int64_t>({32, 64, 128, 256});
  job.model.vocab_size = r.Pick<int64_t>({1000, 4096, 50257});
  const int64_t p = r.Pick<int64_t>({1, 1, 2, 3, 4});
  job.model.num_layers = p * r.Uniform(1, 3);
  int64_t t = r.Pick<int64_t>({1, 1, 2, 4, 8});
  while (job.model.num_heads % t != 0) t /= 2;
  const int64_t d = r.Uniform(1, 4);
  const int64_t micro_batch = r.Pick<int64_t>({1, 1, 2, 4});
  const int64_t m = r.Uniform(1, 9);
  const std::vector<std::string> gpus = GpuNames();
  absl::StatusOr<GpuSpec> gpu =
      GpuByName(gpus[r.Uniform(0, static_cast<int64_t>(gpus.size()) - 1)]);
  VTRAIN_CHECK(gpu.ok());
  job.cluster = DefaultCluster(*gpu, 1);
  job = WithPlan(job, t, d, p, micro_batch, d * micro_batch * m);
  job.cluster.gpus_per_node = r.Pick<int64_t>({1, 2, 4, 8, 16});
  job.plan.schedule = r.Pick({PipelineSchedule::kGpipe, PipelineSchedule::k1F1B});
  job.plan.recompute = r.Pick({Recompute::kNone, Recompute::kFull});
  job.plan.gradient_bucketing = r.Uniform(0, 1) == 1;
  // Small buckets so that the last backward splits into several.
  job.plan.bucket_size_bytes = r.Pick<int64_t>({1, 50'000, 400'000, 25 << 20});
  // Some jobs split the backward pass, where their shape allows it.
  const int64_t split = r.Uniform(0, 7);
  if (split == 0) job.plan.schedule = PipelineSchedule::kZbH1;
  if (split == 1 && p % 2 == 0 && m >= 2 * p && m % 2 == 0) {
    job.plan.schedule = PipelineSchedule::kDualPipe;
  }
  if (split == 2 && p >= 2 && m >= 2 * p && job.model.num_layers % (2 * p) == 0) {
    job.plan.schedule = PipelineSchedule::kDualPipeV;
    job.plan.virtual_stages = 2;
  }
  // Some interleave two chunks per stage (their gradients then reduce chunk
  // by chunk when bucketing is on).
  if (split == 3 && p >= 2 && m % p == 0 && job.model.num_layers % (2 * p) == 0) {
    job.plan.schedule = PipelineSchedule::k1F1B;
    job.plan.virtual_stages = 2;
  }
  job.model.attention_impl = r.Pick({AttentionImpl::kFlash, AttentionImpl::kUnfused});
  // Megatron-Core's overlaps, with what they need.
  if (r.Uniform(0, 2) == 0) {
    job.plan.sequence_parallel = true;
    job.plan.tp_comm_overlap = r.Uniform(0, 1) == 1;
  }
  if (r.Uniform(0, 2) == 0) {
    job.plan.data_parallel_sharding = DataParallelSharding::kOptimizer;
    job.plan.param_gather_overlap = r.Uniform(0, 1) == 1;
  }
  // Some clusters join several nodes in one NVLink domain.
  if (r.Uniform(0, 3) == 0)
    job.cluster.nvlink_domain = job.cluster.gpus_per_node * r.Pick<int64_t>({1, 2, 4});
  // Some train in fp8 where the GPU has it, with any recipe it allows.
  if (job.cluster.gpu.peak_fp8_flops_per_s > 0 && r.Uniform(0, 2) == 0) {
    job.plan.dtype = DType::kFp8;
    job.plan.fp8_recipe = r.Pick(
        {Fp8Recipe::kDelayed, Fp8Recipe::kCurrent, Fp8Recipe::kBlockwise, Fp8Recipe::kMxfp8});
    if (job.plan.fp8_recipe == Fp8Recipe::kMxfp8 && !SupportsMxfp8(job.cluster.gpu)) {
      job.plan.fp8_recipe = Fp8Recipe::kBlockwise;
    }
  }
  // Some split the sequence, over a ring or by all-to-all where the heads allow.
  if (r.Uniform(0, 3) == 0) {
    job.plan.context_parallel = 2;
    job.cluster.num_gpus *= 2;
    const bool splits = job.model.num_heads / job.plan.tensor_parallel % 2 == 0;
    job.plan.cp_comm = splits ? r.Pick({ContextParallelComm::kP2P, ContextParallelComm::kA2A})
                              : ContextParallelComm::kP2P;
  }
  return job;
}

std::string DescribeJob(const Job& job) {
  return absl::StrCat(
      "L=", job.model.num_layers, " h=", job.model.hidden_size, " a=", job.model.num_heads,
      " s=", job.model.seq_len, " v=", job.model.vocab_size, " t=", job.plan.tensor_parallel,
      " d=", job.plan.data_parallel, " p=", job.plan.pipeline_parallel, " b=", job.plan.micro_batch,
      " B=", job.plan.global_batch, " gpn=", job.cluster.gpus_per_node, " ", job.cluster.gpu.name,
      " ", ScheduleName(job.plan.schedule), " recompute=", RecomputeName(job.plan.recompute),
      " bucketing=", job.plan.gradient_bucketing ? "on" : "off",
      " bucket=", job.plan.bucket_size_bytes, " sp=", job.plan.sequence_parallel ? "on" : "off",
      " tp_overlap=", job.plan.tp_comm_overlap ? "on" : "off",
      " sharding=", ShardingName(job.plan.data_parallel_sharding),
      " gather_overlap=", job.plan.param_gather_overlap ? "on" : "off",
      " nvlink_domain=", job.cluster.nvlink_domain, " ", DTypeName(job.plan.dtype), "/",
      Fp8RecipeName(job.plan.fp8_recipe), " c=", job.plan.context_parallel, " ",
      CpCommName(job.plan.cp_comm));
}

}  // namespace vtrain::testing
