// Profile tables: operator keys to the CUDA kernels they launch, collective latency
// curves, and the fidelity every lookup reports (docs/architecture.md#profiles-and-fidelity).
#ifndef VTRAIN_CORE_PROFILE_PROFILE_H_
#define VTRAIN_CORE_PROFILE_PROFILE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/profile/analytical_params.h"
#include "core/spec/gpu.h"
#include "core/spec/job.h"
#include "core/spec/model.h"

namespace vtrain {

// How a number was obtained. Ordered from best to worst.
enum class Fidelity { kMeasured = 0, kInterpolated = 1, kAnalytical = 2 };
inline constexpr int kNumFidelities = 3;
absl::string_view FidelityName(Fidelity fidelity);

// The operators vtrain profiles: one decoder layer's blocks, plus the parts
// only the first or last pipeline stage runs, plus the optimizer step.
enum class OperatorKind {
  kEmbeddingFwd,
  kEmbeddingBwd,
  kAttentionFwd,
  kAttentionBwd,
  kMlpFwd,
  kMlpBwd,
  kLogitFwd,  // final layer-norm + logit GEMM
  kLogitBwd,
  kLossFwd,  // vocabulary-parallel cross-entropy
  kLossBwd,
  kOptimizerStep,  // Adam over the parameters one GPU holds
  // A Mixture-of-Experts layer's FFN block: pre-norm, router and top-k,
  // token permutation, the local experts' grouped GEMMs, unpermutation, the
  // shared experts; the token exchange between EP ranks is priced apart.
  kMoeFwd,
  kMoeBwd,
};
inline constexpr int kNumOperatorKinds = 13;
absl::string_view OperatorKindName(OperatorKind kind);
absl::StatusOr<OperatorKind> ParseOperatorKind(absl::string_view name);

// Identifies one operator shape on one GPU model. Fields an operator does not
// depend on are zero (see MakeOperatorKey), so equal work has equal keys.
struct OperatorKey {
  std::string gpu;
  DType dtype = DType::kFp16;
  OperatorKind op = OperatorKind::kAttentionFwd;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t ffn = 0;
  int64_t seq = 0;
  int64_t micro_batch = 0;
  int64_t tensor_parallel = 1;
  int64_t vocab = 0;           // embedding, logit and loss only
  int64_t num_parameters = 0;  // optimizer only: parameters on one GPU
  // The layer architecture; kGpt for the operators that do not depend on it
  // (loss, optimizer step).
  Architecture arch = Architecture::kGpt;
  int64_t kv_heads = 0;  // Llama attention only: key/value heads
  // Attention keys only: how the core runs. MakeOperatorKey sets each
  // architecture's historical default (DefaultAttentionImpl), so keys
  // written before the choice existed keep their meaning.
  AttentionImpl attention_impl = AttentionImpl::kFlash;
  // fp8 keys of the operators with fp8 linear layers (attention, MLP, MoE,
  // not the attention core alone): how TE scales them. Delayed, the default,
  // keeps keys written before the choice existed.
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;
  // Parallel splits (see WithParallelSplits); the defaults leave a key as
  // it was before they existed.
  bool sequence_parallel = false;    // layer norms and dropout on seq / t tokens
  int64_t context_parallel = 1;      // seq / c tokens per rank, attention over all seq keys
  bool attention_core_only = false;  // attention_fwd: only scores, softmax, dropout, context
  // Attention (see WithLayerShape): the head width when it is not
  // hidden / heads, and MLA's dimensions (mla_kv_lora > 0: MLA).
  int64_t head_dim = 0;
  int64_t mla_q_lora = 0, mla_kv_lora = 0, mla_rope = 0, mla_v = 0;
  // MoE operators only: routed experts in all, experts per token, the shared
  // experts' total width (ffn is one routed expert's width), the expert
  // parallel degrees, and the busiest EP rank's load in thousandths of the
  // balanced load.
  int64_t experts = 0, top_k = 0, shared_ffn = 0;
  int64_t expert_parallel = 1, expert_tensor_parallel = 1, expert_load_permille = 1000;

  // Whether this is an attention key whose core is not its architecture's
  // default (DefaultAttentionImpl): the keys whose text says attn=.
  bool NonDefaultAttention() const;

