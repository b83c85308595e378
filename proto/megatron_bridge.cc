#include "proto/megatron_bridge.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/megatron_bridge_fields.h"
#include "proto/megatron_mapper.h"
#include "proto/yaml_reader.h"

namespace vtrain::proto {
namespace {

using internal::BridgeField;
using internal::BridgeKind;
using internal::MegatronArg;
using Kind = YamlNode::Kind;

bool IsTrue(const YamlNode& n) {
  return n.kind == Kind::kScalar && !n.quoted &&
         (n.text == "true" || n.text == "True" || n.text == "TRUE");
}

// Off: null, false, zero, an empty string or collection.
bool IsOff(const YamlNode& n) {
  if (n.kind == Kind::kNull) return true;
  if (n.kind == Kind::kMap) return n.map.empty();
  if (n.kind == Kind::kSeq) return n.seq.empty();
  if (n.quoted) return n.text.empty();
  double v = 1;
  return n.text == "false" || n.text == "False" || n.text == "FALSE" ||
         (absl::SimpleAtod(n.text, &v) && v == 0);
}

// A Python object the dump wrote as a mapping: a dtype ({_target_:
// torch.bfloat16, _call_: false}) as "bf16"; an enum as its _name_; a
// function as its last name ("silu").
std::optional<std::string> ObjectName(const YamlNode& n) {
  if (n.kind != Kind::kMap) return std::nullopt;
  if (const YamlNode* name = n.Find("_name_"); name != nullptr && name->kind == Kind::kScalar) {
    return name->text;
  }
  const YamlNode* target = n.Find("_target_");
  if (target == nullptr || target->kind != Kind::kScalar) return std::nullopt;
  const std::string& t = target->text;
  if (t == "torch.bfloat16") return "bf16";
  if (t == "torch.float16" || t == "torch.half") return "fp16";
  if (t == "torch.float32" || t == "torch.float") return "fp32";
  if (t == "torch.uint8") return "uint8";
  const size_t dot = t.rfind('.');
  return dot == std::string::npos ? t : t.substr(dot + 1);
}

// A field's value as argument words: a scalar, a list of scalars, a
// Python object's name; nullopt for what has no argument form.
std::optional<std::vector<std::string>> Words(const YamlNode& n) {
  if (n.kind == Kind::kScalar) return std::vector<std::string>{n.text};
  if (std::optional<std::string> o = ObjectName(n)) return std::vector<std::string>{*o};
  if (n.kind != Kind::kSeq) return std::nullopt;
  std::vector<std::string> out;
  for (const auto& item : n.seq) {
    if (item->kind != Kind::kScalar) return std::nullopt;
    out.push_back(item->text);
  }
  return out;
}

// Whether `n` is the value a dump writes as `text` (numbers compared as
// numbers, Python objects by name).
bool SameValue(const YamlNode& n, absl::string_view text) {
  absl::StatusOr<std::shared_ptr<const YamlNode>> d = ReadYaml(text, "default");
  if (!d.ok()) return false;
  std::function<bool(const YamlNode&, const YamlNode&)> same = [&](const YamlNode& a,
                                                                   const YamlNode& b) {
    if (a.kind != b.kind) return false;
    switch (a.kind) {
      case Kind::kNull:
        return true;
      case Kind::kScalar: {
        double x = 0, y = 0;
        return a.text == b.text ||
               (absl::SimpleAtod(a.text, &x) && absl::SimpleAtod(b.text, &y) && x == y);
      }
      case Kind::kSeq:
        if (a.seq.size() != b.seq.size()) return false;
        for (size_t i = 0; i < a.seq.size(); ++i) {
          if (!same(*a.seq[i], *b.seq[i])) return false;
        }
        return true;
      case Kind::kMap:
        return a.map.empty() ? b.map.empty() : ObjectName(a) == ObjectName(b);
    }
    return false;
  };
  return same(n, **d);
}

// Megatron's layout string ("E|t*4|t*4,L" style: '|' between stages) from a
// list of stages, each a list of embedding/decoder/mtp/loss.
std::optional<std::string> LayoutString(const YamlNode& n) {
  if (n.kind == Kind::kScalar) return n.text;
  if (n.kind != Kind::kSeq) return std::nullopt;
  std::vector<std::string> stages;
  for (const auto& stage : n.seq) {
    if (stage->kind != Kind::kSeq) return std::nullopt;
    std::string s;
    for (const auto& layer : stage->seq) {
      const std::string& t = layer->text;
      if (t == "embedding") {
        s += 'E';
      } else if (t == "decoder") {
        s += 't';
      } else if (t == "mtp") {
        s += 'm';
      } else if (t == "loss") {
        s += 'L';
      } else {
        return std::nullopt;
      }
    }
    stages.push_back(std::move(s));
  }
  return absl::StrJoin(stages, "|");
}

class Translator {
 public:
  Translator(absl::string_view name, MegatronJob& job) : name_(name), job_(job) {}

