// Decoder-only model descriptions (GPT-style, Llama-style, and Llama-style
// Mixture-of-Experts with grouped-query or multi-head latent attention) and
// the named presets vtrain knows, with their parameter counts.
#ifndef VTRAIN_CORE_SPEC_MODEL_H_
#define VTRAIN_CORE_SPEC_MODEL_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vtrain {

// The layer architecture of a decoder-only model.
//  kGpt: learned position embeddings, LayerNorm, GeLU MLP (two GEMMs), biases
//    everywhere, word embeddings tied with the output logit layer, the
//    vocabulary unpadded (docs/architecture.md#the-gpt-vocabulary-is-not-padded).
//  kLlama (Touvron et al. 2023): rotary position embeddings, RMSNorm, SwiGLU
//    MLP (three GEMMs of width ffn: gate, up, down), grouped-query attention
//    (num_kv_heads key/value heads), no biases, untied input and output
//    embeddings, the vocabulary padded as Megatron pads it (PaddedVocab).
enum class Architecture { kGpt, kLlama };

// "gpt" / "llama".
absl::string_view ArchitectureName(Architecture arch);
// INVALID_ARGUMENT naming model.arch and the choices.
absl::StatusOr<Architecture> ParseArchitecture(absl::string_view name);

// The attention of a Llama-architecture layer. kStandard: multi-head or
// grouped-query attention (num_kv_heads); kMla: DeepSeek's Multi-head Latent
// Attention (DeepSeek-V2 report, Liu et al. 2024, §2.1.2): queries and
// keys/values through low-rank projections, each head's query/key split into
// a no-rope part (head_dim) and a shared rotary part (MlaDims::rope_head_dim).
enum class AttentionKind { kStandard, kMla };
// "mha" (also "gqa") / "mla".
absl::string_view AttentionName(AttentionKind kind);
// Accepts mha, gqa and mla; INVALID_ARGUMENT naming model.attention otherwise.
absl::StatusOr<AttentionKind> ParseAttention(absl::string_view name);

// How the attention core (scores, softmax, weighted sum) runs, independent of
// the architecture.
//  kFlash: one fused kernel per pass that keeps no s x s scores
//    (FlashAttention-2/3, cuDNN fused attention: what Megatron-Core with
//    Transformer Engine runs; --attention-backend flash/fused).
//  kUnfused: the paper's Megatron-LM of 2022: batched GEMMs for the scores
//    and the weighted sum, the s x s scores written to memory, softmax and
//    dropout as their own kernels (--attention-backend unfused). The measured
//    A100 runs of data/ and the paper's reproductions use it.
enum class AttentionImpl { kFlash, kUnfused };
// "flash" / "unfused".
absl::string_view AttentionImplName(AttentionImpl impl);
// INVALID_ARGUMENT naming model.attention_impl and the choices otherwise.
absl::StatusOr<AttentionImpl> ParseAttentionImpl(absl::string_view name);

// MLA's dimensions (DeepSeek-V3 config.json names in comments).
struct MlaDims {
  int64_t q_lora_rank = 0;     // q_lora_rank; 0: queries projected directly from h
  int64_t kv_lora_rank = 0;    // kv_lora_rank: the compressed key/value latent
  int64_t rope_head_dim = 0;   // qk_rope_head_dim: the rotary part of a query/key head
  int64_t value_head_dim = 0;  // v_head_dim
};

// How a Mixture-of-Experts router scores experts: softmax over the experts
// (Mixtral, Qwen3, GPT-OSS) or a sigmoid per expert (DeepSeek-V3). Both cost
// one small GEMM and a top-k; the load-balancing loss costs nothing to model.
enum class RouterScore { kSoftmax, kSigmoid };
absl::string_view RouterScoreName(RouterScore score);
absl::StatusOr<RouterScore> ParseRouterScore(absl::string_view name);

// The Mixture-of-Experts layers of a model; num_experts == 0: a dense model.
// A MoE layer replaces the dense SwiGLU MLP with a router, num_experts
// routed SwiGLU experts of width expert_ffn of which each token uses top_k,
// and shared_experts always-on experts of width shared_expert_ffn each.
struct MoeSpec {
  int64_t num_experts = 0;
  int64_t top_k = 0;
  int64_t expert_ffn = 0;
  int64_t shared_experts = 0;
  int64_t shared_expert_ffn = 0;  // per shared expert; 0 means expert_ffn
  // The first dense_layers layers keep a dense MLP of ffn_hidden_size
  // (DeepSeek-V3: first_k_dense_replace = 3); of the others, layer i (counted
  // from 0) is a MoE layer when i % layer_freq == 0 (Megatron's
  // --moe-layer-freq).
  int64_t dense_layers = 0;
  int64_t layer_freq = 1;
  RouterScore router = RouterScore::kSoftmax;

  bool enabled() const { return num_experts > 0; }
  int64_t shared_ffn() const { return shared_expert_ffn > 0 ? shared_expert_ffn : expert_ffn; }
  // The shared experts' total width (they run as one MLP).
  int64_t shared_width() const { return shared_experts * shared_ffn(); }
};