  friend bool operator==(const OperatorKey&, const OperatorKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const OperatorKey& k) {
    return H::combine(std::move(h), k.gpu, k.dtype, k.op, k.hidden, k.heads, k.ffn, k.seq,
                      k.micro_batch, k.tensor_parallel, k.vocab, k.num_parameters, k.arch,
                      k.kv_heads, k.attention_impl, k.fp8_recipe, k.sequence_parallel,
                      k.context_parallel, k.attention_core_only, k.head_dim, k.mla_q_lora,
                      k.mla_kv_lora, k.mla_rope, k.mla_v, k.experts, k.top_k, k.shared_ffn,
                      k.expert_parallel, k.expert_tensor_parallel, k.expert_load_permille);
  }
  // "a100-sxm4-80gb/fp16/attention_fwd h=2048 a=16 f=8192 s=2048 b=1 t=1";
  // Llama keys carry "arch=llama" and, for attention, "kv=N":
  // "h100-sxm5-80gb/bf16/attention_fwd arch=llama h=4096 a=32 kv=8 s=8192 b=1 t=1";
  // with " sp=1", " c=N" and " core=1" when set; " attn=flash" (GPT) or
  // " attn=unfused" (Llama) when attention is not the architecture's default;
  // " fp8=current|blockwise|mxfp8" when fp8 is not delayed-scaled; attention with "
  // hd=", " qlr=", " kvlr=", " rope=", " vd=" when set; MoE keys
  // "... moe_fwd arch=llama h=7168 f=2048 e=256 k=8 sf=2048 s=4096 b=1 t=1
  // ep=64 etp=1 load=1000".
  std::string ToString() const;
};

// The longest operator-key text ParseOperatorKey accepts and the longest GPU
// name in it (a real key is under 100 characters; the bounds keep outside text
// from growing keys and errors, and any key ToString prints from a parsed one,
// at most 128 + 20 + 11 * 23 + 11 characters, parses again).
inline constexpr size_t kMaxOperatorKeyLength = 512;
inline constexpr size_t kMaxOperatorKeyGpuLength = 128;

// The reverse of OperatorKey::ToString (the text work items carry):
// INVALID_ARGUMENT naming the part that does not parse, or a text longer than
// kMaxOperatorKeyLength or a GPU name longer than kMaxOperatorKeyGpuLength.
absl::StatusOr<OperatorKey> ParseOperatorKey(absl::string_view text);

// Builds a key with only the fields `op` depends on set (`arch` for all but
// the loss and the optimizer step, `kv_heads` for Llama attention only).
OperatorKey MakeOperatorKey(std::string gpu, DType dtype, OperatorKind op, int64_t hidden,
                            int64_t heads, int64_t ffn, int64_t seq, int64_t micro_batch,
                            int64_t tensor_parallel, int64_t vocab, int64_t num_parameters,
                            Architecture arch = Architecture::kGpt, int64_t kv_heads = 0);

// `key` with the splits the operator depends on set: sequence parallelism
// (layer-norm and dropout operators, only with t > 1: a no-op otherwise),
// context parallelism (every operator but the optimizer) and the attention
// core alone (attention_fwd, for selective recomputation).
OperatorKey WithParallelSplits(OperatorKey key, bool sequence_parallel, int64_t context_parallel,
                               bool attention_core_only);

// The attention implementation an attention key of `arch` has unless told:
// unfused for GPT (the paper's measured kernels), flash for Llama.
AttentionImpl DefaultAttentionImpl(Architecture arch);

// The layer shape beyond MakeOperatorKey's arguments.
struct LayerShape {
  // Set: the attention keys' implementation; unset: the key's as made.
  std::optional<AttentionImpl> attention_impl;
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;  // fp8 keys with fp8 linear layers
  int64_t head_dim = 0;                        // 0: hidden / heads
  MlaDims mla;                                 // kv_lora_rank > 0: MLA attention
  int64_t experts = 0, top_k = 0, shared_ffn = 0;
  int64_t expert_parallel = 1, expert_tensor_parallel = 1, expert_load_permille = 1000;
};

// The layer shape every operator key of `job` takes (WithLayerShape).
LayerShape LayerShapeOf(const Job& job);

// Whether `key` runs linear layers in fp8 (an fp8 attention, MLP or MoE key,
// not the attention core alone): the keys a recipe applies to.
bool HasFp8Linears(const OperatorKey& key);

// `key` with the fields of `shape` its operator depends on: keys with fp8
// linear layers take the recipe, attention keys take the implementation, the head width (only when
// it differs from hidden / heads) and MLA's dimensions, MoE keys the expert fields; other keys are
// returned as given.
OperatorKey WithLayerShape(OperatorKey key, const LayerShape& shape);

// One kernel of an operator: GPU time, then the idle time on the stream until
// the next kernel starts (host dispatch, synchronisation), as profiled with
// the operator run on its own.
struct KernelRecord {
  std::string name;
  int64_t duration_ns = 0;
  int64_t gap_ns = 0;
  // Host CPU time to dispatch the kernel, when known (the analytical model
  // knows it; 0 otherwise). With it, the graph builder replays a whole
  // forward or backward pass with the host running ahead of the GPU instead
  // of using gaps measured operator by operator
  // (docs/architecture.md#small-shapes-are-host-bound).
  int64_t host_ns = 0;
};

struct OperatorProfile {
  std::vector<KernelRecord> kernels;
  Fidelity fidelity = Fidelity::kAnalytical;
  // Sum of durations and of gaps except the last: the time from the first
  // kernel's start to the last kernel's end when nothing else intervenes.
  int64_t SpanNs() const;
};

// kAllToAll: every rank sends a 1/n slice of its buffer to every other rank
// (nccl-tests alltoall_perf; the MoE token dispatch and combine).
enum class Collective { kAllReduce, kAllGather, kReduceScatter, kSendRecv, kAllToAll };
inline constexpr int kNumCollectives = 5;
absl::string_view CollectiveName(Collective c);
absl::StatusOr<Collective> ParseCollective(absl::string_view name);
enum class LinkScope { kIntraNode, kInterNode };
absl::string_view LinkScopeName(LinkScope s);

struct CollectiveKey {
  std::string gpu;
  LinkScope scope = LinkScope::kIntraNode;
  Collective collective = Collective::kAllReduce;
  int64_t ranks = 2;

