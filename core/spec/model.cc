#include "core/spec/model.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/util/enum_names.h"

namespace vtrain {
namespace {

struct Preset {
  const char* name;
  int64_t layers, hidden, heads, seq;
  Architecture arch = Architecture::kGpt;
  int64_t kv_heads = 0, ffn = 0, vocab = 50257;
};

// GPT-3 shapes from Brown et al. 2020, Table 2.1 (n_layers, d_model, n_heads;
// context 2048). Two rows of that table are not self-consistent, and we keep
// the head width d_head = 128 that the table gives:
//  - GPT-3 XL lists 24 heads of 128 for d_model 2048; we use 16 heads.
//  - GPT-3 13B lists d_model 5140 with 40 heads of 128; we use 5120.
// MT-NLG 530B from Smith et al. 2022: 105 layers, hidden 20480, 128 heads.
constexpr Preset kPresets[] = {
    {"gpt3-125m", 12, 768, 12, 2048},
    {"gpt3-350m", 24, 1024, 16, 2048},
    {"gpt3-1.3b", 24, 2048, 16, 2048},
    {"gpt3-2.7b", 32, 2560, 32, 2048},
    {"gpt3-6.7b", 32, 4096, 32, 2048},
    {"gpt3-13b", 40, 5120, 40, 2048},
    {"gpt3-175b", 96, 12288, 96, 2048},
    {"mtnlg-530b", 105, 20480, 128, 2048},
    // Llama 2 (Touvron et al. 2023, Table 1 and §2.2; model cards and
    // config.json of meta-llama/Llama-2-{7b,13b,70b}-hf): 4k context,
    // 32000-token vocabulary, grouped-query attention with 8 KV heads only
    // for 70B.
    {"llama2-7b", 32, 4096, 32, 4096, Architecture::kLlama, 32, 11008, 32000},
    {"llama2-13b", 40, 5120, 40, 4096, Architecture::kLlama, 40, 13824, 32000},
    {"llama2-70b", 80, 8192, 64, 4096, Architecture::kLlama, 8, 28672, 32000},
    // Llama 3 (model cards and config.json of meta-llama/Meta-Llama-3-8B and
    // -70B): 8k context, 128256-token vocabulary, 8 KV heads.
    {"llama3-8b", 32, 4096, 32, 8192, Architecture::kLlama, 8, 14336, 128256},
    {"llama3-70b", 80, 8192, 64, 8192, Architecture::kLlama, 8, 28672, 128256},
    // Llama 3.1 405B (Llama Team 2024, "The Llama 3 Herd of Models", Table 3;
    // config.json of meta-llama/Llama-3.1-405B): 126 layers, model dimension
    // 16384, FFN 53248, 128 heads, 8 KV heads; pre-trained at 8k context
    // (§3.4.1; the 128k context comes from a later long-context stage).
    {"llama3.1-405b", 126, 16384, 128, 8192, Architecture::kLlama, 8, 53248, 128256},
};

constexpr EnumName<Architecture> kArchitectures[] = {{Architecture::kGpt, "gpt"},
                                                     {Architecture::kLlama, "llama"}};
// "gqa" parses as standard attention (the heads say how many key/value heads).
constexpr EnumName<AttentionKind> kAttentions[] = {{AttentionKind::kStandard, "mha"},
                                                   {AttentionKind::kStandard, "gqa"},
                                                   {AttentionKind::kMla, "mla"}};
constexpr EnumName<AttentionImpl> kAttentionImpls[] = {{AttentionImpl::kFlash, "flash"},
                                                       {AttentionImpl::kUnfused, "unfused"}};
constexpr EnumName<RouterScore> kRouterScores[] = {{RouterScore::kSoftmax, "softmax"},
                                                   {RouterScore::kSigmoid, "sigmoid"}};

// A Mixture-of-Experts preset: a Llama-architecture model with MoE layers.
struct MoePreset {
  const char* name;
  int64_t layers, hidden, heads, kv_heads, head_dim, seq, vocab, ffn;
  MoeSpec moe;
  AttentionKind attention = AttentionKind::kStandard;
  MlaDims mla = {};
  int64_t mtp_layers = 0;
};

// From each model's config.json and model card on Hugging Face (the
// pre-training sequence length where the card gives a longer fine-tuned
// context):
//  - mistralai/Mixtral-8x7B-v0.1, Mixtral-8x22B-v0.1 (Jiang et al. 2024,
//    "Mixtral of Experts", Table 1): 8 experts, top-2, no shared experts.
//  - Qwen/Qwen3-30B-A3B, Qwen3-235B-A22B (Qwen3 Technical Report 2025,
//    Table 2): 128 experts, top-8, head_dim 128, 4 KV heads; the first
//    pre-training stage at 4,096 tokens.
//  - openai/gpt-oss-20b, gpt-oss-120b (gpt-oss model card 2025, Table 1):
//    32 or 128 experts, top-4, 64 heads of 64, 8 KV heads; attention sinks,
//    sliding-window layers and biases are not modelled.
//  - deepseek-ai/DeepSeek-V3 (DeepSeek-V3 Technical Report 2024, §4.2): 61
//    layers, the first 3 dense (ffn 18432), 256 routed experts of 2048 and
//    one shared, top-8 with sigmoid scores, MLA with q/kv LoRA ranks
//    1536/512, 128 heads of 128 (+64 rope) and values of 128, one MTP module,
//    4K pre-training context.
const MoePreset kMoePresets[] = {
    {"qwen3-30b-a3b",
     48,
     2048,
     32,
     4,
     128,
     4096,
     151936,
     6144,
     {.num_experts = 128, .top_k = 8, .expert_ffn = 768}},
    {"gpt-oss-20b",
     24,
     2880,
     64,
     8,
     64,
     4096,
     201088,
     2880,
     {.num_experts = 32, .top_k = 4, .expert_ffn = 2880}},
    {"mixtral-8x7b",
     32,
     4096,
     32,
     8,
     0,
     4096,
     32000,
     14336,
     {.num_experts = 8, .top_k = 2, .expert_ffn = 14336}},
    {"gpt-oss-120b",
     36,
     2880,
     64,
     8,
     64,
     4096,
     201088,
     2880,
     {.num_experts = 128, .top_k = 4, .expert_ffn = 2880}},
    {"mixtral-8x22b",
     56,
     6144,
     48,
     8,
     0,
     4096,
     32000,
     16384,
     {.num_experts = 8, .top_k = 2, .expert_ffn = 16384}},
    {"qwen3-235b-a22b",
     94,
     4096,
     64,
     4,
     128,
     4096,
     151936,
     12288,
     {.num_experts = 128, .top_k = 8, .expert_ffn = 1536}},
    {"deepseek-v3",
     61,
     7168,
     128,
     128,
     128,
     4096,
     129280,
     18432,
     {.num_experts = 256,
      .top_k = 8,
      .expert_ffn = 2048,
      .shared_experts = 1,
      .dense_layers = 3,
      .router = RouterScore::kSigmoid},
     AttentionKind::kMla,
     {.q_lora_rank = 1536, .kv_lora_rank = 512, .rope_head_dim = 64, .value_head_dim = 128},
     1},
};

ModelSpec FromMoePreset(const MoePreset& p) {
  ModelSpec m;
  m.name = p.name;
  m.arch = Architecture::kLlama;
  m.num_layers = p.layers;
  m.hidden_size = p.hidden;
  m.num_heads = p.heads;
  m.num_kv_heads = p.kv_heads;
  m.head_dim = p.head_dim;
  m.seq_len = p.seq;
  m.vocab_size = p.vocab;
  m.ffn_hidden_size = p.ffn;
  m.moe = p.moe;
  m.attention = p.attention;
  m.mla = p.mla;
  m.mtp_layers = p.mtp_layers;
  return m;
}

}  // namespace

absl::string_view ArchitectureName(Architecture arch) { return NameIn(kArchitectures, arch); }

absl::StatusOr<Architecture> ParseArchitecture(absl::string_view name) {
  return ParseIn(kArchitectures, name, "model.arch");
}

absl::StatusOr<ModelSpec> ModelPreset(absl::string_view name) {
  for (const Preset& p : kPresets) {
    if (name == p.name) {
      ModelSpec m;
      m.name = p.name;
      m.num_layers = p.layers;
      m.hidden_size = p.hidden;
      m.num_heads = p.heads;
      m.seq_len = p.seq;
      m.arch = p.arch;
      m.num_kv_heads = p.kv_heads;
      m.ffn_hidden_size = p.ffn;
      m.vocab_size = p.vocab;
      return m;
    }
  }
  for (const MoePreset& p : kMoePresets) {
    if (name == p.name) return FromMoePreset(p);
  }
  return absl::NotFoundError(absl::StrCat("model preset '", name, "' is unknown; use one of: ",
                                          absl::StrJoin(ModelPresetNames(), ", ")));
}

std::vector<std::string> ModelPresetNames() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.emplace_back(p.name);
  for (const MoePreset& p : kMoePresets) names.emplace_back(p.name);
  return names;
}

