#include "core/graph/pass_templates.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/graph/template_writer.h"
#include "core/profile/moe_kernels.h"
#include "core/spec/model.h"
#include "core/spec/moe.h"

namespace vtrain::internal {
namespace {

// Whose a blocking collective is, for the stage breakdown.
constexpr TemplateWriter::Comm kCp = TemplateWriter::Comm::kContext;

// Makes the templates of one stage; see MakeStageTemplates.
class TemplateMaker {
 public:
  // `paired_share`: the share of the passes that run merged in a 1F1B pair
  // and hide their MoE token exchange (PairedPassShare); 0 without overlap.
  TemplateMaker(const Job& job, ProfileLookup& lookup, Granularity granularity, LabelFn label,
                double paired_share)
      : job_(job),
        model_(job.model),
        plan_(job.plan),
        lookup_(lookup),
        granularity_(granularity),
        label_(label),
        t_(plan_.tensor_parallel),
        p_(plan_.pipeline_parallel),
        c_(plan_.context_parallel),
        bucketing_(BucketsGradients(job)),
        sp_(plan_.sequence_parallel_active()),
        fsdp_(plan_.data_parallel_sharding == DataParallelSharding::kFull &&
              GradientRanks(job) > 1),
        activation_bytes_(ActivationBytes(job)),
        shape_(LayerShapeOf(job)),
        paired_share_(paired_share) {}

  StageTemplates Make(StageEnds ends);

