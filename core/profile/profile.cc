#include "core/profile/profile.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/spec/moe.h"

namespace vtrain {
namespace {

constexpr absl::string_view kOperatorNames[kNumOperatorKinds] = {
    "embedding_fwd",  "embedding_bwd", "attention_fwd", "attention_bwd", "mlp_fwd",
    "mlp_bwd",        "logit_fwd",     "logit_bwd",     "loss_fwd",      "loss_bwd",
    "optimizer_step", "moe_fwd",       "moe_bwd",
};

constexpr absl::string_view kCollectiveNames[kNumCollectives] = {
    "all_reduce", "all_gather", "reduce_scatter", "send_recv", "all_to_all"};

}  // namespace

absl::string_view FidelityName(Fidelity f) {
  switch (f) {
    case Fidelity::kMeasured:
      return "measured";
    case Fidelity::kInterpolated:
      return "interpolated";
    case Fidelity::kAnalytical:
      return "analytical";
  }
  return "unknown";
}

absl::string_view OperatorKindName(OperatorKind kind) {
  return kOperatorNames[static_cast<int>(kind)];
}

absl::StatusOr<OperatorKind> ParseOperatorKind(absl::string_view name) {
  for (int i = 0; i < kNumOperatorKinds; ++i) {
    if (name == kOperatorNames[i]) return static_cast<OperatorKind>(i);
  }
  return absl::InvalidArgumentError(absl::StrCat("operator '", name, "' is unknown"));
}

absl::string_view CollectiveName(Collective c) { return kCollectiveNames[static_cast<int>(c)]; }

absl::StatusOr<Collective> ParseCollective(absl::string_view name) {
  for (int i = 0; i < kNumCollectives; ++i) {
    if (name == kCollectiveNames[i]) return static_cast<Collective>(i);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "collective '", name,
      "' is unknown; use all_reduce, all_gather, reduce_scatter, send_recv or all_to_all"));
}

absl::string_view LinkScopeName(LinkScope s) {
  return s == LinkScope::kIntraNode ? "intra_node" : "inter_node";
}

std::string OperatorKey::ToString() const {
  std::string out = absl::StrCat(gpu, "/", DTypeName(dtype), "/", OperatorKindName(op));
  if (op == OperatorKind::kOptimizerStep) {
    absl::StrAppend(&out, " params=", num_parameters);
    return out;
  }
  if (arch != Architecture::kGpt) absl::StrAppend(&out, " arch=", ArchitectureName(arch));
  absl::StrAppend(&out, " h=", hidden);
  if (heads > 0) absl::StrAppend(&out, " a=", heads);
  if (kv_heads > 0) absl::StrAppend(&out, " kv=", kv_heads);
  if (head_dim > 0) absl::StrAppend(&out, " hd=", head_dim);
  if (mla_kv_lora > 0) {
    absl::StrAppend(&out, " qlr=", mla_q_lora, " kvlr=", mla_kv_lora, " rope=", mla_rope,
                    " vd=", mla_v);
  }
  if (ffn > 0) absl::StrAppend(&out, " f=", ffn);
  if (experts > 0) {
    absl::StrAppend(&out, " e=", experts, " k=", top_k);
    if (shared_ffn > 0) absl::StrAppend(&out, " sf=", shared_ffn);
  }
  absl::StrAppend(&out, " s=", seq, " b=", micro_batch, " t=", tensor_parallel);
  if (vocab > 0) absl::StrAppend(&out, " v=", vocab);
  if (sequence_parallel) absl::StrAppend(&out, " sp=1");
  if (context_parallel != 1) absl::StrAppend(&out, " c=", context_parallel);
  if (attention_core_only) absl::StrAppend(&out, " core=1");
  if (NonDefaultAttention()) absl::StrAppend(&out, " attn=", AttentionImplName(attention_impl));
  if (fp8_recipe != Fp8Recipe::kDelayed) absl::StrAppend(&out, " fp8=", Fp8RecipeName(fp8_recipe));
  if (experts > 0) {
    absl::StrAppend(&out, " ep=", expert_parallel, " etp=", expert_tensor_parallel,
                    " load=", expert_load_permille);
  }
  return out;
}

