#include "profiler_agent/gpu/cupti_recorder.h"

#include <cupti.h>

#include <cstdlib>
#include <mutex>

#include "profiler_agent/gpu/cupti_records.h"

namespace vtrain::gpu {
namespace {

constexpr size_t kBufferBytes = 8 << 20;
constexpr size_t kAlign = 8;
// Records kept in memory at most (about 100 bytes each): a framework run
// recorded for hours stays bounded; the excess is counted as dropped.
constexpr size_t kMaxRecords = 4'000'000;

// CUPTI's buffer callbacks carry no user pointer: the records they deliver
// land in this process-wide state, guarded by `mu`.
struct State {
  std::mutex mu;
  RecordDecoder decoder;
  uint64_t dropped = 0;
  bool started = false;
};

State& GlobalState() {
  static State* state = new State();  // never destroyed: callbacks may run at exit
  return *state;
}

std::string CuptiError(const char* call, CUptiResult r) {
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  return std::string(call) + ": " + (msg ? msg : "unknown CUPTI error") + " (" +
         std::to_string(static_cast<int>(r)) + ")";
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t size,
                              size_t valid_size) {
  (void)size;
  State& st = GlobalState();
  std::lock_guard<std::mutex> lock(st.mu);
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    if (st.decoder.records() >= kMaxRecords) {
      ++st.dropped;
      continue;
    }
    st.decoder.Add(record);
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS) {
    st.dropped += dropped;
  }
  std::free(buffer);
}

}  // namespace

std::string CuptiRecorder::Start(bool nvtx) {
  State& st = GlobalState();
  {
    std::lock_guard<std::mutex> lock(st.mu);
    if (st.started) return "CuptiRecorder::Start called twice";
  }
  CUptiResult r = cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted);
  if (r != CUPTI_SUCCESS) return CuptiError("cuptiActivityRegisterCallbacks", r);
  struct {
    CUpti_ActivityKind kind;
    const char* name;
  } kinds[] = {{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "cuptiActivityEnable(CONCURRENT_KERNEL)"},
               {CUPTI_ACTIVITY_KIND_RUNTIME, "cuptiActivityEnable(RUNTIME)"},
               {CUPTI_ACTIVITY_KIND_DRIVER, "cuptiActivityEnable(DRIVER)"},
               {CUPTI_ACTIVITY_KIND_MARKER, "cuptiActivityEnable(MARKER)"}};
  for (const auto& k : kinds) {
    if (k.kind == CUPTI_ACTIVITY_KIND_MARKER && !nvtx) continue;
    r = cuptiActivityEnable(k.kind);
    if (r != CUPTI_SUCCESS) return CuptiError(k.name, r);
  }
  // Device records only label the tables: not having them is no failure.
  if (nvtx) cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE);
  std::lock_guard<std::mutex> lock(st.mu);
  st.started = true;
  return "";
}

Trace CuptiRecorder::Collect() {
  State& st = GlobalState();
  if (cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != CUPTI_SUCCESS) {
    std::lock_guard<std::mutex> lock(st.mu);
    ++st.dropped;  // records still in CUPTI's buffers are not in this trace
  }
  std::lock_guard<std::mutex> lock(st.mu);
  return st.decoder.TakeTrace();
}

void CuptiRecorder::Stop() {
  for (CUpti_ActivityKind k :
       {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME,
        CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_MARKER, CUPTI_ACTIVITY_KIND_DEVICE}) {
    cuptiActivityDisable(k);
  }
}

std::string CuptiRecorder::DeviceName(uint64_t* memory_bytes) {
  State& st = GlobalState();
  std::lock_guard<std::mutex> lock(st.mu);
  *memory_bytes = st.decoder.device_memory();
  return st.decoder.device_name();
}

uint64_t CuptiRecorder::Now() {
  uint64_t t = 0;
  cuptiGetTimestamp(&t);
  return t;
}

uint64_t CuptiRecorder::Dropped() {
  State& st = GlobalState();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.dropped;
}

}  // namespace vtrain::gpu