 private:
  const ResolvedOperator& Op(OperatorKind op, double num_parameters = 0, bool core_only = false) {
    const bool moe = op == OperatorKind::kMoeFwd || op == OperatorKind::kMoeBwd;
    return lookup_.Resolved(WithLayerShape(
        WithParallelSplits(
            MakeOperatorKey(job_.cluster.gpu.name, plan_.dtype, op, model_.hidden_size,
                            model_.num_heads, moe ? model_.moe.expert_ffn : model_.ffn(),
                            model_.seq_len, plan_.micro_batch, t_, PaddedVocab(model_, t_),
                            static_cast<int64_t>(num_parameters), model_.arch, model_.kv_heads()),
            sp_, c_, core_only),
        shape_));
  }
  // Whether layer `index` of the chunk is a MoE layer.
  bool IsMoe(int64_t first_layer, int64_t index) const {
    return model_.IsMoeLayer(first_layer + index);
  }
  // A MoE layer's FFN block: the shared experts' tensor-parallel
  // collectives around the token dispatch, the experts and the combine
  // (WriteMoeBlock); `backward` mirrors it. Under overlap, a pass merged with
  // another micro-batch's (Megatron's 1F1B A2A overlap) leaves only part of
  // its exchange exposed (PrepareMoe).
  void MoeBlock(TemplateWriter& w, const ResolvedOperator& op) {
    if (shared_tp_ && sp_) w.TensorParallel(gather_ns_, gather_label_);
    WriteMoeBlock(w, op, &op == moe_bwd_, moe_);
    if (shared_tp_) {
      w.TensorParallel(sp_ ? scatter_ns_ : reduce_ns_, sp_ ? scatter_label_ : reduce_label_);
    }
  }
  void PrepareMoe();
  // A TP collective inside training: the collective plus the in-training overhead
  // (docs/architecture.md#tp-collectives-cost-more-in-training), growing with the group.
  int64_t TensorParallelNs(Collective collective, double bytes) {
    if (t_ == 1) return 0;
    const AnalyticalParams& p = lookup_.params();
    return lookup_.CollectiveNs(collective, bytes, TensorParallelGroup(job_)).latency_ns +
           std::llround(p.tp_collective_overhead_ns +
                        p.tp_collective_overhead_per_rank_ns * static_cast<double>(t_));
  }
  // A TP collective holds its rank's host for the dispatch plus the wait for the slowest
  // rank (tp_host_sync_*): docs/architecture.md#tp-collectives-cost-more-in-training.
  TemplateWriter Writer() {
    const AnalyticalParams& p = lookup_.params();
    // The ranks counted are those inside one NVLink domain: a group spread
    // over domains waits on the network (its collective's own time) rather
    // than on more hosts. The calibration runs hold t <= 8 (and with the
    // A100 exponent of 3.7 the law would make 16 ranks wait 3 ms), so it is
    // not extrapolated past 8 ranks either.
    constexpr int64_t kCalibratedRanks = 8;
    const double ranks = static_cast<double>(
        std::min({t_, std::max<int64_t>(1, NvlinkDomainGpus(job_.cluster)), kCalibratedRanks}));
    const double sync = t_ > 1
                            ? p.tp_host_sync_ns + p.tp_host_sync_per_rank_ns *
                                                      std::pow(ranks - 1, p.tp_host_sync_exponent)
                            : 0;
    return TemplateWriter(label_, granularity_, std::llround(p.host_dispatch_ns + sync),
                          p.tp_host_blocking);
  }
  // The TP collectives around a tensor-parallel block of one layer: without
  // sequence parallelism one all-reduce after it (Shoeybi et al. 2019, the
  // g operator); with it an all-gather before and a reduce-scatter after
  // (Korthikanti et al. 2022, §4.2.2), which move the same bytes as the ring
  // all-reduce they replace. The backward pass mirrors the forward.
  // With tp_comm_overlap (sequence parallel), the all-gather pipelines with
  // the block's first GEMM and the reduce-scatter with its last (forward: QKV
  // or FC1, and the projection or FC2; backward: the first dgrad, and the
  // last wgrad as Transformer Engine's bulk overlap does).
  void Block(TemplateWriter& w, const ResolvedOperator& op) {
    const bool overlap = plan_.tp_comm_overlap && t_ > 1 && sp_;
    const GemmEnds gemms = overlap ? GemmsOf(op) : GemmEnds{};
    if (t_ > 1 && sp_) Overlapped(w, block_gather_ns_, gemms.first_ns, gather_label_);
    w.Operator(op);
    if (t_ > 1 && sp_) Overlapped(w, scatter_ns_, gemms.last_ns, scatter_label_);
    if (t_ > 1 && !sp_) w.TensorParallel(reduce_ns_, reduce_label_);
  }
  // GemmEndsOf(op), found once per operator: Block runs the same few
  // operators for every layer (the lookup's references are stable).
  const GemmEnds& GemmsOf(const ResolvedOperator& op) {
    for (const auto& [known, ends] : gemm_ends_) {
      if (known == &op) return ends;
    }
    return gemm_ends_.emplace_back(&op, GemmEndsOf(op)).second;
  }
  // The collective's exposed part blocks the stream; the rest is hidden.
  void Overlapped(TemplateWriter& w, int64_t collective_ns, double gemm_ns, int32_t label) {
    const int64_t exposed_ns = ExposedTensorParallelNs(collective_ns, gemm_ns, t_);
    w.TensorParallel(exposed_ns, label, collective_ns - exposed_ns);
  }
  // Context parallelism (Megatron-Core / Transformer Engine, cp_comm). The
  // all-to-all (a2a, a2a+p2p) moves Q, K, V onto a head split of c1 ranks
  // and the output back, forward; dO and dQ, dK, dV backward: the same bytes,
  // not overlapped. The K/V ring (p2p, a2a+p2p) over c2 = c / c1 groups: c2
  // steps of attention on one K/V block each, the c2 - 1 exchanges of the
  // next block overlapped with the current step's compute; what the compute
  // does not hide blocks the stream. `factor`: 1 forward; 2 backward (K/V and
  // their gradients travel, over twice the compute).
  void ContextRing(TemplateWriter& w, double factor) {
    if (c_ == 1) return;
    if (cp_a2a_ns_ > 0) w.TensorParallel(cp_a2a_ns_, cp_a2a_label_, 0, kCp);
    const int64_t ring = cp_ring_ranks_;
    if (ring == 1) return;
    const double step_compute = factor * static_cast<double>(core_ns_) / static_cast<double>(ring);
    const double exposed =
        static_cast<double>(ring - 1) *
        std::max(0.0, factor * static_cast<double>(ring_step_ns_) - step_compute);
    w.TensorParallel(std::llround(exposed), ring_label_, 0, kCp);
  }
  // FSDP's per-layer parameter all-gather (and, backward, gradient
  // reduce-scatter), on their own stream, prefetched during the layer before:
  // only what that layer's compute does not hide blocks the stream.
  void ShardedLayer(TemplateWriter& w, double collective_ns, double layer_ns) {
    if (!fsdp_) return;
    w.TensorParallel(std::llround(std::max(0.0, collective_ns - layer_ns)), fsdp_label_);
  }
  // What the backward re-runs of a layer's forward, looked up once: whole
  // blocks under full recomputation and mlp and moe; the shared experts (a
  // TP block); the parts (RecomputedKernels, the attention core) selective
  // recomputation re-runs before the MoE block's and the attention's backward.
  struct Reruns {
    const ResolvedOperator *attention = nullptr, *mlp = nullptr, *moe = nullptr, *shared = nullptr;
    std::vector<const ResolvedOperator*> before_moe, before_attention;
  };
  Reruns Rerun();
  void Prepare();
  ActionTemplate Forward(StageEnds ends);
  ActionTemplate Backward(StageEnds ends, bool bucketed);

