#include "profiler_agent/gpu/device_info.h"

#include <cuda_runtime.h>
#include <unistd.h>

namespace vtrain::gpu {
namespace {

std::string VersionText(int v) {  // 13000 -> "13.0"
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

}  // namespace

void QueryVersions(DeviceInfo* out) {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) out->host = host;
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  out->cuda = VersionText(runtime);
  out->driver = driver > 0 ? VersionText(driver) : "none";
}

std::string QueryDevice(int device, DeviceInfo* out) {
  QueryVersions(out);
  cudaError_t e = cudaGetDeviceCount(&out->device_count);
  if (e != cudaSuccess) {
    return std::string("no usable CUDA GPU: cudaGetDeviceCount: ") + cudaGetErrorString(e) + " (" +
           std::to_string(static_cast<int>(e)) + ")";
  }
  if (out->device_count == 0) return "no usable CUDA GPU: cudaGetDeviceCount found none";
  const bool keep_current = device < 0;
  if (keep_current && (e = cudaGetDevice(&device)) != cudaSuccess) {
    return std::string("cudaGetDevice: ") + cudaGetErrorString(e);
  }
  if (device >= out->device_count) {
    return "--device " + std::to_string(device) + " does not exist; this node has " +
           std::to_string(out->device_count) + " GPUs (0.." +
           std::to_string(out->device_count - 1) + ")";
  }
  cudaDeviceProp prop{};
  if ((e = cudaGetDeviceProperties(&prop, device)) != cudaSuccess) {
    return std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(e);
  }
  out->name = prop.name;
  out->memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  out->cc_major = prop.major;
  out->cc_minor = prop.minor;
  out->sm_count = prop.multiProcessorCount;
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device);
  out->clock_khz = clock_khz;
  if (!keep_current && (e = cudaSetDevice(device)) != cudaSuccess) {
    return std::string("cudaSetDevice: ") + cudaGetErrorString(e);
  }
  return "";
}

}  // namespace vtrain::gpu
