// Cluster and parallel-plan descriptions, and the validation of a whole job
// (model + plan + cluster) that reports every violation at once.
#ifndef VTRAIN_CORE_SPEC_JOB_H_
#define VTRAIN_CORE_SPEC_JOB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/spec/fabric.h"
#include "core/spec/gpu.h"
#include "core/spec/model.h"
#include "core/spec/reliability.h"

namespace vtrain {

// Validation bounds that job.cc and moe.cc share: they keep every product the
// simulator forms (tokens x hidden x bytes, FLOPs) far inside int64 and double.
inline constexpr int64_t kMaxFfnWidth = 1 << 20;
inline constexpr int64_t kMaxParallelDegree = 1 << 20;

inline constexpr double kDefaultMemoryHeadroom = 0.03;
inline constexpr double kMaxMemoryHeadroom = 0.5;

struct ClusterSpec {
  GpuSpec gpu;
  int64_t num_gpus = 0;
  int64_t gpus_per_node = 8;
  double intra_node_bandwidth_bytes_per_s = 0;  // per GPU, one direction (NVLink)
  double inter_node_bandwidth_bytes_per_s = 0;  // per node, all NICs together
  double price_usd_per_gpu_hour = 0;            // 0: no cost is computed
  // The fraction of a GPU's memory a plan must leave free to count as fitting
  // (the memory estimate is approximate; a plan at 79.3 of 80 GiB is a risk).
  double memory_headroom = kDefaultMemoryHeadroom;
  // Failures, checkpoints and restarts over a whole run (goodput).
  ReliabilitySpec reliability;
  // The leaf/spine fabric and where the job's nodes sit on it; flat by
  // default.
  FabricSpec fabric;
  // GPUs one NVLink domain joins (8 for a DGX, 72 for a GB200 NVL72 rack of
  // 4-GPU trays); 0: the node's gpus_per_node. Groups inside a domain talk
  // at intra_node_bandwidth; a domain leaves it through all its nodes' NICs.
  int64_t nvlink_domain = 0;
};

// The GPUs of one NVLink domain: cluster.nvlink_domain, or a node's GPUs.
inline int64_t NvlinkDomainGpus(const ClusterSpec& c) {
  return c.nvlink_domain > 0 ? c.nvlink_domain : c.gpus_per_node;
}
// The network bandwidth out of one NVLink domain: the NICs of every node in
// it (inter_node_bandwidth is a node's).
inline double DomainNetworkBandwidth(const ClusterSpec& c) {
  return c.inter_node_bandwidth_bytes_per_s * static_cast<double>(NvlinkDomainGpus(c)) /
         static_cast<double>(c.gpus_per_node);
}

// A cluster of `num_gpus` GPUs of `gpu` with that GPU's default bandwidths.
ClusterSpec DefaultCluster(const GpuSpec& gpu, int64_t num_gpus);

// kGpipe, k1F1B (interleaved with virtual_stages > 1), and the schedules
// that split the backward pass into input-gradient (B) and weight-gradient
// (W) work (core/graph/schedule.h): kZbH1 (Qi et al., "Zero Bubble Pipeline
// Parallelism", ICLR 2024), kDualPipe (DeepSeek-V3 report, §3.2.1) and
// kDualPipeV (its cut-in-half V shape, two chunks per stage).
enum class PipelineSchedule { kGpipe, k1F1B, kZbH1, kDualPipe, kDualPipeV };
// Whether `schedule` splits the backward into B and W (and runs from a
// per-stage list of passes, ScheduledPasses in core/graph/schedule.h).
bool SplitsBackward(PipelineSchedule schedule);
// Whether `schedule` is DeepSeek's DualPipe or DualPipeV (F&B pairs).
bool IsDualPipe(PipelineSchedule schedule);
// kSelective (Korthikanti et al. 2022, §5): only the attention core (scores,
// softmax, dropout, context) is recomputed in the backward pass.
enum class Recompute { kNone, kFull, kSelective };
// Megatron-Core's --recompute-modules under selective recomputation: the
// parts of each layer recomputed in the backward instead of kept. Bits of
// ParallelPlan::recompute_modules.
//  core_attn: the attention core (Megatron's default).
//  layernorm: the outputs of the norms that are modules of their own (a MoE
//   layer's pre-MLP norm, MLA's input norm); Transformer Engine fuses the
//   others into the GEMM after them, which keeps its input.
//  mlp: a dense layer's MLP (its checkpointed input kept).
//  moe: a MoE layer's whole MoE block, token exchange included.
//  moe_act: the routed experts' SwiGLU output (fc2's input).
//  mla_up_proj: MLA's query and key/value up-projections and rotary
//   embedding (Q, K and V re-made from the kept latents).
//  shared_experts: a MoE layer's shared experts, checkpointed (their input
//   kept, their forward re-run, tensor-parallel collectives included).
enum RecomputeModule : uint32_t {
  kRecomputeCoreAttn = 1,
  kRecomputeLayernorm = 2,
  kRecomputeMlp = 4,
  kRecomputeMoe = 8,
  kRecomputeMoeAct = 16,
  kRecomputeMlaUpProj = 32,
  kRecomputeSharedExperts = 64,
};
// The settings base a request's unset training settings come from
// (core/spec/settings.h): the model's tuned public recipe, Megatron-LM's
// argparse defaults, or the vTrain paper's A100 setup.
enum class SettingsBase { kTuned, kMegatronDefaults, kPaper };
// How data-parallel ranks share the model states: kNone replicates them;
// kOptimizer is Megatron's distributed optimizer / ZeRO-1 (gradients
// reduce-scattered, parameters all-gathered, optimizer states / d); kFull is
// FSDP / ZeRO-3 (parameters gathered per layer in forward and backward,
// gradients reduce-scattered per layer, every state / d).
enum class DataParallelSharding { kNone, kOptimizer, kFull };

// How context-parallel attention exchanges the sequence (Megatron-Core's
// --cp-comm-type, Transformer Engine): kP2P passes K/V blocks around a ring
// of c ranks, overlapped with the attention steps; kA2A (DeepSpeed-Ulysses
// style) all-to-alls Q, K, V onto a head split and the output back, not
// overlapped; kA2AP2P does both hierarchically: all-to-all inside groups of
// cp_a2a_size ranks, a ring over the c / cp_a2a_size groups.
enum class ContextParallelComm { kP2P, kA2A, kA2AP2P };

// How a MoE layer moves tokens to their experts (Megatron-Core's
// --moe-token-dispatcher-type): kAllToAll sends each token copy to the EP rank
// of its expert and back; kAllGather gathers every token on every EP rank
// and reduce-scatters the outputs; kFlex is DeepEP's fused dispatch/combine
// (16-bit tokens both ways, as Megatron-Core sends them, each token sent once per
// node then forwarded over NVLink); kHybridEp is the flex dispatcher with
// the HybridEP backend (--moe-flex-dispatcher-backend hybridep, Megatron-
// Bridge's Hopper recipes): the same exchange, its kernels on 32 SMs, not
// 20, and buffers sized for every rank's tokens landing on one.
enum class MoeDispatcher { kAllToAll, kAllGather, kFlex, kHybridEp };
// kFlex or kHybridEp: Megatron-Core's flex dispatcher, either backend.
inline bool IsFlex(MoeDispatcher d) {
  return d == MoeDispatcher::kFlex || d == MoeDispatcher::kHybridEp;
}
absl::string_view DispatcherName(MoeDispatcher dispatcher);
absl::StatusOr<MoeDispatcher> ParseDispatcher(absl::string_view name);

absl::string_view ScheduleName(PipelineSchedule schedule);
absl::StatusOr<PipelineSchedule> ParseSchedule(absl::string_view name);
absl::string_view RecomputeName(Recompute recompute);
absl::StatusOr<Recompute> ParseRecompute(absl::string_view name);
// One module by Megatron's name ("core_attn", "layernorm", "mlp", "moe",
// "moe_act"); INVALID_ARGUMENT naming plan.recompute_modules otherwise.
absl::StatusOr<RecomputeModule> ParseRecomputeModule(absl::string_view name);
// The modules of `bits` by name, in the order above; and comma-separated.
std::vector<absl::string_view> RecomputeModuleNames(uint32_t bits);
std::string RecomputeModulesName(uint32_t bits);
absl::string_view ShardingName(DataParallelSharding sharding);
absl::string_view CpCommName(ContextParallelComm comm);
absl::StatusOr<ContextParallelComm> ParseCpComm(absl::string_view name);
absl::StatusOr<DataParallelSharding> ParseSharding(absl::string_view name);

// How a MoE job's tokens travel and how evenly the router spreads them.
struct MoeRouting {
  MoeDispatcher dispatcher = MoeDispatcher::kAllToAll;
  // Megatron's 1F1B all-to-all overlap: dispatch and combine of one
  // micro-batch hidden behind another micro-batch's compute.
  bool overlap = false;
  // Tokens an expert takes, as a multiple of the mean (drops beyond it);
  // 0: dropless (Megatron's default).
  double capacity_factor = 0;
  // Per-expert loads: 0 Megatron-Core's forced balance (NVIDIA's published
  // benchmarks force it: uniform random routing each micro-batch, the
  // busiest EP rank its binomial spread above the mean); sigma > 0:
  // log-normal loads with that sigma, the slowest EP rank setting the pace.
  double routing_sigma = 0;
};

// What one model chunk (a pipeline stage, or with interleaving one of its
// virtual stages) holds besides its decoder layers: an explicit layout's entry.
struct ChunkContent {
  int64_t layers = 0;      // decoder layers
  int64_t mtp_layers = 0;  // multi-token-prediction modules
  bool embedding = false;
  bool loss = false;  // the output layer and the loss
};

// How the decoder layers are laid over the p * v model chunks
// (core/spec/pipeline_layout.h resolves it). Unset (the default): evenly when
// p * v divides the layers, else as Megatron-Core's options would lay them.
struct PipelineLayout {
  // Megatron's --decoder-first-pipeline-num-layers and
  // --decoder-last-pipeline-num-layers: decoder layers on the first / last
  // stage (over its v chunks); 0: unset.
  int64_t first_stage_layers = 0;
  int64_t last_stage_layers = 0;
  // An explicit layout (Megatron's --pipeline-model-parallel-layout), one
  // entry per chunk in model order (chunk * p + stage); empty: derived.
  std::vector<ChunkContent> chunks;
  bool is_default() const {
    return first_stage_layers == 0 && last_stage_layers == 0 && chunks.empty();
  }
};

// How one training iteration is split over the GPUs (Megatron-style
// parallelism: tensor t, context c, pipeline p, data d; GPUs = t * c * p * d).
struct ParallelPlan {
  int64_t tensor_parallel = 1;
  int64_t data_parallel = 1;
  int64_t pipeline_parallel = 1;
  int64_t micro_batch = 1;
  int64_t global_batch = 1;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  Recompute recompute = Recompute::kFull;
  // RecomputeModule bits with recompute = kSelective; 0: core_attn alone.
  uint32_t recompute_modules = 0;
  // Whether selective recomputation recomputes `module`.
  bool recomputes(RecomputeModule module) const {
    if (recompute != Recompute::kSelective) return false;
    return ((recompute_modules == 0 ? kRecomputeCoreAttn : recompute_modules) & module) != 0;
  }
  bool gradient_bucketing = false;  // overlap DP all-reduce with the last backward
  int64_t bucket_size_bytes = 25 * (int64_t{1} << 20);
  // Megatron-Core's --tp-comm-overlap (Transformer Engine's userbuffers):
  // each sequence-parallel all-gather and reduce-scatter is split into t
  // chunks and pipelined with the linear layer's GEMM next to it, so only
  // what the GEMM does not cover blocks the stream. Needs sequence
  // parallelism when t > 1; a no-op with t == 1. Off: Megatron's default.
  bool tp_comm_overlap = false;
  // Megatron's --overlap-param-gather: the distributed optimizer's parameter
  // all-gather runs bucket by bucket under the next iteration's first
  // forward pass instead of after the optimizer step. Needs
  // data_parallel_sharding = optimizer.
  bool param_gather_overlap = false;
  DType dtype = DType::kFp16;
  // Megatron-Core's precision-aware optimizer with bf16 Adam moments
  // (--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype
  // bf16): 8 bytes of optimizer state a parameter instead of 12 (memory
  // only; the step's time is not modelled apart).
  bool bf16_moments = false;
  // Gradients accumulated and reduced in an fp32 buffer, as Megatron-LM
  // does for bf16 unless told otherwise (arguments.py:
  // accumulate_allreduce_grads_in_fp32 follows main_grads_dtype fp32):
  // 4 bytes of gradient a parameter, not 2 (memory only; the gradient
  // traffic is still counted at 16 bits).
  bool fp32_grads = false;
  // fp8 only: how Transformer Engine scales the fp8 tensors (gpu.h).
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;
  // Sequence parallelism (Korthikanti et al. 2022): TP all-reduces become
  // reduce-scatter + all-gather, layer-norm and dropout run on s/t tokens.
  // With t == 1 it is a no-op, as Megatron-LM turns it off there.
  bool sequence_parallel = false;
  // Context parallelism: the sequence split over c ranks (between tp and dp
  // in Megatron's rank order), attention exchanging K/V around a ring.
  int64_t context_parallel = 1;
  ContextParallelComm cp_comm = ContextParallelComm::kP2P;
  // kA2AP2P: the all-to-all group's size, a divisor of c; 0: the largest
  // divisor of c whose groups (c1 * t ranks) fit in one NVLink domain.
  int64_t cp_a2a_size = 0;
  DataParallelSharding data_parallel_sharding = DataParallelSharding::kNone;
  // Interleaved 1F1B (Narayanan et al. 2021, §2.2): model chunks per GPU.
  int64_t virtual_stages = 1;
  PipelineLayout layout;

