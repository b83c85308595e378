// Answers to Predict requests by key (the request's bytes and the profile set
// that answered it), so that a scheduler asking again about the same job —
// as every scheduling round does for every queued job — is answered without
// simulating. Only successful answers are kept. Bounded: past the bound the
// cache starts over, so its memory stays flat whatever callers ask.
// Thread-safe.
#ifndef VTRAIN_SERVER_PREDICTION_CACHE_H_
#define VTRAIN_SERVER_PREDICTION_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::server {

class PredictionCache {
 public:
  struct Answer {
    v1::PredictResponse response;
    // What a hit must still do: count the keys no measurement covers as
    // profiling work (when the plan fits), as the first answer did.
    std::vector<std::string> missing_keys;
    bool fits = false;
    std::string gpu;  // the job's GPU, whose work queue they go to
  };

  // The most bytes of answers kept (responses, keys and missing keys): a
  // 530B answer with its 105 stages is tens of kB.
  static constexpr size_t kMaxBytes = size_t{64} << 20;

  // `max_entries` 0: keeps nothing.
  explicit PredictionCache(size_t max_entries, size_t max_bytes = kMaxBytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  bool enabled() const { return max_entries_ > 0; }
  // The cache key of `request` answered with the profile set `set_id`.
  static std::string Key(const std::string& set_id, const v1::PredictRequest& request);
  // The answer to `key`, or nullptr.
  std::shared_ptr<const Answer> Get(const std::string& key) const;
  void Put(const std::string& key, std::shared_ptr<const Answer> answer);
  size_t size() const;
  size_t bytes() const;

 private:
  const size_t max_entries_;
  const size_t max_bytes_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const Answer>> entries_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_PREDICTION_CACHE_H_
