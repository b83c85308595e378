#include "proto/vtrain_config.h"

#include <cctype>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace vtrain::convert {

absl::StatusOr<v1::PredictRequest> RequestFromVtrainConfig(const std::string& json) {
  google::protobuf::Struct config;
  {
    google::protobuf::util::JsonParseOptions options;
    auto status = google::protobuf::util::JsonStringToMessage(json, &config, options);
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("not a vTrain configuration (JSON object): ", std::string(status.message())));
    }
  }
  const auto& f = config.fields();
  auto number = [&](const char* key, double fallback, bool required) -> absl::StatusOr<double> {
    auto it = f.find(key);
    if (it == f.end()) {
      if (required) {
        return absl::InvalidArgumentError(absl::StrCat("vTrain config: '", key, "' is required"));
      }
      return fallback;
    }
    if (it->second.kind_case() != google::protobuf::Value::kNumberValue) {
      return absl::InvalidArgumentError(absl::StrCat("vTrain config: '", key, "' must be a number"));
    }
    return it->second.number_value();
  };
  auto text = [&](const char* key, const std::string& fallback) {
    auto it = f.find(key);
    return it != f.end() && it->second.kind_case() == google::protobuf::Value::kStringValue
               ? it->second.string_value()
               : fallback;
  };
  auto flag = [&](const char* key, bool fallback) {
    auto it = f.find(key);
    return it != f.end() && it->second.kind_case() == google::protobuf::Value::kBoolValue
               ? it->second.bool_value()
               : fallback;
  };
  v1::PredictRequest r;
  struct IntField {
    const char* key;
    bool required;
    void (*set)(v1::PredictRequest&, int64_t);
  };
  const IntField ints[] = {
      {"num_layers", true, [](v1::PredictRequest& q, int64_t v) { q.mutable_model()->set_num_layers(v); }},
      {"hidden_size", true, [](v1::PredictRequest& q, int64_t v) { q.mutable_model()->set_hidden_size(v); }},
      {"num_attention_heads", true, [](v1::PredictRequest& q, int64_t v) { q.mutable_model()->set_num_heads(v); }},
      {"max_length", true, [](v1::PredictRequest& q, int64_t v) { q.mutable_model()->set_seq_len(v); }},
      {"vocab_size", false, [](v1::PredictRequest& q, int64_t v) { q.mutable_model()->set_vocab_size(v); }},
      {"num_gpus", false, [](v1::PredictRequest& q, int64_t v) { q.mutable_cluster()->set_num_gpus(v); }},
      {"node_size", false, [](v1::PredictRequest& q, int64_t v) { q.mutable_cluster()->set_gpus_per_node(v); }},
      {"tensor_parallel_size", false, [](v1::PredictRequest& q, int64_t v) { q.mutable_plan()->set_tensor_parallel(v); }},
      {"data_parallel_size", false, [](v1::PredictRequest& q, int64_t v) { q.mutable_plan()->set_data_parallel(v); }},
      {"pipeline_parallel_size", false, [](v1::PredictRequest& q, int64_t v) { q.mutable_plan()->set_pipeline_parallel(v); }},
      {"global_batch_size", true, [](v1::PredictRequest& q, int64_t v) { q.mutable_plan()->set_global_batch(v); }},
      {"micro_batch_size", false, [](v1::PredictRequest& q, int64_t v) { q.mutable_plan()->set_micro_batch(v); }},
  };
  for (const IntField& field : ints) {
    absl::StatusOr<double> v = number(field.key, 0, field.required);
    if (!v.ok()) return v.status();
    if (*v != std::floor(*v) || std::abs(*v) > 9e15) {
      return absl::InvalidArgumentError(absl::StrCat("vTrain config: '", field.key, "' must be an integer"));
    }
    field.set(r, static_cast<int64_t>(*v));
  }
  absl::StatusOr<double> bucket_mb = number("ddp_bucket_size", 0, false);
  absl::StatusOr<double> inter_gbit = number("inter_node_bandwidth", 0, false);
  absl::StatusOr<double> intra_gbyte = number("intra_node_bandwidth", 0, false);
  for (const auto* s : {&bucket_mb, &inter_gbit, &intra_gbyte}) {
    if (!s->ok()) return s->status();
  }
  if (*bucket_mb < 0 || *inter_gbit < 0 || *intra_gbyte < 0) {
    return absl::InvalidArgumentError(
        "vTrain config: ddp_bucket_size and the bandwidths must not be negative");
  }
  r.mutable_plan()->set_bucket_size_bytes(static_cast<int64_t>(*bucket_mb * 1e6));
  r.mutable_cluster()->set_inter_node_bandwidth_bytes_per_s(*inter_gbit * 1e9 / 8);
  r.mutable_cluster()->set_intra_node_bandwidth_bytes_per_s(*intra_gbyte * 1e9);
  r.mutable_plan()->set_recompute(flag("use_checkpoint", true) ? v1::RECOMPUTE_FULL : v1::RECOMPUTE_NONE);
  r.mutable_plan()->set_gradient_bucketing(flag("use_gradient_bucket", false));
  const std::string schedule = text("pipeline_scheduling", "1f1b");
  if (schedule == "gpipe" || schedule == "GPipe") {
    r.mutable_plan()->set_schedule(v1::PIPELINE_SCHEDULE_GPIPE);
  } else if (schedule == "1f1b" || schedule == "1F1B") {
    r.mutable_plan()->set_schedule(v1::PIPELINE_SCHEDULE_1F1B);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "vTrain config: pipeline_scheduling='", schedule, "' is unknown; use 1f1b or gpipe"));
  }
  // vTrain names GPUs loosely ("A100", "a100-80gb", "H100"...).
  std::string gpu = text("gpu_name", "a100-sxm4-80gb");
  std::string lower;
  for (char c : gpu) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("a100") != std::string::npos) {
    gpu = lower.find("40") != std::string::npos ? "a100-sxm4-40gb" : "a100-sxm4-80gb";
  } else if (lower.find("h100") != std::string::npos) {
    gpu = "h100-sxm5-80gb";
  } else if (lower.find("h200") != std::string::npos) {
    gpu = "h200-sxm-141gb";
  } else if (lower.find("v100") != std::string::npos) {
    gpu = "v100-sxm2-32gb";
  }
  r.mutable_cluster()->set_gpu(gpu);
  return r;
}

}  // namespace vtrain::convert