  friend bool operator==(const CollectiveKey&, const CollectiveKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const CollectiveKey& k) {
    return H::combine(std::move(h), k.gpu, k.scope, k.collective, k.ranks);
  }
  std::string ToString() const;
};

struct CollectivePoint {
  double bytes = 0;
  double latency_ns = 0;
};

// Latency against message size, sorted by size; at least one point.
class CollectiveCurve {
 public:
  // The longest latency a point may have: 2^40 ns (18 minutes), the bound on
  // a kernel's duration too, so that times summed over an iteration fit int64.
  static constexpr double kMaxLatencyNs = 1099511627776.0;

  // Sorts the points; INVALID_ARGUMENT unless every size is positive and
  // finite, every latency in (0, kMaxLatencyNs] and the sizes are distinct.
  static absl::StatusOr<CollectiveCurve> Create(std::vector<CollectivePoint> points);

  const std::vector<CollectivePoint>& points() const { return points_; }
  bool Covers(double bytes) const {
    return bytes >= points_.front().bytes && bytes <= points_.back().bytes;
  }
  bool IsPoint(double bytes) const;
  // Log-log interpolation inside the range; the nearest end point outside it.
  double LatencyNs(double bytes) const;

 private:
  explicit CollectiveCurve(std::vector<CollectivePoint> p) : points_(std::move(p)) {}
  std::vector<CollectivePoint> points_;
};

// A set of tables for one GPU model: measured operators and collectives, and
// the parameters of the analytical model that fills in whatever is missing.
// How far measurements fell from predictions in one regime, from the
// held-out residuals of a calibration: the signed relative error
// (predicted - measured) / measured has quantiles error_low and error_high.
struct ErrorBand {
  std::string regime;     // see RegimeOf in core/predict/predictor.h
  double error_low = 0;   // e.g. the 5th percentile
  double error_high = 0;  // e.g. the 95th percentile
  double coverage = 0.9;  // fraction of residuals inside [low, high]
  int64_t rows = 0;       // residuals it was computed from
};

struct ProfileSet {
  std::string id;    // content id ("sha256:..."); empty when not computed
  std::string name;  // a label for people, never an id
  std::string gpu;
  // The GPU's figures, for a GPU this build has no datasheet for (GpuByName
  // fails); unset for the built-in GPUs.
  std::optional<GpuSpec> datasheet;
  std::string provenance;  // where the numbers come from, for humans
  AnalyticalParams params;
  std::vector<ErrorBand> error_bands;
  absl::flat_hash_map<OperatorKey, OperatorProfile> operators;
  absl::flat_hash_map<CollectiveKey, CollectiveCurve> collectives;
};

// Checks the values a set holds beyond its tables' own invariants: every
// analytical parameter finite and inside its physical range
// (AnalyticalParamInfos), every error band finite with -1 < error_low <=
// error_high, coverage in (0, 1] and rows >= 0, and a regime named. Returns
// OK or one INVALID_ARGUMENT listing every violation, each naming the field
// ("profile_set.params.memory_efficiency=0 must be in [0.05, 1]").
absl::Status ValidateProfileSetValues(const ProfileSet& set);

}  // namespace vtrain

#endif  // VTRAIN_CORE_PROFILE_PROFILE_H_
