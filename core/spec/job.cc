#include "core/spec/job.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "core/spec/moe.h"
#include "core/spec/pipeline_layout.h"

namespace vtrain {
namespace {

// Upper bounds that keep every product the simulator forms (tokens x hidden x
// bytes, FLOPs) far inside int64 and double precision.
constexpr int64_t kMaxLayers = 100'000;
constexpr int64_t kMaxHidden = 1 << 18;
constexpr int64_t kMaxHeads = 1 << 14;
constexpr int64_t kMaxSeqLen = 1 << 20;
constexpr int64_t kMaxVocab = 1 << 24;
constexpr int64_t kMaxMicroBatch = 1 << 16;
constexpr int64_t kMaxGlobalBatch = int64_t{1} << 31;
constexpr int64_t kMaxGpus = 1 << 24;
constexpr int64_t kMaxGpusPerNode = 1024;
constexpr double kMaxBandwidth = 1e15;

class Violations {
 public:
  // Checks lo <= value <= hi; returns whether it was in range.
  bool InRange(absl::string_view field, int64_t value, int64_t lo, int64_t hi) {
    if (value < lo) {
      Add(absl::StrCat(field, "=", value, " must be at least ", lo));
      return false;
    }
    if (value > hi) {
      Add(absl::StrCat(field, "=", value, " exceeds the maximum ", hi, "; use a smaller value"));
      return false;
    }
    return true;
  }
  bool Positive(absl::string_view field, double value, double hi) {
    if (!(value > 0) || !std::isfinite(value)) {
      Add(absl::StrCat(field, "=", value, " must be a positive number"));
      return false;
    }
    if (value > hi) {
      Add(absl::StrCat(field, "=", value, " exceeds the maximum ", hi, "; use a smaller value"));
      return false;
    }
    return true;
  }
  void Add(std::string message) { messages_.push_back(std::move(message)); }
  absl::Status ToStatus() const {
    if (messages_.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrJoin(messages_, "; "));
  }