namespace {

// The integer fields of an operator key's text form, and where each goes.
struct KeyIntegers {
  int64_t h = 0, a = 0, kv = 0, f = 0, s = 0, b = 0, t = 1, v = 0, params = 0, sp = 0, c = 1,
          core = 0;
};

// The integer field `name` of a key's text (KeyIntegers or the layer shape),
// or nullptr when no field has that name.
int64_t* IntegerField(absl::string_view name, KeyIntegers& k, LayerShape& shape) {
  const std::pair<absl::string_view, int64_t*> fields[] = {{"h", &k.h},
                                                           {"a", &k.a},
                                                           {"kv", &k.kv},
                                                           {"f", &k.f},
                                                           {"s", &k.s},
                                                           {"b", &k.b},
                                                           {"t", &k.t},
                                                           {"v", &k.v},
                                                           {"params", &k.params},
                                                           {"sp", &k.sp},
                                                           {"c", &k.c},
                                                           {"core", &k.core},
                                                           {"hd", &shape.head_dim},
                                                           {"qlr", &shape.mla.q_lora_rank},
                                                           {"kvlr", &shape.mla.kv_lora_rank},
                                                           {"rope", &shape.mla.rope_head_dim},
                                                           {"vd", &shape.mla.value_head_dim},
                                                           {"e", &shape.experts},
                                                           {"k", &shape.top_k},
                                                           {"sf", &shape.shared_ffn},
                                                           {"ep", &shape.expert_parallel},
                                                           {"etp", &shape.expert_tensor_parallel},
                                                           {"load", &shape.expert_load_permille}};
  for (const auto& [field_name, field] : fields) {
    if (name == field_name) return field;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<OperatorKey> ParseOperatorKey(absl::string_view text) {
  if (text.size() > kMaxOperatorKeyLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("operator key '", text.substr(0, 64), "...' has ", text.size(),
                     " characters, more than the ", kMaxOperatorKeyLength, " a key can have"));
  }
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "operator key '", text, "': ", why,
        "; expected GPU/DTYPE/OP [arch=llama] h=.. [a=..] [kv=..] [f=..] s=.. b=.. t=.. "
        "[v=..] [sp=1] [c=..] [core=1] [attn=flash|unfused] [fp8=current|blockwise|mxfp8] "
        "[hd=.. qlr=.. kvlr=.. rope=.. vd=..] "
        "[e=.. k=.. sf=.. ep=.. etp=.. load=..] or "
        "GPU/DTYPE/optimizer_step params=.."));
  };
  const std::vector<absl::string_view> words = absl::StrSplit(text, ' ', absl::SkipEmpty());
  if (words.empty()) return bad("it is empty");
  const std::vector<absl::string_view> path = absl::StrSplit(words[0], '/');
  if (path.size() != 3 || path[0].empty()) return bad("it does not start with GPU/DTYPE/OP");
  if (path[0].size() > kMaxOperatorKeyGpuLength) {
    return bad(
        absl::StrCat("the GPU name has more than ", kMaxOperatorKeyGpuLength, " characters"));
  }
  absl::StatusOr<DType> dtype = ParseDType(path[1]);
  if (!dtype.ok()) return bad(absl::StrCat("dtype '", path[1], "' is unknown"));
  absl::StatusOr<OperatorKind> op = ParseOperatorKind(path[2]);
  if (!op.ok()) return bad(absl::StrCat("operator '", path[2], "' is unknown"));
  KeyIntegers n;
  LayerShape shape;
  Architecture arch = Architecture::kGpt;
  bool expert_fields = false;
  for (size_t i = 1; i < words.size(); ++i) {
    const std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(words[i], '=');
    if (kv.first == "attn") {
      absl::StatusOr<AttentionImpl> parsed = ParseAttentionImpl(kv.second);
      if (!parsed.ok()) return bad(absl::StrCat("'", words[i], "' is not attn=flash or unfused"));
      if (!absl::StartsWith(path[2], "attention_")) {
        return bad("attn= applies to attention_fwd and attention_bwd only");
      }
      shape.attention_impl = *parsed;
      continue;
    }
    if (kv.first == "fp8") {
      absl::StatusOr<Fp8Recipe> parsed = ParseFp8Recipe(kv.second);
      if (!parsed.ok() || *parsed == Fp8Recipe::kDelayed)
        return bad(absl::StrCat("'", words[i], "' is not fp8=current, blockwise or mxfp8"));
      shape.fp8_recipe = *parsed;
      continue;
    }
    if (kv.first == "arch") {
      absl::StatusOr<Architecture> parsed = ParseArchitecture(kv.second);
      if (!parsed.ok()) return bad(absl::StrCat("'", words[i], "' is not arch=gpt or arch=llama"));
      arch = *parsed;
      continue;
    }
    int64_t value = 0;
    if (!absl::SimpleAtoi(kv.second, &value) || value < 0) {
      return bad(absl::StrCat("'", words[i], "' is not name=non-negative integer"));
    }
    int64_t* field = IntegerField(kv.first, n, shape);
    if (field == nullptr) return bad(absl::StrCat("'", kv.first, "' is not a key field"));
    *field = value;
    expert_fields |= kv.first == "k" || kv.first == "sf" || kv.first == "ep" || kv.first == "etp" ||
                     kv.first == "load";
  }
  // The experts' fields print only with e > 0 (OperatorKey::ToString): without
  // it they would not survive a round trip.
  if (expert_fields && shape.experts == 0) {
    return bad("k=, sf=, ep=, etp= and load= describe experts: give e= as well");
  }
  if (n.sp > 1 || n.core > 1 || n.c < 1) return bad("sp and core must be 0 or 1, c at least 1");
  if (shape.expert_parallel < 1 || shape.expert_tensor_parallel < 1) {
    return bad("ep and etp must be at least 1");
  }
  OperatorKey key = WithLayerShape(
      WithParallelSplits(MakeOperatorKey(std::string(path[0]), *dtype, *op, n.h, n.a, n.f, n.s, n.b,
                                         n.t, n.v, n.params, arch, n.kv),
                         n.sp == 1, n.c, n.core == 1),
      shape);
  // WithLayerShape leaves keys without fp8 linear layers delayed.
  if (shape.fp8_recipe != key.fp8_recipe) return bad("fp8= is for fp8 attention, MLP, MoE keys");
  return key;
}

