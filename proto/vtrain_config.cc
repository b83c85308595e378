#include "proto/vtrain_config.h"

#include <cctype>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace vtrain::convert {
namespace {

enum class Presence { kRequired, kOptional };

// Typed reads of a vTrain configuration's fields; errors name the field.
class ConfigReader {
 public:
  explicit ConfigReader(const google::protobuf::Struct& config) : fields_(config.fields()) {}

  // A number: 0 when an optional field is absent.
  absl::StatusOr<double> Number(const char* key, Presence presence) const {
    auto it = fields_.find(key);
    if (it == fields_.end()) {
      if (presence == Presence::kRequired) {
        return absl::InvalidArgumentError(absl::StrCat("vTrain config: '", key, "' is required"));
      }
      return 0.0;
    }
    if (it->second.kind_case() != google::protobuf::Value::kNumberValue) {
      return absl::InvalidArgumentError(
          absl::StrCat("vTrain config: '", key, "' must be a number"));
    }
    return it->second.number_value();
  }

  // A whole number (vTrain writes them as JSON numbers).
  absl::StatusOr<int64_t> Integer(const char* key, Presence presence) const {
    VTRAIN_ASSIGN_OR_RETURN(double v, Number(key, presence));
    if (v != std::floor(v) || std::abs(v) > 9e15) {
      return absl::InvalidArgumentError(
          absl::StrCat("vTrain config: '", key, "' must be an integer"));
    }
    return static_cast<int64_t>(v);
  }

  // A number in [0, max] (sizes and bandwidths; the bound keeps the unit
  // conversions finite and in range of int64).
  absl::StatusOr<double> Amount(const char* key, double max) const {
    VTRAIN_ASSIGN_OR_RETURN(double v, Number(key, Presence::kOptional));
    if (!(v >= 0 && v <= max)) {
      return absl::InvalidArgumentError(
          absl::StrCat("vTrain config: '", key, "' must be in [0, ", max, "]"));
    }
    return v;
  }

  std::string Text(const char* key, const std::string& fallback) const {
    auto it = fields_.find(key);
    return it != fields_.end() && it->second.kind_case() == google::protobuf::Value::kStringValue
               ? it->second.string_value()
               : fallback;
  }

  bool Flag(const char* key, bool fallback) const {
    auto it = fields_.find(key);
    return it != fields_.end() && it->second.kind_case() == google::protobuf::Value::kBoolValue
               ? it->second.bool_value()
               : fallback;
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
  google::protobuf::Struct config;
  if (auto status = google::protobuf::util::JsonStringToMessage(json, &config); !status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a vTrain configuration (JSON object): ", std::string(status.message())));
  }
  const ConfigReader c(config);
  v1::PredictRequest r;
  for (const IntField& field : kIntFields) {
    VTRAIN_ASSIGN_OR_RETURN(int64_t v, c.Integer(field.key, field.presence));
    field.set(r, v);
  }
  // At most 1e9 MB (a petabyte) and 1e9 Gb/s or GB/s: far above any machine.
  VTRAIN_ASSIGN_OR_RETURN(double bucket_mb, c.Amount("ddp_bucket_size", 1e9));
  VTRAIN_ASSIGN_OR_RETURN(double inter_gbit, c.Amount("inter_node_bandwidth", 1e9));
  VTRAIN_ASSIGN_OR_RETURN(double intra_gbyte, c.Amount("intra_node_bandwidth", 1e9));
  r.mutable_plan()->set_bucket_size_bytes(static_cast<int64_t>(bucket_mb * 1e6));
  r.mutable_cluster()->set_inter_node_bandwidth_bytes_per_s(inter_gbit * 1e9 / 8);
  r.mutable_cluster()->set_intra_node_bandwidth_bytes_per_s(intra_gbyte * 1e9);
  r.mutable_plan()->set_recompute(c.Flag("use_checkpoint", /*fallback=*/true) ? v1::RECOMPUTE_FULL
                                                                              : v1::RECOMPUTE_NONE);
  r.mutable_plan()->set_gradient_bucketing(c.Flag("use_gradient_bucket", /*fallback=*/false));
  const std::string schedule = c.Text("pipeline_scheduling", "1f1b");
  if (schedule == "gpipe" || schedule == "GPipe") {
    r.mutable_plan()->set_schedule(v1::PIPELINE_SCHEDULE_GPIPE);
  } else if (schedule == "1f1b" || schedule == "1F1B") {
    r.mutable_plan()->set_schedule(v1::PIPELINE_SCHEDULE_1F1B);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("vTrain config: pipeline_scheduling='", schedule,
                                                   "' is unknown; use 1f1b or gpipe"));
  }
  r.mutable_cluster()->set_gpu(GpuName(c.Text("gpu_name", "a100-sxm4-80gb")));
  return r;
}

}  // namespace vtrain::convert
