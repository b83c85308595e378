// The tasks one pass puts on a pipeline stage's compute stream (a forward or
// backward pass of one micro-batch, or the optimizer step), priced through
// the profile lookup: the building blocks of the iteration walker (walker.h).
#ifndef VTRAIN_CORE_GRAPH_PASS_TEMPLATES_H_
#define VTRAIN_CORE_GRAPH_PASS_TEMPLATES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "core/graph/iteration.h"
#include "core/graph/schedule.h"
#include "core/graph/task_graph.h"
#include "core/profile/analytical.h"
#include "core/profile/lookup.h"
#include "core/spec/job.h"
#include "core/spec/pipeline_layout.h"

namespace vtrain::internal {

class TemplateWriter;  // core/graph/template_writer.h

inline constexpr double kElemBytes = 2;  // fp16 / bf16 activations and gradients

// Bytes of one gradient as the data-parallel reduction moves it: 4 with
// Megatron-LM's fp32 gradient buffer (plan.fp32_grads: it reduces main_grad
// in fp32 unless --grad-reduce-in-bf16), else 2.
inline double GradientElemBytes(const ParallelPlan& plan) { return plan.fp32_grads ? 4 : 2; }

// One future task of a pass, before it is placed in the graph.
struct Item {
  int64_t duration_ns = 0;
  int64_t gap_ns = 0;
  int32_t label = 0;
  TaskKind kind = TaskKind::kCompute;
  int64_t host_ns = 0;  // host dispatch time; 0 when unknown
  // The host waits for the GPU to finish every earlier item before
  // dispatching this one (a device-to-host copy the host reads: the MoE
  // dispatchers' token counts).
  bool host_sync = false;
};

// A run of items on the compute stream; when bucket_bytes > 0 a gradient
// all-reduce of that size follows it (last micro-batch only).
struct Segment {
  std::vector<Item> items;
  double bucket_bytes = 0;
};

// The tasks one forward or backward pass of one micro-batch puts on one
// stage's compute stream.
struct ActionTemplate {
  std::vector<Segment> segments;
  int64_t tensor_parallel_ns = 0;
  // TP collective time hidden behind GEMMs (tp_comm_overlap): not on the
  // stream, reported beside it.
  int64_t tensor_parallel_hidden_ns = 0;
  // Of tensor_parallel_ns: the context-parallel exchange and the MoE token
  // dispatch and combine (expert parallelism) that blocked the stream.
  int64_t context_parallel_ns = 0, expert_parallel_ns = 0;
  int64_t NumItems() const {
    int64_t n = 0;
    for (const Segment& s : segments) n += static_cast<int64_t>(s.items.size());
    return n;
  }
  // The time its tasks hold the compute stream: durations and gaps, summed in
  // doubles (bounds of the makespan use it before anything is simulated).
  double TaskNs() const {
    double ns = 0;
    for (const Segment& s : segments) {
      for (const Item& item : s.items) {
        ns += static_cast<double>(item.duration_ns) + static_cast<double>(item.gap_ns);
      }
    }
    return ns;
  }
};

struct StageTemplates {
  ActionTemplate forward;
  ActionTemplate backward;       // every micro-batch but the last
  ActionTemplate backward_last;  // the last, split at gradient buckets
  ActionTemplate optimizer;      // with the distributed optimizer's parameter all-gather
  // Schedules that split the backward (SplitsBackward): B, the backward with
  // its weight-gradient GEMMs taken out, and W, those GEMMs as one task.
  ActionTemplate input_grad, weight_grad;
  // DualPipe(V) with MoE layers: the forward and backward of an F&B pair,
  // each hiding its token exchange behind the other's compute as
  // MoeRouting::overlap does; empty otherwise (the plain passes serve).
  ActionTemplate paired_forward, paired_backward;
  double parameters_per_gpu = 0;
  // Gradient bytes the data-parallel collective (GradientCollective) reduces
  // after the last backward: every gradient but the routed experts', or under
  // FSDP those not reduce-scattered layer by layer.
  double gradient_bytes = 0;
  // The routed experts' gradients, reduced over the expert data-parallel
  // group (ExpertDataParallelGroup) after the last backward, and the wait
  // for that collective (ExpertReduceNs; 0 when edp == 1 or the chunk has
  // no MoE layer).
  double expert_gradient_bytes = 0;
  int64_t expert_reduce_ns = 0;
  // The distributed optimizer's parameter all-gather: the part in the
  // optimizer template (on the compute stream) and, with
  // param_gather_overlap, the part hidden under the next forward.
  int64_t param_gather_ns = 0;
  int64_t param_gather_hidden_ns = 0;
};

// What a pipeline stage (or model chunk) holds: the ends of the model, its
// decoder layers and its multi-token-prediction modules (a resolved chunk of
// the pipeline layout).
using StageEnds = ChunkLayers;

// Every chunk of a valid job, in model order (virtual stage chunk * p +
// stage), as its pipeline layout (core/spec/pipeline_layout.h) lays them.
std::vector<StageEnds> JobChunks(const Job& job);
// A text naming what makes two chunks' templates differ: their ends, their
// layers and which of them are MoE layers, their MTP modules.
std::string ChunkSignature(const Job& job, const StageEnds& ends);

// Interns a task label (TaskGraph::AddLabel) and returns its index; sinks
// that keep no labels return 0.
using LabelFn = absl::FunctionRef<int32_t(const std::string&)>;

// The templates of one stage of `job` (which must be valid) that holds
// `ends`; with interleaving, of one model chunk of a stage. Resolves every operator and TP
// collective through `lookup` (which records them) and interns every task label through `label`,
// both in a fixed order, so equal calls give equal lookups and label indices.
StageTemplates MakeStageTemplates(const Job& job, ProfileLookup& lookup, Granularity granularity,
                                  StageEnds ends, LabelFn label);

// The template of a pass of `kind` (an F&B pair's own when `paired` and the
// chunk has them).
inline const ActionTemplate& PassTemplate(const StageTemplates& st, PassKind kind, bool paired) {
  const bool pair = paired && !st.paired_forward.segments.empty();
  switch (kind) {
    case PassKind::kForward:
      return pair ? st.paired_forward : st.forward;
    case PassKind::kBackward:
      return pair ? st.paired_backward : st.backward;
    case PassKind::kInputGrad:
      return st.input_grad;
    case PassKind::kWeightGrad:
      break;
  }
  return st.weight_grad;
}

// The share of the attention block's backward time that is weight
// gradients (the MLP's is one half, recomputed forwards' none).
double AttentionWeightShare(const ModelSpec& model);
// Splits s.backward into s.input_grad and s.weight_grad: B keeps every item,
// its compute shortened in proportion so that W, one task, takes
// `weight_ns` (at most the compute) and B + W is the backward.
void SplitWeightGradient(StageTemplates& s, double weight_ns, int32_t input_label,
                         int32_t weight_label);

// Megatron-Core's overlaps (core/graph/pass_overlap.cc).
// The GPU time of an operator's first and last GEMM kernels, found by name
// (the analytical kernels' "gemm_*" and CUPTI's cuBLAS/CUTLASS names alike);
// zero when it has none.
struct GemmEnds {
  double first_ns = 0, last_ns = 0;
};
GemmEnds GemmEndsOf(const ResolvedOperator& op);
// --tp-comm-overlap: the part of a TP collective of `collective_ns` split
// into t chunks and pipelined with a GEMM of `gemm_ns` split the same way
// that still blocks the stream, max(0, c - g * (t - 1) / t).
int64_t ExposedTensorParallelNs(int64_t collective_ns, double gemm_ns, int64_t t);
// --overlap-param-gather: the part of the distributed optimizer's parameter
// all-gather (`gather_ns` for `bytes`) that the next forward (`forward_ns` of
// compute) does not hide, gathered in buckets of `bucket_bytes`: the first
// bucket is always waited for, max(gather / buckets, gather - forward).
int64_t ExposedParamGatherNs(int64_t gather_ns, double bytes, int64_t bucket_bytes,
                             double forward_ns);
// The compute a chunk's next parameter gather can run under, given one
// forward pass of it (`forward_ns`): that forward; with interleaving, the
// previous chunk's first p forwards too (the warm-up runs p micro-batches of
// a chunk before the next chunk starts, and Megatron-Core launches a chunk's
// gather from the forward before it).
double ParamGatherWindowNs(const ParallelPlan& plan, double forward_ns);
// The distributed optimizer's all-gather of the updated 16-bit parameters
// after the optimizer step, the part the next forward does not hide
// (ExposedParamGatherNs under --overlap-param-gather), appended to
// `s.optimizer` (its forward and parameters set); sets s.param_gather_ns and
// s.param_gather_hidden_ns.
void AddParamGather(const Job& job, ProfileLookup& lookup, int32_t label, StageTemplates& s);

// The time one MoE block's token exchange takes on a rank of `job` (valid,
// MoE): dispatch (with the expert-TP gather) and combine (with the expert-TP
// scatter), with the busiest EP rank receiving `load` times the mean
// (core/graph/pass_moe.cc).
struct MoeExchange {
  double dispatch_ns = 0;
  double combine_ns = 0;
};
MoeExchange MoeExchangeNs(const Job& job, ProfileLookup& lookup, double load);

// The alltoall dispatcher's two sorts of a pass, with more than one local
// expert: after the dispatch the received tokens are regrouped by local
// expert, before the combine put back in source-rank order; the busiest
// rank receives `load` times the mean
// (token_dispatcher.py, sort_chunks_by_idxs; TE's moe_sort_chunks_by_index
// under --moe-permute-fusion): each reads and writes every received copy
// (16 bits). Empty for the other dispatchers (DeepEP and HybridEP permute
// by expert inside their own kernels) and one local expert.
std::vector<KernelRecord> MoeChunkSortKernels(const Job& job, const AnalyticalParams& params,
                                              double load, bool backward);

// What a pass writes of a MoE layer's block besides the shared experts'
// collectives (MakeMoeBlockParts, WriteMoeBlock): the forward split at the
// host's wait for the token counts (route and experts empty when there is
// no wait, or the kernels have no host times), the alltoall dispatcher's
// sorts (MoeChunkSortKernels), and the exposed exchange with the dispatch's
// share of it. A template maker keeps one: merged passes keep pointers to
// its kernels' names.
struct MoeBlockParts {
  ResolvedOperator route, experts, sort_fwd, sort_bwd;
  double exposed_ns = 0;
  double dispatch_share = 0.5;
  int32_t label = 0;  // the exchange's ("moe_token_exchange")
};
MoeBlockParts MakeMoeBlockParts(const Job& job, const AnalyticalParams& params,
                                const ResolvedOperator& forward, const MoeExchange& x, double load);
// One block's operator `op` (the MoE forward or backward, `backward` saying
// which), its sorts and its exposed exchange; a forward with a wait runs as
// routing, the host's wait, the dispatch, the experts and the combine.
void WriteMoeBlock(TemplateWriter& w, const ResolvedOperator& op, bool backward,
                   const MoeBlockParts& parts);

// Splits a MoE forward operator's kernels before its first permutation
// kernel: `route` (norm, router, auxiliary loss, dispatch preprocessing)
// and `experts` (permutation, experts, unpermutation, shared experts).
// False (both untouched) when there is no such kernel or a kernel has no
// host time (measured gaps).
bool MoeSyncSplit(const std::vector<KernelRecord>& kernels, std::vector<KernelRecord>& route,
                  std::vector<KernelRecord>& experts);

// The parameters of a chunk's layers and its multi-token-prediction modules
// (each a layer of the last layer's kind, the 2h -> h projection and two
// RMSNorms), before tensor and expert parallelism split them.
LayerParameters ChunkParameters(const ModelSpec& model, StageEnds ends);

// The compute of one layer's pass that Megatron-Core's 1F1B all-to-all
// overlap pairs with another micro-batch's exchange: the attention block
// (with the router, before dispatch) and the MoE block (experts, after it).
struct MoeLayerCompute {
  double attention_ns = 0;
  double moe_ns = 0;
};
// The exchange time a MoE layer's forward and its backward each leave
// exposed when a forward of one micro-batch runs merged with the backward of
// another (megatron/core/models/common/model_chunk_schedule_plan.py,
// TransformerLayerSchedulePlan.run): the backward's combine runs beside the
// forward's attention; the forward's dispatch, then the backward's dispatch,
// beside the backward's MoE block and the forward's; the forward's combine
// beside the backward's attention. While an exchange runs, its kernels hold
// `comm_sm_share` of the SMs, and the compute beside it slows down by that
// share. Returns the merged pair's time less both passes' compute, halved:
// the exposed exchange charged to each pass.
double PairedMoeExposedNs(const MoeExchange& x, const MoeLayerCompute& forward,
                          const MoeLayerCompute& backward, double comm_sm_share);
// The share of a stage's passes that run merged in a 1F1B pair under
// Megatron-Core's all-to-all overlap: all but the warm-up forwards and the
// cool-down backwards, averaged over the pipeline ranks.
double PairedPassShare(const ParallelPlan& plan);
// A MoE layer pass's exposed exchange when `paired_share` of the passes pair
// (PairedPassShare) and the rest keep the whole exchange, with the
// exchange's SM share taken from the job's GPU.
double ExposedMoeExchangeNs(const Job& job, const MoeExchange& x, const MoeLayerCompute& forward,
                            const MoeLayerCompute& backward, double paired_share);
// The wait for a chunk's routed-expert gradient reduction over the expert
// data-parallel group after its last backward (0 when edp == 1 or it has
// none), from the chunk's expert_gradient_bytes, gradient_bytes and
// backward_last. With gradient bucketing only what the last backward cannot
// hold stays (at least one bucket).
int64_t ExpertReduceNs(const Job& job, ProfileLookup& lookup, const StageTemplates& s);

// Megatron rank order: tensor-parallel ranks innermost, then context-,
// then data-parallel, then pipeline (rank = stage * t*c*d + replica * t*c +
// cp_rank * t + tp_rank).
CommGroup TensorParallelGroup(const Job& job);
// The d * c ranks that reduce gradients (GradientRanks).
CommGroup DataParallelGroup(const Job& job);
// The ep ranks that exchange a MoE layer's tokens (stride etp in Megatron's
// expert rank order: etp innermost, then ep, then edp).
CommGroup ExpertParallelGroup(const Job& job);
// The etp ranks that split one expert.
CommGroup ExpertTensorParallelGroup(const Job& job);
// The edp ranks that hold the same experts and reduce their gradients.
CommGroup ExpertDataParallelGroup(const Job& job);
// Two neighbours of the context-parallel K/V ring.
CommGroup ContextRingGroup(const Job& job);
// The context-parallel ranks that all-to-all Q, K, V and the output
// (cp_comm a2a or a2a+p2p; ParallelPlan::cp_a2a_ranks of them).
CommGroup ContextAllToAllGroup(const Job& job);
// Two ranks `stages_apart` stages apart: on one node or not, with the NIC
// shared by the t*d GPUs of a stage on a node that send at once.
CommGroup StagePairGroup(const Job& job, int64_t stage, int64_t stages_apart);
// StagePairGroup(job, s, 1) for s = 0 .. p - 2, the pipeline's spine load
// (the same for every stage: they all send at once) computed once.
std::vector<CommGroup> NeighbourStagePairGroups(const Job& job);

// Bytes of one micro-batch's activations at a layer boundary on one rank
// (b * s/c * h * 2).
double ActivationBytes(const Job& job);
// The ranks holding the same parameters, d * c, and the collective that
// reduces their gradients: an all-reduce, or a reduce-scatter when sharded.
int64_t GradientRanks(const Job& job);
Collective GradientCollective(const Job& job);
// Whether the last backward pass all-reduces its gradients in buckets.
bool BucketsGradients(const Job& job);
// Whether, with interleaving, each model chunk reduces its gradients after
// its own last backward pass (instead of the stage's at the end).
bool ReducesGradientsPerChunk(const Job& job);

}  // namespace vtrain::internal

#endif  // VTRAIN_CORE_GRAPH_PASS_TEMPLATES_H_
