#include "server/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace vtrain::server {

void TuneAllocatorForServing(int cores) {
#if defined(__GLIBC__)
  // An operator's explicit settings win.
  if (std::getenv("GLIBC_TUNABLES") != nullptr) return;
  if (cores <= 0) cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  mallopt(M_ARENA_MAX, cores);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);  // keep freed heap for the next call
  mallopt(M_TOP_PAD, 64 << 20);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // graphs and timelines from the heap, not fresh mmaps
#else
  (void)cores;
#endif
}

}  // namespace vtrain::server
