// CUPTI record decoding on records built by hand from the toolkit's
// headers (no GPU): field mapping, demangling, NVTX START/END pairing
// across buffers, and the device label; then the reduction of the result.
#include "profiler_agent/gpu/cupti_records.h"

#include <cupti.h>

#include "gtest/gtest.h"

namespace vtrain::gpu {
namespace {

const CUpti_Activity* AsRecord(const void* r) { return static_cast<const CUpti_Activity*>(r); }

CUpti_ActivityMarker2 Marker(CUpti_ActivityFlag flag, uint32_t id, uint64_t t, uint32_t thread,
                             const char* name) {
  CUpti_ActivityMarker2 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MARKER;
  m.flags = flag;
  m.id = id;
  m.timestamp = t;
  m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  m.objectId.pt.threadId = thread;
  m.name = name;
  return m;
}

TEST(CuptiRecordsTest, DecodesKernelsLaunchesMarkersAndDevice) {
  RecordDecoder d;
  const CUpti_ActivityMarker2 start =
      Marker(CUPTI_ACTIVITY_FLAG_MARKER_START, 5, 1000, 3, "vtrain:attention_fwd");
  d.Add(AsRecord(&start));
  CUpti_ActivityAPI launch{};
  launch.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  launch.correlationId = 42;
  launch.start = 1100;
  launch.end = 1150;
  launch.threadId = 3;
  d.Add(AsRecord(&launch));
  CUpti_ActivityKernel10 kernel{};
  kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  kernel.name = "_Z21layer_norm_fwd_kernelPfi";
  kernel.start = 2000;
  kernel.end = 2600;
  kernel.streamId = 13;
  kernel.correlationId = 42;
  d.Add(AsRecord(&kernel));
  CUpti_ActivityDevice5 device{};
  device.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  device.name = "NVIDIA H200";
  device.globalMemorySize = 150'000'000'000;
  d.Add(AsRecord(&device));
  // An END whose START never came (recording began inside the range).
  const CUpti_ActivityMarker2 orphan = Marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 9, 1200, 3, nullptr);
  d.Add(AsRecord(&orphan));
  // The START arrived in an earlier buffer: the pairing survives TakeTrace.
  Trace first = d.TakeTrace();
  EXPECT_TRUE(first.ranges.empty());
  const CUpti_ActivityMarker2 end = Marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 5, 3000, 3, nullptr);
  d.Add(AsRecord(&end));
  Trace second = d.TakeTrace();

  ASSERT_EQ(first.kernels.size(), 1u);
  EXPECT_EQ(first.kernels[0].name, "layer_norm_fwd_kernel(float*, int)");
  EXPECT_EQ(first.kernels[0].stream, 13u);
  EXPECT_EQ(first.kernels[0].end_ns - first.kernels[0].start_ns, 600u);
  ASSERT_EQ(first.launches.size(), 1u);
  EXPECT_EQ(first.launches[0].thread, 3u);
  ASSERT_EQ(second.ranges.size(), 1u);
  EXPECT_EQ(second.ranges[0].name, "vtrain:attention_fwd");
  EXPECT_EQ(second.ranges[0].start_ns, 1000u);
  EXPECT_EQ(second.ranges[0].end_ns, 3000u);
  EXPECT_EQ(d.device_name(), "NVIDIA H200");
  EXPECT_EQ(d.device_memory(), 150'000'000'000u);

  // The pieces together reduce to the operator's table.
  first.ranges = second.ranges;
  first.ranges[0].name = "attention_fwd";
  ReduceResult r = Reduce(first);
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_EQ(r.tables.size(), 1u);
  EXPECT_EQ(r.tables[0].kernels[0].duration_ns, 600);
  EXPECT_EQ(Demangle("not_mangled"), "not_mangled");
  EXPECT_EQ(Demangle(nullptr), "unknown");
}

}  // namespace
}  // namespace vtrain::gpu