  const Job& job_;
  const ModelSpec& model_;
  const ParallelPlan& plan_;
  ProfileLookup& lookup_;
  const Granularity granularity_;
  LabelFn label_;
  const int64_t t_, p_, c_;
  const bool bucketing_, sp_, fsdp_;
  const double activation_bytes_;
  const LayerShape shape_;
  const double paired_share_;
  // Set by PrepareMoe: what a MoE block writes besides the shared experts'
  // collectives, whether those are needed, and the backward operator (to
  // tell a block's pass).
  MoeBlockParts moe_;
  bool shared_tp_ = false;
  const ResolvedOperator* moe_bwd_ = nullptr;
  // Set by Backward: the weight-gradient share of the pass's compute (W).
  double weight_ns_ = 0;
  // Rerun's parts: members, as merged passes keep pointers to their
  // kernels' names.
  ResolvedOperator up_proj_, input_norm_, moe_norm_, moe_act_, shared_;
  // Set by Prepare.
  int64_t reduce_ns_ = 0, gather_ns_ = 0, scatter_ns_ = 0, core_ns_ = 0, ring_step_ns_ = 0;
  int64_t block_gather_ns_ = 0;  // the all-gather into a block's first GEMM
  double fsdp_gather_ns_ = 0, fsdp_scatter_ns_ = 0;
  int32_t reduce_label_ = 0, gather_label_ = 0, scatter_label_ = 0, ring_label_ = 0,
          fsdp_label_ = 0, cp_a2a_label_ = 0;
  int64_t cp_a2a_ns_ = 0;      // the context-parallel all-to-alls of one attention block
  int64_t cp_ring_ranks_ = 1;  // steps of the context-parallel K/V ring (c2)
  std::vector<std::pair<const ResolvedOperator*, GemmEnds>> gemm_ends_;
};

void TemplateMaker::Prepare() {
  reduce_label_ = label_("tp_all_reduce");
  gather_label_ = label_("tp_all_gather");
  scatter_label_ = label_("tp_reduce_scatter");
  ring_label_ = label_("cp_ring_exposed");
  fsdp_label_ = label_("fsdp_exposed");
  // Message sizes as nccl-tests counts them: the whole b*s*h buffer.
  if (sp_) {
    gather_ns_ = TensorParallelNs(Collective::kAllGather, activation_bytes_);
    scatter_ns_ = TensorParallelNs(Collective::kReduceScatter, activation_bytes_);
    // Under fp8, Transformer Engine's userbuffers (--tp-comm-overlap) gather
    // a GEMM's input already quantized (its initialize_ub: fp8 buffers for
    // the all-gather overlaps): one byte an element; reduce-scatters 16-bit.
    const bool fp8 = plan_.tp_comm_overlap && plan_.dtype == DType::kFp8;
    block_gather_ns_ =
        fp8 ? TensorParallelNs(Collective::kAllGather, activation_bytes_ / kElemBytes) : gather_ns_;
  } else {
    reduce_ns_ = TensorParallelNs(Collective::kAllReduce, activation_bytes_);
  }
  if (c_ > 1) {
    core_ns_ = Op(OperatorKind::kAttentionFwd, 0, /*core_only=*/true).profile.SpanNs();
    // One K and one V block of s/c tokens and the rank's kv_heads / t key/
    // value heads (at least one) of width h / heads: GQA sends only those.
    const double kv_heads = std::max(1.0, static_cast<double>(model_.kv_heads()) / t_);
    const double kv_bytes = 2 * activation_bytes_ * kv_heads / model_.num_heads;
    ring_step_ns_ =
        lookup_.CollectiveNs(Collective::kSendRecv, kv_bytes, ContextRingGroup(job_)).latency_ns;
    cp_ring_ranks_ = plan_.cp_ring_ranks(NvlinkDomainGpus(job_.cluster));
    const CommGroup a2a = ContextAllToAllGroup(job_);
    if (a2a.ranks > 1) {
      // A rank's s/c tokens: Q, K and V (key/value heads as the model has
      // them), then the output, each of heads / t channels.
      cp_a2a_label_ = label_("cp_all_to_all");
      const double o_bytes = activation_bytes_ / static_cast<double>(t_);
      const double qkv_bytes = o_bytes *
                               static_cast<double>(model_.num_heads + 2 * model_.kv_heads()) /
                               static_cast<double>(model_.num_heads);
      cp_a2a_ns_ = lookup_.CollectiveNs(Collective::kAllToAll, qkv_bytes, a2a).latency_ns +
                   lookup_.CollectiveNs(Collective::kAllToAll, o_bytes, a2a).latency_ns;
    }
  }
  PrepareMoe();
  if (fsdp_) {
    const double layer_params = LayerParameterCount(model_) / static_cast<double>(t_);
    const CommGroup group = DataParallelGroup(job_);
    fsdp_gather_ns_ = static_cast<double>(
        lookup_.CollectiveNs(Collective::kAllGather, layer_params * kElemBytes, group).latency_ns);
    fsdp_scatter_ns_ =
        static_cast<double>(lookup_
                                .CollectiveNs(Collective::kReduceScatter,
                                              layer_params * GradientElemBytes(plan_), group)
                                .latency_ns);
  }
}

void TemplateMaker::PrepareMoe() {
  if (!model_.is_moe()) return;
  shared_tp_ = t_ > 1 && model_.moe.shared_width() > 0;
  const double load = static_cast<double>(shape_.expert_load_permille) / 1000.0;
  const MoeExchange x = MoeExchangeNs(job_, lookup_, load);
  moe_ = MakeMoeBlockParts(job_, lookup_.params(), Op(OperatorKind::kMoeFwd), x, load);
  moe_.label = label_("moe_token_exchange");
  moe_bwd_ = &Op(OperatorKind::kMoeBwd);
  if (paired_share_ <= 0) return;
  auto span = [&](OperatorKind op) { return static_cast<double>(Op(op).profile.SpanNs()); };
  moe_.exposed_ns = ExposedMoeExchangeNs(
      job_, x, {span(OperatorKind::kAttentionFwd), span(OperatorKind::kMoeFwd)},
      {span(OperatorKind::kAttentionBwd), span(OperatorKind::kMoeBwd)}, paired_share_);
}

ActionTemplate TemplateMaker::Forward(StageEnds ends) {
  TemplateWriter w = Writer();
  if (ends.embedding) {
    w.Operator(Op(OperatorKind::kEmbeddingFwd));
    // Vocabulary-parallel embedding: partial sums all-reduced, or with SP
    // reduce-scattered onto the sequence split.
    if (t_ > 1)
      w.TensorParallel(sp_ ? scatter_ns_ : reduce_ns_, sp_ ? scatter_label_ : reduce_label_);
  }
  const ResolvedOperator& attention = Op(OperatorKind::kAttentionFwd);
  const ResolvedOperator& mlp = Op(OperatorKind::kMlpFwd);
  const ResolvedOperator* moe = model_.is_moe() ? &Op(OperatorKind::kMoeFwd) : nullptr;
  const double layer_ns = static_cast<double>(attention.profile.SpanNs() + mlp.profile.SpanNs());
  auto layer = [&](bool is_moe) {
    Block(w, attention);
    ContextRing(w, 1);
    if (is_moe) {
      MoeBlock(w, *moe);
    } else {
      Block(w, mlp);
    }
  };
  for (int64_t l = 0; l < ends.num_layers; ++l) {
    // The stage's first layer has nothing before it to hide its gather.
    ShardedLayer(w, fsdp_gather_ns_, l == 0 ? 0 : layer_ns);
    layer(IsMoe(ends.first_layer, l));
  }
  // DeepSeek's multi-token prediction: each module one more layer (of the
  // last layer's kind), then its own logit and loss.
  for (int64_t i = 0; i < ends.mtp_layers; ++i) {
    layer(model_.IsMoeLayer(model_.num_layers - 1));
    w.Operator(Op(OperatorKind::kLogitFwd));
    w.Operator(Op(OperatorKind::kLossFwd));
  }
  if (ends.loss) {
    // SP gathers the final layer norm's output before the logit GEMM.
    if (t_ > 1 && sp_) w.TensorParallel(gather_ns_, gather_label_);
    w.Operator(Op(OperatorKind::kLogitFwd));
    w.Operator(Op(OperatorKind::kLossFwd));
    if (t_ > 1) {
      // Vocabulary-parallel cross-entropy all-reduces the max, the sum of
      // exponentials and the target logit: fp32 per token each.
      const double bytes = static_cast<double>(plan_.micro_batch * model_.seq_len / c_) * 4;
      const int64_t small_ns = TensorParallelNs(Collective::kAllReduce, bytes);
      for (int i = 0; i < 3; ++i) w.TensorParallel(small_ns, reduce_label_);
    }
  }
  return std::move(w).Take(label_("forward"));
}

// `bucketed`: split the pass where a gradient bucket fills (the last
// micro-batch with gradient bucketing).
ActionTemplate TemplateMaker::Backward(StageEnds ends, bool bucketed) {
  TemplateWriter w = Writer();
  const double t = static_cast<double>(t_), bucket_limit = plan_.bucket_size_bytes;
  double pending = 0;
  // The weight-gradient (W) share of each operator's time (AttentionWeightShare).
  weight_ns_ = 0;
  const double attention_w = AttentionWeightShare(model_);
  // Of its kernels' GPU time, not its host gaps: W never exceeds the
  // kernels it is taken from, at either granularity.
  auto weight_share = [&](const ResolvedOperator& op, double share) {
    for (const KernelRecord& k : op.profile.kernels) weight_ns_ += share * k.duration_ns;
  };
  // Gradients of `params` parameters are final: close a bucket once full.
  auto gradients_ready = [&](double params) {
    if (!bucketed) return;
    pending += params * GradientElemBytes(plan_);
    if (pending >= bucket_limit) {
      w.EndSegment(pending);
      pending = 0;
    }
  };
  if (ends.loss) {
    w.Operator(Op(OperatorKind::kLossBwd));
    w.Operator(Op(OperatorKind::kLogitBwd));
    weight_share(Op(OperatorKind::kLogitBwd), 0.5);
    if (t_ > 1)
      w.TensorParallel(sp_ ? scatter_ns_ : reduce_ns_, sp_ ? scatter_label_ : reduce_label_);
    // With p > 1 the last stage holds its own copy of a tied embedding.
    gradients_ready(OutputParametersPerGpu(model_, t_, p_));
  }
  const double layer_params = LayerParameterCount(model_) / t;
  const ResolvedOperator& mlp_bwd = Op(OperatorKind::kMlpBwd);
  const ResolvedOperator& attention_bwd = Op(OperatorKind::kAttentionBwd);
  const double layer_ns =
      static_cast<double>(attention_bwd.profile.SpanNs() + mlp_bwd.profile.SpanNs());
  const Reruns rerun = Rerun();
  const bool moe_model = model_.is_moe();
  const ResolvedOperator* moe_bwd = moe_model ? &Op(OperatorKind::kMoeBwd) : nullptr;
  // MoE layers reduce their routed experts' gradients apart (over edp).
  const double moe_layer_params = moe_model ? MoeLayerDenseParameterCount(model_) / t : 0;
  auto layer = [&](bool is_moe) {
    if (rerun.attention != nullptr) {
      // Full recomputation re-runs the layer's forward before its backward.
      Block(w, *rerun.attention);
      ContextRing(w, 1);
    }
    if (is_moe) {
      if (rerun.moe != nullptr) MoeBlock(w, *rerun.moe);
      for (const ResolvedOperator* op : rerun.before_moe) w.Operator(*op);
      if (rerun.shared != nullptr) Block(w, *rerun.shared);
      MoeBlock(w, *moe_bwd);
    } else {
      if (rerun.mlp != nullptr) Block(w, *rerun.mlp);
      Block(w, mlp_bwd);
    }
    weight_share(is_moe ? *moe_bwd : mlp_bwd, 0.5);
    weight_share(attention_bwd, attention_w);
    for (const ResolvedOperator* op : rerun.before_attention) w.Operator(*op);
    Block(w, attention_bwd);
    ContextRing(w, 2);
    gradients_ready(is_moe ? moe_layer_params : layer_params);
  };
  for (int64_t i = 0; i < ends.mtp_layers; ++i) {
    w.Operator(Op(OperatorKind::kLossBwd));
    w.Operator(Op(OperatorKind::kLogitBwd));
    weight_share(Op(OperatorKind::kLogitBwd), 0.5);
    layer(model_.IsMoeLayer(model_.num_layers - 1));
  }
  for (int64_t l = 0; l < ends.num_layers; ++l) {
    ShardedLayer(w, fsdp_gather_ns_ + fsdp_scatter_ns_, l == 0 ? 0 : layer_ns);
    layer(IsMoe(ends.first_layer, ends.num_layers - 1 - l));
  }
  if (ends.embedding) {
    // SP: the gradient of the embedding's reduce-scatter is an all-gather.
    if (t_ > 1 && sp_) w.TensorParallel(gather_ns_, gather_label_);
    w.Operator(Op(OperatorKind::kEmbeddingBwd));
    weight_share(Op(OperatorKind::kEmbeddingBwd), 1);  // the table's gradient itself
    gradients_ready(EmbeddingParametersPerGpu(model_, t_));
  }
  w.EndSegment(bucketed ? pending : 0);
  return std::move(w).Take(label_("backward"));
}

TemplateMaker::Reruns TemplateMaker::Rerun() {
  using enum OperatorKind;
  using enum RecomputedPart;
  const bool full = plan_.recompute == Recompute::kFull, moe = model_.is_moe();
  Reruns r;
  if (full) r.attention = &Op(kAttentionFwd);
  if (full || plan_.recomputes(kRecomputeMlp)) r.mlp = &Op(kMlpFwd);
  if (moe && (full || plan_.recomputes(kRecomputeMoe))) r.moe = &Op(kMoeFwd);
  // `slot` made the part of `forward` that `module` re-runs, where it applies.
  auto part = [&](RecomputeModule module, bool applies, ResolvedOperator& slot,
                  OperatorKind forward, RecomputedPart which) -> const ResolvedOperator* {
    if (!applies || !plan_.recomputes(module)) return nullptr;
    if (slot.profile.kernels.empty()) {
      slot.profile.kernels = RecomputedKernels(Op(forward).profile, which);
      slot.chain = ChainOf(slot.profile.kernels);
    }
    return slot.profile.kernels.empty() ? nullptr : &slot;
  };
  const auto add = [](std::vector<const ResolvedOperator*>& to, const ResolvedOperator* op) {
    if (op != nullptr) to.push_back(op);
  };
  const bool mla = model_.attention == AttentionKind::kMla, routed = moe && r.moe == nullptr;
  add(r.before_moe, part(kRecomputeLayernorm, moe, moe_norm_, kMoeFwd, kNorm));
  add(r.before_moe, part(kRecomputeMoeAct, routed, moe_act_, kMoeFwd, kMoeAct));
  r.shared = part(kRecomputeSharedExperts, routed, shared_, kMoeFwd, kSharedExperts);
  add(r.before_attention, part(kRecomputeLayernorm, mla, input_norm_, kAttentionFwd, kNorm));
  add(r.before_attention,
      part(kRecomputeMlaUpProj, true, up_proj_, kAttentionFwd, kMlaUpProjection));
  // The attention core, the default module (Korthikanti et al. 2022, §5).
  if (plan_.recomputes(kRecomputeCoreAttn)) {
    r.before_attention.push_back(&Op(kAttentionFwd, 0, /*core_only=*/true));
  }
  return r;
}

StageTemplates TemplateMaker::Make(StageEnds ends) {
  Prepare();
  StageTemplates s;
  const double t = static_cast<double>(t_);
  const LayerParameters chunk = ChunkParameters(model_, ends);
  const double layer_parameters = chunk.dense / t;
  const double expert_parameters =
      chunk.experts / static_cast<double>(plan_.expert_parallel * plan_.expert_tensor_parallel);
  s.parameters_per_gpu = layer_parameters + expert_parameters;
  if (ends.embedding) s.parameters_per_gpu += EmbeddingParametersPerGpu(model_, t_);
  if (ends.loss) s.parameters_per_gpu += OutputParametersPerGpu(model_, t_, p_);
  // FSDP reduce-scatters the layers' gradients layer by layer; the rest at
  // the end of the pass.
  s.gradient_bytes = (s.parameters_per_gpu - expert_parameters - (fsdp_ ? layer_parameters : 0)) *
                     GradientElemBytes(plan_);
  s.expert_gradient_bytes = expert_parameters * GradientElemBytes(plan_);
  s.forward = Forward(ends);
  s.backward = Backward(ends, /*bucketed=*/false);
  s.backward_last = bucketing_ ? Backward(ends, /*bucketed=*/true) : s.backward;
  s.expert_reduce_ns = ExpertReduceNs(job_, lookup_, s);
  if (SplitsBackward(plan_.schedule)) {
    // weight_ns_ as the Backward calls above set it.
    SplitWeightGradient(s, weight_ns_, label_("backward_input"), label_("backward_weight"));
  }
  // Sharded optimizers step their 1/(d*c) share.
  const double ranks = static_cast<double>(GradientRanks(job_));
  const bool sharded = plan_.data_parallel_sharding != DataParallelSharding::kNone && ranks > 1;
  TemplateWriter w = Writer();
  w.Operator(Op(OperatorKind::kOptimizerStep, s.parameters_per_gpu / (sharded ? ranks : 1)));
  s.optimizer = std::move(w).Take(label_("optimizer_step"));
  for (Segment& seg : s.optimizer.segments) {
    for (Item& i : seg.items) i.kind = TaskKind::kOptimizer;
  }
  if (sharded && plan_.data_parallel_sharding == DataParallelSharding::kOptimizer) {
    AddParamGather(job_, lookup_, label_("dp_param_all_gather"), s);
  }
  return s;
}

}  // namespace

StageTemplates MakeStageTemplates(const Job& job, ProfileLookup& lookup, Granularity granularity,
                                  StageEnds ends, LabelFn label) {
  if (!IsDualPipe(job.plan.schedule) || !job.model.is_moe()) {
    const double share = job.model.is_moe() && job.plan.moe.overlap ? PairedPassShare(job.plan) : 0;
    return TemplateMaker(job, lookup, granularity, label, share).Make(ends);
  }
  // DualPipe runs its own pairs: each paired pass hides its exchange, the
  // unpaired ones none (whatever moe.overlap says).
  StageTemplates s = TemplateMaker(job, lookup, granularity, label, 0).Make(ends);
  StageTemplates o = TemplateMaker(job, lookup, granularity, label, 1).Make(ends);
  s.paired_forward = std::move(o.forward);
  s.paired_backward = std::move(o.backward);
  return s;
}

}  // namespace vtrain::internal
