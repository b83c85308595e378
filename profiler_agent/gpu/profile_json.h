// Writes profile sets in the protobuf JSON form of vtrain.v1.ProfileSet
// (proto/vtrain/v1/vtrain.proto) without protobuf, so the GPU agent builds
// with the CUDA Toolkit alone. `vtrainctl profiles push` and
// `vtrain-agent push` read the files it writes.
#ifndef VTRAIN_PROFILER_AGENT_GPU_PROFILE_JSON_H_
#define VTRAIN_PROFILER_AGENT_GPU_PROFILE_JSON_H_

#include <cstdint>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

#include "profiler_agent/gpu/trace.h"
#include "profiler_agent/gpu/workloads.h"

namespace vtrain::gpu {

// Where and how the numbers were measured (vtrain.v1.Provenance).
struct Provenance {
  std::string gpu_name;  // as the driver reports it: "NVIDIA H200"
  std::string driver;
  std::string cuda;
  std::string nccl;
  std::string host;
  std::string workload;  // what ran: shape, repetitions, command
  std::string note;
};

// One operator table under its key (vtrain.v1.OperatorKey; model totals for
// heads, ffn and vocab, as the simulator looks them up).
struct OperatorEntry {
  std::string op;  // embedding_fwd ... optimizer_step
  bool bf16 = false;
  bool fp8 = false;      // dtype fp8 (the shape's fp8 linear layers)
  bool llama = false;    // arch llama (never on loss and optimizer keys)
  int64_t kv_heads = 0;  // Llama keys: key/value heads
  int64_t hidden = 0, heads = 0, ffn = 0, seq = 0, micro_batch = 0, tensor_parallel = 1;
  int64_t vocab = 0, num_parameters = 0;
  // MoE keys (moe_fwd, moe_bwd): routed experts, experts per token, EP.
  int64_t experts = 0, top_k = 0, expert_parallel = 1;
  std::vector<KernelStats> kernels;
};

// One collective's latency over message sizes (vtrain.v1.CollectiveCurve).
struct CollectiveEntry {
  std::string scope;       // intra_node or inter_node
  std::string collective;  // all_reduce, all_gather, reduce_scatter, send_recv
  int64_t ranks = 2;
  std::vector<std::pair<double, double>> points;  // bytes, latency_ns
};

struct ProfileSetFile {
  std::string name;
  std::string gpu;         // vtrain GPU name, e.g. h200-sxm-141gb
  std::string created_at;  // RFC 3339, UTC
  Provenance provenance;
  std::vector<OperatorEntry> operators;
  std::vector<CollectiveEntry> collectives;
};

// The tables of one layer shape under their keys (optimizer_step keyed by
// shape.adam_params, every other operator by the layer's shape).
std::vector<OperatorEntry> OperatorEntries(const std::vector<OperatorTable>& tables,
                                           const LayerShape& shape);

// The file's JSON text (snake_case field names, which protobuf's JSON
// parser accepts), ending in a newline.
std::string ToProfileSetJson(const ProfileSetFile& set);

// A JSON string literal for `s`, quotes included (control characters and
// bytes >= 0x80 escaped as \u00XX, so any kernel name stays valid JSON).
std::string JsonString(const std::string& s);

// "2026-11-29T10:48:27Z".
std::string Rfc3339Utc(std::time_t t);

// Maps a CUDA device name to vtrain's GPU name ("NVIDIA A100-SXM4-80GB" ->
// "a100-sxm4-80gb"); "" when it is not one vtrain models (pass --gpu then).
std::string VtrainGpuName(const std::string& device_name, int64_t memory_bytes);

}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_PROFILE_JSON_H_
