// libvtrain_inject.so: records a framework's own training process. Loaded
// through CUDA_INJECTION64_PATH, CUDA calls InitializeInjection when the
// process initialises CUDA; we start CUPTI there (kernels, launches, NVTX
// ranges) and at exit reduce the kernels launched inside NVTX ranges named
// after operators (torch.cuda.nvtx.range("attention_fwd") or
// "vtrain:attention_fwd") to a profile-set file.
//
//   CUDA_INJECTION64_PATH=/path/libvtrain_inject.so
//   VTRAIN_PROFILE_SHAPE=hidden=2048,heads=16,seq=2048,micro_batch=1,tp=1
//   VTRAIN_PROFILE_OUT=layer.json [VTRAIN_PROFILE_GPU=a100-sxm4-80gb] python train.py
#include <cupti.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>

#include "profiler_agent/gpu/cupti_recorder.h"
#include "profiler_agent/gpu/device_info.h"
#include "profiler_agent/gpu/inject_config.h"
#include "profiler_agent/gpu/profile_json.h"
#include "profiler_agent/gpu/trace.h"

namespace vtrain::gpu {
namespace {

// Set once in InitializeInjection, read once at exit: the process-wide
// lifetime is CUDA's injection contract, not a design choice.
LayerShape* g_shape = nullptr;
pid_t g_recording_pid = 0;  // a forked child must not overwrite the parent's file

std::string Env(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

void WriteProfileAtExit() {
  if (getpid() != g_recording_pid) return;
  Trace trace = CuptiRecorder::Collect();
  CuptiRecorder::Stop();
  std::vector<OperatorRange> kept;
  for (OperatorRange& r : trace.ranges) {
    const std::string op = OperatorOfRange(r.name);
    if (op.empty()) continue;
    r.name = op;
    kept.push_back(std::move(r));
  }
  const size_t all_ranges = trace.ranges.size();
  trace.ranges = std::move(kept);
  ReduceResult reduced = Reduce(trace);
  if (!reduced.error.empty()) {
    std::fprintf(stderr,
                 "vtrain-inject: nothing written: %s (%zu kernels, %zu NVTX ranges, %zu named "
                 "after operators; NVTX reaches CUPTI only when NVTX_INJECTION64_PATH names the "
                 "CUPTI library before the process's first NVTX call: set it in the environment)\n",
                 reduced.error.c_str(), trace.kernels.size(), all_ranges, trace.ranges.size());
    return;
  }
  // No device calls at exit (the process's CUDA state may be torn down):
  // the GPU's name comes from CUPTI's device record.
  DeviceInfo info;
  QueryVersions(&info);
  uint64_t memory = 0;
  info.name = CuptiRecorder::DeviceName(&memory);
  info.memory_bytes = static_cast<int64_t>(memory);
  ProfileSetFile file;
  file.gpu = Env("VTRAIN_PROFILE_GPU", VtrainGpuName(info.name, info.memory_bytes));
  if (file.gpu.empty()) file.gpu = "unknown";
  file.name = "recorded " + file.gpu + " pid " + std::to_string(getpid());
  file.created_at = Rfc3339Utc(std::time(nullptr));
  file.provenance = {info.name,
                     info.driver,
                     info.cuda,
                     "",
                     info.host,
                     "CUDA_INJECTION64_PATH recording of pid " + std::to_string(getpid()),
                     "median over the NVTX ranges of each operator; " +
                         std::to_string(reduced.unattributed_kernels) +
                         " kernels ran outside operator ranges; CUPTI dropped " +
                         std::to_string(CuptiRecorder::Dropped()) + " records"};
  file.operators = OperatorEntries(reduced.tables, *g_shape);
  const std::string path =
      Env("VTRAIN_PROFILE_OUT", "vtrain-profile-" + std::to_string(getpid()) + ".json");
  std::ofstream out(path);
  out << ToProfileSetJson(file);
  out.close();
  std::fprintf(stderr, "vtrain-inject: %s %zu operators to %s\n", out ? "wrote" : "FAILED to write",
               file.operators.size(), path.c_str());
}

}  // namespace
}  // namespace vtrain::gpu

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  using namespace vtrain::gpu;
  static LayerShape shape;
  const std::string spec = Env("VTRAIN_PROFILE_SHAPE");
  if (std::string e = ParseShapeSpec(spec, &shape); !e.empty()) {
    std::fprintf(stderr, "vtrain-inject: not recording: %s\n", e.c_str());
    return 1;  // CUDA continues without us either way
  }
  g_shape = &shape;
  g_recording_pid = getpid();
  // CUPTI sees NVTX ranges only when NVTX loads it as its injection; point
  // NVTX at the CUPTI library this process already has, unless the user did.
  if (std::getenv("NVTX_INJECTION64_PATH") == nullptr) {
    Dl_info dl{};
    if (dladdr(reinterpret_cast<void*>(&cuptiActivityEnable), &dl) && dl.dli_fname) {
      setenv("NVTX_INJECTION64_PATH", dl.dli_fname, 0);
    }
  }
  if (std::string e = CuptiRecorder::Start(true); !e.empty()) {
    std::fprintf(stderr, "vtrain-inject: not recording: %s\n", e.c_str());
    return 1;
  }
  std::atexit(WriteProfileAtExit);
  std::fprintf(stderr, "vtrain-inject: recording kernels and NVTX ranges\n");
  return 1;
}