absl::string_view AttentionName(AttentionKind kind) { return NameIn(kAttentions, kind); }

absl::StatusOr<AttentionKind> ParseAttention(absl::string_view name) {
  return ParseIn(kAttentions, name, "model.attention");
}

absl::string_view AttentionImplName(AttentionImpl impl) { return NameIn(kAttentionImpls, impl); }

absl::StatusOr<AttentionImpl> ParseAttentionImpl(absl::string_view name) {
  return ParseIn(kAttentionImpls, name, "model.attention_impl");
}

absl::string_view RouterScoreName(RouterScore score) { return NameIn(kRouterScores, score); }

absl::StatusOr<RouterScore> ParseRouterScore(absl::string_view name) {
  return ParseIn(kRouterScores, name, "model.moe.router");
}

int64_t ModelSpec::MoeLayersIn(int64_t first, int64_t count) const {
  if (!moe.enabled()) return 0;
  int64_t n = 0;
  for (int64_t l = first; l < first + count; ++l) n += IsMoeLayer(l) ? 1 : 0;
  return n;
}

double AttentionParameterCount(const ModelSpec& model) {
  const double h = static_cast<double>(model.hidden_size);
  const double heads = static_cast<double>(model.num_heads);
  const double d = static_cast<double>(model.head_width());
  if (model.attention == AttentionKind::kMla) {
    // DeepSeek-V2 report §2.1.2: W_DQ (h x q_lora) and its norm, W_UQ/W_QR
    // (q_lora x heads*(d + rope)), W_DKV/W_KR (h x (kv_lora + rope)) and its
    // norm, W_UK/W_UV (kv_lora x heads*(d + v)), W_O (heads*v x h), the
    // input RMSNorm.
    const MlaDims& a = model.mla;
    const double ql = static_cast<double>(a.q_lora_rank), kl = static_cast<double>(a.kv_lora_rank);
    const double rope = static_cast<double>(a.rope_head_dim);
    const double v = static_cast<double>(a.value_head_dim);
    const double q = ql > 0 ? h * ql + ql + ql * heads * (d + rope) : h * heads * (d + rope);
    return q + h * (kl + rope) + kl + kl * heads * (d + v) + heads * v * h + h;
  }
  // Q and output projections (2 h * heads*d), K and V of kv_heads heads
  // (2 h kv*d), the input RMSNorm; no biases.
  const double kv = static_cast<double>(model.kv_heads());
  return 2 * h * heads * d + 2 * h * kv * d + h;
}

