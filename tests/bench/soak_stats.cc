#include "tests/bench/soak_stats.h"

#include <malloc.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/time/clock.h"

namespace vtrain::server {

const char* CodeName(int code) {
  static constexpr const char* kNames[17] = {
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT", "DEADLINE",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "EXHAUSTED",        "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",         "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
  return code >= 0 && code < 17 ? kNames[code] : "?";
}

namespace {

int64_t ResidentKib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoll(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

// What the allocator has handed out and not had back, over all arenas: unlike
// the resident size, fragmentation and cached free memory do not count.
int64_t HeapInUseKib() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<int64_t>((m.uordblks + m.hblkhd) / 1024);
}

}  // namespace

MemorySample SampleMemory(absl::Time begin) {
  return {absl::ToDoubleSeconds(absl::Now() - begin), ResidentKib(), HeapInUseKib()};
}

}  // namespace vtrain::server
