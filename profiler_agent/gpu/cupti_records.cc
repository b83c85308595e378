#include "profiler_agent/gpu/cupti_records.h"

#include <cxxabi.h>

#include <cstdlib>
#include <utility>

namespace vtrain::gpu {

std::string Demangle(const char* name) {
  if (name == nullptr) return "unknown";
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) return name;
  std::string s(out);
  std::free(out);
  return s;
}

void RecordDecoder::Add(const CUpti_Activity* record) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      // The newest record version of this toolkit (CUDA 13: Kernel10).
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      trace_.kernels.push_back(
          {Demangle(k->name), k->start, k->end, k->streamId, k->correlationId});
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      trace_.launches.push_back({a->correlationId, a->start, a->end, a->threadId});
      break;
    }
    case CUPTI_ACTIVITY_KIND_DEVICE: {
      const auto* d = reinterpret_cast<const CUpti_ActivityDevice5*>(record);
      if (device_name_.empty() && d->name != nullptr) {
        device_name_ = d->name;
        device_memory_ = d->globalMemorySize;
      }
      break;
    }
    case CUPTI_ACTIVITY_KIND_MARKER: {
      // NVTX push/pop and start/end ranges: a START record carries the name,
      // the END record with the same id closes it.
      const auto* m = reinterpret_cast<const CUpti_ActivityMarker2*>(record);
      const uint64_t thread =
          m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? m->objectId.pt.threadId : 0;
      if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
        open_markers_[m->id] = {m->name ? m->name : "", m->timestamp, thread};
      } else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
        auto it = open_markers_.find(m->id);
        if (it != open_markers_.end()) {
          trace_.ranges.push_back(
              {it->second.name, it->second.start_ns, m->timestamp, it->second.thread});
          open_markers_.erase(it);
        }
      }
      break;
    }
    default:
      break;
  }
}

Trace RecordDecoder::TakeTrace() {
  Trace out = std::move(trace_);
  trace_ = Trace();
  return out;
}

}  // namespace vtrain::gpu
