#include "core/spec/moe.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"

namespace vtrain {
namespace {

constexpr int64_t kMaxExperts = 1 << 16;
constexpr int64_t kMaxHeadDim = 4096;
constexpr int64_t kMaxLoraRank = 1 << 16;
constexpr int64_t kMaxSharedExperts = 64;
constexpr int64_t kMaxMtpLayers = 16;
constexpr double kMaxCapacityFactor = 64;
constexpr double kMaxRoutingSigma = 4;

// Collects "field=value must ..." messages.
class Problems {
 public:
  explicit Problems(std::vector<std::string>& out) : out_(out) {}
  bool InRange(absl::string_view field, int64_t value, int64_t lo, int64_t hi,
               absl::string_view fix) {
    if (value >= lo && value <= hi) return true;
    Add(absl::StrCat(field, "=", value, " must be in [", lo, ", ", hi, "]; ", fix));
    return false;
  }
  void Add(std::string message) { out_.push_back(std::move(message)); }

 private:
  std::vector<std::string>& out_;
};

// Fields that only mean something with experts: refused when set without.
void CheckDenseModelHasNoMoeFields(const Job& job, Problems& p) {
  const MoeSpec& moe = job.model.moe;
  const struct {
    const char* field;
    int64_t value;
  } unused[] = {{"model.moe.top_k", moe.top_k},
                {"model.moe.expert_ffn", moe.expert_ffn},
                {"model.moe.shared_experts", moe.shared_experts},
                {"model.moe.shared_expert_ffn", moe.shared_expert_ffn},
                {"model.moe.dense_layers", moe.dense_layers},
                {"plan.expert_parallel", job.plan.expert_parallel - 1},
                {"plan.expert_tensor_parallel", job.plan.expert_tensor_parallel - 1}};
  for (const auto& u : unused) {
    if (u.value != 0) {
      p.Add(absl::StrCat(u.field,
                         " is set but model.moe.num_experts=0 (a dense model); set "
                         "--num-experts or leave it out"));
    }
  }
  if (moe.layer_freq != 1) {
    p.Add(
        "model.moe.layer_freq is set but model.moe.num_experts=0; set --num-experts or leave it "
        "out");
  }
  if (job.plan.moe.overlap) {
    p.Add("plan.moe_overlap needs a MoE model (model.moe.num_experts > 0); set --moe-overlap off");
  }
  if (job.plan.moe.capacity_factor != 0 || job.plan.moe.routing_sigma != 0) {
    p.Add(
        "plan.capacity_factor and plan.routing_sigma need a MoE model (model.moe.num_experts > "
        "0); leave them out for a dense model");
  }
}

// --recompute-modules, as Megatron-Core's TransformerConfig takes them.
void CheckRecomputeModules(const Job& job, Problems& p) {
  const ParallelPlan& plan = job.plan;
  const uint32_t m = plan.recompute_modules;
  if (m == 0) return;
  const std::string name = absl::StrCat("plan.recompute_modules=", RecomputeModulesName(m));
  if (plan.recompute != Recompute::kSelective) {
    p.Add(absl::StrCat(name, " needs plan.recompute=selective; add --recompute selective"));
  }
  if ((m & (kRecomputeMoe | kRecomputeMoeAct)) != 0 && !job.model.is_moe()) {
    p.Add(absl::StrCat(name, ": moe and moe_act need a MoE model; leave them out"));
  }
  if ((m & kRecomputeSharedExperts) != 0 && job.model.moe.shared_width() == 0) {
    p.Add(absl::StrCat(name,
                       ": shared_experts needs a MoE model with shared experts "
                       "(model.moe.shared_experts > 0); leave it out"));
  }
  if ((m & kRecomputeMlaUpProj) != 0 && job.model.attention != AttentionKind::kMla) {
    p.Add(absl::StrCat(name,
                       ": mla_up_proj needs multi-latent attention (model.attention=mla); "
                       "leave it out"));
  }
  if ((m & kRecomputeMoe) != 0 && plan.moe.overlap) {
    p.Add(absl::StrCat(name,
                       " with plan.moe_overlap: Megatron-Core cannot recompute moe under "
                       "the all-to-all overlap; use moe_act, or --moe-overlap off"));
  }
}

// Megatron-Core's 1F1B all-to-all overlap (--overlap-moe-expert-parallel-comm)
// and what TransformerConfig.__post_init__ asks of it.
void CheckOverlap(const ParallelPlan& plan, Problems& p) {
  if (plan.expert_parallel == 1) {
    p.Add(
        "plan.moe_overlap needs plan.expert_parallel > 1 (there is no exchange to hide); "
        "set --ep or --moe-overlap off");
  }
  if (plan.moe.dispatcher == MoeDispatcher::kAllGather) {
    p.Add(
        "plan.moe_overlap works with the alltoall and flex dispatchers, as in Megatron-Core; "
        "set --moe-dispatcher alltoall or flex, or --moe-overlap off");
  }
  if (plan.recompute == Recompute::kFull) {
    p.Add(
        "plan.moe_overlap cannot run with plan.recompute=full, as in Megatron-Core; use "
        "--recompute selective or none, or --moe-overlap off");
  }
  if (plan.pipeline_parallel > 1 && !IsDualPipe(plan.schedule) &&
      (plan.schedule != PipelineSchedule::k1F1B || plan.virtual_stages < 2)) {
    p.Add(absl::StrCat("plan.moe_overlap with plan.pipeline_parallel=", plan.pipeline_parallel,
                       " needs the interleaved 1F1B schedule (plan.virtual_stages > 1), as "
                       "Megatron-Core requires; set --virtual-stages 2 or more, or --moe-overlap "
                       "off"));
  }
}

void CheckExperts(const Job& job, Problems& p) {
  const ModelSpec& m = job.model;
  const MoeSpec& moe = m.moe;
  const ParallelPlan& plan = job.plan;
  if (m.arch != Architecture::kLlama) {
    p.Add(
        "model.moe.num_experts needs model.arch=llama (MoE layers are SwiGLU experts with "
        "RMSNorm); set --arch llama");
  }
  const bool experts_ok = p.InRange("model.moe.num_experts", moe.num_experts, 1, kMaxExperts,
                                    "use the routed expert count");
  if (experts_ok) {
    p.InRange("model.moe.top_k", moe.top_k, 1, moe.num_experts,
              "each token uses between 1 and num_experts experts (--moe-top-k)");
  }
  const bool ffn_ok = p.InRange("model.moe.expert_ffn", moe.expert_ffn, 1, kMaxFfnWidth,
                                "give each expert's FFN width (--moe-ffn)");
  p.InRange("model.moe.shared_experts", moe.shared_experts, 0, kMaxSharedExperts,
            "use 0 or a few shared experts (--shared-experts)");
  const bool shared_ok =
      p.InRange("model.moe.shared_expert_ffn", moe.shared_expert_ffn, 0, kMaxFfnWidth,
                "use 0 for the expert width (--shared-expert-ffn)");
  const bool layers_ok = m.num_layers >= 1 && m.num_layers <= 100'000;
  if (layers_ok) {
    p.InRange("model.moe.dense_layers", moe.dense_layers, 0, m.num_layers - 1,
              "at least one layer must be a MoE layer (--dense-layers)");
    p.InRange("model.moe.layer_freq", moe.layer_freq, 1, m.num_layers,
              "every layer_freq-th layer is a MoE layer (--moe-layer-freq)");
    if (moe.dense_layers >= 0 && moe.layer_freq >= 1 && moe.dense_layers < m.num_layers &&
        moe.layer_freq <= m.num_layers && m.MoeLayersIn(0, m.num_layers) == 0) {
      p.Add(absl::StrCat("model.moe.dense_layers=", moe.dense_layers,
                         " with model.moe.layer_freq=", moe.layer_freq,
                         " leaves no MoE layer among the ", m.num_layers, "; lower either"));
    }
  }
  const bool ep_ok = p.InRange("plan.expert_parallel", plan.expert_parallel, 1, kMaxParallelDegree,
                               "use a degree that divides the experts (--ep)");
  const bool etp_ok = p.InRange("plan.expert_tensor_parallel", plan.expert_tensor_parallel, 1,
                                kMaxParallelDegree, "use 1 or a small degree (--etp)");
  if (experts_ok && ep_ok && moe.num_experts % plan.expert_parallel != 0) {
    p.Add(absl::StrCat("plan.expert_parallel=", plan.expert_parallel,
                       " does not divide model.moe.num_experts=", moe.num_experts,
                       "; each EP rank must hold a whole number of experts"));
  }
  if (ffn_ok && etp_ok && moe.expert_ffn % plan.expert_tensor_parallel != 0) {
    p.Add(absl::StrCat("plan.expert_tensor_parallel=", plan.expert_tensor_parallel,
                       " does not divide model.moe.expert_ffn=", moe.expert_ffn,
                       "; use an expert tensor-parallel degree that divides the expert width"));
  }
  const int64_t t = plan.tensor_parallel;
  if (shared_ok && t >= 1 && moe.shared_width() % t != 0) {
    p.Add(absl::StrCat("plan.tensor_parallel=", t, " does not divide the shared experts' width ",
                       moe.shared_width(), "; use a degree that divides it"));
  }
  // Parallel folding (Megatron-Core): the experts' etp * ep * edp grid covers
  // the same t * c * d ranks of a stage as attention.
  const int64_t tcd = t * plan.context_parallel * plan.data_parallel;
  const bool sizes_ok = ep_ok && etp_ok && t >= 1 && plan.context_parallel >= 1 &&
                        plan.data_parallel >= 1 && tcd <= (int64_t{1} << 40);
  const int64_t grid = sizes_ok ? plan.expert_parallel * plan.expert_tensor_parallel : 0;
  if (sizes_ok && grid > tcd) {
    p.Add(absl::StrCat("plan.expert_parallel * plan.expert_tensor_parallel = ", grid,
                       " exceeds the ", tcd,
                       " ranks of a pipeline stage (tensor * context * data parallel); lower "
                       "--ep/--etp or raise --dp"));
  } else if (sizes_ok && tcd % grid != 0) {
    p.Add(
        absl::StrCat("plan.expert_parallel * plan.expert_tensor_parallel = ", plan.expert_parallel,
                     " * ", plan.expert_tensor_parallel, " does not divide the ", tcd,
                     " ranks of a pipeline stage (tensor * context * data parallel); "
                     "choose ep and etp whose product divides them"));
  }
  // megatron/training/arguments.py: expert and tensor parallelism together
  // need sequence parallelism.
  if (t > 1 && plan.expert_parallel > 1 && !plan.sequence_parallel) {
    p.Add(absl::StrCat("plan.expert_parallel=", plan.expert_parallel,
                       " with plan.tensor_parallel=", t,
                       " needs plan.sequence_parallel, as Megatron-Core requires; add "
                       "--sequence-parallel"));
  }
  if (plan.moe.overlap) CheckOverlap(plan, p);
  if (!(plan.moe.capacity_factor == 0 ||
        (plan.moe.capacity_factor >= 1.0 / 64 && plan.moe.capacity_factor <= kMaxCapacityFactor))) {
    p.Add(absl::StrCat("plan.capacity_factor=", plan.moe.capacity_factor,
                       " must be 0 (dropless) or in [1/64, ", kMaxCapacityFactor, "], e.g. 1.25"));
  }
  if (!(plan.moe.routing_sigma >= 0 && plan.moe.routing_sigma <= kMaxRoutingSigma)) {
    p.Add(absl::StrCat("plan.routing_sigma=", plan.moe.routing_sigma, " must be in [0, ",
                       kMaxRoutingSigma, "]; use --routing balanced or lognormal:0.5"));
  }
}

void CheckAttention(const ModelSpec& m, Problems& p) {
  p.InRange("model.head_dim", m.head_dim, 0, kMaxHeadDim,
            "use 0 for hidden_size / num_heads, or the model card's head_dim");
  p.InRange("model.mtp_layers", m.mtp_layers, 0, kMaxMtpLayers,
            "use 0 or the model's multi-token-prediction depth");
  if ((m.head_dim != 0 || m.mtp_layers != 0) && m.arch != Architecture::kLlama) {
    p.Add("model.head_dim and model.mtp_layers need model.arch=llama; set --arch llama");
  }
  const MlaDims& a = m.mla;
  if (m.attention != AttentionKind::kMla) {
    if (a.q_lora_rank != 0 || a.kv_lora_rank != 0 || a.rope_head_dim != 0 ||
        a.value_head_dim != 0) {
      p.Add(
          "model.mla dimensions are set but model.attention is not mla; set --attention mla "
          "or leave the --mla-* flags out");
    }
    return;
  }
  if (m.arch != Architecture::kLlama) {
    p.Add("model.attention=mla needs model.arch=llama; set --arch llama");
  }
  if (m.attention_impl == AttentionImpl::kUnfused) {
    p.Add(
        "model.attention_impl=unfused is not modelled for model.attention=mla (MLA runs as "
        "fused attention in Megatron-Core); use --attention-impl flash");
  }
  p.InRange("model.mla.q_lora_rank", a.q_lora_rank, 0, kMaxLoraRank,
            "use 0 for uncompressed queries (--mla-q-lora-rank)");
  p.InRange("model.mla.kv_lora_rank", a.kv_lora_rank, 1, kMaxLoraRank,
            "give the key/value latent width (--mla-kv-lora-rank)");
  if (p.InRange("model.mla.rope_head_dim", a.rope_head_dim, 2, kMaxHeadDim,
                "give the rotary part of a head (--mla-rope-dim)") &&
      a.rope_head_dim % 2 != 0) {
    p.Add(absl::StrCat("model.mla.rope_head_dim=", a.rope_head_dim,
                       " must be even (rotary embeddings rotate pairs)"));
  }
  p.InRange("model.mla.value_head_dim", a.value_head_dim, 1, kMaxHeadDim,
            "give the value head width (--mla-v-dim)");
  if (m.num_kv_heads != 0 && m.num_kv_heads != m.num_heads) {
    p.Add(absl::StrCat("model.num_kv_heads=", m.num_kv_heads,
                       " does not apply to model.attention=mla (every head has its own keys and "
                       "values from the latent); leave --kv-heads out"));
  }
}

// SplitMix64 (Steele et al. 2014): a fixed, portable sequence, so the draws
// are the same everywhere (std::normal_distribution is not).
struct SplitMix64 {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1).
  double Uniform() { return (static_cast<double>(Next() >> 11) + 0.5) / 9007199254740992.0; }
  // Standard normal by Box-Muller (one of the pair).
  double Normal() {
    const double u = Uniform(), v = Uniform();
    return std::sqrt(-2 * std::log(u)) * std::cos(6.283185307179586 * v);
  }
};

}  // namespace

