#include "core/spec/model.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

constexpr absl::string_view kArchNames[] = {"gpt", "llama"};

}  // namespace

absl::string_view ArchitectureName(Architecture arch) { return kArchNames[static_cast<int>(arch)]; }

absl::StatusOr<Architecture> ParseArchitecture(absl::string_view name) {
  if (name == "gpt") return Architecture::kGpt;
  if (name == "llama") return Architecture::kLlama;
  return absl::InvalidArgumentError(
      absl::StrCat("model.arch='", name, "' is unknown; use gpt or llama"));
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
  if (model.arch == Architecture::kLlama) {
    // Q and output projections (2h^2), K and V of kv_heads heads of h/heads
    // each (2 h kv_dim), gate, up and down projections (3hf), two RMSNorm
    // weights (2h); no biases.
    const double kv_dim =
        static_cast<double>(model.kv_heads()) * h / static_cast<double>(model.num_heads);
    return 2 * h * h + 2 * h * kv_dim + 3 * h * f + 2 * h;
  }
  // QKV (3h^2 + 3h), projection (h^2 + h), FFN up (hf + f), FFN down (fh + h),
  // two layer-norms (4h).
  return 4 * h * h + 2 * h * f + 9 * h + f;
}

double ModelParameterCount(const ModelSpec& model) {
  const double h = static_cast<double>(model.hidden_size);
  const double layers = static_cast<double>(model.num_layers) * LayerParameterCount(model);
  const double vocab = static_cast<double>(model.vocab_size);
  if (model.arch == Architecture::kLlama) {
    return layers + 2 * vocab * h +  // untied input embedding and output layer
           h;                        // final RMSNorm
  }
  return layers + vocab * h +                      // word embedding, tied with logits
         static_cast<double>(model.seq_len) * h +  // learned positions
         2 * h;                                    // final layer-norm
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