OperatorKey WithParallelSplits(OperatorKey key, bool sequence_parallel, int64_t context_parallel,
                               bool attention_core_only) {
  if (key.op == OperatorKind::kOptimizerStep) return key;
  key.context_parallel = context_parallel;
  key.attention_core_only = attention_core_only && key.op == OperatorKind::kAttentionFwd;
  // The loss runs on the gathered logits; every other operator has a layer
  // norm or a dropout on the sequence-split tokens.
  key.sequence_parallel = sequence_parallel && key.tensor_parallel > 1 &&
                          key.op != OperatorKind::kLossFwd && key.op != OperatorKind::kLossBwd &&
                          !key.attention_core_only;
  return key;
}

AttentionImpl DefaultAttentionImpl(Architecture arch) {
  return arch == Architecture::kGpt ? AttentionImpl::kUnfused : AttentionImpl::kFlash;
}

bool OperatorKey::NonDefaultAttention() const {
  return (op == OperatorKind::kAttentionFwd || op == OperatorKind::kAttentionBwd) &&
         attention_impl != DefaultAttentionImpl(arch);
}

bool HasFp8Linears(const OperatorKey& key) {
  if (key.dtype != DType::kFp8 || key.attention_core_only) return false;
  switch (key.op) {
    case OperatorKind::kAttentionFwd:
    case OperatorKind::kAttentionBwd:
    case OperatorKind::kMlpFwd:
    case OperatorKind::kMlpBwd:
    case OperatorKind::kMoeFwd:
    case OperatorKind::kMoeBwd:
      return true;
    default:
      return false;
  }
}

