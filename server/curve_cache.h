// Computed throughput curves by key (job shape, plan space, counts and the
// profile set they were drawn from), so that a scheduler asking again is
// answered without simulating. Bounded; thread-safe.
#ifndef VTRAIN_SERVER_CURVE_CACHE_H_
#define VTRAIN_SERVER_CURVE_CACHE_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "service/service.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::server {

class CurveCache final : public service::CurveStore {
 public:
  // At most this many curves are kept; past it the cache starts over.
  static constexpr size_t kMaxEntries = 1024;

  // Copies the curve of `key` into `out`; false when absent.
  bool Get(const std::string& key, v1::Curve* out) const override;
  void Put(const std::string& key, const v1::Curve& curve) override;
  int64_t hits() const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, v1::Curve> entries_ ABSL_GUARDED_BY(mu_);
  mutable int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_CURVE_CACHE_H_