void CheckMoeFields(const Job& job, std::vector<std::string>& problems) {
  Problems p(problems);
  CheckAttention(job.model, p);
  CheckRecomputeModules(job, p);
  if (job.model.moe.num_experts == 0) {
    CheckDenseModelHasNoMoeFields(job, p);
    return;
  }
  CheckExperts(job, p);
}

int64_t ExpertDataParallel(const ParallelPlan& plan) {
  const int64_t tcd = plan.tensor_parallel * plan.context_parallel * plan.data_parallel;
  return std::max<int64_t>(1, tcd / (plan.expert_parallel * plan.expert_tensor_parallel));
}

namespace {

// The draws behind ExpectedExpertLoad under log-normal routing (sigma > 0).
ExpertLoad DrawExpertLoad(int64_t experts, int64_t ep, double sigma, double cap) {
  ExpertLoad out;
  constexpr int kDraws = 128;
  const int64_t local = experts / ep;
  SplitMix64 rng{0x5EED0F7A11ULL};
  std::vector<double> load(static_cast<size_t>(experts));
  double max_sum = 0, kept_sum = 0;
  for (int d = 0; d < kDraws; ++d) {
    double total = 0;
    for (double& l : load) {
      l = std::exp(sigma * rng.Normal());
      total += l;
    }
    // Normalised so that the mean expert takes 1 (the balanced load).
    const double scale = static_cast<double>(experts) / total;
    double kept = 0, busiest = 0;
    for (int64_t r = 0; r < ep; ++r) {
      double rank = 0;
      for (int64_t e = r * local; e < (r + 1) * local; ++e) {
        const double l = load[static_cast<size_t>(e)] * scale;
        rank += cap > 0 ? std::min(l, cap) : l;
      }
      kept += rank;
      busiest = std::max(busiest, rank);
    }
    max_sum += busiest / static_cast<double>(local);
    kept_sum += kept / static_cast<double>(experts);
  }
  out.max_over_mean = max_sum / kDraws;
  out.kept = kept_sum / kDraws;
  return out;
}

}  // namespace