OperatorKey WithLayerShape(OperatorKey key, const LayerShape& shape) {
  key.fp8_recipe = HasFp8Linears(key) ? shape.fp8_recipe : Fp8Recipe::kDelayed;
  switch (key.op) {
    case OperatorKind::kAttentionFwd:
    case OperatorKind::kAttentionBwd:
      if (shape.attention_impl.has_value()) key.attention_impl = *shape.attention_impl;
      if (key.arch != Architecture::kLlama) return key;
      key.head_dim = shape.head_dim > 0 && key.heads > 0 && shape.head_dim * key.heads != key.hidden
                         ? shape.head_dim
                         : 0;
      if (shape.mla.kv_lora_rank > 0) {
        key.head_dim = shape.head_dim;  // MLA: always the no-rope width
        key.mla_q_lora = shape.mla.q_lora_rank;
        key.mla_kv_lora = shape.mla.kv_lora_rank;
        key.mla_rope = shape.mla.rope_head_dim;
        key.mla_v = shape.mla.value_head_dim;
        key.kv_heads = key.heads;  // every head its own keys and values
      }
      return key;
    case OperatorKind::kMoeFwd:
    case OperatorKind::kMoeBwd:
      key.experts = shape.experts;
      key.top_k = shape.top_k;
      key.shared_ffn = shape.shared_ffn;
      key.expert_parallel = shape.expert_parallel;
      key.expert_tensor_parallel = shape.expert_tensor_parallel;
      key.expert_load_permille = shape.expert_load_permille;
      return key;
    default:
      return key;
  }
}

OperatorKey MakeOperatorKey(std::string gpu, DType dtype, OperatorKind op, int64_t hidden,
                            int64_t heads, int64_t ffn, int64_t seq, int64_t micro_batch,
                            int64_t tensor_parallel, int64_t vocab, int64_t num_parameters,
                            Architecture arch, int64_t kv_heads) {
  OperatorKey k;
  k.gpu = std::move(gpu);
  k.dtype = dtype;
  k.op = op;
  // The loss and the optimizer step run the same kernels for every
  // architecture, so their keys leave it out.
  if (op != OperatorKind::kOptimizerStep && op != OperatorKind::kLossFwd &&
      op != OperatorKind::kLossBwd) {
    k.arch = arch;
  }
  switch (op) {
    case OperatorKind::kOptimizerStep:
      k.num_parameters = num_parameters;
      return k;
    case OperatorKind::kAttentionFwd:
    case OperatorKind::kAttentionBwd:
      k.heads = heads;
      if (arch == Architecture::kLlama) k.kv_heads = kv_heads > 0 ? kv_heads : heads;
      k.attention_impl = DefaultAttentionImpl(arch);
      break;
    case OperatorKind::kMlpFwd:
    case OperatorKind::kMlpBwd:
    case OperatorKind::kMoeFwd:
    case OperatorKind::kMoeBwd:
      k.ffn = ffn;
      break;
    case OperatorKind::kEmbeddingFwd:
    case OperatorKind::kEmbeddingBwd:
    case OperatorKind::kLogitFwd:
    case OperatorKind::kLogitBwd:
    case OperatorKind::kLossFwd:
    case OperatorKind::kLossBwd:
      k.vocab = vocab;
      break;
  }
  k.hidden = hidden;
  k.seq = seq;
  k.micro_batch = micro_batch;
  k.tensor_parallel = tensor_parallel;
  return k;
}

int64_t OperatorProfile::SpanNs() const {
  int64_t total = 0;
  for (size_t i = 0; i < kernels.size(); ++i) {
    total += kernels[i].duration_ns;
    if (i + 1 < kernels.size()) total += kernels[i].gap_ns;
  }
  return total;
}

std::string CollectiveKey::ToString() const {
  return absl::StrCat(gpu, "/", LinkScopeName(scope), "/", CollectiveName(collective),
                      " ranks=", ranks);
}