struct ModelSpec {
  std::string name;  // preset name or "custom"; informational only
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t seq_len = 0;
  // GPT-2 BPE, not padded (docs/architecture.md#the-gpt-vocabulary-is-not-padded).
  int64_t vocab_size = 50257;
  int64_t ffn_hidden_size = 0;  // 0 means 4 * hidden_size
  Architecture arch = Architecture::kGpt;
  int64_t num_kv_heads = 0;  // key/value heads (grouped-query attention); 0 means num_heads
  // Width of one attention head (of a query/key head's no-rope part under
  // MLA); 0 means hidden_size / num_heads. Qwen3 and GPT-OSS set it apart
  // from the hidden size (64 heads of 128 over hidden 4096).
  int64_t head_dim = 0;
  AttentionKind attention = AttentionKind::kStandard;
  // Flash for every model unless asked: what Megatron-Core runs today.
  AttentionImpl attention_impl = AttentionImpl::kFlash;
  MlaDims mla;  // attention == kMla only
  MoeSpec moe;
  // DeepSeek-V3's multi-token-prediction modules (num_nextn_predict_layers):
  // each one more layer, a 2h -> h projection and another logit and loss on
  // the last pipeline stage. Not counted in ModelParameterCount (model cards
  // count the main model: DeepSeek-V3's 671B leaves its 14B MTP module out).
  int64_t mtp_layers = 0;

  // FFN width with the default applied.
  int64_t ffn() const { return ffn_hidden_size > 0 ? ffn_hidden_size : 4 * hidden_size; }
  // Key/value heads with the default applied (num_heads: multi-head attention).
  int64_t kv_heads() const { return num_kv_heads > 0 ? num_kv_heads : num_heads; }
  // Head width with the default applied.
  int64_t head_width() const {
    return head_dim > 0 ? head_dim : (num_heads > 0 ? hidden_size / num_heads : 0);
  }
  bool is_moe() const { return moe.enabled(); }
  // Whether layer `layer` (0-based) is a Mixture-of-Experts layer.
  bool IsMoeLayer(int64_t layer) const {
    return moe.enabled() && layer >= moe.dense_layers &&
           layer % std::max<int64_t>(1, moe.layer_freq) == 0;
  }
  // How many of layers [first, first + count) are MoE layers.
  int64_t MoeLayersIn(int64_t first, int64_t count) const;
};

// Returns the preset with this name, or NOT_FOUND listing the known names.
absl::StatusOr<ModelSpec> ModelPreset(absl::string_view name);

// All preset names: the dense ones in size order, then the MoE ones in size
// order.
std::vector<std::string> ModelPresetNames();

// Parameters of one dense decoder layer (attention, MLP, two norms).
double LayerParameterCount(const ModelSpec& model);
// Parameters of the attention block of one layer (with its input norm):
// standard or MLA. Tensor parallelism divides it by t.
double AttentionParameterCount(const ModelSpec& model);
// Parameters of one MoE layer that are not routed experts: its attention, the
// router (and DeepSeek's per-expert score bias), the shared experts and the
// pre-MLP norm. Tensor parallelism divides them by t (the router is small).
double MoeLayerDenseParameterCount(const ModelSpec& model);
// Parameters of one MoE layer's routed experts: num_experts * 3 * h * expert_ffn.
// Expert parallelism times expert tensor parallelism divides them.
double MoeLayerExpertParameterCount(const ModelSpec& model);
// Parameters of the whole model with the vocabulary as given (unpadded, as
// model cards count them); tied embeddings counted once.
double ModelParameterCount(const ModelSpec& model);
// The parameters one token uses: ModelParameterCount with only top_k of the
// routed experts of each MoE layer (equal to it for a dense model).
double ActiveParameterCount(const ModelSpec& model);
// The parameters of layers [first, first + count), split as tensor
// parallelism and expert parallelism divide them.
struct LayerParameters {
  double dense = 0;    // attention, dense MLPs, routers, shared experts, norms
  double experts = 0;  // routed experts
};
LayerParameters LayerParametersIn(const ModelSpec& model, int64_t first, int64_t count);

// The vocabulary rows the embedding and logit layers hold when trained with
// `tensor_parallel`-way tensor parallelism. Llama: Megatron-LM pads the
// vocabulary to a multiple of 128 * t (--make-vocab-size-divisible-by 128,
// megatron/training/tokenizer _vocab_size_with_padding), so it depends on t.
// GPT: vocab_size unpadded, the shape vTrain measured
// (docs/architecture.md#the-gpt-vocabulary-is-not-padded).
int64_t PaddedVocab(const ModelSpec& model, int64_t tensor_parallel);

// Whether the output logit layer shares the input word embedding (GPT).
bool TiedEmbeddings(const ModelSpec& model);

// Parameters one GPU of the first pipeline stage holds besides its layers:
// its 1/t of the word embedding (padded vocabulary) and, for GPT, the
// learned position embedding.
double EmbeddingParametersPerGpu(const ModelSpec& model, int64_t tensor_parallel);
// Parameters one GPU of the last stage holds besides its layers: the final
// norm and the output layer's 1/t (untied: always; tied: its own copy only
// when the pipeline has more than one stage).
double OutputParametersPerGpu(const ModelSpec& model, int64_t tensor_parallel,
                              int64_t pipeline_parallel);

}  // namespace vtrain

#endif  // VTRAIN_CORE_SPEC_MODEL_H_
