// Configuration of the injection library (libvtrain_inject.so, loaded into a
// framework process through CUDA_INJECTION64_PATH): the layer shape the
// process runs, given in VTRAIN_PROFILE_SHAPE, and which NVTX ranges are
// operators. Plain C++17.
#ifndef VTRAIN_PROFILER_AGENT_GPU_INJECT_CONFIG_H_
#define VTRAIN_PROFILER_AGENT_GPU_INJECT_CONFIG_H_

#include <string>

#include "profiler_agent/gpu/workloads.h"

namespace vtrain::gpu {

// Parses "hidden=2048,heads=16,seq=2048,micro_batch=1,tp=1[,ffn=8192]
// [,vocab=50257][,dtype=fp16|bf16|fp8][,arch=gpt|llama][,kv_heads=N][,adam_params=N]"
// into *shape (ffn
// defaults to 4 x hidden). Returns "" or a message naming the bad key.
std::string ParseShapeSpec(const std::string& spec, LayerShape* shape);

// The operator an NVTX range stands for: its name when that is an operator
// name (attention_fwd, ..., optimizer_step), with or without a "vtrain:"
// prefix; "" for every other range (framework ranges are ignored).
std::string OperatorOfRange(const std::string& range_name);

}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_INJECT_CONFIG_H_
