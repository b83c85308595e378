// The soak benchmark's figures: a latency histogram that never allocates,
// per-kind call counts by status code, and the process's memory over time.
#ifndef VTRAIN_TESTS_BENCH_SOAK_STATS_H_
#define VTRAIN_TESTS_BENCH_SOAK_STATS_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "absl/time/time.h"

namespace vtrain::server {

// Latencies in a fixed log histogram (buckets 5% wide from 1 us), so that
// recording never allocates and the soak's own memory stays flat.
class Histogram {
 public:
  void Add(absl::Duration d) {
    const double us = std::max(1.0, absl::ToDoubleMicroseconds(d));
    const int b = std::min<int>(kBuckets - 1, static_cast<int>(std::log(us) / std::log(kGrowth)));
    ++counts_[b];
  }
  void Merge(const Histogram& o) {
    for (int b = 0; b < kBuckets; ++b) counts_[b] += o.counts_[b];
  }
  // The upper edge of the bucket holding the q-quantile, in ms; 0 when empty.
  double QuantileMs(double q) const {
    int64_t total = 0;
    for (int64_t c : counts_) total += c;
    if (total == 0) return 0;
    const int64_t rank = static_cast<int64_t>(std::ceil(q * static_cast<double>(total)));
    int64_t seen = 0;
    for (int b = 0; b < kBuckets; ++b) {
      seen += counts_[b];
      if (seen >= std::max<int64_t>(rank, 1)) return std::pow(kGrowth, b + 1) / 1000.0;
    }
    return std::pow(kGrowth, kBuckets) / 1000.0;
  }

 private:
  static constexpr double kGrowth = 1.05;
  static constexpr int kBuckets = 512;  // 1.05^512 us: far past any deadline
  std::array<int64_t, kBuckets> counts_{};
};

// One client's (then the run's) figures for one kind of call.
struct KindStats {
  int64_t calls = 0;
  std::array<int64_t, 17> unexpected{};  // by grpc::StatusCode
  std::array<int64_t, 17> expected{};
  int64_t bad_responses = 0;  // OK, but the answer is malformed
  Histogram latency;
  void Merge(const KindStats& o) {
    calls += o.calls;
    for (int c = 0; c < 17; ++c) {
      unexpected[c] += o.unexpected[c];
      expected[c] += o.expected[c];
    }
    bad_responses += o.bad_responses;
    latency.Merge(o.latency);
  }
  int64_t Unexpected() const {
    int64_t n = bad_responses;
    for (int64_t c : unexpected) n += c;
    return n;
  }
  int64_t Expected() const {
    int64_t n = 0;
    for (int64_t c : expected) n += c;
    return n;
  }
};
// The name of a grpc::StatusCode number.
const char* CodeName(int code);

// Resident memory (VmRSS) and the heap in use, in KiB, at t_s seconds.
struct MemorySample {
  double t_s = 0;
  int64_t rss_kib = 0;
  int64_t heap_kib = 0;
};
MemorySample SampleMemory(absl::Time begin);

}  // namespace vtrain::server

#endif  // VTRAIN_TESTS_BENCH_SOAK_STATS_H_