double LayerParameterCount(const ModelSpec& model) {
  const double h = static_cast<double>(model.hidden_size);
  const double f = static_cast<double>(model.ffn());
  if (model.arch == Architecture::kLlama) {
    // The attention block, then gate, up and down projections (3hf) and the
    // pre-MLP RMSNorm (h).
    return AttentionParameterCount(model) + 3 * h * f + h;
  }
  // QKV (3h^2 + 3h), projection (h^2 + h), FFN up (hf + f), FFN down (fh + h),
  // two layer-norms (4h).
  return 4 * h * h + 2 * h * f + 9 * h + f;
}

double MoeLayerDenseParameterCount(const ModelSpec& model) {
  const double h = static_cast<double>(model.hidden_size);
  const double e = static_cast<double>(model.moe.num_experts);
  const double router = e * h + (model.moe.router == RouterScore::kSigmoid ? e : 0);
  const double shared = 3 * h * static_cast<double>(model.moe.shared_width());
  return AttentionParameterCount(model) + router + shared + h;
}

double MoeLayerExpertParameterCount(const ModelSpec& model) {
  return static_cast<double>(model.moe.num_experts) * 3 * static_cast<double>(model.hidden_size) *
         static_cast<double>(model.moe.expert_ffn);
}

LayerParameters LayerParametersIn(const ModelSpec& model, int64_t first, int64_t count) {
  const int64_t moe_layers = model.MoeLayersIn(first, count);
  const double dense_layers = static_cast<double>(count - moe_layers);
  const double moe = static_cast<double>(moe_layers);
  LayerParameters out;
  out.dense = dense_layers * LayerParameterCount(model);
  if (moe_layers > 0) {
    out.dense += moe * MoeLayerDenseParameterCount(model);
    out.experts = moe * MoeLayerExpertParameterCount(model);
  }
  return out;
}

