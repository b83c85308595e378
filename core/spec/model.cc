#include "core/spec/model.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace vtrain {
namespace {

struct Preset {
  const char* name;
  int64_t layers, hidden, heads, seq;
};

// GPT-3 shapes from Brown et al. 2020, Table 2.1 (n_layers, d_model, n_heads;
// context 2048). Two rows of that table are not self-consistent, and we keep
// the head width d_head = 128 that the table gives:
//  - GPT-3 XL lists 24 heads of 128 for d_model 2048; we use 16 heads.
//  - GPT-3 13B lists d_model 5140 with 40 heads of 128; we use 5120.
// MT-NLG 530B from Smith et al. 2022: 105 layers, hidden 20480, 128 heads.
constexpr Preset kPresets[] = {
    {"gpt3-125m", 12, 768, 12, 2048},   {"gpt3-350m", 24, 1024, 16, 2048},
    {"gpt3-1.3b", 24, 2048, 16, 2048},  {"gpt3-2.7b", 32, 2560, 32, 2048},
    {"gpt3-6.7b", 32, 4096, 32, 2048},  {"gpt3-13b", 40, 5120, 40, 2048},
    {"gpt3-175b", 96, 12288, 96, 2048}, {"mtnlg-530b", 105, 20480, 128, 2048},
};

}  // namespace

absl::StatusOr<ModelSpec> ModelPreset(absl::string_view name) {
  for (const Preset& p : kPresets) {
    if (name == p.name) {
      ModelSpec m;
      m.name = p.name;
      m.num_layers = p.layers;
      m.hidden_size = p.hidden;
      m.num_heads = p.heads;
      m.seq_len = p.seq;
      return m;
    }
  }
  return absl::NotFoundError(absl::StrCat("model preset '", name, "' is unknown; use one of: ",
                                          absl::StrJoin(ModelPresetNames(), ", ")));
}

std::vector<std::string> ModelPresetNames() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.emplace_back(p.name);
  return names;
}

double LayerParameterCount(const ModelSpec& model) {
  const double h = static_cast<double>(model.hidden_size);
  const double f = static_cast<double>(model.ffn());
  // QKV (3h^2 + 3h), projection (h^2 + h), FFN up (hf + f), FFN down (fh + h),
  // two layer-norms (4h).
  return 4 * h * h + 2 * h * f + 9 * h + f;
}

double ModelParameterCount(const ModelSpec& model) {
  const double h = static_cast<double>(model.hidden_size);
  return static_cast<double>(model.num_layers) * LayerParameterCount(model) +
         static_cast<double>(model.vocab_size) * h +  // word embedding, tied with logits
         static_cast<double>(model.seq_len) * h +     // learned positions
         2 * h;                                       // final layer-norm
}

}  // namespace vtrain
