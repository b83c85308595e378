#include "proto/vtrain_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/util/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "proto/json_keys.h"

namespace vtrain::proto {
namespace {

enum class Presence { kRequired, kOptional };

using google::protobuf::Value;

// Every key of vTrain's configuration (VIA-Research/vTrain src/config.py,
// vTrainConfig's constructor arguments); model_arch and trace_path are read
// and not used.
constexpr const char* kKnownKeys[] = {"num_gpus",
                                      "gpu_name",
                                      "tensor_parallel_size",
                                      "data_parallel_size",
                                      "pipeline_parallel_size",
                                      "global_batch_size",
                                      "micro_batch_size",
                                      "model_arch",
                                      "num_layers",
                                      "hidden_size",
                                      "num_attention_heads",
                                      "max_length",
                                      "vocab_size",
                                      "use_gradient_bucket",
                                      "use_checkpoint",
                                      "ddp_bucket_size",
                                      "inter_node_bandwidth",
                                      "intra_node_bandwidth",
                                      "pipeline_scheduling",
                                      "node_size",
                                      "trace_path"};

const char* KindName(Value::KindCase kind) {
  switch (kind) {
    case Value::kNumberValue:
      return "a number";
    case Value::kStringValue:
      return "a string";
    case Value::kBoolValue:
      return "true or false";
    case Value::kStructValue:
      return "an object";
    case Value::kListValue:
      return "a list";
    default:
      return "null";
  }
}

// Typed reads of a vTrain configuration's fields; errors name the field. A
// key set to null (vTrain writes None so) counts as absent.
class ConfigReader {
 public:
  explicit ConfigReader(const google::protobuf::Struct& config) : fields_(config.fields()) {}

  // The keys vTrain does not have (a misspelt key would otherwise be
  // ignored and its default used).
  absl::Status CheckKeys() const {
    std::vector<std::string> unknown;
    for (const auto& [key, value] : fields_) {
      bool known = false;
      for (const char* k : kKnownKeys) known = known || key == k;
      if (!known) unknown.push_back(key);
    }
    if (unknown.empty()) return absl::OkStatus();
    std::sort(unknown.begin(), unknown.end());
    return absl::InvalidArgumentError(absl::StrCat(
        "vTrain config: unknown key", unknown.size() > 1 ? "s" : "", " '",
        absl::StrJoin(unknown, "', '"), "'; the keys are ", absl::StrJoin(kKnownKeys, ", ")));
  }

  // The value of `key` when present and not null, checked to be of `kind`.
  absl::StatusOr<const Value*> Find(const char* key, Value::KindCase kind) const {
    auto it = fields_.find(key);
    if (it == fields_.end() || it->second.kind_case() == Value::kNullValue) {
      return static_cast<const Value*>(nullptr);
    }
    if (it->second.kind_case() != kind) {
      return absl::InvalidArgumentError(absl::StrCat("vTrain config: '", key, "' must be ",
                                                     KindName(kind), ", not ",
                                                     KindName(it->second.kind_case())));
    }
    return &it->second;
  }

  absl::StatusOr<std::optional<double>> Number(const char* key, Presence presence) const {
    VTRAIN_ASSIGN_OR_RETURN(const Value* v, Find(key, Value::kNumberValue));
    if (v == nullptr) {
      if (presence == Presence::kRequired) {
        return absl::InvalidArgumentError(absl::StrCat("vTrain config: '", key, "' is required"));
      }
      return std::optional<double>();
    }
    return std::optional<double>(v->number_value());
  }

  // A whole number (vTrain writes them as JSON numbers).
  absl::StatusOr<std::optional<int64_t>> Integer(const char* key, Presence presence) const {
    VTRAIN_ASSIGN_OR_RETURN(std::optional<double> v, Number(key, presence));
    if (!v) return std::optional<int64_t>();
    if (*v != std::floor(*v) || std::abs(*v) > 9e15) {
      return absl::InvalidArgumentError(
          absl::StrCat("vTrain config: '", key, "' must be an integer"));
    }
    return std::optional<int64_t>(static_cast<int64_t>(*v));
  }

  // A number in (0, max] (sizes and bandwidths; the bound keeps the unit
  // conversions finite and in range of int64).
  absl::StatusOr<std::optional<double>> Amount(const char* key, double max) const {
    VTRAIN_ASSIGN_OR_RETURN(std::optional<double> v, Number(key, Presence::kOptional));
    if (v && !(*v > 0 && *v <= max)) {
      return absl::InvalidArgumentError(
          absl::StrCat("vTrain config: '", key, "' must be in (0, ", max, "]"));
    }
    return v;
  }

  absl::StatusOr<std::string> Text(const char* key, const std::string& fallback) const {
    VTRAIN_ASSIGN_OR_RETURN(const Value* v, Find(key, Value::kStringValue));
    return v == nullptr ? fallback : v->string_value();
  }

  absl::StatusOr<bool> Flag(const char* key, bool fallback) const {
    VTRAIN_ASSIGN_OR_RETURN(const Value* v, Find(key, Value::kBoolValue));
    return v == nullptr ? fallback : v->bool_value();
  }

