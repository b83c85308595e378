#include "profiler_agent/gpu/profile_json.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace vtrain::gpu {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Shortest text that parses back to the same double.
std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  for (int precision = 6; precision < 17; ++precision) {
    char shorter[32];
    std::snprintf(shorter, sizeof(shorter), "%.*g", precision, v);
    if (std::strtod(shorter, nullptr) == v) return shorter;
  }
  return buf;
}

// The vtrain.v1 enum value name of an internal lowercase name:
// ("OPERATOR_KIND_", "attention_fwd") -> "OPERATOR_KIND_ATTENTION_FWD".
std::string EnumValue(const char* prefix, const std::string& name) {
  std::string out = prefix;
  for (char c : name) out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return JsonString(out);
}

}  // namespace

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x80) {
      // Bytes >= 0x80 become Latin-1 code points: lossless for ASCII names
      // and always valid UTF-8 JSON whatever the bytes were.
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string Rfc3339Utc(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string VtrainGpuName(const std::string& device_name, int64_t memory_bytes) {
  const std::string n = Lower(device_name);
  const double gib = static_cast<double>(memory_bytes) / (1024.0 * 1024.0 * 1024.0);
  auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  if (has("a100")) {
    if (has("pcie")) return "";  // vtrain models the SXM4 parts only
    return gib > 60 ? "a100-sxm4-80gb" : "a100-sxm4-40gb";
  }
  if (has("h200")) return "h200-sxm-141gb";
  if (has("h100")) return has("pcie") ? "" : "h100-sxm5-80gb";
  if (has("v100")) return has("pcie") ? "" : "v100-sxm2-32gb";
  return "";
}

std::vector<OperatorEntry> OperatorEntries(const std::vector<OperatorTable>& tables,
                                           const LayerShape& shape) {
  std::vector<OperatorEntry> entries;
  for (const OperatorTable& t : tables) {
    OperatorEntry e;
    e.op = t.op;
    e.bf16 = shape.bf16;
    e.fp8 = shape.fp8;
    // The loss and the optimizer step are keyed without an architecture
    // (core's MakeOperatorKey).
    const bool arch_free = t.op == "optimizer_step" || t.op == "loss_fwd" || t.op == "loss_bwd";
    e.llama = shape.llama && !arch_free;
    if (e.llama) e.kv_heads = shape.kv_heads > 0 ? shape.kv_heads : shape.heads;
    if (t.op == "optimizer_step") {
      e.num_parameters = shape.adam_params;
    } else {
      e.hidden = shape.hidden;
      e.heads = shape.heads;
      e.ffn = shape.ffn > 0 ? shape.ffn : 4 * shape.hidden;
      e.seq = shape.seq;
      e.micro_batch = shape.micro_batch;
      e.tensor_parallel = shape.tensor_parallel;
      e.vocab = shape.vocab;
    }
    if (shape.experts > 0 && (t.op == "moe_fwd" || t.op == "moe_bwd")) {
      e.experts = shape.experts;
      e.top_k = shape.moe_top_k;
      e.expert_parallel = shape.expert_parallel;
    }
    e.kernels = t.kernels;
    entries.push_back(std::move(e));
  }
  return entries;
}

// The MoE fields of a key (none for other keys).
static std::string MoeKeyFields(const OperatorEntry& e) {
  if (e.experts == 0) return std::string();
  return ", \"experts\": " + std::to_string(e.experts) + ", \"top_k\": " + std::to_string(e.top_k) +
         ", \"expert_parallel\": " + std::to_string(e.expert_parallel);
}

std::string ToProfileSetJson(const ProfileSetFile& set) {
  std::string o = "{\n";
  o += "  \"name\": " + JsonString(set.name) + ",\n";
  o += "  \"gpu\": " + JsonString(set.gpu) + ",\n";
  if (!set.created_at.empty()) o += "  \"created_at\": " + JsonString(set.created_at) + ",\n";
  const Provenance& p = set.provenance;
  o += "  \"provenance\": {\"gpu_name\": " + JsonString(p.gpu_name) +
       ", \"driver\": " + JsonString(p.driver) + ", \"cuda\": " + JsonString(p.cuda) +
       ", \"nccl\": " + JsonString(p.nccl) + ", \"host\": " + JsonString(p.host) +
       ",\n    \"workload\": " + JsonString(p.workload) + ",\n    \"note\": " + JsonString(p.note) +
       "},\n";
  o += "  \"operators\": [";
  for (size_t i = 0; i < set.operators.size(); ++i) {
    const OperatorEntry& e = set.operators[i];
    o += i ? ",\n" : "\n";
    const char* dtype = e.fp8 ? "DTYPE_FP8" : e.bf16 ? "DTYPE_BF16" : "DTYPE_FP16";
    const std::string arch =
        e.llama ? ", \"arch\": \"ARCHITECTURE_LLAMA\", \"kv_heads\": " + std::to_string(e.kv_heads)
                : "";
    o += "    {\"key\": {\"gpu\": " + JsonString(set.gpu) + ", \"dtype\": \"" + dtype + "\"" +
         arch + ", \"op\": " + EnumValue("OPERATOR_KIND_", e.op) +
         ", \"hidden\": " + std::to_string(e.hidden) + ", \"heads\": " + std::to_string(e.heads) +
         ", \"ffn\": " + std::to_string(e.ffn) + ", \"seq\": " + std::to_string(e.seq) +
         ", \"micro_batch\": " + std::to_string(e.micro_batch) +
         ", \"tensor_parallel\": " + std::to_string(e.tensor_parallel) +
         ", \"vocab\": " + std::to_string(e.vocab) +
         ", \"num_parameters\": " + std::to_string(e.num_parameters) + MoeKeyFields(e) +
         "},\n     \"kernels\": [";
    for (size_t j = 0; j < e.kernels.size(); ++j) {
      const KernelStats& k = e.kernels[j];
      o += j ? ",\n       " : "\n       ";
      o += "{\"name\": " + JsonString(k.name) +
           ", \"duration_ns\": " + std::to_string(k.duration_ns) +
           ", \"gap_ns\": " + std::to_string(k.gap_ns) +
           ", \"duration_min_ns\": " + std::to_string(k.duration_min_ns) +
           ", \"duration_max_ns\": " + std::to_string(k.duration_max_ns) + "}";
    }
    o += "]}";
  }
  o += set.operators.empty() ? "],\n" : "\n  ],\n";
  o += "  \"collectives\": [";
  for (size_t i = 0; i < set.collectives.size(); ++i) {
    const CollectiveEntry& c = set.collectives[i];
    o += i ? ",\n" : "\n";
    o += "    {\"gpu\": " + JsonString(set.gpu) +
         ", \"scope\": " + EnumValue("LINK_SCOPE_", c.scope) +
         ", \"collective\": " + EnumValue("COLLECTIVE_", c.collective) +
         ", \"ranks\": " + std::to_string(c.ranks) + ", \"points\": [";
    bool first = true;
    for (size_t j = 0; j < c.points.size(); ++j) {
      // JSON has no NaN or infinity; a failed measurement is left out.
      if (!std::isfinite(c.points[j].first) || !std::isfinite(c.points[j].second)) continue;
      o += first ? "" : ", ";
      first = false;
      o += "{\"bytes\": " + Number(c.points[j].first) +
           ", \"latency_ns\": " + Number(c.points[j].second) + "}";
    }
    o += "]}";
  }
  o += set.collectives.empty() ? "]\n" : "\n  ]\n";
  o += "}\n";
  return o;
}

}  // namespace vtrain::gpu