double ExpectedMaxOfNormals(int64_t n) {
  if (n <= 1) return 0;
  static std::mutex mu;
  static std::map<int64_t, double>* memo = new std::map<int64_t, double>();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = memo->find(n); it != memo->end()) return it->second;
  }
  // E[max] = integral of x * n * phi(x) * Phi(x)^(n-1) dx, by the midpoint
  // rule over [-9, 9] (the integrand is below 1e-17 outside for n <= 2^20).
  constexpr int kSteps = 3600;
  constexpr double kLo = -9, kHi = 9, kDx = (kHi - kLo) / kSteps;
  const double inv_sqrt_2pi = 1 / std::sqrt(2 * M_PI);
  const double m = static_cast<double>(std::min<int64_t>(n, int64_t{1} << 20));
  double sum = 0;
  for (int i = 0; i < kSteps; ++i) {
    const double x = kLo + (i + 0.5) * kDx;
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    if (cdf <= 0) continue;
    sum += x * m * inv_sqrt_2pi * std::exp(-0.5 * x * x + (m - 1) * std::log(cdf)) * kDx;
  }
  std::lock_guard<std::mutex> lock(mu);
  if (memo->size() >= 4096) memo->clear();  // bounded
  memo->emplace(n, sum);
  return sum;
}

double ForcedBalanceSpread(const ModelSpec& model, const ParallelPlan& plan) {
  // Megatron-Core's --moe-router-force-load-balancing replaces the router's
  // logits by fresh normal draws (router.py, apply_random_logits), so each
  // token picks top_k distinct experts uniformly at random, anew every
  // micro-batch and layer. One EP rank holds L = E / ep of them: a token
  // sends it a hypergeometric count (mean k L / E, variance
  // k (L/E)(1 - L/E)(E - k)/(E - 1)), summed over the T tokens the EP group
  // routes. The ranks' counts share a fixed total, so with per-rank standard
  // deviation sigma the busiest is z_ep * sigma * sqrt(ep / (ep - 1)) above
  // the mean (z_n: the expected maximum of n standard normals).
  const int64_t experts = model.moe.num_experts, ep = plan.expert_parallel;
  const double k = static_cast<double>(std::min(model.moe.top_k, experts));
  if (ep <= 1 || experts < ep || k <= 0) return 1;
  const double e = static_cast<double>(experts);
  const double share = static_cast<double>(experts / ep) / e;
  const double tokens = MoeTokensPerRank(model, plan) * static_cast<double>(ep) *
                        static_cast<double>(std::max<int64_t>(1, plan.expert_tensor_parallel));
  const double mean = tokens * k * share;
  if (!(mean > 0) || experts == 1) return 1;
  const double var = tokens * k * share * (1 - share) * (e - k) / (e - 1);
  const double n = static_cast<double>(ep);
  const double busiest = mean + ExpectedMaxOfNormals(ep) * std::sqrt(var * n / (n - 1));
  return std::min(n, busiest / mean);
}