 private:
  const google::protobuf::Map<std::string, google::protobuf::Value>& fields_;
};

// The integer fields and where they go in the request.
struct IntField {
  const char* key;
  Presence presence;
  void (*set)(v1::PredictRequest&, int64_t);
};
constexpr Presence kRequired = Presence::kRequired;
constexpr Presence kOptional = Presence::kOptional;
constexpr IntField kIntFields[] = {
    {"num_layers", kRequired,
     [](v1::PredictRequest& q, int64_t v) { q.mutable_model()->set_num_layers(v); }},
    {"hidden_size", kRequired,
     [](v1::PredictRequest& q, int64_t v) { q.mutable_model()->set_hidden_size(v); }},
    {"num_attention_heads", kRequired,
     [](v1::PredictRequest& q, int64_t v) { q.mutable_model()->set_num_heads(v); }},
    {"max_length", kRequired,
     [](v1::PredictRequest& q, int64_t v) { q.mutable_model()->set_seq_len(v); }},
    {"vocab_size", kOptional,
     [](v1::PredictRequest& q, int64_t v) { q.mutable_model()->set_vocab_size(v); }},
    {"num_gpus", kOptional,
     [](v1::PredictRequest& q, int64_t v) { q.mutable_cluster()->set_num_gpus(v); }},
    {"node_size", kOptional,
     [](v1::PredictRequest& q, int64_t v) { q.mutable_cluster()->set_gpus_per_node(v); }},
    {"tensor_parallel_size", kOptional,
     [](v1::PredictRequest& q, int64_t v) { q.mutable_plan()->set_tensor_parallel(v); }},
    {"data_parallel_size", kOptional,
     [](v1::PredictRequest& q, int64_t v) { q.mutable_plan()->set_data_parallel(v); }},
    {"pipeline_parallel_size", kOptional,
     [](v1::PredictRequest& q, int64_t v) { q.mutable_plan()->set_pipeline_parallel(v); }},
    {"global_batch_size", kRequired,
     [](v1::PredictRequest& q, int64_t v) { q.mutable_plan()->set_global_batch(v); }},
    {"micro_batch_size", kOptional,
     [](v1::PredictRequest& q, int64_t v) { q.mutable_plan()->set_micro_batch(v); }},
};

// vTrain names GPUs loosely ("A100", "a100-80gb", "H100"...).
std::string GpuName(const std::string& loose) {
  std::string lower;
  for (char c : loose) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("a100") != std::string::npos) {
    return lower.find("40") != std::string::npos ? "a100-sxm4-40gb" : "a100-sxm4-80gb";
  }
  if (lower.find("h100") != std::string::npos) return "h100-sxm5-80gb";
  if (lower.find("h200") != std::string::npos) return "h200-sxm-141gb";
  if (lower.find("v100") != std::string::npos) return "v100-sxm2-32gb";
  return loose;
}

}  // namespace

absl::StatusOr<v1::PredictRequest> RequestFromVtrainConfig(const std::string& json) {
  VTRAIN_RETURN_IF_ERROR(CheckNoDuplicateKeys(json));
  google::protobuf::Struct config;
  if (auto status = google::protobuf::util::JsonStringToMessage(json, &config); !status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a vTrain configuration (JSON object): ", std::string(status.message())));
  }
  const ConfigReader c(config);
  VTRAIN_RETURN_IF_ERROR(c.CheckKeys());
  v1::PredictRequest r;
  for (const IntField& field : kIntFields) {
    VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> v, c.Integer(field.key, field.presence));
    if (v) field.set(r, *v);
  }
  // At most 1e9 MB (a petabyte) and 1e9 Gb/s or GB/s: far above any machine.
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> bucket_mb, c.Amount("ddp_bucket_size", 1e9));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> inter_gbit, c.Amount("inter_node_bandwidth", 1e9));
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> intra_gbyte, c.Amount("intra_node_bandwidth", 1e9));
  if (bucket_mb) {
    r.mutable_plan()->set_bucket_size_bytes(
        std::max<int64_t>(1, static_cast<int64_t>(*bucket_mb * 1e6)));
  }
  if (inter_gbit) r.mutable_cluster()->set_inter_node_bandwidth_bytes_per_s(*inter_gbit * 1e9 / 8);
  if (intra_gbyte) r.mutable_cluster()->set_intra_node_bandwidth_bytes_per_s(*intra_gbyte * 1e9);
  VTRAIN_ASSIGN_OR_RETURN(bool checkpoint, c.Flag("use_checkpoint", /*fallback=*/true));
  r.mutable_plan()->set_recompute(checkpoint ? v1::RECOMPUTE_FULL : v1::RECOMPUTE_NONE);
  VTRAIN_ASSIGN_OR_RETURN(bool bucketing, c.Flag("use_gradient_bucket", /*fallback=*/false));
  r.mutable_plan()->set_gradient_bucketing(bucketing);
  VTRAIN_ASSIGN_OR_RETURN(const std::string schedule, c.Text("pipeline_scheduling", "1f1b"));
  if (schedule == "gpipe" || schedule == "GPipe") {
    r.mutable_plan()->set_schedule(v1::PIPELINE_SCHEDULE_GPIPE);
  } else if (schedule == "1f1b" || schedule == "1F1B") {
    r.mutable_plan()->set_schedule(v1::PIPELINE_SCHEDULE_1F1B);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("vTrain config: pipeline_scheduling='", schedule,
                                                   "' is unknown; use 1f1b or gpipe"));
  }
  VTRAIN_ASSIGN_OR_RETURN(const std::string gpu, c.Text("gpu_name", "a100-sxm4-80gb"));
  r.mutable_cluster()->set_gpu(GpuName(gpu));
  // Read for their type only: vtrain has no use for them.
  VTRAIN_RETURN_IF_ERROR(c.Text("model_arch", "").status());
  VTRAIN_RETURN_IF_ERROR(c.Text("trace_path", "").status());
  // vTrain profiled Megatron-LM's unfused attention; its files mean that.
  r.mutable_model()->set_attention_impl(v1::ATTENTION_IMPL_UNFUSED);
  // And its runs were the paper's: the settings a file leaves unset are those.
  r.mutable_plan()->set_settings(v1::SETTINGS_PAPER);
  return r;
}

}  // namespace vtrain::proto