  // Mixture-of-Experts layers, as Megatron-Core lays them out ("parallel
  // folding"): attention runs on t * c * d ranks of a stage, the experts on
  // etp * ep * edp of the same ranks (edp = t*c*d / (etp*ep)), etp innermost.
  int64_t expert_parallel = 1;         // ep: ranks the routed experts are spread over
  int64_t expert_tensor_parallel = 1;  // etp: ranks each expert's FFN is split over
  MoeRouting moe;
  // Where the settings a request left unset came from (reported with the
  // answer; the fields above hold the values simulated).
  SettingsBase settings = SettingsBase::kTuned;

  // The context-parallel ranks that all-to-all together (c1) and the ring
  // over their groups (c2 = c / c1): p2p 1 and c, a2a c and 1.
  int64_t cp_a2a_ranks(int64_t nvlink_domain) const;
  int64_t cp_ring_ranks(int64_t nvlink_domain) const {
    return context_parallel / cp_a2a_ranks(nvlink_domain);
  }
  // Sequence parallelism in effect (on and t > 1).
  bool sequence_parallel_active() const { return sequence_parallel && tensor_parallel > 1; }
  // global_batch / (d * micro_batch): micro-batches per replica per iteration.
  int64_t num_micro_batches() const { return global_batch / (data_parallel * micro_batch); }
  // Model chunks each stage holds: virtual_stages, or 2 under DualPipe (its
  // own stage and, for the reverse direction, the mirrored one).
  int64_t chunks_per_stage() const {
    return schedule == PipelineSchedule::kDualPipe ? 2 : virtual_stages;
  }
  // The place in the pipeline layout (model order, 0 .. p * virtual_stages)
  // of `stage`'s `chunk`-th chunk: chunk * p + stage when interleaved;
  // DualPipeV's V (chunk 1 runs back up: 2p - 1 - stage); DualPipe's mirror
  // (chunk 1 is stage p - 1 - stage's).
  int64_t chunk_position(int64_t stage, int64_t chunk) const {
    if (chunk == 0) return stage;
    if (schedule == PipelineSchedule::kDualPipeV) return 2 * pipeline_parallel - 1 - stage;
    if (schedule == PipelineSchedule::kDualPipe) return pipeline_parallel - 1 - stage;
    return chunk * pipeline_parallel + stage;
  }
};

struct Job {
  ModelSpec model;
  ParallelPlan plan;
  ClusterSpec cluster;
};

// The GPUs the job runs on, t * c * p * d: at most cluster.num_gpus (a
// cluster may be larger than the job); utilisation and cost count these.
inline int64_t JobGpus(const Job& job) {
  return job.plan.tensor_parallel * job.plan.context_parallel * job.plan.data_parallel *
         job.plan.pipeline_parallel;
}

// Checks every constraint of the job and returns OK, or one INVALID_ARGUMENT
// whose message lists every violation, each naming the field and the fix,
// separated by "; ". Absurd values are rejected before any arithmetic on them
// can overflow.
absl::Status ValidateJob(const Job& job);

// Bandwidth with an explicit unit: "150GB/s", "800Gb/s", "25GiB/s", "1.6Tb/s".
// Returns bytes per second; `field` names the input in error messages.
absl::StatusOr<double> ParseBandwidth(absl::string_view text, absl::string_view field);

}  // namespace vtrain

#endif  // VTRAIN_CORE_SPEC_JOB_H_
