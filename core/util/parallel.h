// The one worker pool of core: runs independent items (plans of a search,
// counts of a curve, rows of a calibration) on a few threads.
#ifndef VTRAIN_CORE_UTIL_PARALLEL_H_
#define VTRAIN_CORE_UTIL_PARALLEL_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace vtrain {

// Calls work(i) for i in [0, n), handing the next index to whichever of
// min(threads, n) workers is free (the calling thread is one of them), and
// returns when all are done. `work` returns false to stop: no further index
// is handed out (those running finish). `work` must be safe to call from
// several threads at once. threads < 1 counts as 1.
template <typename Work>
void ParallelFor(int64_t n, int threads, const Work& work) {
  if (n <= 0) return;
  std::atomic<int64_t> next{0};
  std::atomic<bool> stop{false};
  auto worker = [&] {
    for (int64_t i; !stop.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < n;) {
      if (!work(i)) stop = true;
    }
  };
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(threads, n));
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(workers - 1));
  for (int64_t w = 1; w < workers; ++w) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

}  // namespace vtrain

#endif  // VTRAIN_CORE_UTIL_PARALLEL_H_
