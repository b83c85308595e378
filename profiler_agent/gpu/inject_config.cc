#include "profiler_agent/gpu/inject_config.h"

#include <cstdint>
#include <cstdlib>
#include <sstream>

#include "profiler_agent/gpu/operator_names.h"

namespace vtrain::gpu {

std::string ParseShapeSpec(const std::string& spec, LayerShape* shape) {
  LayerShape s;
  s.ffn = 0;
  bool seen_hidden = false, seen_heads = false, seen_seq = false, seen_batch = false;
  std::stringstream in(spec);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      return "VTRAIN_PROFILE_SHAPE: '" + item + "' is not key=value";
    }
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "dtype") {
      if (value != "fp16" && value != "bf16" && value != "fp8") {
        return "VTRAIN_PROFILE_SHAPE: dtype='" + value + "' must be fp16, bf16 or fp8";
      }
      s.bf16 = value != "fp16";  // fp8: Transformer Engine's linear layers, bf16 elsewhere
      s.fp8 = value == "fp8";
      continue;
    }
    if (key == "arch") {
      if (value != "gpt" && value != "llama") {
        return "VTRAIN_PROFILE_SHAPE: arch='" + value + "' must be gpt or llama";
      }
      s.llama = value == "llama";
      continue;
    }
    static const char* const kKeys[] = {"hidden", "heads", "seq",         "micro_batch", "tp",
                                        "ffn",    "vocab", "adam_params", "kv_heads"};
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    if (!known) {
      return "VTRAIN_PROFILE_SHAPE: unknown key '" + key +
             "'; use hidden, heads, seq, micro_batch, tp, ffn, vocab, dtype, arch, kv_heads, "
             "adam_params";
    }
    char* end = nullptr;
    const long long n = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || n < 0) {
      return "VTRAIN_PROFILE_SHAPE: " + key + "='" + value + "' must be a non-negative integer";
    }
    if (key == "hidden") {
      s.hidden = n;
      seen_hidden = true;
    } else if (key == "heads") {
      s.heads = n;
      seen_heads = true;
    } else if (key == "seq") {
      s.seq = n;
      seen_seq = true;
    } else if (key == "micro_batch") {
      s.micro_batch = n;
      seen_batch = true;
    } else if (key == "tp") {
      s.tensor_parallel = n;
    } else if (key == "ffn") {
      s.ffn = n;
    } else if (key == "vocab") {
      s.vocab = n;
    } else if (key == "kv_heads") {
      s.kv_heads = n;
    } else {
      s.adam_params = n;
    }
  }
  if (!seen_hidden || !seen_heads || !seen_seq || !seen_batch) {
    return "VTRAIN_PROFILE_SHAPE needs hidden, heads, seq and micro_batch (e.g. "
           "hidden=2048,heads=16,seq=2048,micro_batch=1,tp=1)";
  }
  if (s.ffn == 0) s.ffn = 4 * s.hidden;
  if (s.kv_heads > 0 && !s.llama) return "VTRAIN_PROFILE_SHAPE: kv_heads needs arch=llama";
  if (std::string e = ValidateShape(s); !e.empty()) return "VTRAIN_PROFILE_SHAPE: " + e;
  *shape = s;
  return "";
}

std::string OperatorOfRange(const std::string& range_name) {
  std::string name = range_name;
  if (name.rfind("vtrain:", 0) == 0) name = name.substr(7);
  for (const char* op : kOperatorNames) {
    if (name == op) return name;
  }
  return "";
}

}  // namespace vtrain::gpu