absl::StatusOr<CollectiveCurve> CollectiveCurve::Create(std::vector<CollectivePoint> points) {
  if (points.empty()) {
    return absl::InvalidArgumentError("collective curve has no points; give at least one");
  }
  for (const CollectivePoint& p : points) {
    if (!(p.bytes > 0) || !std::isfinite(p.bytes) || !(p.latency_ns > 0) ||
        !(p.latency_ns <= kMaxLatencyNs)) {
      return absl::InvalidArgumentError(
          absl::StrCat("collective point (bytes=", p.bytes, ", latency_ns=", p.latency_ns,
                       ") must have a positive, finite size and a latency in (0, 2^40] ns"));
    }
  }
  std::sort(points.begin(), points.end(),
            [](const CollectivePoint& a, const CollectivePoint& b) { return a.bytes < b.bytes; });
  for (size_t i = 1; i < points.size(); ++i) {
    if (points[i].bytes == points[i - 1].bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("collective curve has two points for bytes=", points[i].bytes,
                       "; keep one measurement per size"));
    }
  }
  return CollectiveCurve(std::move(points));
}

bool CollectiveCurve::IsPoint(double bytes) const {
  auto it = std::lower_bound(points_.begin(), points_.end(), bytes,
                             [](const CollectivePoint& p, double b) { return p.bytes < b; });
  return it != points_.end() && it->bytes == bytes;
}

double CollectiveCurve::LatencyNs(double bytes) const {
  if (bytes <= points_.front().bytes) return points_.front().latency_ns;
  if (bytes >= points_.back().bytes) return points_.back().latency_ns;
  auto hi = std::lower_bound(points_.begin(), points_.end(), bytes,
                             [](const CollectivePoint& p, double b) { return p.bytes < b; });
  auto lo = hi - 1;
  const double x =
      (std::log(bytes) - std::log(lo->bytes)) / (std::log(hi->bytes) - std::log(lo->bytes));
  return std::exp(std::log(lo->latency_ns) +
                  x * (std::log(hi->latency_ns) - std::log(lo->latency_ns)));
}

absl::Status ValidateProfileSetValues(const ProfileSet& set) {
  std::vector<std::string> problems;
  for (const ParamInfo& info : AnalyticalParamInfos()) {
    const double v = set.params.*(info.member);
    if (!std::isfinite(v) || v < info.min || v > info.max) {
      problems.push_back(absl::StrCat("profile_set.params.", info.name, "=", v, " must be in [",
                                      info.min, ", ", info.max, "]"));
    }
  }
  for (size_t i = 0; i < set.error_bands.size(); ++i) {
    const ErrorBand& b = set.error_bands[i];
    const std::string where = absl::StrCat("profile_set.error_bands[", i, "]");
    if (b.regime.empty()) problems.push_back(absl::StrCat(where, ".regime is empty"));
    if (!std::isfinite(b.error_low) || !std::isfinite(b.error_high) || b.error_low <= -1 ||
        b.error_low > b.error_high || b.error_high > 100) {
      problems.push_back(absl::StrCat(where, ": error_low=", b.error_low,
                                      " and error_high=", b.error_high,
                                      " must be finite with -1 < error_low <= error_high <= 100"));
    }
    if (!(b.coverage > 0 && b.coverage <= 1)) {
      problems.push_back(absl::StrCat(where, ".coverage=", b.coverage, " must be in (0, 1]"));
    }
    if (b.rows < 0) problems.push_back(absl::StrCat(where, ".rows=", b.rows, " must be >= 0"));
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
}

LayerShape LayerShapeOf(const Job& job) {
  const ModelSpec& m = job.model;
  LayerShape shape;
  shape.attention_impl = m.attention_impl;
  shape.fp8_recipe = job.plan.fp8_recipe;
  shape.head_dim = m.arch == Architecture::kLlama ? m.head_width() : 0;
  if (m.attention == AttentionKind::kMla) shape.mla = m.mla;
  if (m.is_moe()) {
    shape.experts = m.moe.num_experts;
    shape.top_k = m.moe.top_k;
    shape.shared_ffn = m.moe.shared_width();
    shape.expert_parallel = job.plan.expert_parallel;
    shape.expert_tensor_parallel = job.plan.expert_tensor_parallel;
    const ExpertLoad load = ExpectedExpertLoad(m, job.plan);
    shape.expert_load_permille = std::max<int64_t>(1, std::llround(1000 * load.max_over_mean));
  }
  return shape;
}

}  // namespace vtrain