namespace {

// Parameters of the model's layers and ends, with `experts_used` of each MoE
// layer's routed experts.
double CountParameters(const ModelSpec& model, double experts_used) {
  const double h = static_cast<double>(model.hidden_size);
  const LayerParameters p = LayerParametersIn(model, 0, model.num_layers);
  const double per_expert_share =
      model.is_moe() ? experts_used / static_cast<double>(model.moe.num_experts) : 1;
  const double layers = p.dense + p.experts * per_expert_share;
  const double vocab = static_cast<double>(model.vocab_size);
  if (model.arch == Architecture::kLlama) {
    return layers + 2 * vocab * h +  // untied input embedding and output layer
           h;                        // final RMSNorm
  }
  return layers + vocab * h +                      // word embedding, tied with logits
         static_cast<double>(model.seq_len) * h +  // learned positions
         2 * h;                                    // final layer-norm
}

}  // namespace

double ModelParameterCount(const ModelSpec& model) {
  return CountParameters(model, static_cast<double>(model.moe.num_experts));
}

double ActiveParameterCount(const ModelSpec& model) {
  return CountParameters(model, static_cast<double>(model.moe.top_k));
}

int64_t PaddedVocab(const ModelSpec& model, int64_t tensor_parallel) {
  if (model.arch != Architecture::kLlama) return model.vocab_size;
  const int64_t multiple = 128 * std::max<int64_t>(1, tensor_parallel);
  return (model.vocab_size + multiple - 1) / multiple * multiple;
}

bool TiedEmbeddings(const ModelSpec& model) { return model.arch == Architecture::kGpt; }

double EmbeddingParametersPerGpu(const ModelSpec& model, int64_t tensor_parallel) {
  const double h = static_cast<double>(model.hidden_size);
  const double rows = static_cast<double>(PaddedVocab(model, tensor_parallel)) /
                      static_cast<double>(tensor_parallel);
  if (model.arch == Architecture::kLlama) return rows * h;  // rotary: no position table
  return rows * h + static_cast<double>(model.seq_len) * h;
}

double OutputParametersPerGpu(const ModelSpec& model, int64_t tensor_parallel,
                              int64_t pipeline_parallel) {
  const double h = static_cast<double>(model.hidden_size);
  const double rows = static_cast<double>(PaddedVocab(model, tensor_parallel)) /
                      static_cast<double>(tensor_parallel);
  if (model.arch == Architecture::kLlama) return h + rows * h;  // RMSNorm weight, own output layer
  return 2 * h + (pipeline_parallel > 1 ? rows * h : 0);
}

}  // namespace vtrain
