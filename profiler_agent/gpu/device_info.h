// What the GPU agent records about the machine it measured on (the
// provenance of a profile set): device, driver, CUDA runtime, host.
#ifndef VTRAIN_PROFILER_AGENT_GPU_DEVICE_INFO_H_
#define VTRAIN_PROFILER_AGENT_GPU_DEVICE_INFO_H_

#include <cstdint>
#include <string>

namespace vtrain::gpu {

struct DeviceInfo {
  int device_count = 0;
  std::string name;  // "NVIDIA H200"
  int64_t memory_bytes = 0;
  int cc_major = 0, cc_minor = 0, sm_count = 0;
  int64_t clock_khz = 0;
  std::string driver;  // CUDA version the driver supports, "13.0"
  std::string cuda;    // runtime version, "13.0"
  std::string host;
};

// Fills *out for `device`; returns "" or one line saying why no GPU is
// usable ("no usable CUDA GPU: cudaGetDeviceCount: CUDA driver version is
// insufficient for CUDA runtime version (35)").
// Host name and the runtime's and driver's CUDA versions, without touching
// any device (safe at process exit inside someone else's process).
void QueryVersions(DeviceInfo* out);

// Makes `device` current. device < 0 describes the current device without
// changing it.
std::string QueryDevice(int device, DeviceInfo* out);

}  // namespace vtrain::gpu

#endif  // VTRAIN_PROFILER_AGENT_GPU_DEVICE_INFO_H_