ExpertLoad ExpectedExpertLoad(const ModelSpec& model, const ParallelPlan& plan) {
  ExpertLoad out;
  const int64_t experts = model.moe.num_experts, ep = plan.expert_parallel;
  const double sigma = plan.moe.routing_sigma, cap = plan.moe.capacity_factor;
  if (experts <= 0 || ep <= 0) return out;
  // A capacity factor pads every expert's input to its capacity
  // (--moe-pad-expert-input-to-capacity, as the recipes that set one do): the
  // GEMMs and the exchange carry cap x the mean, whatever the routing.
  if (sigma == 0) {
    out.max_over_mean = cap > 0 ? cap : ForcedBalanceSpread(model, plan);
    out.kept = cap > 0 ? std::min(1.0, cap) : 1;
    return out;
  }
  // The draws cost about a millisecond for 256 experts, and one prediction
  // asks several times (each chunk's templates, memory, the answer), a search
  // once per plan: remembered per (experts, ep, sigma, capacity). The result
  // is deterministic, so the memo changes no figure.
  using Key = std::tuple<int64_t, int64_t, double, double>;
  static std::mutex mu;
  static std::map<Key, ExpertLoad>* memo = new std::map<Key, ExpertLoad>();
  const Key key{experts, ep, sigma, cap};
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = memo->find(key); it != memo->end()) return it->second;
  }
  out = DrawExpertLoad(experts, ep, sigma, cap);
  if (cap > 0) out.max_over_mean = cap;  // padded
  std::lock_guard<std::mutex> lock(mu);
  if (memo->size() >= 4096) memo->clear();  // bounded
  memo->emplace(key, out);
  return out;
}

bool ExchangesTokens(const ParallelPlan& plan) {
  return plan.expert_parallel * plan.expert_tensor_parallel > 1;
}

bool MoeHostSyncs(const ParallelPlan& plan) {
  return ExchangesTokens(plan) && plan.moe.capacity_factor <= 0;
}

double MoeTokensPerRank(const ModelSpec& model, const ParallelPlan& plan) {
  const double tokens = static_cast<double>(plan.micro_batch) * static_cast<double>(model.seq_len) /
                        static_cast<double>(plan.context_parallel);
  return plan.sequence_parallel_active() ? tokens / static_cast<double>(plan.tensor_parallel)
                                         : tokens;
}

}  // namespace vtrain
