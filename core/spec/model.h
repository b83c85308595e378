// Decoder-only model descriptions (GPT-style and Llama-style) and the named
// presets vtrain knows, with their parameter counts.
#ifndef VTRAIN_CORE_SPEC_MODEL_H_
#define VTRAIN_CORE_SPEC_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vtrain {

// The layer architecture of a decoder-only model.
//  kGpt: learned position embeddings, LayerNorm, GeLU MLP (two GEMMs), biases
//    everywhere, word embeddings tied with the output logit layer, the
//    vocabulary unpadded (DESIGN.md §5).
//  kLlama (Touvron et al. 2023): rotary position embeddings, RMSNorm, SwiGLU
//    MLP (three GEMMs of width ffn: gate, up, down), grouped-query attention
//    (num_kv_heads key/value heads), no biases, untied input and output
//    embeddings, the vocabulary padded as Megatron pads it (PaddedVocab).
enum class Architecture { kGpt, kLlama };

// "gpt" / "llama".
absl::string_view ArchitectureName(Architecture arch);
// INVALID_ARGUMENT naming model.arch and the choices.
absl::StatusOr<Architecture> ParseArchitecture(absl::string_view name);

struct ModelSpec {
  std::string name;  // preset name or "custom"; informational only
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t seq_len = 0;
  int64_t vocab_size = 50257;   // GPT-2 BPE, not padded (DESIGN.md §5)
  int64_t ffn_hidden_size = 0;  // 0 means 4 * hidden_size
  Architecture arch = Architecture::kGpt;
  int64_t num_kv_heads = 0;  // key/value heads (grouped-query attention); 0 means num_heads

  // FFN width with the default applied.
  int64_t ffn() const { return ffn_hidden_size > 0 ? ffn_hidden_size : 4 * hidden_size; }
  // Key/value heads with the default applied (num_heads: multi-head attention).
  int64_t kv_heads() const { return num_kv_heads > 0 ? num_kv_heads : num_heads; }
};

// Returns the preset with this name, or NOT_FOUND listing the known names.
absl::StatusOr<ModelSpec> ModelPreset(absl::string_view name);

// All preset names, in size order.
std::vector<std::string> ModelPresetNames();

// Parameters of one decoder layer (attention, MLP, two norms).
double LayerParameterCount(const ModelSpec& model);
// Parameters of the whole model with the vocabulary as given (unpadded, as
// model cards count them); tied embeddings counted once.
double ModelParameterCount(const ModelSpec& model);

// The vocabulary rows the embedding and logit layers hold when trained with
// `tensor_parallel`-way tensor parallelism. Llama: Megatron-LM pads the
// vocabulary to a multiple of 128 * t (--make-vocab-size-divisible-by 128,
// megatron/training/tokenizer _vocab_size_with_padding), so it depends on t.
// GPT: vocab_size unpadded, the shape vTrain measured (DESIGN.md §5).
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
