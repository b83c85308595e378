// GPT-style model description and the named presets vtrain knows.
#ifndef VTRAIN_CORE_SPEC_MODEL_H_
#define VTRAIN_CORE_SPEC_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vtrain {

// A decoder-only GPT model: learned position embeddings, GeLU MLP, biases
// everywhere, word embeddings tied with the output logit layer.
struct ModelSpec {
  std::string name;  // preset name or "custom"; informational only
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t seq_len = 0;
  int64_t vocab_size = 50257;   // GPT-2 BPE, not padded (DESIGN.md §5)
  int64_t ffn_hidden_size = 0;  // 0 means 4 * hidden_size

  // FFN width with the default applied.
  int64_t ffn() const { return ffn_hidden_size > 0 ? ffn_hidden_size : 4 * hidden_size; }
};

// Returns the preset with this name, or NOT_FOUND listing the known names.
absl::StatusOr<ModelSpec> ModelPreset(absl::string_view name);

// All preset names, in size order.
std::vector<std::string> ModelPresetNames();

// Parameters of one decoder layer (attention, MLP, two layer-norms).
double LayerParameterCount(const ModelSpec& model);
// Parameters of the whole model, tied embeddings counted once.
double ModelParameterCount(const ModelSpec& model);

}  // namespace vtrain

#endif  // VTRAIN_CORE_SPEC_MODEL_H_