 private:
  std::vector<std::string> messages_;
};

// The zero-bubble and DualPipe schedules' shapes, as their reference
// implementations assert them (DualPipe's dualpipe.py / dualpipev.py: an even
// number of ranks, at least 2p micro-batches).
void ValidateSplitSchedule(const ParallelPlan& p, Violations& v) {
  const std::string name(ScheduleName(p.schedule));
  const int64_t pp = p.pipeline_parallel, m = p.num_micro_batches();
  const bool v_shape = p.schedule == PipelineSchedule::kDualPipeV;
  if (p.virtual_stages != (v_shape ? 2 : 1)) {
    v.Add(v_shape ? absl::StrCat("plan.schedule=dualpipev runs two model chunks per stage in a V; "
                                 "set plan.virtual_stages=2 (it is ",
                                 p.virtual_stages, ")")
                  : absl::StrCat("plan.schedule=", name,
                                 " runs one model chunk per stage; set plan.virtual_stages=1 (it "
                                 "is ",
                                 p.virtual_stages, ")"));
  }
  if (p.schedule == PipelineSchedule::kZbH1) return;
  if (pp < 2 || (p.schedule == PipelineSchedule::kDualPipe && pp % 2 != 0)) {
    v.Add(absl::StrCat("plan.schedule=", name, " needs ",
                       p.schedule == PipelineSchedule::kDualPipe ? "an even " : "a ",
                       "plan.pipeline_parallel of at least 2 (it is ", pp,
                       "); use 1f1b or zb-h1 for this pipeline"));
    return;
  }
  if (p.global_batch % (p.data_parallel * p.micro_batch) != 0) return;
  if (m < 2 * pp || (p.schedule == PipelineSchedule::kDualPipe && m % 2 != 0)) {
    v.Add(absl::StrCat("plan.schedule=", name,
                       " needs at least 2 * plan.pipeline_parallel = ", 2 * pp,
                       p.schedule == PipelineSchedule::kDualPipe ? ", and an even number of," : "",
                       " micro-batches per replica (global_batch / (data_parallel * "
                       "micro_batch) = ",
                       m, "); raise the global batch or lower the micro-batch"));
  }
}

// Context parallelism and interleaving, as Megatron-LM checks them
// (megatron/training/arguments.py, megatron/core/pipeline_parallel/
// schedules.py). `sizes_ok`: the degrees and batch sizes are in range.
void ValidateSplits(const ModelSpec& m, const ParallelPlan& p, Violations& v, bool sizes_ok,
                    bool cp_ok) {
  if (cp_ok && p.context_parallel > 1 && m.seq_len >= 1 && m.seq_len <= kMaxSeqLen &&
      m.seq_len % (2 * p.context_parallel) != 0) {
    // Each rank holds two of 2c sequence chunks (one early, one late) so that
    // causal attention's work is balanced.
    v.Add(absl::StrCat("model.seq_len=", m.seq_len,
                       " is not divisible by 2 * plan.context_parallel", " = ",
                       2 * p.context_parallel,
                       " (context parallelism splits the sequence into 2c balanced chunks); "
                       "use a context-parallel degree whose double divides the sequence length"));
  }
  if (sizes_ok && SplitsBackward(p.schedule)) {
    ValidateSplitSchedule(p, v);
    return;
  }
  if (!sizes_ok || p.virtual_stages == 1) return;
  // Megatron needs p > 1 for interleaving (p > 2 only when the pipeline
  // sends are not overlapped, which its default --overlap-p2p-communication
  // does).
  if (p.pipeline_parallel < 2) {
    v.Add(absl::StrCat("plan.virtual_stages=", p.virtual_stages,
                       " needs plan.pipeline_parallel of at least 2; use virtual_stages=1 "
                       "or a deeper pipeline"));
    return;
  }
  if (p.schedule != PipelineSchedule::k1F1B) {
    v.Add(absl::StrCat("plan.virtual_stages=", p.virtual_stages,
                       " needs plan.schedule=1f1b (interleaved 1F1B); use virtual_stages=1 "
                       "with gpipe"));
  }
  // Megatron groups micro-batches by p per model chunk and refuses a last
  // group smaller than p: the micro-batches must be a multiple of p.
  if (p.global_batch % (p.data_parallel * p.micro_batch) == 0 &&
      p.num_micro_batches() % p.pipeline_parallel != 0) {
    v.Add(absl::StrCat("plan.virtual_stages=", p.virtual_stages, " needs the ",
                       p.num_micro_batches(),
                       " micro-batches per replica (global_batch / (data_parallel * micro_batch))",
                       " to be a multiple of plan.pipeline_parallel=", p.pipeline_parallel,
                       "; change the global batch or the micro-batch"));
  }
}

// Context-parallel communication, as Megatron-Core and Transformer Engine
// check it: the all-to-all splits the heads (and the key/value heads) a
// tensor-parallel rank holds over its group, and cp_a2a_size divides c.
void ValidateCpComm(const ModelSpec& m, const ParallelPlan& p, int64_t domain, Violations& v) {
  if (p.cp_a2a_size != 0) {
    if (p.cp_comm != ContextParallelComm::kA2AP2P) {
      v.Add(absl::StrCat("plan.cp_a2a_size=", p.cp_a2a_size,
                         " applies only to plan.cp_comm=a2a+p2p, not '", CpCommName(p.cp_comm),
                         "'; leave it out or use --cp-comm a2a+p2p"));
      return;
    }
    if (!v.InRange("plan.cp_a2a_size", p.cp_a2a_size, 1, kMaxParallelDegree)) return;
  }
  const int64_t c = p.context_parallel, t = p.tensor_parallel;
  if (p.cp_comm == ContextParallelComm::kP2P || c < 1 || c > kMaxParallelDegree || t < 1 ||
      t > kMaxParallelDegree) {
    return;
  }
  if (p.cp_a2a_size > 0 && c % p.cp_a2a_size != 0) {
    v.Add(absl::StrCat("plan.cp_a2a_size=", p.cp_a2a_size,
                       " does not divide plan.context_parallel=", c,
                       "; use a divisor of the context-parallel degree"));
    return;
  }
  const int64_t a2a = p.cp_a2a_ranks(domain);
  if (m.num_heads >= 1 && m.num_heads % t == 0 && m.kv_heads() >= 1 &&
      (m.num_heads / t % a2a != 0 || std::max<int64_t>(1, m.kv_heads() / t) % a2a != 0)) {
    v.Add(absl::StrCat("plan.cp_comm=", CpCommName(p.cp_comm), " splits the ", m.num_heads / t,
                       " heads (", std::max<int64_t>(1, m.kv_heads() / t),
                       " key/value heads) of a tensor-parallel rank over ", a2a,
                       " context-parallel ranks, which must divide both; use --cp-comm p2p, "
                       "--cp-comm a2a+p2p with a --cp-a2a-size that divides them, or another "
                       "tensor-parallel degree"));
  }
}

// The fp8 recipe: only with fp8, and MXFP8 only where the tensor cores
// apply MX block scales.
void ValidateFp8Recipe(const ParallelPlan& p, const GpuSpec& gpu, Violations& v) {
  if (p.fp8_recipe == Fp8Recipe::kDelayed) return;
  if (p.dtype != DType::kFp8) {
    v.Add(absl::StrCat("plan.fp8_recipe=", Fp8RecipeName(p.fp8_recipe),
                       " applies to plan.dtype=fp8, not ", DTypeName(p.dtype),
                       "; use --dtype fp8 or leave the recipe out"));
    return;
  }
  if (p.fp8_recipe == Fp8Recipe::kMxfp8 && !SupportsMxfp8(gpu)) {
    v.Add(
        absl::StrCat("plan.fp8_recipe=mxfp8 needs MX block scaling in the tensor cores "
                     "(Blackwell, ",
                     absl::StrJoin(MxBlockScalingGpuNames(), ", "), "), which GPU '", gpu.name,
                     "' lacks; use blockwise, current or delayed"));
  }
}

// The overlap switches, as Megatron-LM checks them (arguments.py: TP
// overlap needs sequence parallelism, the parameter-gather overlap the
// distributed optimizer).
void ValidateOverlap(const ParallelPlan& p, Violations& v) {
  if (p.tp_comm_overlap && p.tensor_parallel > 1 && !p.sequence_parallel) {
    v.Add(
        "plan.tp_comm_overlap=on needs plan.sequence_parallel=on (Transformer Engine overlaps "
        "the sequence-parallel all-gather and reduce-scatter); turn sequence parallelism on "
        "or the overlap off");
  }
  if (p.param_gather_overlap && p.data_parallel_sharding != DataParallelSharding::kOptimizer) {
    v.Add(
        absl::StrCat("plan.param_gather_overlap=on needs plan.data_parallel_sharding=optimizer "
                     "(the distributed optimizer's parameter all-gather), not '",
                     ShardingName(p.data_parallel_sharding),
                     "'; use the distributed optimizer or turn the overlap off"));
  }
}

}  // namespace

ClusterSpec DefaultCluster(const GpuSpec& gpu, int64_t num_gpus) {
  ClusterSpec c;
  c.gpu = gpu;
  c.num_gpus = num_gpus;
  c.intra_node_bandwidth_bytes_per_s = gpu.default_intra_node_bandwidth_bytes_per_s;
  c.inter_node_bandwidth_bytes_per_s = gpu.default_inter_node_bandwidth_bytes_per_s;
  return c;
}

namespace {

// Which of the model's fields are valid, for the checks that combine them.
struct ModelFieldsOk {
  bool layers, hidden, heads, ffn, kv;
};

ModelFieldsOk ValidateModel(const ModelSpec& m, Violations& v) {
  ModelFieldsOk ok;
  ok.layers = v.InRange("model.num_layers", m.num_layers, 1, kMaxLayers);
  ok.hidden = v.InRange("model.hidden_size", m.hidden_size, 1, kMaxHidden);
  ok.heads = v.InRange("model.num_heads", m.num_heads, 1, kMaxHeads);
  v.InRange("model.seq_len", m.seq_len, 1, kMaxSeqLen);
  v.InRange("model.vocab_size", m.vocab_size, 1, kMaxVocab);
  ok.ffn = v.InRange("model.ffn_hidden_size", m.ffn_hidden_size, 0, kMaxFfnWidth);
  // An explicit head_dim (Qwen3, GPT-OSS, MLA) frees heads from the hidden size.
  if (ok.hidden && ok.heads && m.head_dim == 0 && m.hidden_size % m.num_heads != 0) {
    v.Add(absl::StrCat("model.hidden_size=", m.hidden_size, " is not divisible by model.num_heads=",
                       m.num_heads, "; choose a head count that divides the hidden size"));
  }
  ok.kv = v.InRange("model.num_kv_heads", m.num_kv_heads, 0, kMaxHeads);
  if (ok.kv && ok.heads && m.num_heads % m.kv_heads() != 0) {
    v.Add(absl::StrCat("model.num_kv_heads=", m.num_kv_heads, " does not divide model.num_heads=",
                       m.num_heads, "; each key/value head must serve a whole group of heads"));
  }
  if (m.arch == Architecture::kGpt && m.num_kv_heads != 0 && m.num_kv_heads != m.num_heads) {
    v.Add(absl::StrCat("model.num_kv_heads=", m.num_kv_heads,
                       " needs model.arch=llama (GPT layers use multi-head attention); set "
                       "--arch llama or leave --kv-heads out"));
  }
  return ok;
}

// An NVLink domain of whole nodes; not combined with a leaf/spine fabric,
// whose nodes_per_leaf counts nodes a domain would span.
void ValidateNvlinkDomain(const ClusterSpec& c, Violations& v) {
  if (c.nvlink_domain == 0) return;
  if (!v.InRange("cluster.nvlink_domain", c.nvlink_domain, 1, kMaxGpus)) return;
  if (c.gpus_per_node >= 1 && c.gpus_per_node <= kMaxGpusPerNode &&
      c.nvlink_domain % c.gpus_per_node != 0) {
    v.Add(absl::StrCat("cluster.nvlink_domain=", c.nvlink_domain,
                       " is not a multiple of cluster.gpus_per_node=", c.gpus_per_node,
                       "; an NVLink domain joins whole nodes (e.g. 72 = 18 nodes of 4 for a "
                       "GB200 NVL72)"));
  }
  if (c.nvlink_domain > c.gpus_per_node && !c.fabric.flat()) {
    v.Add(absl::StrCat("cluster.nvlink_domain=", c.nvlink_domain,
                       " spans several nodes, which a leaf/spine cluster.fabric does not model; "
                       "leave out --nodes-per-leaf or the NVLink domain"));
  }
}

// The cluster's own fields and the plan's dtype on its GPU; returns whether
// cluster.num_gpus is valid.
bool ValidateCluster(const ClusterSpec& c, DType dtype, Violations& v) {
  const bool gpus_ok = v.InRange("cluster.num_gpus", c.num_gpus, 1, kMaxGpus);
  v.InRange("cluster.gpus_per_node", c.gpus_per_node, 1, kMaxGpusPerNode);
  v.Positive("cluster.intra_node_bandwidth", c.intra_node_bandwidth_bytes_per_s, kMaxBandwidth);
  v.Positive("cluster.inter_node_bandwidth", c.inter_node_bandwidth_bytes_per_s, kMaxBandwidth);
  if (!(c.price_usd_per_gpu_hour >= 0) || !std::isfinite(c.price_usd_per_gpu_hour)) {
    v.Add(absl::StrCat("cluster.price_usd_per_gpu_hour=", c.price_usd_per_gpu_hour,
                       " must be zero or a positive number"));
  }
  if (!(c.memory_headroom >= 0 && c.memory_headroom <= kMaxMemoryHeadroom)) {
    v.Add(absl::StrCat("memory_headroom=", c.memory_headroom, " must be in [0, ",
                       kMaxMemoryHeadroom, "] (a fraction of the GPU's memory, e.g. 0.03)"));
  }
  ValidateNvlinkDomain(c, v);
  std::vector<std::string> problems;
  CheckReliability(c.reliability, problems);
  if (c.gpus_per_node >= 1 && c.num_gpus >= 1) {
    CheckFabric(c.fabric, (c.num_gpus + c.gpus_per_node - 1) / c.gpus_per_node, problems);
  }
  for (std::string& message : problems) v.Add(std::move(message));
  if (dtype == DType::kFp8 && c.gpu.PeakFlops(dtype) <= 0) {
    v.Add(absl::StrCat("plan.dtype=fp8 is not supported by GPU '", c.gpu.name,
                       "' (no fp8 tensor cores); use bf16, or an fp8 GPU such as h100-sxm5-80gb"));
  } else if (c.gpu.PeakFlops(dtype) <= 0) {
    v.Add(absl::StrCat("plan.dtype=", DTypeName(dtype), " is not supported by GPU '", c.gpu.name,
                       "'; use ", c.gpu.PeakFlops(DType::kBf16) > 0 ? "bf16" : "fp16"));
  }
  return gpus_ok;
}

}  // namespace

absl::Status ValidateJob(const Job& job) {
  Violations v;
  const ModelSpec& m = job.model;
  const ParallelPlan& p = job.plan;
  const ClusterSpec& c = job.cluster;
  const ModelFieldsOk model_ok = ValidateModel(m, v);
  const bool layers_ok = model_ok.layers, hidden_ok = model_ok.hidden, heads_ok = model_ok.heads,
             ffn_ok = model_ok.ffn, kv_ok = model_ok.kv;
  const bool t_ok = v.InRange("plan.tensor_parallel", p.tensor_parallel, 1, kMaxParallelDegree);
  const bool d_ok = v.InRange("plan.data_parallel", p.data_parallel, 1, kMaxParallelDegree);
  const bool pp_ok =
      v.InRange("plan.pipeline_parallel", p.pipeline_parallel, 1, kMaxParallelDegree);
  const bool cp_ok = v.InRange("plan.context_parallel", p.context_parallel, 1, kMaxParallelDegree);
  const bool vs_ok = v.InRange("plan.virtual_stages", p.virtual_stages, 1, kMaxLayers);
  const bool mb_ok = v.InRange("plan.micro_batch", p.micro_batch, 1, kMaxMicroBatch);
  const bool gb_ok = v.InRange("plan.global_batch", p.global_batch, 1, kMaxGlobalBatch);
  // Checked whether or not bucketing is on: a bad value is a mistake either way.
  v.InRange("plan.bucket_size_bytes", p.bucket_size_bytes, 1, int64_t{1} << 40);

  const bool gpus_ok = ValidateCluster(c, p.dtype, v);
  if (t_ok && d_ok && pp_ok && cp_ok && gpus_ok) {
    // Each factor is below 2^20 and the product of three below 2^60; the
    // fourth is checked against the GPU bound first so nothing overflows.
    const int64_t tdp = p.tensor_parallel * p.data_parallel * p.pipeline_parallel;
    // A cluster larger than the job is allowed (vTrain's configurations give
    // the cluster's size): the job runs on t * c * p * d of its GPUs.
    if (tdp > kMaxGpus || tdp * p.context_parallel > c.num_gpus) {
      const std::string product = tdp > kMaxGpus ? "more than the maximum GPU count"
                                                 : absl::StrCat(tdp * p.context_parallel);
      v.Add(absl::StrCat("plan.tensor_parallel * plan.context_parallel * plan.pipeline_parallel * ",
                         "plan.data_parallel = ", p.tensor_parallel, " * ", p.context_parallel,
                         " * ", p.pipeline_parallel, " * ", p.data_parallel, " = ", product,
                         " GPUs exceeds cluster.num_gpus=", c.num_gpus,
                         "; lower the degrees or raise the GPU count"));
    }
  }
  ValidateSplits(m, p, v, layers_ok && pp_ok && vs_ok && mb_ok && gb_ok && d_ok, cp_ok);
  ValidateOverlap(p, v);
  ValidateFp8Recipe(p, c.gpu, v);
  if (heads_ok && kv_ok) ValidateCpComm(m, p, NvlinkDomainGpus(c), v);
  if (t_ok && heads_ok && m.num_heads % p.tensor_parallel != 0) {
    v.Add(absl::StrCat("plan.tensor_parallel=", p.tensor_parallel,
                       " does not divide model.num_heads=", m.num_heads,
                       "; use a tensor-parallel degree that divides the head count"));
  }
  // Megatron-Core splits the key/value heads (query groups) over the
  // tensor-parallel ranks: num_query_groups must be divisible by t.
  if (t_ok && kv_ok && heads_ok && m.kv_heads() < m.num_heads &&
      m.kv_heads() % p.tensor_parallel != 0) {
    v.Add(absl::StrCat("plan.tensor_parallel=", p.tensor_parallel,
                       " does not divide model.num_kv_heads=", m.kv_heads(),
                       "; use a tensor-parallel degree that divides the key/value head count"));
  }
  if (t_ok && ffn_ok && hidden_ok && m.ffn() % p.tensor_parallel != 0) {
    v.Add(absl::StrCat("plan.tensor_parallel=", p.tensor_parallel, " does not divide the FFN size ",
                       m.ffn(),
                       "; use a tensor-parallel degree that divides model.ffn_hidden_size"));
  }
  // Layers that p * v does not divide are laid out unevenly, as Megatron-Core
  // can (core/spec/pipeline_layout.h); what cannot be laid out is refused.
  if (pp_ok && layers_ok && vs_ok) {
    std::vector<std::string> layout_problems;
    CheckPipelineLayout(job, layout_problems);
    for (std::string& problem : layout_problems) v.Add(std::move(problem));
  }
  std::vector<std::string> moe_problems;
  CheckMoeFields(job, moe_problems);
  for (std::string& problem : moe_problems) v.Add(std::move(problem));
  if (d_ok && mb_ok && gb_ok && p.global_batch % (p.data_parallel * p.micro_batch) != 0) {
    v.Add(absl::StrCat("plan.global_batch=", p.global_batch,
                       " is not divisible by plan.data_parallel * plan.micro_batch = ",
                       p.data_parallel * p.micro_batch,
                       "; use a global batch that is a multiple of it"));
  }
  return v.ToStatus();
}

}  // namespace vtrain