  void Section(absl::string_view section, const YamlNode& map);
  void MixedPrecision(const YamlNode& n);
  void Finish();

  std::vector<MegatronArg> args;
  std::vector<std::string> refused;

 private:
  std::string Where(const YamlNode& n, absl::string_view path) const {
    return absl::StrCat(name_, ":", n.line, ": ", path);
  }
  void Emit(absl::string_view flag, std::vector<std::string> values, const YamlNode& n,
            absl::string_view path, std::vector<MegatronArg>* into = nullptr) {
    MegatronArg a;
    a.name = std::string(flag);
    a.values = std::move(values);
    a.line = n.line;
    a.path = std::string(path);
    (into != nullptr ? *into : args).push_back(std::move(a));
  }
  void Refuse(const YamlNode& n, absl::string_view path, absl::string_view why) {
    refused.push_back(absl::StrCat(Where(n, path), " ", why));
  }
  void Field(absl::string_view section, const std::string& key, const YamlNode& n);
  bool Special(const std::string& key, const YamlNode& n, const std::string& path);

  absl::string_view name_;
  MegatronJob& job_;
  std::vector<MegatronArg> precision_;        // the model's bf16/fp16/fp8 fields
  std::vector<MegatronArg> named_precision_;  // mixed_precision's recipe, which wins
  bool precision_named_ = false;              // mixed_precision named a recipe
  bool gated_ = false;
  std::string activation_ = "gelu", granularity_;
  const YamlNode* modules_ = nullptr;
  const YamlNode* fp8_recipe_ = nullptr;
  const YamlNode *tokenizer_vocab_ = nullptr, *dataset_seq_ = nullptr, *model_vocab_ = nullptr,
                 *model_seq_ = nullptr;
  std::string modules_path_;
};

void Translator::Section(absl::string_view section, const YamlNode& map) {
  for (const auto& [key, value] : map.map) {
    if (absl::StartsWith(key, "_")) continue;  // _target_, _builder_, _call_: the class
    if (section == "model" && key == "transformer" && value->kind == Kind::kMap) {
      Section("model", *value);  // Bridge's builder-backed shape
      continue;
    }
    Field(section, key, *value);
  }
}

void Translator::Field(absl::string_view section, const std::string& key, const YamlNode& n) {
  const std::string path = absl::StrCat(section, ".", key);
  if (section == "model" && Special(key, n, path)) return;
  if (section == "optimizer" && key == "optimizer") {
    if (n.kind == Kind::kScalar && n.text != "adam") {
      Refuse(n, path, absl::StrCat("'", n.text, "': vtrain models Adam's memory and step"));
    }
    return;
  }
  if ((section == "tokenizer" && key == "vocab_size") ||
      (section == "dataset" && key == "seq_length")) {
    (key == "vocab_size" ? tokenizer_vocab_ : dataset_seq_) = &n;
    return;
  }
  if (section == "model" && (key == "vocab_size" || key == "seq_length") && !n.IsNull()) {
    (key == "vocab_size" ? model_vocab_ : model_seq_) = &n;
  }
  const BridgeField* f = internal::FindBridgeField(section, key);
  const internal::BridgeDefault* d =
      f == nullptr ? internal::FindBridgeDefault(section, key) : nullptr;
  if (d != nullptr && d->no_step_time) {
    job_.ignored.push_back(absl::StrCat(path, " (initialisation, numerics or logging)"));
    return;
  }
  if (d != nullptr && SameValue(n, d->value)) {
    job_.ignored.push_back(absl::StrCat(path, " (at Megatron-Core's default)"));
    return;
  }
  if (f == nullptr) {
    if (IsOff(n)) {
      job_.ignored.push_back(absl::StrCat(path, " (not read by vtrain; off in this run)"));
    } else if (n.kind == Kind::kMap && n.Find("_call_") != nullptr) {
      job_.ignored.push_back(absl::StrCat(path, " (a Python object, not a setting)"));
    } else {
      Refuse(n, path,
             "is not a field vtrain reads and is not off; it may change the step time (remove "
             "it or set it to its default to predict without it; docs/megatron.md lists what "
             "is read)");
    }
    return;
  }
  switch (f->kind) {
    case BridgeKind::kNoStepTime:
      job_.ignored.push_back(absl::StrCat(path, " (", f->flag_or_why, ")"));
      return;
    case BridgeKind::kSwitch:
      if (IsTrue(n)) Emit(f->flag_or_why, {}, n, path);
      return;
    case BridgeKind::kNegated:
      if (!IsTrue(n) && IsOff(n) && n.kind != Kind::kNull) Emit(f->flag_or_why, {}, n, path);
      return;
    case BridgeKind::kValue:
    case BridgeKind::kSpecial:
      if (n.IsNull()) return;
      if (std::optional<std::vector<std::string>> w = Words(n)) {
        Emit(f->flag_or_why, *std::move(w), n, path);
      } else {
        Refuse(n, path, "has a value vtrain cannot read (a scalar or a list of scalars)");
      }
      return;
  }
}

// The model fields whose translation is more than one argument.
bool Translator::Special(const std::string& key, const YamlNode& n, const std::string& path) {
  if (key == "gated_linear_unit") {
    gated_ = IsTrue(n);
    if (gated_) Emit("swiglu", {}, n, path);
    return true;
  }
  if (key == "activation_func") {
    if (n.kind == Kind::kScalar) activation_ = n.text;
    if (std::optional<std::string> a = ObjectName(n)) activation_ = *a;
    return true;
  }
  if (key == "num_query_groups") {
    if (!n.IsNull()) {
      Emit("group-query-attention", {}, n, path);
      Emit("num-query-groups", {n.text}, n, path);
    }
    return true;
  }
  if (key == "bf16" || key == "fp16") {
    if (IsTrue(n)) Emit(key, {}, n, path, &precision_);
    return true;
  }
  if (key == "fp8") {
    if (!n.IsNull()) Emit("fp8-format", {n.text}, n, path, &precision_);
    return true;
  }
  if (key == "fp8_recipe") {
    fp8_recipe_ = &n;  // read only with fp8 (below)
    return true;
  }
  if (key == "fp4") {
    if (!n.IsNull())
      Refuse(n, path, "(fp4 training) is not modelled; vtrain has bf16, fp16 and fp8");
    return true;
  }
  if (key == "pipeline_model_parallel_layout") {
    if (n.IsNull()) return true;
    if (std::optional<std::string> s = LayoutString(n)) {
      Emit("pipeline-model-parallel-layout", {*s}, n, path);
    } else {
      Refuse(n, path,
             "is not a layout: a string or a list of stages of embedding/decoder/mtp/loss");
    }
    return true;
  }
  if (key == "moe_layer_freq") {
    if (n.kind == Kind::kScalar && n.text == "1") {
      job_.ignored.push_back(absl::StrCat(path, " (at Megatron-Core's default)"));
    } else if (n.kind == Kind::kSeq) {
      std::vector<std::string> items;
      for (const auto& i : n.seq) items.push_back(i->text);
      Emit("moe-layer-freq", {absl::StrCat("[", absl::StrJoin(items, ","), "]")}, n, path);
    } else if (!n.IsNull()) {
      Emit("moe-layer-freq", {n.text}, n, path);
    }
    return true;
  }
  if (key == "cp_comm_type") {
    if (n.kind == Kind::kSeq && !n.seq.empty() &&
        std::all_of(n.seq.begin(), n.seq.end(),
                    [&](const auto& i) { return i->text == n.seq.front()->text; })) {
      Emit("cp-comm-type", {n.seq.front()->text}, n, path);
      return true;
    }
    return false;
  }
  if (key == "recompute_granularity") {
    if (!n.IsNull()) granularity_ = n.text;
    return false;
  }
  if (key == "recompute_modules") {
    modules_ = &n;  // read only for selective recomputation (below)
    modules_path_ = path;
    return true;
  }
  return false;
}

void Translator::MixedPrecision(const YamlNode& n) {
  const std::string path = "mixed_precision";
  if (n.kind == Kind::kMap) {
    job_.ignored.push_back(
        "mixed_precision (copied into model, ddp and optimizer by the run; read there)");
    return;
  }
  if (n.kind != Kind::kScalar) return;
  // A recipe's name, applied over the model's fields when the run starts.
  const std::string& r = n.text;
  std::vector<MegatronArg> p;
  if (absl::StartsWith(r, "bf16")) {
    Emit("bf16", {}, n, path, &p);
  } else if (absl::StartsWith(r, "fp16")) {
    Emit("fp16", {}, n, path, &p);
  } else {
    Refuse(n, path,
           absl::StrCat("'", r, "' is not a recipe vtrain knows (bf16_mixed, fp16_mixed, ...)"));
    return;
  }
  if (absl::StrContains(r, "fp4")) {
    Refuse(n, path, absl::StrCat("'", r, "': fp4 training is not modelled"));
    return;
  }
  const char* recipe = absl::StrContains(r, "mxfp8")         ? "mxfp8"
                       : absl::StrContains(r, "fp8_delayed") ? "delayed"
                       : absl::StrContains(r, "fp8_current") ? "tensorwise"
                       : absl::StrContains(r, "fp8_subchannel") || absl::StrContains(r, "blockwise")
                           ? "blockwise"
                           : nullptr;
  if (recipe != nullptr) {
    Emit("fp8-format", {std::string(absl::StrContains(r, "delayed") ? "hybrid" : "e4m3")}, n, path,
         &p);
    Emit("fp8-recipe", {recipe}, n, path, &p);
  } else if (absl::StrContains(r, "fp8")) {
    Refuse(n, path, absl::StrCat("'", r, "': an fp8 recipe vtrain does not know"));
    return;
  }
  named_precision_ = std::move(p);
  precision_named_ = true;
}

void Translator::Finish() {
  std::vector<MegatronArg>& precision = precision_named_ ? named_precision_ : precision_;
  const bool fp8 = std::any_of(precision.begin(), precision.end(),
                               [](const MegatronArg& a) { return a.name == "fp8-format"; });
  if (fp8 && !precision_named_ && fp8_recipe_ != nullptr && !fp8_recipe_->IsNull()) {
    Emit("fp8-recipe", {fp8_recipe_->text}, *fp8_recipe_, "model.fp8_recipe", &precision);
  } else if (fp8_recipe_ != nullptr) {
    job_.ignored.push_back(fp8 ? "model.fp8_recipe (mixed_precision's recipe wins)"
                               : "model.fp8_recipe (no fp8)");
  }
  args.insert(args.end(), precision.begin(), precision.end());
  // A dense model's MoE fields hold Megatron-Core's defaults (top-k 2, EP 1):
  // they configure nothing.
  const bool experts = std::any_of(args.begin(), args.end(), [](const MegatronArg& a) {
    return a.name == "num-experts" && !(a.values.size() == 1 && a.values[0] == "0");
  });
  if (!experts) {
    std::vector<MegatronArg> kept;
    for (MegatronArg& a : args) {
      const bool moe =
          absl::StartsWith(a.name, "moe-") || a.name == "expert-tensor-parallel-size" ||
          (a.name == "expert-model-parallel-size" && a.values.size() == 1 && a.values[0] == "1");
      if (moe) {
        job_.ignored.push_back(absl::StrCat(a.path, " (a MoE field; the model has no experts)"));
      } else {
        kept.push_back(std::move(a));
      }
    }
    args = std::move(kept);
  }
  if (gated_ && activation_ != "silu" && activation_ != "fast_gelu" && activation_ != "gelu") {
    job_.notes.push_back(absl::StrCat("model.activation_func ", activation_,
                                      " with a gated unit: predicted as SwiGLU (the same GEMMs)"));
  }
  if (modules_ != nullptr && granularity_ == "selective") {
    if (std::optional<std::vector<std::string>> w = Words(*modules_)) {
      Emit("recompute-modules", *w, *modules_, modules_path_);
    }
  }
  if (model_vocab_ == nullptr && tokenizer_vocab_ != nullptr && !tokenizer_vocab_->IsNull()) {
    Emit("vocab-size", {tokenizer_vocab_->text}, *tokenizer_vocab_, "tokenizer.vocab_size");
  }
  if (dataset_seq_ != nullptr && !dataset_seq_->IsNull()) {
    if (model_seq_ == nullptr) {
      Emit("seq-length", {dataset_seq_->text}, *dataset_seq_, "dataset.seq_length");
    } else if (model_seq_->text != dataset_seq_->text) {
      Refuse(*dataset_seq_, "dataset.seq_length",
             absl::StrCat(dataset_seq_->text, " differs from model.seq_length ", model_seq_->text,
                          " (Megatron-Bridge refuses this run; make them equal)"));
    }
  }
}

}  // namespace

absl::StatusOr<MegatronJob> RequestFromBridgeConfig(absl::string_view text,
                                                    absl::string_view name) {
  YamlLimits limits;
  limits.max_bytes = kMaxBridgeConfigBytes;
  absl::StatusOr<std::shared_ptr<const YamlNode>> root = ReadYaml(text, name, limits);
  if (!root.ok()) return root.status();
  const YamlNode* model = (*root)->Find("model");
  if (model == nullptr || model->kind != Kind::kMap) {
    return absl::InvalidArgumentError(absl::StrCat(
        name,
        ": no 'model:' mapping: not a Megatron-Bridge ConfigContainer dump (the run_config.yaml "
        "beside a checkpoint, or ConfigContainer.to_yaml's file)"));
  }
  if (const YamlNode* t = model->Find("_target_"); t != nullptr && t->kind == Kind::kScalar) {
    for (const char* other : {"T5", "Mamba", "Hybrid", "Bert", "Vision", "VLM", "LLaVA"}) {
      if (absl::StrContains(t->text, other)) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ":", t->line, ": model._target_ ", t->text,
                         ": vtrain predicts GPT-style decoders (GPT, Llama, MLA and MoE "
                         "providers), not this model"));
      }
    }
  }
  MegatronJob job;
  Translator tr(name, job);
  for (const auto& [section, value] : (*root)->map) {
    if (absl::StartsWith(section, "_")) continue;
    if (section == "mixed_precision") {
      tr.MixedPrecision(*value);
    } else if (absl::string_view why = internal::IgnoredBridgeSection(section); !why.empty()) {
      job.ignored.push_back(absl::StrCat(section, " (", why, ")"));
    } else if (section == "peft" && !IsOff(*value)) {
      tr.refused.push_back(absl::StrCat(name, ":", value->line,
                                        ": peft: parameter-efficient fine-tuning is not "
                                        "modelled (vtrain predicts full training)"));
    } else if (value->kind == Kind::kMap) {
      tr.Section(section, *value);
    } else if (!IsOff(*value)) {
      tr.refused.push_back(absl::StrCat(name, ":", value->line, ": ", section,
                                        " is not a section vtrain reads and is not off"));
    }
  }
  tr.Finish();
  if (!tr.refused.empty()) return absl::InvalidArgumentError(absl::StrJoin(tr.refused, "; "));
  internal::MegatronMapper mapper(name, job);
  if (absl::Status s = mapper.Map(tr.args); !s.ok()) return s;
  // The world size: the data-parallel size the run computed, times t, p, c.
  const v1::ParallelPlan& p = job.request.plan();
  int64_t dp = 0;
  for (const char* section : {"comm_overlap", "dataset"}) {
    const YamlNode* s = (*root)->Find(section);
    const YamlNode* d = s != nullptr ? s->Find("data_parallel_size") : nullptr;
    if (d != nullptr && d->kind == Kind::kScalar && absl::SimpleAtoi(d->text, &dp) && dp > 0) break;
    dp = 0;
  }
  if (dp > 0) {
    auto degree = [](bool has, int64_t v) { return has ? v : 1; };
    job.request.mutable_cluster()->set_num_gpus(
        dp * degree(p.has_tensor_parallel(), p.tensor_parallel()) *
        degree(p.has_pipeline_parallel(), p.pipeline_parallel()) *
        degree(p.has_context_parallel(), p.context_parallel()));
  } else {
    job.notes.push_back(absl::StrCat(
        name, ": the world size is not in the config (no data_parallel_size): give --gpus"));
  }
  std::sort(job.ignored.begin(), job.ignored.end());
  return job;
}

}  // namespace vtrain::proto
